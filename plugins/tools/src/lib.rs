//! `tools`: the `keel.tools` service (ARCHITECTURE §8, requirements C9 and B9) — the registry
//! of tools and the pipeline every model tool call goes through.
//!
//! The pieces, each testable alone: [`registry`] (who provides which tool), [`schedule`] (the
//! pure batch scheduler: pool, barriers, model-order commit, cancellation), [`stages`] (the
//! stages of one call over a `Host` seam), [`provider`] (the body under its deadline), and
//! [`kernel`] (the `Host` over the kernel). This file is the glue: manifest, row config, and
//! the [`ToolsProvider`] methods (their shapes and codes are declared with the `Tools` contract
//! in `keel_plugin_api::services::tools`; `register` emits `tools/change {tools: [name]}`, all
//! current names, and so does `unregister`).
//!
//! A result is encoded once: the body's answer is frozen in [`kernel`], the snapshot is what
//! `tools/execute`, `tools/post-execute`, `tools/result` and the loop get, and it is encoded
//! again only when a listener changed the result.

pub mod batches;
pub mod kernel;
pub mod log_events;
pub mod provider;
pub mod registry;
pub mod schedule;
pub mod stages;

use std::sync::Arc;

use keel_plugin_api::events::Typed;
use keel_plugin_api::events::tools::{self as ev};
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::approval::Approval;
use keel_plugin_api::services::session::Sessions;
use keel_plugin_api::services::tools::{
    BatchOutcome, BatchRequest, CancelRequest, ListRequest, RegisterRequest, Registered, ToolList,
    Tools, ToolsProvider, UnregisterRequest,
};
use schemars::JsonSchema;
use serde::Deserialize;

use batches::Batches;
use kernel::KernelHost;
use registry::Registry;
use stages::CallPipeline;

/// The row config.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Config {
    /// Cap of the parallel pool (TOOL-10).
    #[serde(default = "default_max_parallel")]
    #[schemars(range(min = 1))]
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

struct State {
    ctx: Context,
    config: Config,
    registry: Arc<Registry>,
    batches: Arc<Batches>,
}

impl State {
    fn changed(&self) {
        let payload = Typed::new(&ev::ToolSetChange {
            tools: self.registry.names(),
        });
        match payload.and_then(|p| self.ctx.emit(crate::DISPATCH.change, &p)) {
            Ok(()) => {}
            Err(e) => tracing::warn!(error = %e, "tools/change could not be emitted"),
        }
    }

    async fn run_batch(&self, request: BatchRequest) -> Result<BatchOutcome> {
        let guard = self.batches.begin(&request.session_id);
        let host = KernelHost {
            ctx: self.ctx,
            sessions: self.ctx.client::<Sessions>()?,
            approval: self.ctx.get_client::<Approval>()?,
            registry: Arc::clone(&self.registry),
            session_id: request.session_id.clone(),
            cancel: Arc::clone(&guard.cancel),
        };
        let pipeline = CallPipeline {
            host: &host,
            registry: &self.registry,
            request: &request,
            timeout_ms: self.config.default_timeout_ms,
            parsed: Default::default(),
        };
        let outcome = schedule::run_batch(
            &pipeline,
            request.calls.len(),
            self.config.max_parallel,
            guard.cancel.flag(),
        )
        .await?;
        Ok(BatchOutcome {
            results: outcome.results,
            failure: outcome.failure,
        })
    }
}

/// The service: one `State` shared by every call.
struct Service(Arc<State>);

impl ToolsProvider for Service {
    async fn register(&self, r: RegisterRequest) -> Result<Registered> {
        let registration = self.0.registry.register(&r.service, r.tools)?;
        self.0.changed();
        Ok(Registered { registration })
    }

    async fn unregister(&self, r: UnregisterRequest) -> Result<()> {
        self.0.registry.unregister(r.registration)?;
        self.0.changed();
        Ok(())
    }

    async fn list(&self, _: ListRequest) -> Result<ToolList> {
        Ok(ToolList {
            tools: self.0.registry.list(),
        })
    }

    async fn run_batch(&self, request: BatchRequest) -> Result<BatchOutcome> {
        self.0.run_batch(request).await
    }

    async fn cancel(&self, r: CancelRequest) -> Result<()> {
        self.0.batches.cancel(&r.session_id);
        Ok(())
    }
}

/// The plugin value.
#[derive(Default)]
struct ToolsPlugin;

keel_plugin_api::dispatches! {
    /// The `tools/*` events: the pipeline's stages and notices.
    pub struct Dispatches {
        pub rewrite: ev::Rewrite,
        pub pre_execute: ev::PreExecute,
        pub guard: ev::Guard,
        pub execute: ev::Execute,
        pub post_execute: ev::PostExecute,
        pub tools_result: ev::ToolsResult,
        pub change: ev::Change,
    }
}

impl Plugin for ToolsPlugin {
    type Dispatches = Dispatches;

    fn manifest(&self) -> Manifest {
        Manifest::new("tools", env!("CARGO_PKG_VERSION"))
            .description(
                "tool registry and pipeline: policy, approval, guards, model-order results",
            )
            .provides::<Tools>()
            .requires::<Sessions>()
            .optional::<Approval>()
            .config_type::<Config>()
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let config: Config = ctx.config()?;
        let state = Arc::new(State {
            ctx,
            config,
            registry: Arc::new(Registry::new()),
            batches: Arc::new(Batches::default()),
        });
        ctx.serve::<Tools, _>(Service(state))?;
        Ok(())
    }
}

keel_plugin_api::export_plugin!(ToolsPlugin);
