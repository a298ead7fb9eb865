//! keel's plugin API: the stable ABI between the kernel and `cdylib` plugins, and the safe SDK
//! plugin authors write against.
//!
//! A plugin serving a typed service with a typed config, and listening to a core event. The
//! service is declared once with [`contract!`]; the provider implements the generated trait,
//! consumers get the generated client; codes are declared with [`error_codes!`]; the row
//! config's JSON Schema is derived from its type (`config_type`). A complete, built and tested
//! crate is what `cargo xtask new-plugin` writes; see `docs/plugin-authoring.md`.
//!
//! ```
//! use keel_plugin_api::events::kernel::PluginStatus;
//! use keel_plugin_api::prelude::*;
//! use serde::{Deserialize, Serialize};
//!
//! keel_plugin_api::contract! {
//!     /// Greets people.
//!     pub contract Hello = "example.hello", version 1;
//!     provider HelloProvider;
//!     client HelloClient;
//!     /// Greets `name`; `HELLO_NO_NAME` when it is empty.
//!     fn greet(Greet) -> Greeting;
//! }
//!
//! /// `greet`'s request.
//! #[derive(Serialize, Deserialize)]
//! pub struct Greet { pub name: String }
//!
//! /// `greet`'s answer.
//! #[derive(Debug, Serialize, Deserialize)]
//! pub struct Greeting { pub text: String }
//!
//! keel_plugin_api::error_codes! {
//!     /// Codes of `example.hello`.
//!     pub enum HelloCode in "hello" {
//!         /// Nobody to greet.
//!         NoName = "HELLO_NO_NAME", by "`example.hello` `greet`", retry Changed;
//!     }
//! }
//!
//! /// The row config; `keel` checks every row against the schema derived from it.
//! #[derive(Deserialize, schemars::JsonSchema)]
//! #[serde(deny_unknown_fields)]
//! struct Config {
//!     #[schemars(length(min = 1))]
//!     greeting: String,
//! }
//!
//! /// The provider: one per row.
//! struct Greeter { greeting: String }
//!
//! impl HelloProvider for Greeter {
//!     async fn greet(&self, request: Greet) -> Result<Greeting> {
//!         if request.name.is_empty() {
//!             return Err(Error::coded(HelloCode::NoName, "say who to greet"));
//!         }
//!         Ok(Greeting { text: format!("{}, {}!", self.greeting, request.name) })
//!     }
//! }
//!
//! #[derive(Default)]
//! struct HelloPlugin;
//!
//! impl Plugin for HelloPlugin {
//!     type Dispatches = ();
//!
//!     fn manifest(&self) -> Manifest {
//!         Manifest::new("hello", env!("CARGO_PKG_VERSION"))
//!             .provides::<Hello>()
//!             .config_type::<Config>()
//!     }
//!
//!     async fn activate(&self, ctx: Context) -> Result<()> {
//!         let config: Config = ctx.config()?;
//!         ctx.serve::<Hello, _>(Greeter { greeting: config.greeting })?;
//!         ctx.on::<PluginStatus>(ListenerOptions::default(), |status| {
//!             tracing::info!(row = %status.row, state = %status.state, "row changed state");
//!             Ok(())
//!         })?;
//!         Ok(())
//!     }
//! }
//!
//! keel_plugin_api::export_plugin!(HelloPlugin);
//!
//! /// A consumer (its manifest says `.requires::<Hello>()`) calls through a typed client.
//! async fn ask(ctx: Context) -> Result<String> {
//!     let hello: HelloClient = ctx.client::<Hello>()?;
//!     Ok(hello.greet(Greet { name: "Ada".into() }).await?.text)
//! }
//!
//! fn main() {
//!     // What a consumer's client does across the ABI, without a kernel: the provider behind
//!     // the contract's one handle type.
//!     let handle = ContractHandle::serve::<Hello, _>("hello", Greeter { greeting: "Hi".into() });
//!     let client: HelloClient = ContractClient::new(handle, "doc").into();
//!     let greeting = futures::executor::block_on(client.greet(Greet { name: "Ada".into() }));
//!     assert_eq!(greeting.unwrap().text, "Hi, Ada!");
//!     let empty = futures::executor::block_on(client.greet(Greet { name: String::new() }));
//!     assert!(empty.unwrap_err().is(HelloCode::NoName));
//!     let _ = ask;
//! }
//! ```
//!
//! The crate has three audiences (nushell's split): [`abi`] holds the `repr(C)` types and nothing
//! else; [`sdk`] is what plugin authors use (no abi_stable name in its signatures but R-types in
//! payloads); [`host`] is for the kernel only. [`events`] and [`services`] declare the shared
//! vocabulary.

#![allow(
    unsafe_code,
    reason = "the ABI layer: raw pointers cross images here and nowhere else; each block has a SAFETY note"
)]

pub mod abi;
pub mod civil_time;
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
