//! `tools`: the `keel.tools` service (ARCHITECTURE §8, requirements C9 and B9) — the registry
//! of tools and the pipeline every model tool call goes through.
//!
//! The pieces, each testable alone: [`registry`] (who provides which tool), [`schedule`] (the
//! pure batch scheduler: pool, barriers, model-order commit, cancellation), [`stages`] (the
//! stages of one call over a `Host` seam), [`provider`] (the body under its deadline), and
//! [`kernel`] (the `Host` over the kernel). This file is the glue: manifest, row config, and
//! the JSON methods.
//!
//! Methods (shapes in `keel_plugin_api::services::tools::Tools`):
//! - `register {service, tools}` → `{registration}` (`DUPLICATE_TOOL`,
//!   `INVALID_TOOL_DEFINITION`); emits `tools/change {tools: [name]}` (all current names);
//! - `unregister {registration}` → `{}` (`UNKNOWN_REGISTRATION`); emits `tools/change`;
//! - `list {}` → `{tools: [ToolDefinition]}`;
//! - `run_batch BatchRequest` → `{results: [ToolResult], failure?: {code, message}}`; `failure`
//!   (code `TOOL_STAGE_FAILED`) means a stage listener failed and the turn must end in error;
//!   an `Err` means the session refused an append;
//! - `cancel {session_id}` → `{}`: the running batch starts nothing more, and a body that is
//!   running is stopped at once (its provider call is dropped, as at the deadline) and answers
//!   `ABORTED`.
//!
//! Other codes: `INVALID_ARGS`, `UNKNOWN_METHOD`.

pub mod batches;
pub mod kernel;
pub mod provider;
pub mod registry;
pub mod schedule;
pub mod stages;

use std::sync::Arc;

use keel_plugin_api::events::Json;
use keel_plugin_api::events::tools::Change;
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::approval::Approval;
use keel_plugin_api::services::session::Sessions;
use keel_plugin_api::services::tools::{BatchRequest, ToolDefinition, Tools};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use batches::Batches;
use kernel::KernelHost;
use registry::Registry;
use stages::CallPipeline;

/// The row config.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    /// Cap of the parallel pool (TOOL-10).
    #[serde(default = "default_max_parallel")]
    max_parallel: usize,
    /// Deadline handed to `tools/execute` for every body, ms (0 = none).
    #[serde(default = "default_timeout_ms")]
    default_timeout_ms: u64,
}

fn default_max_parallel() -> usize {
    10
}

fn default_timeout_ms() -> u64 {
    600_000
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RegisterArgs {
    service: String,
    tools: Vec<ToolDefinition>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UnregisterArgs {
    registration: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionArgs {
    session_id: String,
}

struct State {
    ctx: Context,
    config: Config,
    registry: Arc<Registry>,
    batches: Arc<Batches>,
}

fn args<T: DeserializeOwned>(method: &str, v: Value) -> Result<T> {
    serde_json::from_value(v).map_err(|e| Error::new("INVALID_ARGS", format!("{method}: {e}")))
}

impl State {
    fn changed(&self) {
        let payload = Json::of(&json!({"tools": self.registry.names()}));
        match payload.and_then(|p| self.ctx.emit::<Change>(&p)) {
            Ok(()) => {}
            Err(e) => tracing::warn!(error = %e, "tools/change could not be emitted"),
        }
    }

    async fn call(&self, method: &str, a: Value) -> Result<Value> {
        match method {
            "register" => {
                let a: RegisterArgs = args(method, a)?;
                let id = self.registry.register(&a.service, a.tools)?;
                self.changed();
                Ok(json!({"registration": id}))
            }
            "unregister" => {
                let a: UnregisterArgs = args(method, a)?;
                self.registry.unregister(a.registration)?;
                self.changed();
                Ok(json!({}))
            }
            "list" => Ok(json!({"tools": self.registry.list()})),
            "run_batch" => self.run_batch(args(method, a)?).await,
            "cancel" => {
                let a: SessionArgs = args(method, a)?;
                self.batches.cancel(&a.session_id);
                Ok(json!({}))
            }
            other => Err(Error::new(
                "UNKNOWN_METHOD",
                format!("keel.tools has no method '{other}'"),
            )),
        }
    }

    async fn run_batch(&self, request: BatchRequest) -> Result<Value> {
        let guard = self.batches.begin(&request.session_id);
        let host = KernelHost {
            ctx: self.ctx,
            sessions: self.ctx.client::<Sessions>()?,
            approval: self.ctx.get_service::<Approval>()?,
            registry: Arc::clone(&self.registry),
            session_id: request.session_id.clone(),
            cancel: Arc::clone(&guard.cancel),
        };
        let pipeline = CallPipeline {
            host: &host,
            registry: &self.registry,
            request: &request,
            timeout_ms: self.config.default_timeout_ms,
        };
        let outcome = schedule::run_batch(
            &pipeline,
            request.calls.len(),
            self.config.max_parallel,
            guard.cancel.flag(),
        )
        .await?;
        Ok(serde_json::to_value(&outcome)?)
    }
}

/// The plugin value.
#[derive(Default)]
struct ToolsPlugin;

impl Plugin for ToolsPlugin {
    fn manifest(&self) -> Manifest {
        Manifest::new("tools", env!("CARGO_PKG_VERSION"))
            .description(
                "tool registry and pipeline: policy, approval, guards, model-order results",
            )
            .provides::<Tools>()
            .requires::<Sessions>()
            .optional::<Approval>()
            .config_schema(json!({
                "type": "object",
                "properties": {
                    "max_parallel": { "type": "integer", "minimum": 1 },
                    "default_timeout_ms": { "type": "integer", "minimum": 0 }
                },
                "additionalProperties": false
            }))
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let config: Config = ctx.config()?;
        let state = Arc::new(State {
            ctx,
            config,
            registry: Arc::new(Registry::new()),
            batches: Arc::new(Batches::default()),
        });
        ctx.provide::<Tools>(CallHandle::new(move |method, a| {
            let state = Arc::clone(&state);
            async move { state.call(&method, a).await }
        }))?;
        Ok(())
    }
}

keel_plugin_api::export_plugin!(ToolsPlugin);
