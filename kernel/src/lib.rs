//! keel's kernel: loads `cdylib` plugins, checks them, assembles a profile's rows into fibers,
//! dispatches events between them and disposes them. It knows no feature: the agent loop,
//! tools, sessions and drivers are plugins it has never heard of (ARCHITECTURE §1).
//!
//! Reading order: [`paths`] → [`config`] (profiles and layers) → [`loader`] (find, digest,
//! open) → [`lock`] → [`graph`] (facility graph, layers) → [`runtime`] (fibers, inject,
//! control) → [`bus`] (the five dispatch modes) → [`services`]. [`assemble`] strings them
//! together for the CLI in [`cli`].

#![allow(
    clippy::result_large_err,
    reason = "assembly errors end the process (exit 2); their size never matters on a hot path"
)]

pub mod assemble;
pub mod bus;
pub mod cli;
pub mod config;
pub mod error;
pub mod fiber;
pub mod graph;
pub mod hardening;
pub mod loader;
pub mod lock;
pub mod output_guard;
pub mod paths;
pub mod redact;
pub mod runtime;
pub mod schema;
pub mod services;

pub use error::{KernelError, Result};
pub use runtime::Kernel;
