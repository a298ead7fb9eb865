//! The root module every plugin library exports, checked by abi_stable at load.
//!
//! Its layout contains only plugin-implemented entry points and plain data: the host table
//! travels inside [`HostCtx`] as an opaque pointer (see `host_api`), so the direction of
//! abi_stable's check (host = expected, plugin = found) never rejects older plugins for what
//! the host added.

use abi_stable::StableAbi;
use abi_stable::library::RootModule;
use abi_stable::sabi_types::VersionStrings;
use abi_stable::std_types::{RString, RVec};
use abi_stable::type_layout::TypeLayout;
use async_ffi::FfiFuture;

use super::AbiResult;
use super::host_api::HostCtx;

/// A plugin library's entry points.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginRoot_Ref)))]
#[sabi(missing_field(option))]
pub struct PluginRoot {
    /// The ABI major the library was built with (also in `KEEL_PLUGIN_ABI`).
    pub abi_major: u32,
    /// The manifest as JSON (see `sdk::Manifest`).
    pub manifest: extern "C" fn() -> AbiResult<RString>,
    /// Activates one fiber (row) of this plugin.
    pub activate: extern "C" fn(ctx: HostCtx) -> FfiFuture<AbiResult<()>>,
    /// Payload and output layouts of the events the manifest declares: the declaring plugin,
    /// not the first dispatcher, fixes what an event's payload is.
    pub event_layouts: extern "C" fn() -> RVec<EventLayout>,
    /// Called once at kernel exit: stop plugin-owned threads and runtimes.
    #[sabi(last_prefix_field)]
    pub shutdown: extern "C" fn(),
}

/// One declared event's layouts.
#[repr(C)]
#[derive(StableAbi, Clone)]
pub struct EventLayout {
    /// Event name.
    pub name: RString,
    /// Payload layout as compiled into the declaring plugin.
    pub payload: &'static TypeLayout,
    /// Output layout.
    pub output: &'static TypeLayout,
}

impl RootModule for PluginRoot_Ref {
    abi_stable::declare_root_module_statics! {PluginRoot_Ref}
    const BASE_NAME: &'static str = "keel_plugin";
    const NAME: &'static str = "keel plugin";
    const VERSION_STRINGS: VersionStrings = super::ABI_VERSION_STRINGS;
}
