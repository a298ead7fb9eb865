//! keel's kernel: loads `cdylib` plugins, checks them, assembles a profile's rows into fibers,
//! dispatches events between them and disposes them. It knows no feature: the agent loop,
//! tools, sessions and drivers are plugins it has never heard of (ARCHITECTURE §1).
//!
//! Reading order: [`paths`] → [`loader`] (find, digest, open) → [`lock`] → [`graph`] (facility
//! graph, layers) → [`runtime`] (fibers, inject, control) → [`bus`] (the five dispatch modes) →
//! [`services`]. [`assemble`] strings them together for the `keel` binary (crate `keel-cli`);
//! profiles and layers are parsed by `keel-config`, printed output is redacted by
//! `keel-output-guard`.

#![allow(
    clippy::result_large_err,
    reason = "assembly errors end the process (exit 2); their size never matters on a hot path"
)]

pub mod assemble;
pub mod bus;
pub mod error;
pub mod fiber;
pub mod graph;
pub mod loader;
pub mod lock;
pub mod paths;
pub mod runtime;
/// Row config validation (crate `keel-loader`'s, beside the manifests it reads schemas from).
pub use keel_loader::schema;
pub mod services;

pub use error::{KernelError, Result};
pub use runtime::Kernel;
