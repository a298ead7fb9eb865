//! The kernel's implementation of the host API plugins call (ARCHITECTURE §4.5).
//!
//! Every call names its fiber; calls from fibers that are gone get `INACTIVE_FIBER`, and
//! registrations on a fiber that is unloading are refused (Cordis #91/#96). Futures handed back
//! to plugins enter the kernel's runtime on every poll, so kernel timers work even when a
//! plugin polls them from its own runtime thread.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use keel_plugin_api::abi::{
    AbiResult, AsyncTerminalFfi, DisposerFfi, ErasedBox, ErasedShared, EventMode, FfiFuture,
    FiberId, ListenerFfi, ListenerOptions, LogLevel, PluginError, ROption, RResult, RString,
    SyncTerminalFfi, TypeLayout,
};
use keel_plugin_api::codes::ContractCode;
use keel_plugin_api::host::{BoxFuture, ControlCode, Host, HostCode, PayloadMut, PayloadRef};
use keel_plugin_api::sdk::ControlOp;

use super::{Inner, lifecycle};
use crate::fiber::{Effect, EffectKind, Fiber};

pub(super) struct HostImpl(pub(super) Arc<Inner>);

/// Polls the inner future inside the kernel runtime's context.
struct InRuntime<F> {
    handle: tokio::runtime::Handle,
    fut: Pin<Box<F>>,
}

impl<F: Future> Future for InRuntime<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _entered = self.handle.enter();
        self.fut.as_mut().poll(cx)
    }
}

fn inactive(fiber: FiberId) -> PluginError {
    PluginError::coded(
        HostCode::InactiveFiber,
        format!("fiber {} is not active (disposed or unloading)", fiber.0),
    )
}

fn err<T>(e: PluginError) -> AbiResult<T> {
    RResult::RErr(e)
}

impl HostImpl {
    /// The one row of the plugin whose crate leads `target`, else its name (issue 23 item 16).
    fn row_of_target(&self, target: &str) -> Option<String> {
        let krate = target.split("::").next()?;
        let plugin = krate.strip_prefix("keel_plugin_")?.replace('_', "-");
        let mut rows = self
            .0
            .fibers
            .iter()
            .filter(|f| f.plugin.name == plugin)
            .map(|f| f.row.clone());
        match (rows.next(), rows.next()) {
            (Some(row), None) => Some(row),
            _ => Some(plugin),
        }
    }

    fn fiber(&self, id: FiberId) -> Result<Arc<Fiber>, PluginError> {
        self.0
            .fibers
            .get(&id)
            .map(|f| Arc::clone(&f))
            .ok_or_else(|| inactive(id))
    }

    fn boxed<T: Send + 'static>(
        &self,
        fut: impl Future<Output = T> + Send + 'static,
    ) -> BoxFuture<T> {
        Box::pin(InRuntime {
            handle: self.0.handle.clone(),
            fut: Box::pin(fut),
        })
    }

    fn who(&self, id: FiberId) -> String {
        self.0
            .fibers
            .get(&id)
            .map(|f| format!("row '{}'", f.row))
            .unwrap_or_else(|| format!("fiber {}", id.0))
    }

    fn push(
        &self,
        fiber: &Fiber,
        id: u64,
        label: String,
        kind: EffectKind,
    ) -> Result<(), PluginError> {
        fiber
            .push_effect(Effect { id, label, kind })
            .map_err(|_| refused(fiber))
    }
}

fn refused(fiber: &Fiber) -> PluginError {
    PluginError::coded(
        HostCode::InactiveFiber,
        format!(
            "row '{}' is {}; registration refused",
            fiber.row,
            fiber.state().as_str()
        ),
    )
}

impl Host for HostImpl {
    fn log(&self, fiber: FiberId, level: LogLevel, target: &str, m: &str) {
        // A plugin's tracing line carries no fiber (0): name its row from the target.
        let own = self.0.fibers.get(&fiber).map(|f| f.row.clone());
        let row = own.or_else(|| self.row_of_target(target));
        let row = row.as_deref();
        match level {
            LogLevel::Error => tracing::error!(target: "keel::plugin", source = target, row, "{m}"),
            LogLevel::Warn => tracing::warn!(target: "keel::plugin", source = target, row, "{m}"),
            LogLevel::Info => tracing::info!(target: "keel::plugin", source = target, row, "{m}"),
            // Issue 25 item 1: a plugin's start-up line (`first request`) joins the kernel's.
            LogLevel::Debug if target == "keel::boot" => {
                tracing::debug!(target: "keel::boot", row, "{m}")
            }
            LogLevel::Debug => tracing::debug!(target: "keel::plugin", source = target, row, "{m}"),
            LogLevel::Trace => tracing::trace!(target: "keel::plugin", source = target, row, "{m}"),
        }
    }

    fn redact(&self, fiber: FiberId, pairs: Vec<(String, String)>) -> AbiResult<()> {
        let row = match self.fiber(fiber) {
            Ok(f) => f.row.clone(),
            Err(e) => return err(e),
        };
        match keel_output_guard::redact::set(&row, pairs) {
            Ok(()) => RResult::ROk(()),
            Err(why) => RResult::RErr(PluginError::coded(HostCode::Redact, why)),
        }
    }

    fn write_output(&self, _fiber: FiberId, stream: u8, text: &str) -> AbiResult<()> {
        match keel_output_guard::redact::write(stream, text) {
            Ok(()) => RResult::ROk(()),
            Err(e) => RResult::RErr(PluginError::coded(ContractCode::Io, e.to_string())),
        }
    }

    fn row(&self, fiber: FiberId) -> AbiResult<RString> {
        match self.fiber(fiber) {
            Ok(f) => RResult::ROk(RString::from(f.row.as_str())),
            Err(e) => err(e),
        }
    }

    fn config(&self, fiber: FiberId) -> AbiResult<RString> {
        match self.fiber(fiber) {
            Ok(f) => RResult::ROk(RString::from(f.config.to_string())),
            Err(e) => err(e),
        }
    }

    fn keel_home(&self, fiber: FiberId) -> AbiResult<RString> {
        match self.fiber(fiber) {
            Ok(_) => RResult::ROk(RString::from(self.0.keel_home.display().to_string())),
            Err(e) => err(e),
        }
    }

    fn data_dir(&self, fiber: FiberId) -> AbiResult<RString> {
        let f = match self.fiber(fiber) {
            Ok(f) => f,
            Err(e) => return err(e),
        };
        let dir = self.0.keel_home.join("data").join(&f.row);
        match std::fs::create_dir_all(&dir) {
            Ok(()) => RResult::ROk(RString::from(dir.display().to_string())),
            Err(e) => err(PluginError::coded(
                ContractCode::Io,
                format!("{}: {e}", dir.display()),
            )),
        }
    }

    fn register(
        &self,
        fiber: FiberId,
        event: &str,
        mode: EventMode,
        payload: &'static TypeLayout,
        output: &'static TypeLayout,
        options: ListenerOptions,
        listener: ListenerFfi,
    ) -> AbiResult<u64> {
        let f = match self.fiber(fiber) {
            Ok(f) => f,
            Err(e) => return err(e),
        };
        if !f.accepts_registrations() {
            return err(refused(&f));
        }
        let id = self.0.next_id();
        if let Err(e) = self
            .0
            .bus
            .register(id, &f, event, mode, payload, output, options, listener)
        {
            return err(e);
        }
        let label = format!("on({event})");
        if let Err(e) = self.push(
            &f,
            id,
            label,
            EffectKind::Listener {
                event: event.to_owned(),
            },
        ) {
            self.0.bus.remove(event, id);
            return err(e);
        }
        RResult::ROk(id)
    }

    fn unregister(&self, fiber: FiberId, registration: u64) -> BoxFuture<AbiResult<()>> {
        let inner = Arc::clone(&self.0);
        let f = self.fiber(fiber);
        self.boxed(async move {
            let f = match f {
                Ok(f) => f,
                Err(e) => return err(e),
            };
            let Some(effect) = f.take_effect(registration) else {
                return err(PluginError::coded(
                    HostCode::UnknownRegistration,
                    format!("row '{}' has no registration {registration}", f.row),
                ));
            };
            lifecycle::dispose_effect(&inner, &f, effect).await;
            RResult::ROk(())
        })
    }

    fn emit(
        &self,
        fiber: FiberId,
        event: &str,
        layout: &'static TypeLayout,
        payload: PayloadRef<'_>,
    ) -> AbiResult<()> {
        // `kernel/*` events report what the kernel observed; a plugin may listen, never forge.
        if event.starts_with("kernel/") {
            return err(PluginError::coded(
                HostCode::EventReserved,
                format!(
                    "{} may not dispatch '{event}': kernel/* events are the kernel's own",
                    self.who(fiber)
                ),
            ));
        }
        self.0.bus.emit(event, layout, payload, &|| self.who(fiber))
    }

    fn waterfall(
        &self,
        fiber: FiberId,
        event: &str,
        layout: &'static TypeLayout,
        payload: PayloadMut<'_>,
        terminal: SyncTerminalFfi,
    ) -> AbiResult<()> {
        self.0
            .bus
            .waterfall(event, layout, payload, terminal, &|| self.who(fiber))
    }

    fn async_waterfall(
        &self,
        fiber: FiberId,
        event: &str,
        output: &'static TypeLayout,
        payload: ErasedBox,
        terminal: AsyncTerminalFfi,
    ) -> BoxFuture<AbiResult<ErasedBox>> {
        let fut = self
            .0
            .bus
            .async_waterfall(event, output, payload, terminal, &|| self.who(fiber));
        self.boxed(fut)
    }

    fn parallel(
        &self,
        fiber: FiberId,
        event: &str,
        payload: ErasedBox,
    ) -> BoxFuture<AbiResult<()>> {
        let fut = self.0.bus.parallel(event, payload, &|| self.who(fiber));
        self.boxed(fut)
    }

    fn serial(
        &self,
        fiber: FiberId,
        event: &str,
        output: &'static TypeLayout,
        payload: ErasedBox,
    ) -> BoxFuture<AbiResult<ROption<ErasedBox>>> {
        let fut = self
            .0
            .bus
            .serial(event, output, payload, &|| self.who(fiber));
        self.boxed(fut)
    }

    fn provide(&self, fiber: FiberId, name: &str, handle: ErasedShared) -> AbiResult<u64> {
        let f = match self.fiber(fiber) {
            Ok(f) => f,
            Err(e) => return err(e),
        };
        if !f.accepts_registrations() {
            return err(refused(&f));
        }
        let Some(decl) = f.plugin.manifest.provides.iter().find(|p| p.name == name) else {
            return err(PluginError::coded(
                HostCode::UndeclaredService,
                format!(
                    "row '{}' provides '{name}' but its manifest does not declare it",
                    f.row
                ),
            ));
        };
        let id = self.0.next_id();
        if let Err(e) = self
            .0
            .services
            .provide(name, &f, id, handle, decl.exclusive)
        {
            return err(e);
        }
        if let Err(e) = self.push(
            &f,
            id,
            format!("provide({name})"),
            EffectKind::Service {
                name: name.to_owned(),
            },
        ) {
            self.0.services.remove(id);
            return err(e);
        }
        // A late provide (from an active fiber) may unblock pending rows.
        if f.state() == crate::fiber::FiberState::Active {
            let inner = Arc::clone(&self.0);
            self.0.handle.spawn(async move {
                let _guard = inner.lifecycle.lock().await;
                lifecycle::settle(&inner).await;
            });
        }
        RResult::ROk(id)
    }

    fn service(
        &self,
        fiber: FiberId,
        name: &str,
        layout: &'static TypeLayout,
        optional: bool,
    ) -> AbiResult<ROption<ErasedShared>> {
        let f = match self.fiber(fiber) {
            Ok(f) => f,
            Err(e) => return err(e),
        };
        let declared = f.plugin.manifest.requires.iter().any(|r| r.name == name)
            || f.plugin.manifest.provides.iter().any(|p| p.name == name);
        if !optional && !declared {
            return err(PluginError::coded(
                HostCode::UndeclaredRequirement,
                format!(
                    "row '{}' uses service '{name}' without declaring it in its manifest's requires",
                    f.row
                ),
            ));
        }
        let own = f.plugin.manifest.provides.iter().any(|p| p.name == name);
        match self.0.services.find(name, own) {
            Some(entry) => match self.0.services.handle_for(&entry, &f.row, layout) {
                Ok(h) => RResult::ROk(ROption::RSome(h)),
                Err(e) => err(e),
            },
            None if optional => RResult::ROk(ROption::RNone),
            None => err(PluginError::coded(
                ContractCode::ServiceUnavailable,
                format!(
                    "service '{name}' has no active provider (requested by row '{}')",
                    f.row
                ),
            )),
        }
    }

    fn effect(&self, fiber: FiberId, label: &str, disposer: DisposerFfi) -> AbiResult<u64> {
        let f = match self.fiber(fiber) {
            Ok(f) => f,
            Err(e) => return err(e),
        };
        let id = self.0.next_id();
        match self.push(&f, id, label.to_owned(), EffectKind::Disposer(disposer)) {
            Ok(()) => RResult::ROk(id),
            Err(e) => err(e),
        }
    }

    fn spawn(&self, fiber: FiberId, task: FfiFuture<()>) -> AbiResult<()> {
        let f = match self.fiber(fiber) {
            Ok(f) => f,
            Err(e) => return err(e),
        };
        if !f.accepts_registrations() {
            return err(refused(&f));
        }
        let handle = self.0.handle.spawn(task);
        f.track_task(handle.abort_handle());
        RResult::ROk(())
    }

    fn sleep(&self, ms: u64) -> BoxFuture<()> {
        let _entered = self.0.handle.enter();
        let sleep = tokio::time::sleep(std::time::Duration::from_millis(ms));
        self.boxed(sleep)
    }

    fn plugin_status(&self, _fiber: FiberId) -> AbiResult<RString> {
        match serde_json::to_string(&lifecycle::status(&self.0)) {
            Ok(s) => RResult::ROk(RString::from(s)),
            Err(e) => err(PluginError::coded(ContractCode::InvalidJson, e.to_string())),
        }
    }

    fn control(&self, fiber: FiberId, request: String) -> BoxFuture<AbiResult<RString>> {
        let inner = Arc::clone(&self.0);
        self.boxed(async move {
            let op: ControlOp = match serde_json::from_str(&request) {
                Ok(op) => op,
                Err(e) => return err(PluginError::coded(ControlCode::Control, e.to_string())),
            };
            match lifecycle::control(&inner, fiber, op).await {
                Ok(answer) => match serde_json::to_string(&answer) {
                    Ok(text) => RResult::ROk(RString::from(text)),
                    Err(e) => err(PluginError::coded(ContractCode::InvalidJson, e.to_string())),
                },
                Err(e) => err(e),
            }
        })
    }
}
