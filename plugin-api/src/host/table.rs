//! The `HostApi` table, backed by a safe [`Host`] trait the kernel implements.
//!
//! `extern "C"` functions cannot capture state, so the table's functions forward to one
//! process-global `Host` installed by [`install_host`]: one kernel at a time per process (a
//! kernel that was shut down may be followed by another — `keel resume` relaunching under a
//! session's own profile — which installs itself in its place; plugins keep the same table).
//! Every function catches panics, because a kernel panic unwinding into a plugin's stack frame
//! would abort the process.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use abi_stable::prefix_type::PrefixTypeTrait;
use abi_stable::std_types::{ROption, RResult, RStr, RString};
use async_ffi::{FfiFuture, FutureExt as _};

use super::calls::{PayloadMut, PayloadRef};
use crate::abi::{
    AbiResult, AsyncTerminalFfi, DisposerFfi, ErasedBox, ErasedShared, EventMode, FiberId, HostApi,
    HostApi_Ref, ListenerFfi, ListenerOptions, LogLevel, PluginError, SyncTerminalFfi, TypeLayout,
};

/// A boxed `Send` future.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// What the kernel implements; one method per `HostApi` entry (ARCHITECTURE §4.5).
pub trait Host: Send + Sync + 'static {
    /// A forwarded log line.
    fn log(&self, fiber: FiberId, level: LogLevel, target: &str, message: &str);
    /// Row id.
    fn row(&self, fiber: FiberId) -> AbiResult<RString>;
    /// Row config JSON.
    fn config(&self, fiber: FiberId) -> AbiResult<RString>;
    /// `$KEEL_HOME`.
    fn keel_home(&self, fiber: FiberId) -> AbiResult<RString>;
    /// Per-row data dir.
    fn data_dir(&self, fiber: FiberId) -> AbiResult<RString>;
    /// Registers a listener.
    #[allow(clippy::too_many_arguments, reason = "one per ABI argument")]
    fn register(
        &self,
        fiber: FiberId,
        event: &str,
        mode: EventMode,
        payload: &'static TypeLayout,
        output: &'static TypeLayout,
        options: ListenerOptions,
        listener: ListenerFfi,
    ) -> AbiResult<u64>;
    /// Removes a registration.
    fn unregister(&self, fiber: FiberId, registration: u64) -> BoxFuture<AbiResult<()>>;
    /// Emit.
    fn emit(
        &self,
        fiber: FiberId,
        event: &str,
        layout: &'static TypeLayout,
        payload: PayloadRef<'_>,
    ) -> AbiResult<()>;
    /// Sync waterfall.
    fn waterfall(
        &self,
        fiber: FiberId,
        event: &str,
        layout: &'static TypeLayout,
        payload: PayloadMut<'_>,
        terminal: SyncTerminalFfi,
    ) -> AbiResult<()>;
    /// Async waterfall.
    fn async_waterfall(
        &self,
        fiber: FiberId,
        event: &str,
        output: &'static TypeLayout,
        payload: ErasedBox,
        terminal: AsyncTerminalFfi,
    ) -> BoxFuture<AbiResult<ErasedBox>>;
    /// Parallel.
    fn parallel(&self, fiber: FiberId, event: &str, payload: ErasedBox)
    -> BoxFuture<AbiResult<()>>;
    /// Serial.
    fn serial(
        &self,
        fiber: FiberId,
        event: &str,
        output: &'static TypeLayout,
        payload: ErasedBox,
    ) -> BoxFuture<AbiResult<ROption<ErasedBox>>>;
    /// Provide a service.
    fn provide(&self, fiber: FiberId, name: &str, handle: ErasedShared) -> AbiResult<u64>;
    /// Look a service up.
    fn service(
        &self,
        fiber: FiberId,
        name: &str,
        layout: &'static TypeLayout,
        optional: bool,
    ) -> AbiResult<ROption<ErasedShared>>;
    /// Register a disposer.
    fn effect(&self, fiber: FiberId, label: &str, disposer: DisposerFfi) -> AbiResult<u64>;
    /// Spawn a task owned by the fiber.
    fn spawn(&self, fiber: FiberId, task: FfiFuture<()>) -> AbiResult<()>;
    /// A timer.
    fn sleep(&self, ms: u64) -> BoxFuture<()>;
    /// All rows' states.
    fn plugin_status(&self, fiber: FiberId) -> AbiResult<RString>;
    /// Row control.
    fn control(&self, fiber: FiberId, request: String) -> BoxFuture<AbiResult<RString>>;
    /// Replaces the fiber's output redactions (`(needle, replacement)` pairs).
    fn redact(&self, fiber: FiberId, pairs: Vec<(String, String)>) -> AbiResult<()> {
        let _ = (fiber, pairs);
        RResult::ROk(())
    }
    /// Writes to stdout (`1`) or stderr (`2`) after the redactions.
    fn write_output(&self, fiber: FiberId, stream: u8, text: &str) -> AbiResult<()> {
        let _ = fiber;
        RResult::from(
            crate::sdk::write_stream(stream, text)
                .map_err(|e| PluginError::coded(crate::codes::ContractCode::Io, e.to_string())),
        )
    }
}

/// How many kernels one process may run, one after another: keel runs two at most (a resume
/// relaunched under the session's own profile); a test binary using the in-process harness
/// (`keel-plugin-test`) runs one per test under `cargo test`.
pub const MAX_KERNELS: usize = 256;

/// Every host installed so far, in order; [`CURRENT`] indexes the live one. Retired hosts stay
/// (they are small once their kernel shut down), so a host call is two plain loads — no lock,
/// no reference count on the hot path.
static HOSTS: [OnceLock<Arc<dyn Host>>; MAX_KERNELS] = [const { OnceLock::new() }; MAX_KERNELS];
/// Index of the live host in [`HOSTS`] (`usize::MAX`: none yet).
static CURRENT: AtomicUsize = AtomicUsize::new(usize::MAX);
/// Hosts installed so far.
static INSTALLED: AtomicUsize = AtomicUsize::new(0);
static TABLE: OnceLock<HostApi_Ref> = OnceLock::new();

/// The live host.
fn current_host() -> Option<&'static Arc<dyn Host>> {
    HOSTS.get(CURRENT.load(Ordering::Acquire))?.get()
}

fn no_host() -> PluginError {
    PluginError::coded(
        crate::host::HostCode::NoHost,
        "no kernel is installed in this process",
    )
}

fn kernel_panic() -> PluginError {
    PluginError::coded(
        crate::host::HostCode::KernelPanic,
        "the kernel panicked while serving a plugin call",
    )
}

/// Runs a synchronous host call with the installed host, catching panics.
fn with_host<T>(f: impl FnOnce(&dyn Host) -> AbiResult<T>) -> AbiResult<T> {
    let Some(host) = current_host() else {
        return RResult::RErr(no_host());
    };
    match catch_unwind(AssertUnwindSafe(|| f(&**host))) {
        Ok(r) => r,
        Err(_) => RResult::RErr(kernel_panic()),
    }
}

/// Runs an async host call: the future is built and polled behind panic guards.
fn with_host_async<T: Send + 'static>(
    f: impl FnOnce(&dyn Host) -> BoxFuture<AbiResult<T>>,
) -> FfiFuture<AbiResult<T>> {
    let Some(host) = current_host() else {
        return async { RResult::RErr(no_host()) }.into_ffi();
    };
    match catch_unwind(AssertUnwindSafe(|| f(&**host))) {
        Ok(fut) => async move {
            match futures::FutureExt::catch_unwind(AssertUnwindSafe(fut)).await {
                Ok(r) => r,
                Err(_) => RResult::RErr(kernel_panic()),
            }
        }
        .into_ffi(),
        Err(_) => async { RResult::RErr(kernel_panic()) }.into_ffi(),
    }
}

extern "C" fn log(fiber: FiberId, level: LogLevel, target: RStr<'_>, message: RStr<'_>) {
    let _ = with_host(|h| {
        h.log(fiber, level, target.as_str(), message.as_str());
        RResult::ROk(())
    });
}
extern "C" fn row(fiber: FiberId) -> AbiResult<RString> {
    with_host(|h| h.row(fiber))
}
extern "C" fn config(fiber: FiberId) -> AbiResult<RString> {
    with_host(|h| h.config(fiber))
}
extern "C" fn keel_home(fiber: FiberId) -> AbiResult<RString> {
    with_host(|h| h.keel_home(fiber))
}
extern "C" fn data_dir(fiber: FiberId) -> AbiResult<RString> {
    with_host(|h| h.data_dir(fiber))
}
extern "C" fn register(
    fiber: FiberId,
    event: RStr<'_>,
    mode: EventMode,
    payload: &'static TypeLayout,
    output: &'static TypeLayout,
    options: ListenerOptions,
    listener: ListenerFfi,
) -> AbiResult<u64> {
    with_host(|h| {
        h.register(
            fiber,
            event.as_str(),
            mode,
            payload,
            output,
            options,
            listener,
        )
    })
}
extern "C" fn unregister(fiber: FiberId, registration: u64) -> FfiFuture<AbiResult<()>> {
    with_host_async(|h| h.unregister(fiber, registration))
}
unsafe extern "C" fn emit(
    fiber: FiberId,
    event: RStr<'_>,
    layout: &'static TypeLayout,
    payload: *const (),
) -> AbiResult<()> {
    with_host(|h| h.emit(fiber, event.as_str(), layout, PayloadRef::from_raw(payload)))
}
unsafe extern "C" fn waterfall(
    fiber: FiberId,
    event: RStr<'_>,
    layout: &'static TypeLayout,
    payload: *mut (),
    terminal: SyncTerminalFfi,
) -> AbiResult<()> {
    with_host(|h| {
        h.waterfall(
            fiber,
            event.as_str(),
            layout,
            PayloadMut::from_raw(payload),
            terminal,
        )
    })
}
extern "C" fn async_waterfall(
    fiber: FiberId,
    event: RStr<'_>,
    output: &'static TypeLayout,
    payload: ErasedBox,
    terminal: AsyncTerminalFfi,
) -> FfiFuture<AbiResult<ErasedBox>> {
    let event = event.as_str().to_owned();
    with_host_async(move |h| h.async_waterfall(fiber, &event, output, payload, terminal))
}
extern "C" fn parallel(
    fiber: FiberId,
    event: RStr<'_>,
    payload: ErasedBox,
) -> FfiFuture<AbiResult<()>> {
    let event = event.as_str().to_owned();
    with_host_async(move |h| h.parallel(fiber, &event, payload))
}
extern "C" fn serial(
    fiber: FiberId,
    event: RStr<'_>,
    output: &'static TypeLayout,
    payload: ErasedBox,
) -> FfiFuture<AbiResult<ROption<ErasedBox>>> {
    let event = event.as_str().to_owned();
    with_host_async(move |h| h.serial(fiber, &event, output, payload))
}
extern "C" fn provide(fiber: FiberId, name: RStr<'_>, handle: ErasedShared) -> AbiResult<u64> {
    with_host(|h| h.provide(fiber, name.as_str(), handle))
}
extern "C" fn service(
    fiber: FiberId,
    name: RStr<'_>,
    layout: &'static TypeLayout,
    optional: bool,
) -> AbiResult<ROption<ErasedShared>> {
    with_host(|h| h.service(fiber, name.as_str(), layout, optional))
}
extern "C" fn effect(fiber: FiberId, label: RStr<'_>, disposer: DisposerFfi) -> AbiResult<u64> {
    with_host(|h| h.effect(fiber, label.as_str(), disposer))
}
extern "C" fn spawn(fiber: FiberId, task: FfiFuture<()>) -> AbiResult<()> {
    with_host(|h| h.spawn(fiber, task))
}
extern "C" fn sleep(ms: u64) -> FfiFuture<()> {
    let Some(host) = current_host() else {
        return async {}.into_ffi();
    };
    match catch_unwind(AssertUnwindSafe(|| host.sleep(ms))) {
        Ok(fut) => async move {
            let _ = futures::FutureExt::catch_unwind(AssertUnwindSafe(fut)).await;
        }
        .into_ffi(),
        Err(_) => async {}.into_ffi(),
    }
}
extern "C" fn plugin_status(fiber: FiberId) -> AbiResult<RString> {
    with_host(|h| h.plugin_status(fiber))
}
extern "C" fn control(fiber: FiberId, request: RString) -> FfiFuture<AbiResult<RString>> {
    with_host_async(move |h| h.control(fiber, request.into_string()))
}

extern "C" fn redact(fiber: FiberId, pairs: RString) -> AbiResult<()> {
    with_host(
        |h| match serde_json::from_str::<Vec<(String, String)>>(pairs.as_str()) {
            Ok(pairs) => h.redact(fiber, pairs),
            Err(e) => RResult::RErr(PluginError::coded(
                crate::codes::ContractCode::InvalidJson,
                format!("redactions must be [[needle, replacement], …]: {e}"),
            )),
        },
    )
}
extern "C" fn write_output(fiber: FiberId, stream: u8, text: RStr<'_>) -> AbiResult<()> {
    with_host(|h| h.write_output(fiber, stream, text.as_str()))
}

#[cfg(feature = "host-api-extension-fixture")]
extern "C" fn fixture_extension() -> u32 {
    42
}

/// Installs the process's kernel and returns the table handed to plugins. A later call
/// replaces the host (one kernel at a time: the previous one must have been shut down) and
/// returns the same table, so plugins linked to it reach the new kernel; `None` once
/// [`MAX_KERNELS`] were installed.
pub fn install_host(host: Arc<dyn Host>) -> Option<HostApi_Ref> {
    let n = INSTALLED.fetch_add(1, Ordering::AcqRel);
    HOSTS.get(n)?.set(host).ok()?;
    CURRENT.store(n, Ordering::Release);
    Some(*TABLE.get_or_init(|| {
        HostApi {
            log,
            row,
            config,
            keel_home,
            data_dir,
            register,
            unregister,
            emit,
            waterfall,
            async_waterfall,
            parallel,
            serial,
            provide,
            service,
            effect,
            spawn,
            sleep,
            plugin_status,
            control,
            redact,
            write_output,
            #[cfg(feature = "host-api-extension-fixture")]
            fixture_extension,
        }
        .leak_into_prefix()
    }))
}
