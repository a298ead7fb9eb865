//! `session-sqlite`: the `keel.session-store` backend that keeps every session in one WAL-mode
//! SQLite database (ARCHITECTURE §7, requirements B4). The store is plain Rust
//! ([`SqliteStore`], no SDK types); this file only adapts it to the kernel: the manifest, the
//! row config (`root`), and the `keel.session-store` provider, a
//! [`Worker`](keel_session_store_kit::Worker) whose calls run on a thread the plugin owns, so
//! SQLite I/O never blocks the kernel's async workers.

pub mod error;
pub mod rows;
pub mod schema;
pub mod store;

// The shared session-store modules, at the paths they had when this crate held copies.
use keel_session_store_kit::Worker;
pub use keel_session_store_kit::{args, envelope, line, lock};

use std::path::PathBuf;

use keel_plugin_api::prelude::*;
use keel_plugin_api::services::session::SessionStore;
use schemars::JsonSchema;
use serde::Deserialize;

pub use error::{SqliteError, StoreFailure};
pub use store::{DB_FILE, Loaded, SqliteStore};

/// The row config.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Config {
    /// Directory of `sessions.sqlite3`; default `<KEEL_HOME>/sessions`.
    #[serde(default)]
    #[schemars(length(min = 1))]
    root: Option<PathBuf>,
}

/// The plugin value.
#[derive(Default)]
struct SessionSqlite;

impl Plugin for SessionSqlite {
    type Dispatches = ();

    fn manifest(&self) -> Manifest {
        Manifest::new("session-sqlite", env!("CARGO_PKG_VERSION"))
            .description("session storage: one WAL-mode SQLite database")
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
        let store = SqliteStore::new(root);
        let worker = Worker::start("keel-session-sqlite", store)?;
        ctx.serve::<SessionStore, _>(worker.clone())?;
        ctx.effect("stop the session-sqlite worker", move || async move {
            worker.stop();
            Ok(())
        })?;
        Ok(())
    }
}

keel_plugin_api::export_plugin!(SessionSqlite);
