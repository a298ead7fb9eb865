//! Fibers: one running instance of a profile row, with its state and its effects.
//!
//! A plugin is the executable definition, a fiber is one activation of one row (PLG-01). Every
//! registration a fiber makes is an [`Effect`] on its stack. Teardown is keel's decision on
//! Cordis #26: strictly serial and last-in-first-out across all effects of the fiber, each
//! disposer's error logged, dispose never failing. States follow ARCHITECTURE §4.3; disposal
//! reaches DISPOSED from any state (Cordis #127 fixed). A fiber's lifecycle changes take its
//! [`Fiber::turn`] one at a time, so a teardown never runs beside `activate` (issue 13).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use keel_plugin_api::abi::{DisposerFfi, FiberId};

use crate::loader::PluginLibrary;

/// Locks `m`, taking the data of a poisoned lock as it is (no kernel lock guards an
/// invariant a panic could break half-way).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Fiber states (ARCHITECTURE §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum FiberState {
    /// Waiting for a required service.
    Pending = 0,
    /// `activate` running.
    Loading = 1,
    /// Activated.
    Active = 2,
    /// Activation failed and was rolled back.
    Failed = 3,
    /// Effects being disposed.
    Unloading = 4,
    /// Gone.
    Disposed = 5,
}

impl FiberState {
    fn from_u8(v: u8) -> FiberState {
        match v {
            0 => FiberState::Pending,
            1 => FiberState::Loading,
            2 => FiberState::Active,
            3 => FiberState::Failed,
            4 => FiberState::Unloading,
            _ => FiberState::Disposed,
        }
    }

    /// Lowercase name used in events and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            FiberState::Pending => "pending",
            FiberState::Loading => "loading",
            FiberState::Active => "active",
            FiberState::Failed => "failed",
            FiberState::Unloading => "unloading",
            FiberState::Disposed => "disposed",
        }
    }
}

/// What an effect undoes.
pub enum EffectKind {
    /// A bus listener.
    Listener { event: String },
    /// A provided service.
    Service { name: String },
    /// A plugin-supplied disposer.
    Disposer(DisposerFfi),
}

/// One entry on a fiber's effect stack.
pub struct Effect {
    /// Registration id (unique in the process).
    pub id: u64,
    /// Label for logs (`on(kernel/plugin-status)`, `provide(keel.driver)`, or the plugin's).
    pub label: String,
    /// What to undo.
    pub kind: EffectKind,
}

/// One running instance of a row.
pub struct Fiber {
    /// Id.
    pub id: FiberId,
    /// Row id.
    pub row: String,
    /// The plugin library.
    pub plugin: Arc<PluginLibrary>,
    /// Row config (validated).
    pub config: serde_json::Value,
    state: AtomicU8,
    faults: AtomicU32,
    faulted: AtomicBool,
    effects: Mutex<Vec<Effect>>,
    tasks: Mutex<Vec<tokio::task::AbortHandle>>,
    /// Held by the change in progress — an activation with its rollback, or an unload — and
    /// queued for (FIFO) by the next, so disposers never run beside `activate`.
    pub turn: tokio::sync::Mutex<()>,
    /// Why it was unloaded or failed: the first reason given.
    pub ended: OnceLock<String>,
}

impl std::fmt::Debug for Fiber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fiber")
            .field("id", &self.id)
            .field("row", &self.row)
            .field("state", &self.state())
            .finish()
    }
}

impl Fiber {
    /// A new pending fiber.
    pub fn new(
        id: FiberId,
        row: String,
        plugin: Arc<PluginLibrary>,
        config: serde_json::Value,
    ) -> Fiber {
        Fiber {
            id,
            row,
            plugin,
            config,
            state: AtomicU8::new(FiberState::Pending as u8),
            faults: AtomicU32::new(0),
            faulted: AtomicBool::new(false),
            effects: Mutex::new(Vec::new()),
            tasks: Mutex::new(Vec::new()),
            turn: tokio::sync::Mutex::new(()),
            ended: OnceLock::new(),
        }
    }

    /// Current state.
    pub fn state(&self) -> FiberState {
        FiberState::from_u8(self.state.load(Ordering::Acquire))
    }

    /// Sets the state.
    pub fn set_state(&self, s: FiberState) {
        self.state.store(s as u8, Ordering::Release);
    }

    /// Moves to `to` only from `from`; returns whether it did.
    pub fn transition(&self, from: FiberState, to: FiberState) -> bool {
        self.state
            .compare_exchange(from as u8, to as u8, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Whether registrations are accepted (LOADING or ACTIVE).
    pub fn accepts_registrations(&self) -> bool {
        matches!(self.state(), FiberState::Loading | FiberState::Active)
    }

    /// Whether its listeners may run: alive and not faulted.
    pub fn runnable(&self) -> bool {
        self.accepts_registrations() && !self.faulted.load(Ordering::Acquire)
    }

    /// Whether the plugin was marked faulted.
    pub fn is_faulted(&self) -> bool {
        self.faulted.load(Ordering::Acquire)
    }

    /// Counts a panic or timeout; returns `true` exactly when this made the fiber faulted.
    pub fn record_fault(&self, threshold: u32) -> bool {
        let n = self.faults.fetch_add(1, Ordering::AcqRel) + 1;
        n >= threshold.max(1) && !self.faulted.swap(true, Ordering::AcqRel)
    }

    /// Number of recorded faults.
    pub fn faults(&self) -> u32 {
        self.faults.load(Ordering::Acquire)
    }

    /// Pushes an effect. Refused (returns it back) unless the fiber accepts registrations.
    pub fn push_effect(&self, effect: Effect) -> Result<(), Effect> {
        let mut effects = lock(&self.effects);
        // Checked under the lock so a concurrent teardown cannot miss it.
        if !self.accepts_registrations() {
            return Err(effect);
        }
        effects.push(effect);
        Ok(())
    }

    /// Pops the most recent effect (teardown order).
    pub fn pop_effect(&self) -> Option<Effect> {
        lock(&self.effects).pop()
    }

    /// Removes one effect by registration id.
    pub fn take_effect(&self, id: u64) -> Option<Effect> {
        let mut effects = lock(&self.effects);
        let pos = effects.iter().position(|e| e.id == id)?;
        Some(effects.remove(pos))
    }

    /// Ids of provided services still registered.
    pub fn provided_services(&self) -> Vec<String> {
        lock(&self.effects)
            .iter()
            .filter_map(|e| match &e.kind {
                EffectKind::Service { name } => Some(name.clone()),
                _ => None,
            })
            .collect()
    }

    /// Labels of the effect stack, oldest first (for diagnostics and tests).
    pub fn effect_labels(&self) -> Vec<String> {
        lock(&self.effects)
            .iter()
            .map(|e| e.label.clone())
            .collect()
    }

    /// Remembers a task so teardown can abort it.
    pub fn track_task(&self, handle: tokio::task::AbortHandle) {
        let mut tasks = lock(&self.tasks);
        tasks.retain(|t| !t.is_finished());
        tasks.push(handle);
    }

    /// Aborts every tracked task.
    pub fn abort_tasks(&self) {
        for t in lock(&self.tasks).drain(..) {
            t.abort();
        }
    }

    /// Whether the manifest requires `service` (non-optional).
    pub fn requires(&self, service: &str) -> bool {
        self.plugin
            .manifest
            .requires
            .iter()
            .any(|r| r.name == service && !r.optional)
    }
}
