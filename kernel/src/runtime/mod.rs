//! The running kernel: rows, fibers, bus and services behind one `Arc`, and the boot and
//! shutdown sequences.
//!
//! The kernel installs itself as the process's [`Host`](keel_plugin_api::host::Host) (see
//! `host_impl`), then creates one pending fiber per enabled row and *settles*: every pending
//! fiber whose required services are active is activated, a wave at a time, until no more can
//! be (`lifecycle`). A wave is exactly a Kahn layer of the facility graph, so rows in one layer
//! activate concurrently and nothing activates before its providers are ACTIVE (KRN-03). An
//! idle row (issue 25 item 3) gets no fiber at start; `idle` opens and activates it later.

mod host_impl;
mod idle;
mod lifecycle;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use dashmap::DashMap;
use keel_plugin_api::abi::{FiberId, HostApi_Ref};
use keel_plugin_api::host::KernelCode;
use keel_plugin_api::host::install_host;
use keel_plugin_api::sdk::{Contract, ContractClient, ContractHandle, Service};
use keel_plugin_api::services::command::{Command, CommandInvocation, service_name};
use keel_plugin_api::services::driver::{Driver, DriverInterrupt, DriverInvocation, DriverOutcome};

use crate::bus::Bus;
use crate::error::{KernelError, Result};
use crate::fiber::{Fiber, FiberState};
use crate::loader::PluginLibrary;
use crate::services::Services;
use keel_config::KernelSettings;

/// A failed hand-off to `row` (a driver or a command).
fn seam_failed(row: &str, code: &str, message: String) -> KernelError {
    KernelError::Driver {
        row: row.to_owned(),
        code: code.to_owned(),
        message,
    }
}

/// A row as the running kernel tracks it.
pub struct RowSlot {
    /// Row id.
    pub id: String,
    /// Plugin name.
    pub plugin: Arc<PluginLibrary>,
    /// Current config.
    pub config: serde_json::Value,
    /// Last config that activated.
    pub last_good: serde_json::Value,
    /// Whether the row should run.
    pub enabled: bool,
    /// No work for its config yet: no fiber, library not opened (issue 25 item 3).
    pub idle: bool,
    /// The current fiber.
    pub fiber: Option<Arc<Fiber>>,
    /// Last activation error.
    pub last_error: Option<String>,
}

pub(crate) struct Inner {
    handle: tokio::runtime::Handle,
    bus: Arc<Bus>,
    services: Services,
    rows: Mutex<Vec<RowSlot>>,
    fibers: DashMap<FiberId, Arc<Fiber>>,
    ids: AtomicU64,
    api: OnceLock<HostApi_Ref>,
    keel_home: PathBuf,
    lifecycle: tokio::sync::Mutex<()>,
    settings: KernelSettings,
}

impl Inner {
    fn next_id(&self) -> u64 {
        self.ids.fetch_add(1, Ordering::Relaxed)
    }

    fn rows(&self) -> std::sync::MutexGuard<'_, Vec<RowSlot>> {
        crate::fiber::lock(&self.rows)
    }

    fn new_fiber(
        &self,
        row: &str,
        plugin: &Arc<PluginLibrary>,
        config: &serde_json::Value,
    ) -> Arc<Fiber> {
        Arc::new(Fiber::new(
            FiberId(self.next_id()),
            row.to_owned(),
            Arc::clone(plugin),
            config.clone(),
        ))
    }

    /// Deadline of one activation or one disposer.
    fn deadline(&self) -> Option<Duration> {
        let ms = self.settings.activation_deadline_ms;
        (ms > 0).then(|| Duration::from_millis(ms))
    }
}

/// A row to start, as assembled from the profile.
#[derive(Debug, Clone)]
pub struct RowSpec {
    /// Row id.
    pub id: String,
    /// Plugin library.
    pub plugin: Arc<PluginLibrary>,
    /// Validated config.
    pub config: serde_json::Value,
    /// No work for its config: not opened or activated at start (issue 25 item 3).
    pub idle: bool,
}

/// The kernel. Cheap to clone.
#[derive(Clone)]
pub struct Kernel(Arc<Inner>);

/// State of one row after boot (declared in the SDK, which answers it to `control`).
pub use keel_plugin_api::sdk::RowStatus;

impl Kernel {
    /// Creates the kernel and installs it as this process's host. Declares plugin events.
    ///
    /// # Errors
    /// [`KernelError::Activation`] when two manifests declare one event with different modes.
    pub fn new(
        handle: tokio::runtime::Handle,
        settings: KernelSettings,
        keel_home: PathBuf,
        rows: Vec<RowSpec>,
    ) -> Result<Kernel> {
        let deadline = (settings.listener_deadline_ms > 0)
            .then(|| Duration::from_millis(settings.listener_deadline_ms));
        let bus = Arc::new(Bus::new(settings.fault_threshold, deadline));
        let mut seen: BTreeMap<String, ()> = BTreeMap::new();
        for row in &rows {
            // An idle row's library is not open: its events are declared when it opens (a row
            // declaring an event no starting row declares is never idle, `crate::idle`).
            if row.plugin.loaded().is_none() || seen.insert(row.plugin.name.clone(), ()).is_some() {
                continue;
            }
            idle::declare_events(&bus, &row.plugin).map_err(|e| match e {
                idle::DeclareError::Mode(m) => {
                    KernelError::Activation(format!("row '{}': {m}", row.id))
                }
                idle::DeclareError::Conflict(detail) => KernelError::EventConflict {
                    row: row.id.clone(),
                    detail,
                },
            })?;
        }
        let slots = rows
            .into_iter()
            .map(|r| RowSlot {
                id: r.id,
                plugin: r.plugin,
                last_good: r.config.clone(),
                config: r.config,
                enabled: true,
                idle: r.idle,
                fiber: None,
                last_error: None,
            })
            .collect();
        let inner = Arc::new(Inner {
            handle,
            bus,
            services: Services::default(),
            rows: Mutex::new(slots),
            fibers: DashMap::new(),
            ids: AtomicU64::new(1),
            api: OnceLock::new(),
            keel_home,
            lifecycle: tokio::sync::Mutex::new(()),
            settings,
        });
        let api =
            install_host(Arc::new(host_impl::HostImpl(Arc::clone(&inner)))).ok_or_else(|| {
                KernelError::Activation(format!(
                    "cannot start another kernel: this process already ran {}",
                    keel_plugin_api::host::MAX_KERNELS
                ))
            })?;
        let _ = inner.api.set(api);
        Ok(Kernel(inner))
    }

    /// Activates every row (settling waves) and reports rows that did not become active.
    ///
    /// # Errors
    /// [`KernelError::Activation`] naming every failed or stuck row.
    pub async fn start(&self) -> Result<()> {
        {
            let _guard = self.0.lifecycle.lock().await;
            {
                let mut rows = self.0.rows();
                for slot in rows.iter_mut().filter(|s| !s.idle) {
                    let fiber = self.0.new_fiber(&slot.id, &slot.plugin, &slot.config);
                    slot.fiber = Some(fiber);
                }
            }
            lifecycle::settle(&self.0).await;
        }
        let problems = lifecycle::problems(&self.0);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(KernelError::Activation(problems.join("; ")))
        }
    }

    /// Row states.
    pub fn status(&self) -> Vec<RowStatus> {
        lifecycle::status(&self.0)
    }

    /// The bus (benchmarks and in-process tests).
    pub fn bus(&self) -> &Arc<Bus> {
        &self.0.bus
    }

    /// Hands control to the profile's driver (ARCHITECTURE §4.6) and returns what it answered:
    /// the exit code, and possibly a relaunch request the caller decides on.
    ///
    /// # Errors
    /// [`KernelError::NoDriver`], [`KernelError::Driver`].
    pub async fn run_driver(
        &self,
        profile: &str,
        invocation: &DriverInvocation,
    ) -> Result<DriverOutcome> {
        idle::wake_provider(&self.0, <Driver as Service>::NAME).await;
        let Some((row, driver)) = self.seam::<Driver>(<Driver as Service>::NAME)? else {
            return Err(KernelError::NoDriver {
                profile: profile.to_owned(),
            });
        };
        driver
            .run(invocation.clone())
            .await
            .map_err(|e| seam_failed(&row, &e.code, e.message))
    }

    /// Runs a plugin command (`keel.command.<name>` `run`) and returns the exit code it
    /// reports; `None` when no active row provides it.
    ///
    /// # Errors
    /// [`KernelError::Driver`] when the call fails or answers nonsense.
    pub async fn hand_off(&self, invocation: &CommandInvocation) -> Result<Option<i32>> {
        let service = service_name(&invocation.command);
        idle::wake_provider(&self.0, &service).await;
        let Some((row, command)) = self.seam::<Command>(&service)? else {
            return Ok(None);
        };
        let outcome = command
            .run(invocation.clone())
            .await
            .map_err(|e| seam_failed(&row, &e.code, e.message))?;
        Ok(Some(outcome.exit_code))
    }

    /// Asks the driver to stop its run (`keel.driver` `interrupt`, ARCHITECTURE §11); `false`
    /// when there is no driver or it refused (then only the kernel's grace and teardown stop
    /// it).
    pub async fn interrupt_driver(&self, interrupt: &DriverInterrupt) -> bool {
        let driver = match self.seam::<Driver>(<Driver as Service>::NAME) {
            Ok(Some((_, driver))) => driver,
            Ok(None) => return false,
            Err(e) => {
                tracing::debug!(target: "keel::kernel", "no driver to interrupt: {e}");
                return false;
            }
        };
        let answer = driver.interrupt(interrupt.clone()).await;
        if let Err(e) = &answer {
            tracing::debug!(target: "keel::kernel", "the driver took no interrupt: [{}] {}", e.code, e.message);
        }
        answer.is_ok()
    }

    /// The active row providing `service` and a typed client of it (contract `C`), calling as
    /// `kernel`: the driver, a command, a row's doctor checks.
    ///
    /// # Errors
    /// [`KernelError::Driver`] when the handle does not match the contract.
    pub fn seam<C: Contract>(&self, service: &str) -> Result<Option<(String, C::Client)>> {
        let Some(entry) = self.0.services.find(service, false) else {
            return Ok(None);
        };
        let row = entry.provider.row.clone();
        let shared = self
            .0
            .services
            .handle_for(
                &entry,
                "keel",
                <ContractHandle as keel_plugin_api::abi::StableAbi>::LAYOUT,
            )
            .map_err(|e| seam_failed(&row, e.code.as_str(), e.message.into_string()))?;
        let handle = keel_plugin_api::host::service_ref::<C>(shared)
            .map_err(|e| seam_failed(&row, KernelCode::ServiceLayout.code(), e))?;
        let client = ContractClient::<C>::new((*handle).clone(), "kernel");
        Ok(Some((row, client.into())))
    }

    /// Unloads every row (dependents first, effects LIFO) and calls each library's shutdown.
    pub async fn shutdown(&self) {
        let _guard = self.0.lifecycle.lock().await;
        let fibers: Vec<Arc<Fiber>> = self
            .0
            .rows()
            .iter()
            .rev()
            .filter_map(|s| s.fiber.clone())
            .collect();
        for f in fibers {
            lifecycle::unload(&self.0, f, FiberState::Disposed, "kernel shutdown").await;
        }
        let mut done: BTreeMap<String, ()> = BTreeMap::new();
        let libs: Vec<Arc<PluginLibrary>> = self
            .0
            .rows()
            .iter()
            .map(|s| Arc::clone(&s.plugin))
            .collect();
        for lib in libs {
            if let Some(loaded) = lib.loaded()
                && done.insert(lib.name.clone(), ()).is_none()
            {
                loaded.library.shutdown();
            }
        }
    }
}
