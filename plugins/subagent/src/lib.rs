//! `subagent`: child agents (issue 16; SES-13, SUB-01…07, MEM-07).
//!
//! Two jobs, each in its own modules with its own registry of live children: [`delegate`]
//! (with [`registry`]) offers the `agent` tool — a one-shot child (spawned fresh or forked from the parent's closed prefix)
//! whose final answer is the tool's result, run in parallel under a concurrency and a depth
//! cap — and [`resident`] keeps long-lived named children with their own input queue and
//! two-level memory ([`memory`]). Children are ordinary `keel.agent` sessions: the same loop, pipeline,
//! approval, firewall, sandbox and hooks run inside them; this row only decides what a child
//! is given and when it ends; an `agent` child's step budget is drawn from its parent's
//! ([`budget`]). The kernel knows nothing of children.
//!
//! Both halves' tools are one [`ToolSet`] served as `keel.tool.subagent` (each a `Tool` with
//! typed arguments): the `agent` tool always, the resident tools when `resident.enabled`.

pub mod budget;
pub mod config;
pub mod delegate;
pub mod delegate_resume;
pub mod delegate_run;
pub mod memory;
pub mod registry;
pub mod resident;

use keel_plugin_api::events::subagent::{ChildEnded, ChildStarted};
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::agent::AgentService;
use keel_plugin_api::services::approval::Approval;
use keel_plugin_api::services::session::Sessions;
use keel_plugin_api::services::tools::ToolSet;

use crate::config::SubagentConfig;

/// The plugin id.
pub const PLUGIN_ID: &str = "subagent";

/// The plugin value.
#[derive(Default)]
struct SubagentPlugin;

keel_plugin_api::dispatches! {
    /// What the subagent row dispatches: a child's start and end.
    pub struct Dispatches {
        pub child_started: ChildStarted,
        pub child_ended: ChildEnded,
    }
}

impl Plugin for SubagentPlugin {
    type Dispatches = Dispatches;

    fn manifest(&self) -> Manifest {
        Manifest::new(PLUGIN_ID, env!("CARGO_PKG_VERSION"))
            .description(
                "child agents: the `agent` tool (spawn/fork, parallel) and resident children",
            )
            .serves_tools()
            .requires::<AgentService>()
            .requires::<Sessions>()
            .optional::<Approval>()
            .config_type::<SubagentConfig>()
            // Limits and the children's prompts and budgets: an untrusted project layer must
            // not raise them (issue 23 item 6).
            .guard_keys(&[
                "max_concurrent",
                "max_depth",
                "timeout_ms",
                "agents",
                "resident",
            ])
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let config: SubagentConfig = ctx.config()?;
        // One tool set, `keel.tool.subagent`: the `agent` tool and, when configured, the
        // resident tools. Served last, so at unload it is unregistered before the halves'
        // effects converge and stop their children.
        let tools = ToolSet::new().with(delegate::prepare(&ctx, &config)?);
        let tools = resident::prepare(&ctx, &config, tools)?;
        ctx.serve_tools(self, tools).await
    }
}

keel_plugin_api::export_plugin!(SubagentPlugin);
