//! keel's plugin API: the stable ABI between the kernel and `cdylib` plugins, and the safe SDK
//! plugin authors write against.
//!
//! ```ignore
//! use keel_plugin_api::prelude::*;
//!
//! #[derive(Default)]
//! struct Hello;
//!
//! impl Plugin for Hello {
//!     fn manifest(&self) -> Manifest {
//!         Manifest::new("hello", env!("CARGO_PKG_VERSION"))
//!     }
//!     async fn activate(&self, ctx: Context) -> Result<()> {
//!         ctx.on::<keel_plugin_api::events::kernel::PluginStatus>(ListenerOptions::default(), |status| {
//!             tracing::info!(row = %status.row, state = %status.state, "row changed state");
//!             Ok(())
//!         })?;
//!         Ok(())
//!     }
//! }
//!
//! keel_plugin_api::export_plugin!(Hello);
//! ```
//!
//! The crate has three audiences (nushell's split): [`abi`] holds the `repr(C)` types and nothing
//! else; [`sdk`] is what plugin authors use (no abi_stable name in its signatures but R-types in
//! payloads); [`host`] is for the kernel only. [`events`] and [`services`] declare the shared
//! vocabulary. See `docs/plugin-authoring.md` for a worked example.

#![allow(
    unsafe_code,
    reason = "the ABI layer: raw pointers cross images here and nowhere else; each block has a SAFETY note"
)]

pub mod abi;
pub mod codes;
pub mod conversation;
pub mod events;
#[doc(hidden)]
pub mod host;
pub mod sdk;
pub mod services;

/// Re-exported so a config type's `JsonSchema` derive and `Manifest::config_type` agree on one
/// version of schemars.
pub use schemars;
pub use sdk::prelude;

#[doc(hidden)]
pub mod __private {
    pub use abi_stable::library::{
        __call_root_module_loader, CheckTypeLayout, LibHeader, RootModuleResult,
    };
    pub use serde;
}
