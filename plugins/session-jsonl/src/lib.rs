//! `session-jsonl`: the `keel.session-store` backend that keeps one fsynced JSONL file per
//! session (ARCHITECTURE §7, requirements B3). The store itself is plain Rust
//! ([`JsonlStore`], no SDK types); this file only adapts it to the kernel: the manifest, the
//! row config (`root`, `fsync`), and the `keel.session-store` provider, a
//! [`Worker`](keel_session_store_kit::Worker) whose calls run on a thread the plugin owns, so
//! file I/O never blocks the kernel's async workers.

pub mod answer;
pub mod error;
pub mod scan;
pub mod store;

// The shared session-store modules, at the paths they had when this crate held copies.
use keel_session_store_kit::Worker;
pub use keel_session_store_kit::{args, envelope, line, lock};

use std::path::PathBuf;

use keel_plugin_api::prelude::*;
use keel_plugin_api::services::session::SessionStore;
use schemars::JsonSchema;
use serde::Deserialize;

pub use error::{JsonlError, StoreFailure};
pub use store::{JsonlOptions, JsonlStore, Loaded};

/// The row config.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Config {
    /// Session directory; default `<KEEL_HOME>/sessions`.
    #[serde(default)]
    #[schemars(length(min = 1))]
    root: Option<PathBuf>,
    /// fsync every durable write (default true).
    #[serde(default = "yes")]
    fsync: bool,
}

fn yes() -> bool {
    true
}

/// The plugin value.
#[derive(Default)]
struct SessionJsonl;

impl Plugin for SessionJsonl {
    type Dispatches = ();

    fn manifest(&self) -> Manifest {
        Manifest::new("session-jsonl", env!("CARGO_PKG_VERSION"))
            .description("session storage: one fsynced JSONL file per session")
            .provides::<SessionStore>()
            // Logs under the workspace would be the model's to read and rewrite.
            .guard_keys(&["root"])
            .config_type::<Config>()
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let config: Config = ctx.config()?;
        let root = match config.root {
            Some(r) => r,
            None => ctx.keel_home()?.join("sessions"),
        };
        let store = JsonlStore::new(
            root,
            JsonlOptions {
                fsync: config.fsync,
            },
        );
        let worker = Worker::start("keel-session-jsonl", store)?;
        ctx.serve::<SessionStore, _>(worker.clone())?;
        ctx.effect("stop the session-jsonl worker", move || async move {
            worker.stop();
            Ok(())
        })?;
        Ok(())
    }
}

keel_plugin_api::export_plugin!(SessionJsonl);
