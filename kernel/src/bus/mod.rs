//! The event bus: listener registry, mode and layout checks, and fault accounting.
//!
//! One [`Slot`] per event name holds the declared mode, the canonical payload/output layouts
//! and an immutable listener snapshot (`Arc<[Arc<Listener>]>`) that registration replaces
//! wholesale. Dispatch clones the snapshot and never locks while calling plugins, which gives
//! the snapshot rule of ARCHITECTURE §4.4 for free: a listener removed mid-dispatch still runs
//! this time, one added runs next time. Modes are checked at registration *and* dispatch: the
//! SDK makes a mismatch a compile error, but a foreign plugin could still lie at the ABI.
//!
//! Declarations (issue 13 item 2): the kernel declares only `kernel/*`; every other event is
//! declared by the manifest of the plugin that owns it. Dispatching an undeclared event is
//! `UNKNOWN_EVENT`. Listening to one is allowed, because a registration carries its own mode and
//! layouts: the listener is kept, checked against later listeners, and simply never runs, since
//! nothing can dispatch the event (declarations are all read at boot, before any row activates).
//!
//! Layouts: the declaring plugin's layout (or the first one seen) is canonical; every other
//! image's layout is checked once with abi_stable and its pointer cached, so the hot path is a
//! pointer comparison.

mod dispatch;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use dashmap::DashMap;
use keel_plugin_api::abi::{EventMode, ListenerFfi, ListenerOptions, PluginError, TypeLayout};
use keel_plugin_api::codes::ContractCode;
use keel_plugin_api::events::kernel::{
    ListenerError, ListenerErrorEvent, PluginStatus, PluginStatusEvent,
};
use keel_plugin_api::host::{HostCode, PayloadRef, layouts_compatible};
use keel_plugin_api::sdk::event::{EmitEvent, Event};

use crate::fiber::Fiber;

pub use dispatch::with_deadline;

/// A registered listener.
pub struct Listener {
    /// Registration id.
    pub id: u64,
    /// Owning fiber.
    pub fiber: Arc<Fiber>,
    order: i32,
    seq: u64,
    deadline: Option<Duration>,
    ffi: ListenerFfi,
}

/// Where an event's mode and layouts were declared.
#[derive(Debug, Clone)]
struct Declared {
    mode: EventMode,
    payload: Option<&'static TypeLayout>,
    output: Option<&'static TypeLayout>,
    by: String,
}

#[derive(Default)]
struct LayoutSet {
    canonical: Mutex<Option<&'static TypeLayout>>,
    /// Lock-free cache of layout addresses already proven compatible (the hot path is one
    /// pointer comparison per slot); 0 = empty. Layouts beyond the cache are re-checked.
    fast: [AtomicUsize; FAST_LAYOUTS],
}

/// Distinct layout addresses cached per slot (one per dispatching or listening image, roughly).
const FAST_LAYOUTS: usize = 8;

impl LayoutSet {
    fn new(canonical: Option<&'static TypeLayout>) -> LayoutSet {
        let set = LayoutSet {
            canonical: Mutex::new(canonical),
            fast: Default::default(),
        };
        if let Some(l) = canonical {
            set.remember(l as *const TypeLayout as usize);
        }
        set
    }

    fn remember(&self, key: usize) {
        for slot in &self.fast {
            match slot.compare_exchange(0, key, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return,
                Err(existing) if existing == key => return,
                Err(_) => {}
            }
        }
    }

    #[inline]
    fn check(&self, found: &'static TypeLayout) -> Result<(), String> {
        let key = found as *const TypeLayout as usize;
        if self.fast.iter().any(|s| s.load(Ordering::Acquire) == key) {
            return Ok(());
        }
        self.check_slow(found, key)
    }

    #[cold]
    fn check_slow(&self, found: &'static TypeLayout, key: usize) -> Result<(), String> {
        let mut canonical = self
            .canonical
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let expected = *canonical.get_or_insert(found);
        layouts_compatible(expected, found)?;
        self.remember(key);
        Ok(())
    }
}

/// One event's registry entry.
pub struct Slot {
    name: String,
    mode: EventMode,
    /// Some loaded row (or the kernel) declares the event, so it may be dispatched.
    declared: bool,
    payload: LayoutSet,
    output: LayoutSet,
    listeners: RwLock<Arc<[Arc<Listener>]>>,
}

impl Slot {
    fn snapshot(&self) -> Arc<[Arc<Listener>]> {
        match self.listeners.read() {
            Ok(l) => Arc::clone(&l),
            Err(p) => Arc::clone(&p.into_inner()),
        }
    }

    fn replace(&self, f: impl FnOnce(&mut Vec<Arc<Listener>>)) {
        let mut guard = self
            .listeners
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut v: Vec<Arc<Listener>> = guard.iter().cloned().collect();
        f(&mut v);
        *guard = v.into();
    }
}

/// The bus.
pub struct Bus {
    slots: DashMap<String, Arc<Slot>, foldhash::fast::RandomState>,
    declared: DashMap<String, Declared, foldhash::fast::RandomState>,
    seq: AtomicU64,
    fault_threshold: u32,
    default_deadline: Option<Duration>,
}

fn err(code: HostCode, message: String) -> PluginError {
    PluginError::coded(code, message)
}

fn unknown(event: &str) -> PluginError {
    err(
        HostCode::UnknownEvent,
        format!(
            "event '{event}' is not declared: no loaded row's manifest declares it (the kernel \
             declares only kernel/* events; the plugin that owns an event declares it)"
        ),
    )
}

impl Bus {
    /// A bus knowing the kernel's own `kernel/*` events. `default_deadline` applies to parallel
    /// and serial listeners without their own deadline.
    pub fn new(fault_threshold: u32, default_deadline: Option<Duration>) -> Bus {
        let bus = Bus {
            slots: DashMap::default(),
            declared: DashMap::default(),
            seq: AtomicU64::new(0),
            fault_threshold,
            default_deadline,
        };
        for info in keel_plugin_api::events::kernel::EVENTS {
            bus.declared.insert(
                info.name.to_owned(),
                Declared {
                    mode: info.mode,
                    payload: Some(info.payload_layout),
                    output: Some(info.output_layout),
                    by: "the kernel".to_owned(),
                },
            );
        }
        bus
    }

    /// Declares an event a plugin owns (from its manifest) with the declaring plugin's layouts,
    /// which become canonical (a later dispatcher or listener with another payload type is
    /// refused). Called at boot; errs when already declared with another mode or layouts.
    pub fn declare(
        &self,
        name: &str,
        mode: EventMode,
        layouts: Option<(&'static TypeLayout, &'static TypeLayout)>,
        by: &str,
    ) -> Result<(), String> {
        if let Some(mut existing) = self.declared.get_mut(name) {
            if existing.mode != mode {
                return Err(format!(
                    "event '{name}' is declared {} by {} and {} by {by}",
                    existing.mode.as_str(),
                    existing.by,
                    mode.as_str()
                ));
            }
            if let Some((payload, output)) = layouts {
                match (existing.payload, existing.output) {
                    (Some(p), Some(o)) => {
                        layouts_compatible(p, payload)
                            .and_then(|()| layouts_compatible(o, output))
                            .map_err(|r| {
                                format!(
                                    "event '{name}' is declared with different payload types by {} and {by}: {r}",
                                    existing.by
                                )
                            })?;
                    }
                    _ => {
                        existing.payload = Some(payload);
                        existing.output = Some(output);
                    }
                }
            }
            return Ok(());
        }
        self.declared.insert(
            name.to_owned(),
            Declared {
                mode,
                payload: layouts.map(|l| l.0),
                output: layouts.map(|l| l.1),
                by: by.to_owned(),
            },
        );
        Ok(())
    }

    /// The event's slot; `listening` stands in for a missing declaration (a listener's own
    /// mode and layouts) so a listener on an event nobody declares is kept but never dispatched.
    fn slot(&self, event: &str, listening: Option<Declared>) -> Result<Arc<Slot>, PluginError> {
        if let Some(s) = self.slots.get(event) {
            return Ok(Arc::clone(&s));
        }
        let owned = self.declared.get(event).map(|d| d.clone());
        let declared = owned.is_some();
        let found = owned.or(listening).ok_or_else(|| unknown(event))?;
        let slot = self
            .slots
            .entry(event.to_owned())
            .or_insert_with(|| {
                Arc::new(Slot {
                    name: event.to_owned(),
                    mode: found.mode,
                    declared,
                    payload: LayoutSet::new(found.payload),
                    output: LayoutSet::new(found.output),
                    listeners: RwLock::new(Arc::from(Vec::new())),
                })
            })
            .clone();
        Ok(slot)
    }

    /// The slot, checked for `mode` and the layouts; `listening` is set for a registration and
    /// `None` for a dispatch, which needs a declaration.
    fn checked_slot(
        &self,
        event: &str,
        mode: EventMode,
        payload: Option<&'static TypeLayout>,
        output: Option<&'static TypeLayout>,
        listening: bool,
        who: &dyn Fn() -> String,
    ) -> Result<Arc<Slot>, PluginError> {
        let own = listening.then(|| Declared {
            mode,
            payload,
            output,
            by: who(),
        });
        let slot = self.slot(event, own)?;
        if !slot.declared && !listening {
            return Err(unknown(event));
        }
        if slot.mode != mode {
            return Err(err(
                HostCode::EventMode,
                format!(
                    "event '{event}' is {} but {} used it as {}",
                    slot.mode.as_str(),
                    who(),
                    mode.as_str()
                ),
            ));
        }
        if let Some(l) = payload {
            slot.payload.check(l).map_err(|r| {
                err(
                    HostCode::EventLayout,
                    format!(
                        "event '{event}': payload type of {} does not match: {r}",
                        who()
                    ),
                )
            })?;
        }
        if let Some(l) = output {
            slot.output.check(l).map_err(|r| {
                err(
                    HostCode::EventLayout,
                    format!(
                        "event '{event}': output type of {} does not match: {r}",
                        who()
                    ),
                )
            })?;
        }
        Ok(slot)
    }

    /// Registers a listener for `fiber`. The caller records the effect.
    ///
    /// # Errors
    /// `UNKNOWN_EVENT`, `EVENT_MODE`, `EVENT_LAYOUT`.
    #[allow(clippy::too_many_arguments, reason = "one field per ABI argument")]
    pub fn register(
        &self,
        id: u64,
        fiber: &Arc<Fiber>,
        event: &str,
        mode: EventMode,
        payload: &'static TypeLayout,
        output: &'static TypeLayout,
        options: ListenerOptions,
        ffi: ListenerFfi,
    ) -> Result<(), PluginError> {
        let who = format!("row '{}'", fiber.row);
        if ffi.mode() != mode {
            return Err(err(
                HostCode::EventMode,
                format!(
                    "{who} registered a {} listener as {}",
                    ffi.mode().as_str(),
                    mode.as_str()
                ),
            ));
        }
        let slot = self.checked_slot(event, mode, Some(payload), Some(output), true, &|| {
            who.clone()
        })?;
        let listener = Arc::new(Listener {
            id,
            fiber: Arc::clone(fiber),
            order: options.order,
            seq: self.seq.fetch_add(1, Ordering::Relaxed),
            deadline: (options.deadline_ms > 0).then(|| Duration::from_millis(options.deadline_ms)),
            ffi,
        });
        slot.replace(|v| {
            let pos = v
                .iter()
                .position(|l| (l.order, l.seq) > (listener.order, listener.seq))
                .unwrap_or(v.len());
            v.insert(pos, listener);
        });
        Ok(())
    }

    /// Removes a listener by registration id.
    pub fn remove(&self, event: &str, id: u64) {
        if let Some(slot) = self.slots.get(event) {
            slot.replace(|v| v.retain(|l| l.id != id));
        }
    }

    /// Number of listeners on an event (for diagnostics and tests).
    pub fn listener_count(&self, event: &str) -> usize {
        self.slots
            .get(event)
            .map(|s| s.snapshot().len())
            .unwrap_or(0)
    }

    /// Emits a core event from the kernel itself.
    pub fn emit_kernel<E: EmitEvent>(&self, payload: &E::Payload) {
        let _ = self.emit(
            E::NAME,
            <E::Payload as keel_plugin_api::abi::StableAbi>::LAYOUT,
            PayloadRef::of(payload),
            &|| "the kernel".to_owned(),
        );
    }

    /// Reports a state change of a fiber.
    pub fn report_status(&self, fiber: &Fiber, reason: &str) {
        self.emit_kernel::<PluginStatus>(&PluginStatusEvent {
            row: fiber.row.as_str().into(),
            plugin: fiber.plugin.name.as_str().into(),
            state: fiber.state().as_str().into(),
            faulted: fiber.is_faulted(),
            reason: reason.into(),
        });
    }

    /// Records a listener failure: logs it, counts panics and timeouts toward the fault
    /// threshold, and emits `kernel/listener-error` (and `kernel/plugin-status` on fault).
    fn contain(&self, event: &str, listener: &Listener, e: &PluginError) {
        tracing::warn!(
            target: "keel::bus",
            event,
            row = %listener.fiber.row,
            code = %e.code,
            "listener failed: {}",
            e.message
        );
        let counts = e.is(ContractCode::Panic) || e.is(HostCode::Timeout);
        if counts && listener.fiber.record_fault(self.fault_threshold) {
            tracing::error!(
                target: "keel::bus",
                row = %listener.fiber.row,
                faults = listener.fiber.faults(),
                "plugin marked faulted; its listeners are skipped from now on"
            );
            self.report_status(
                &listener.fiber,
                &format!(
                    "faulted after {} panics/timeouts; last: {}: {}",
                    listener.fiber.faults(),
                    e.code,
                    e.message
                ),
            );
        }
        if event != ListenerError::NAME {
            self.emit_kernel::<ListenerError>(&ListenerErrorEvent {
                event: event.into(),
                row: listener.fiber.row.as_str().into(),
                code: e.code.clone(),
                message: e.message.clone(),
            });
        }
    }
}

#[cfg(test)]
mod declare_tests {
    use keel_plugin_api::abi::{EventMode, StableAbi};
    use keel_plugin_api::events::agent::{AgentPoint, PreStepData};
    use keel_plugin_api::events::tools::ToolExecution;

    use super::Bus;

    // Issue 24 item 7: a conflict names both plugins and the type that differs.
    #[test]
    fn a_declaration_conflict_names_both_plugins_and_the_type() {
        let bus = Bus::new(3, None);
        let unit = <() as StableAbi>::LAYOUT;
        bus.declare(
            "x/e",
            EventMode::Emit,
            Some((<AgentPoint<PreStepData> as StableAbi>::LAYOUT, unit)),
            "plugin a",
        )
        .unwrap();
        let e = bus
            .declare(
                "x/e",
                EventMode::Emit,
                Some((<ToolExecution as StableAbi>::LAYOUT, unit)),
                "plugin b",
            )
            .unwrap_err();
        assert!(e.contains("plugin a") && e.contains("plugin b"), "{e}");
        assert!(e.contains("type AgentPoint"), "{e}");
        let e = bus
            .declare("x/e", EventMode::Parallel, None, "plugin c")
            .unwrap_err();
        assert!(e.contains("plugin a") && e.contains("plugin c"), "{e}");
    }
}
