//! `greeter`: a complete keel plugin built out of tree — the worked example of
//! `docs/plugin-authoring.md`.
//!
//! It shows the whole author surface in one small file: a manifest with a config schema, typed
//! config, a listener on a core event (`kernel/plugin-status`), `tracing` that reaches the
//! kernel's log, and an effect that runs when the row is disposed. It also appends what it does
//! to the file named by `KEEL_PROOF_TRACE`, so keel's tests can check the world.

use std::io::Write as _;

use keel_plugin_api::events::kernel::PluginStatus;
use keel_plugin_api::prelude::*;
use serde::Deserialize;

/// The row config (validated by the kernel against the schema in the manifest first).
#[derive(Debug, Deserialize)]
struct GreeterConfig {
    greeting: String,
}

/// The plugin value: one per library, shared by every row that uses it.
#[derive(Default)]
struct Greeter;

fn note(line: &str) {
    if let Some(path) = std::env::var_os("KEEL_PROOF_TRACE") {
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{line}");
        }
    }
}

impl Plugin for Greeter {
    type Dispatches = ();

    fn manifest(&self) -> Manifest {
        Manifest::new("greeter", env!("CARGO_PKG_VERSION"))
            .description("greets every row that becomes active")
            .config_schema(serde_json::json!({
                "type": "object",
                "properties": { "greeting": { "type": "string", "minLength": 1 } },
                "required": ["greeting"],
                "additionalProperties": false
            }))
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let config: GreeterConfig = ctx.config()?;
        let me = ctx.row()?;
        tracing::info!(row = %me, "greeter is up: {}", config.greeting);
        note(&format!("greeter {me} activated"));

        let greeting = config.greeting.clone();
        ctx.on::<PluginStatus>(ListenerOptions::default(), move |status| {
            if status.state.as_str() == "active" {
                note(&format!("{greeting}, {}", status.row));
            }
            Ok(())
        })?;

        ctx.effect("say goodbye", move || async move {
            note(&format!("greeter {me} disposed"));
            Ok(())
        })?;
        Ok(())
    }
}

keel_plugin_api::export_plugin!(Greeter);
