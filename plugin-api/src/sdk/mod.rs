//! The safe SDK plugin authors use: the [`Plugin`] trait, [`Context`] for registration and
//! dispatch, typed events and services, effects, config, and the export macro.
//!
//! No signature here names abi_stable except the R-types payloads are built from; every call
//! into plugin code that the kernel makes goes through a shim in [`ffi`] that catches panics.

mod context;
mod contract;
#[cfg(test)]
mod contract_tests;
mod control;
mod declare_contract;
mod dispatch;
pub mod environ;
mod error;
pub mod event;
#[doc(hidden)]
pub mod export;
pub(crate) mod ffi;
mod frozen;
pub mod line;
mod link;
mod manifest;
mod output;
mod payload;
mod plugin;
#[cfg(feature = "plugin-runtime")]
mod runtime;
mod service;
mod tracing_forward;

#[cfg(test)]
pub(crate) use context::test_disposer;
pub use context::{Context, Registration, sleep};
#[doc(hidden)]
pub use contract::__boxed;
pub use contract::{BoxedAnswer, Contract, ContractClient, ContractHandle, MethodSpec, Serves};
pub use control::{ControlAnswer, ControlOp, FileTrust, RowControl, RowStatus};
pub use dispatch::{Dispatch, EventSet};
pub use error::{Error, Result};
pub use ffi::{AsyncNext, Next};
pub use frozen::Frozen;
pub use line::one_line;
pub use manifest::{EventDecl, Guarded, IdleWhen, Manifest, Provision, Requirement};
pub use output::write_stream;
pub use payload::Payload;
pub use plugin::Plugin;
#[cfg(feature = "plugin-runtime")]
pub use runtime::{plugin_runtime, spawn_bridged};
pub use service::{Service, ServiceRef};

/// What most plugins import.
pub mod prelude {
    pub use super::event::{
        AsyncWaterfallEvent, EmitEvent, Event, ParallelEvent, SerialEvent, WaterfallEvent,
    };
    pub use super::{
        AsyncNext, Context, Contract, ContractClient, ContractHandle, Dispatch, Error, Frozen,
        Manifest, Next, Plugin, Registration, Result, Service, ServiceRef,
    };
    pub use crate::abi::{ListenerOptions, RString, RVec, StableAbi};
}
