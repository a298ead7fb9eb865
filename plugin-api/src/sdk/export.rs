//! `export_plugin!` and the entry points it instantiates for a plugin type.
//!
//! The macro emits three things into the plugin crate: the plain `KEEL_PLUGIN_ABI` static the
//! kernel reads first, abi_stable's `LibHeader` static (under abi_stable's fixed symbol name, so
//! plugin crates need no abi_stable dependency), and `extern "C"` entries that call the typed
//! [`Plugin`] methods behind panic guards.

use abi_stable::prefix_type::PrefixTypeTrait;
use abi_stable::std_types::{RResult, RString};
use async_ffi::FfiFuture;

use super::context::Context;
use super::dispatch::EventSet;
use super::error::Error;
use super::ffi::{guard, guard_future};
use super::manifest::Manifest;
use super::plugin::Plugin;
use crate::abi::{ABI_MAJOR, AbiResult, EventLayout, HostCtx, PluginRoot, PluginRoot_Ref};
use abi_stable::std_types::RVec;

/// The symbol abi_stable 0.11 looks up for the root module (checked by a unit test).
pub const ROOT_MODULE_SYMBOL: &str = "_1as_0lib_1header_0root_bmodule_bloader";

/// Builds the root module from the macro's entry points.
pub fn root(
    manifest: extern "C" fn() -> AbiResult<RString>,
    activate: extern "C" fn(HostCtx) -> FfiFuture<AbiResult<()>>,
    event_layouts: extern "C" fn() -> RVec<EventLayout>,
    shutdown: extern "C" fn(),
) -> PluginRoot_Ref {
    PluginRoot {
        abi_major: ABI_MAJOR,
        manifest,
        activate,
        event_layouts,
        shutdown,
    }
    .leak_into_prefix()
}

/// The manifest the kernel receives: the plugin's own, plus the declarations of the events of
/// its [`Plugin::Dispatches`] set (after the ones it lists itself, in field order).
pub fn full_manifest<P: Plugin>(plugin: &P) -> Manifest {
    <P::Dispatches as EventSet>::declare(plugin.manifest())
}

/// `event_layouts` entry: the layouts of the declared events.
pub fn event_layouts_entry<P: Plugin>(instance: fn() -> &'static P) -> RVec<EventLayout> {
    std::panic::catch_unwind(|| {
        full_manifest(instance())
            .event_layouts
            .iter()
            .map(|d| EventLayout {
                name: d.name.into(),
                payload: d.payload,
                output: d.output,
            })
            .collect()
    })
    .unwrap_or_default()
}

/// `manifest` entry: serialises the plugin's manifest with the ABI filled in.
pub fn manifest_entry<P: Plugin>(instance: fn() -> &'static P) -> AbiResult<RString> {
    guard(|| {
        let mut manifest = full_manifest(instance());
        manifest.abi = ABI_MAJOR;
        Ok(RString::from(serde_json::to_string(&manifest)?))
    })
}

/// `activate` entry: links the host table (checking its layout), then runs `Plugin::activate`.
pub fn activate_entry<P: Plugin>(
    instance: fn() -> &'static P,
    ctx: HostCtx,
) -> FfiFuture<AbiResult<()>> {
    let linked = guard(|| super::link::link(&ctx));
    match linked {
        RResult::ROk(api) => {
            let context = Context::new(ctx.fiber, api);
            match std::panic::catch_unwind(|| instance().activate(context)) {
                Ok(fut) => guard_future(fut),
                Err(p) => {
                    let e = Error::coded(
                        crate::codes::ContractCode::Panic,
                        format!("plugin panicked: {}", super::ffi::panic_message(&*p)),
                    );
                    guard_future(async move { Err(e) })
                }
            }
        }
        RResult::RErr(e) => guard_future(async move { Err(e.into()) }),
    }
}

/// `shutdown` entry.
pub fn shutdown_entry<P: Plugin>(instance: fn() -> &'static P) {
    let _ = std::panic::catch_unwind(|| {
        instance().shutdown();
        #[cfg(feature = "plugin-runtime")]
        super::runtime::shutdown_runtime();
    });
}

/// Exports a plugin type (which must implement [`Plugin`] and `Default`) from a `cdylib`.
///
/// It also defines `crate::DISPATCH` (where it is invoked: the crate root), the value of the
/// plugin's [`Plugin::Dispatches`] set: `crate::DISPATCH.<field>` is the handle the dispatch
/// methods take (see [`dispatches!`](crate::dispatches)).
///
/// ```ignore
/// #[derive(Default)]
/// struct MyPlugin;
/// impl keel_plugin_api::prelude::Plugin for MyPlugin { /* Dispatches, manifest, activate */ }
/// keel_plugin_api::export_plugin!(MyPlugin);
/// ```
#[macro_export]
macro_rules! export_plugin {
    ($plugin:ty) => {
        /// This plugin's dispatch handles: `DISPATCH.<field>` is the right to dispatch that
        /// event of its `Dispatches` set (issue 24 item 7).
        #[allow(dead_code, reason = "a plugin that dispatches nothing never reads it")]
        pub(crate) const DISPATCH: <$plugin as $crate::sdk::Plugin>::Dispatches =
            <<$plugin as $crate::sdk::Plugin>::Dispatches as $crate::sdk::EventSet>::HANDLES;

        #[doc(hidden)]
        #[allow(
            unsafe_code,
            non_upper_case_globals,
            reason = "the root the loader reads"
        )]
        pub mod __keel_plugin_export {
            use super::*;

            static INSTANCE: ::std::sync::OnceLock<$plugin> = ::std::sync::OnceLock::new();

            fn instance() -> &'static $plugin {
                INSTANCE.get_or_init(<$plugin as ::std::default::Default>::default)
            }

            extern "C" fn manifest() -> $crate::abi::AbiResult<$crate::abi::RString> {
                $crate::sdk::export::manifest_entry::<$plugin>(instance)
            }

            extern "C" fn activate(
                ctx: $crate::abi::HostCtx,
            ) -> $crate::abi::FfiFuture<$crate::abi::AbiResult<()>> {
                $crate::sdk::export::activate_entry::<$plugin>(instance, ctx)
            }

            extern "C" fn event_layouts() -> $crate::abi::RVec<$crate::abi::EventLayout> {
                $crate::sdk::export::event_layouts_entry::<$plugin>(instance)
            }

            extern "C" fn shutdown() {
                $crate::sdk::export::shutdown_entry::<$plugin>(instance)
            }

            fn root() -> $crate::abi::PluginRoot_Ref {
                $crate::sdk::export::root(manifest, activate, event_layouts, shutdown)
            }

            /// The ABI major, read by the kernel with libloading before anything else.
            #[unsafe(no_mangle)]
            pub static KEEL_PLUGIN_ABI: u32 = $crate::abi::ABI_MAJOR;

            /// abi_stable's library header (layout-checked root module).
            #[unsafe(export_name = "_1as_0lib_1header_0root_bmodule_bloader")]
            pub static LIB_HEADER: $crate::__private::LibHeader = {
                extern "C" fn erased_root() -> $crate::__private::RootModuleResult {
                    $crate::__private::__call_root_module_loader(root)
                }
                // SAFETY: `erased_root` returns the root module of type `PluginRoot_Ref`.
                unsafe {
                    $crate::__private::LibHeader::from_constructor::<$crate::abi::PluginRoot_Ref>(
                        erased_root,
                        $crate::__private::CheckTypeLayout::Yes,
                    )
                }
            };
        }
    };
}

#[cfg(test)]
mod tests {
    #[test]
    fn root_module_symbol_matches_abi_stable() {
        assert_eq!(
            super::ROOT_MODULE_SYMBOL,
            abi_stable::library::ROOT_MODULE_LOADER_NAME
        );
    }

    #[test]
    fn panics_become_panic_errors_not_unwinds() {
        let r = super::guard::<()>(|| panic!("boom"));
        match r {
            abi_stable::std_types::RResult::RErr(e) => {
                assert_eq!(e.code.as_str(), "PANIC");
                assert!(e.message.as_str().contains("boom"));
            }
            abi_stable::std_types::RResult::ROk(()) => panic!("expected an error"),
        }
    }
}
