//! The host's function table: everything a plugin can ask of the kernel (ARCHITECTURE §4.5).
//!
//! `HostApi` is a prefix type that only ever grows at the end within an ABI major. It is not
//! reachable from the plugin's root module; the kernel passes it inside [`HostCtx`] as an opaque
//! pointer plus its `TypeLayout`, and the SDK checks *the plugin's* (older or equal) layout
//! against the kernel's (newer or equal) one. abi_stable's check accepts a found prefix with
//! more fields than expected, so a kernel that appended functions still loads older plugins.

use abi_stable::StableAbi;
use abi_stable::std_types::{ROption, RStr, RString};
use abi_stable::type_layout::TypeLayout;
use async_ffi::FfiFuture;

use super::erased::{
    AsyncTerminalFfi, DisposerFfi, ErasedBox, ErasedShared, ListenerFfi, ListenerOptions,
    SyncTerminalFfi,
};
use super::{AbiResult, EventMode};

/// Identifies one fiber (one running instance of a profile row) to the kernel.
#[repr(C)]
#[derive(StableAbi, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FiberId(pub u64);

/// Severity of a forwarded log line.
#[repr(u8)]
#[derive(StableAbi, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    /// Errors.
    Error = 0,
    /// Warnings.
    Warn = 1,
    /// Info.
    Info = 2,
    /// Debug.
    Debug = 3,
    /// Trace.
    Trace = 4,
}

/// What a plugin receives when one of its rows is activated.
#[repr(C)]
#[derive(StableAbi, Clone, Copy)]
pub struct HostCtx {
    /// The kernel's ABI major.
    pub abi: u32,
    /// The fiber being activated.
    pub fiber: FiberId,
    /// Opaque pointer to the kernel's `HostApi` prefix (`HostApi_Ref::to_raw_ptr`).
    pub api: *const (),
    /// The kernel's layout of `HostApi`, checked on the plugin side.
    pub api_layout: &'static TypeLayout,
    /// The most verbose level the kernel's subscriber keeps (0 off, 1 error … 5 trace), so a
    /// plugin's tracing layer drops what would be filtered anyway before it crosses the ABI.
    pub max_log_level: u8,
}

// SAFETY: `api` points to a leaked, immutable table of `extern "C"` fns.
unsafe impl Send for HostCtx {}
// SAFETY: as for `Send`: the table is never written, so shared references are fine.
unsafe impl Sync for HostCtx {}

/// The kernel's services to plugins. Functions that take raw pointers are `unsafe`; the SDK
/// upholds their contracts.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = HostApi_Ref)))]
#[sabi(missing_field(option))]
pub struct HostApi {
    /// Forwards a log line (the SDK's tracing layer and panic hook use it).
    pub log: extern "C" fn(fiber: FiberId, level: LogLevel, target: RStr<'_>, message: RStr<'_>),
    /// The fiber's row id.
    pub row: extern "C" fn(fiber: FiberId) -> AbiResult<RString>,
    /// The fiber's row config as JSON, validated against the manifest's schema.
    pub config: extern "C" fn(fiber: FiberId) -> AbiResult<RString>,
    /// `$KEEL_HOME`: where sessions, secrets, credentials and the user layer live.
    pub keel_home: extern "C" fn(fiber: FiberId) -> AbiResult<RString>,
    /// A per-row data directory under `$KEEL_HOME/data/<row>` (created on demand).
    pub data_dir: extern "C" fn(fiber: FiberId) -> AbiResult<RString>,
    /// Registers a listener; returns its registration id. Refused on an unloading fiber.
    pub register: extern "C" fn(
        fiber: FiberId,
        event: RStr<'_>,
        mode: EventMode,
        payload: &'static TypeLayout,
        output: &'static TypeLayout,
        options: ListenerOptions,
        listener: ListenerFfi,
    ) -> AbiResult<u64>,
    /// Removes one registration (listener, service or effect) early, running its disposer.
    pub unregister: extern "C" fn(fiber: FiberId, registration: u64) -> FfiFuture<AbiResult<()>>,
    /// Emits: every listener runs, failures are contained.
    pub emit: unsafe extern "C" fn(
        fiber: FiberId,
        event: RStr<'_>,
        payload_layout: &'static TypeLayout,
        payload: *const (),
    ) -> AbiResult<()>,
    /// Sync waterfall over `*mut Payload`, ending in the dispatcher's terminal.
    pub waterfall: unsafe extern "C" fn(
        fiber: FiberId,
        event: RStr<'_>,
        payload_layout: &'static TypeLayout,
        payload: *mut (),
        terminal: SyncTerminalFfi,
    ) -> AbiResult<()>,
    /// Async waterfall: payload by value, output by value.
    pub async_waterfall: extern "C" fn(
        fiber: FiberId,
        event: RStr<'_>,
        output_layout: &'static TypeLayout,
        payload: ErasedBox,
        terminal: AsyncTerminalFfi,
    ) -> FfiFuture<AbiResult<ErasedBox>>,
    /// Parallel: all start, all awaited, failures aggregated in registration order.
    pub parallel: extern "C" fn(
        fiber: FiberId,
        event: RStr<'_>,
        payload: ErasedBox,
    ) -> FfiFuture<AbiResult<()>>,
    /// Serial: one at a time until a listener decides.
    pub serial: extern "C" fn(
        fiber: FiberId,
        event: RStr<'_>,
        output_layout: &'static TypeLayout,
        payload: ErasedBox,
    ) -> FfiFuture<AbiResult<ROption<ErasedBox>>>,
    /// Provides a service under `name`; an effect of the fiber.
    pub provide:
        extern "C" fn(fiber: FiberId, name: RStr<'_>, handle: ErasedShared) -> AbiResult<u64>,
    /// Looks a service up. Non-optional lookups of undeclared or absent services are errors.
    pub service: extern "C" fn(
        fiber: FiberId,
        name: RStr<'_>,
        layout: &'static TypeLayout,
        optional: bool,
    ) -> AbiResult<ROption<ErasedShared>>,
    /// Registers a disposer, run LIFO at teardown.
    pub effect:
        extern "C" fn(fiber: FiberId, label: RStr<'_>, disposer: DisposerFfi) -> AbiResult<u64>,
    /// Spawns a task on the kernel's runtime; it is cancelled when the fiber is disposed.
    pub spawn: extern "C" fn(fiber: FiberId, task: FfiFuture<()>) -> AbiResult<()>,
    /// A timer on the kernel's runtime.
    pub sleep: extern "C" fn(ms: u64) -> FfiFuture<()>,
    /// All rows' states as JSON (`[{row, plugin, state, faulted, …}]`).
    pub plugin_status: extern "C" fn(fiber: FiberId) -> AbiResult<RString>,
    /// Row control for drivers and tools: `{"op":"disable"|"enable"|"reload","row":…,"config":…}`.
    #[sabi(last_prefix_field)]
    pub control: extern "C" fn(fiber: FiberId, request: RString) -> FfiFuture<AbiResult<RString>>,
    /// Replaces the fiber's output redactions: JSON `[[needle, replacement], …]`. The kernel
    /// applies every loaded fiber's redactions to each tracing line and to everything written
    /// through `write_output` (SEC-03), for the life of the process. Appended after `control`
    /// (the table only grows at the end within a major).
    pub redact: extern "C" fn(fiber: FiberId, pairs: RString) -> AbiResult<()>,
    /// Writes `text` to the process's stdout (`1`) or stderr (`2`), redacted. Appended after
    /// `control`.
    pub write_output: extern "C" fn(fiber: FiberId, stream: u8, text: RStr<'_>) -> AbiResult<()>,
    /// Test fixture: a function a newer kernel appended (feature `host-api-extension-fixture`).
    #[cfg(feature = "host-api-extension-fixture")]
    pub fixture_extension: extern "C" fn() -> u32,
}
