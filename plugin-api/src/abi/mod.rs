//! The ABI layer: `repr(C)` types and `extern "C"` function tables, no logic, no I/O.
//!
//! Everything that crosses between the kernel and a plugin image is declared here and derives
//! `StableAbi`, so abi_stable can compare layouts at load time. abi_stable is unmaintained
//! (see `abi-research.md`), so nothing outside this crate names it except R-types inside
//! payloads; a later swap to own `repr(C)` vtables touches this module and `host`/`sdk` only.
//!
//! Two checks guard a load, in order: the plain `KEEL_PLUGIN_ABI` static (read with libloading
//! before abi_stable runs, so a wrong major is one line, not a 3,000-line layout report), then
//! abi_stable's root-module layout check. The host's own table ([`HostApi`]) is *not* reachable
//! from the root module: it is handed to the plugin opaquely and checked on the plugin side, so a
//! kernel that appends host functions keeps loading older plugins (the asymmetry rule, §3).

#![allow(
    non_camel_case_types,
    reason = "abi_stable names prefix references `X_Ref`"
)]

mod erased;
mod host_api;
mod root;
mod status;

pub use abi_stable::StableAbi;
pub use abi_stable::std_types::{RBox, ROption, RResult, RSlice, RStr, RString, RVec};
pub use abi_stable::type_layout::TypeLayout;
pub use async_ffi::FfiFuture;
pub use erased::{
    AsyncNextFfi, AsyncTerminalFfi, DisposerFfi, ErasedBox, ErasedShared, ListenerCall,
    ListenerFfi, ListenerOptions, SharedPtr, SyncNextFfi, SyncTerminalFfi,
};
pub use host_api::{FiberId, HostApi, HostApi_Prefix, HostApi_Ref, HostCtx, LogLevel};
pub use root::{EventLayout, PluginRoot, PluginRoot_Ref};
pub use status::{BoxedError, SyncStatus};

/// The ABI major this build of `keel-plugin-api` speaks. Plugins and kernel must agree exactly.
///
/// Bump on any change to a type in this module; every plugin rebuilds (lockstep per major).
/// Major 2 (SDK 2, issue 12): services are typed contracts over one `ContractHandle` and
/// payloads carry `Frozen` documents by reference; `CallHandle` is gone. Major 3 (SDK 3, issue
/// 24): event decisions are `Typed<T>` values, tools are one `Tool` trait, codes are catalog
/// variants, the untyped service calls are gone.
#[cfg(not(feature = "abi-mismatch-fixture"))]
pub const ABI_MAJOR: u32 = 3;
/// Test fixture build: a plugin built for the previous major, 2 (see the
/// `abi-mismatch-fixture` feature), which this kernel must refuse by name.
#[cfg(feature = "abi-mismatch-fixture")]
pub const ABI_MAJOR: u32 = 2;

/// abi_stable's version strings, derived from the ABI version, never from the crate version
/// (a crate version bump must not break plugins; anyrun#236).
#[cfg(not(feature = "abi-mismatch-fixture"))]
pub const ABI_VERSION_STRINGS: abi_stable::sabi_types::VersionStrings =
    abi_stable::sabi_types::VersionStrings::new("3.0.0");
#[cfg(feature = "abi-mismatch-fixture")]
pub const ABI_VERSION_STRINGS: abi_stable::sabi_types::VersionStrings =
    abi_stable::sabi_types::VersionStrings::new("2.0.0");

/// Name of the plain `u32` static every plugin exports; read before anything else.
pub const ABI_SYMBOL: &[u8] = b"KEEL_PLUGIN_ABI";

/// How an event's listeners are run. Part of the event's public contract.
#[repr(u8)]
#[derive(StableAbi, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventMode {
    /// Synchronous notification; errors contained.
    Emit = 0,
    /// Synchronous around-middleware over `&mut Payload`.
    Waterfall = 1,
    /// Asynchronous around-middleware, payload by value, `next` re-runnable.
    AsyncWaterfall = 2,
    /// All start, all awaited, failures aggregated.
    Parallel = 3,
    /// One at a time until a decision.
    Serial = 4,
}

impl EventMode {
    /// Stable lowercase name used in manifests, docs and errors.
    pub const fn as_str(&self) -> &'static str {
        match self {
            EventMode::Emit => "emit",
            EventMode::Waterfall => "waterfall",
            EventMode::AsyncWaterfall => "async-waterfall",
            EventMode::Parallel => "parallel",
            EventMode::Serial => "serial",
        }
    }

    /// Parses [`EventMode::as_str`] output.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "emit" => EventMode::Emit,
            "waterfall" => EventMode::Waterfall,
            "async-waterfall" => EventMode::AsyncWaterfall,
            "parallel" => EventMode::Parallel,
            "serial" => EventMode::Serial,
            _ => return None,
        })
    }
}

/// The only error shape that crosses the ABI: a stable code and a one-line message.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct PluginError {
    /// Stable machine-readable code, e.g. `PANIC`, `TIMEOUT`, `INACTIVE_FIBER`.
    pub code: RString,
    /// Human-readable, one line.
    pub message: RString,
}

impl PluginError {
    /// Builds an error from a catalog code (`crate::codes`).
    pub fn coded(code: impl crate::codes::ErrorCode, message: impl Into<String>) -> Self {
        PluginError {
            code: RString::from(code.as_str()),
            message: RString::from(message.into()),
        }
    }

    /// Rebuilds an error whose code was received from elsewhere (another `Error`, the wire);
    /// new errors are built with [`PluginError::coded`].
    pub fn received(code: &str, message: impl Into<String>) -> Self {
        PluginError {
            code: RString::from(code),
            message: RString::from(message.into()),
        }
    }

    /// Whether this error carries `code`.
    pub fn is(&self, code: impl crate::codes::ErrorCode) -> bool {
        self.code.as_str() == code.as_str()
    }
}

/// Shorthand for results that cross the ABI.
pub type AbiResult<T> = RResult<T, PluginError>;
