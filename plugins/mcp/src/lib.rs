//! `mcp`: an MCP client (issue 15 item 1) on the official Rust SDK (`rmcp`), over stdio and
//! streamable HTTP. Each configured server's tools are registered with `keel.tools` as
//! `mcp__<server>__<tool>` and served by this row's provider (`keel.tool.mcp`), so every MCP
//! call runs through the same B9 pipeline as the built-in tools: approval, the firewall's
//! fill and scrub, the guards, audit events, deadlines, cancellation, the session log. The
//! kernel and the loop know nothing of MCP.
//!
//! Each server tool is a dynamic [`Tool`] ([`McpCall`]: `Args = serde_json::Value`, its name
//! and schema from the server's `tools/list`); the provider is served at activation with
//! `ctx.serve_dynamic_tools`, and each server's supervisor registers its list as one group
//! of that [`DynamicTools`](keel_plugin_api::services::tools::DynamicTools) handle when the server answers, and again on `list_changed`.
//!
//! Start: activation launches every enabled server at once, each under its own supervisor on
//! the plugin's runtime ([`server`]), then waits until each is connected with its tool list
//! or has failed, bounded by its `startup_timeout_ms`. So the first model request carries the
//! MCP tools, and a server that cannot start is found before any request: a `required` one
//! (the default) refuses the run — activation fails, keel exits 2 with one line naming the
//! row and the server — an optional one is said on stderr and retried with backoff.
//!
//! Modules: [`config`] (the row's keys), [`connect`] (spawn, confine, handshake), [`tools`]
//! (names, schemas, flags), [`result`] (call results, codes), [`server`] (supervision and
//! calls), [`command`] (`keel mcp list`).

pub mod command;
pub mod config;
pub mod connect;
pub mod result;
pub mod server;
pub mod stdio;
pub mod tools;

use std::sync::Arc;
use std::time::Duration;

use keel_plugin_api::codes::ContractCode;
use keel_plugin_api::prelude::*;
use keel_plugin_api::sdk::{one_line, plugin_runtime, spawn_bridged};
use keel_plugin_api::services::command::{Command, service_name};
use keel_plugin_api::services::credentials::Credentials;
use keel_plugin_api::services::sandbox::Sandbox;
use keel_plugin_api::services::tools::{
    Tool, ToolCall, ToolDefinition, ToolResult, ToolSet, ToolSpec,
};
use tokio::sync::watch;

use crate::config::McpConfig;
use crate::result::McpError;
use crate::server::{Phase, Server};
use crate::tools::McpTool;

/// The plugin id; the provider is `keel.tool.mcp`, the command `keel mcp`.
pub const PLUGIN_ID: &str = "mcp";

/// Slack beyond a server's own start timeout before the gate stops waiting for it.
const GATE_SLACK: Duration = Duration::from_secs(2);

/// The configured servers.
pub struct Hub {
    /// In name order.
    pub servers: Vec<Arc<Server>>,
}

/// Aborts a plugin-runtime task when dropped: a call the pipeline stops waiting for ends at
/// once, and the SDK cancels its request.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One server tool, as served: its definition from the server's list, and the server that
/// runs its calls (on the plugin's runtime, as a task of its own).
pub struct McpCall {
    server: Arc<Server>,
    definition: ToolDefinition,
}

impl McpCall {
    /// `tools` of `server` as one group of the row's dynamic tools.
    pub fn set(server: &Arc<Server>, tools: &[McpTool]) -> ToolSet {
        tools.iter().fold(ToolSet::new(), |set, t| {
            set.with(McpCall {
                server: Arc::clone(server),
                definition: t.definition.clone(),
            })
        })
    }
}

impl Tool for McpCall {
    /// Unused: each server tool is named at run time (`ToolSpec::named`, from its definition).
    const NAME: &'static str = "mcp";
    type Args = serde_json::Value;

    fn describe(&self) -> ToolSpec {
        ToolSpec::from(self.definition.clone())
    }

    async fn run(&self, args: serde_json::Value, call: &ToolCall) -> ToolResult {
        let runtime = match plugin_runtime() {
            Ok(r) => r,
            Err(e) => return ToolResult::from_error(&e),
        };
        let server = Arc::clone(&self.server);
        let (name, call_id) = (call.name.clone(), call.call_id.clone());
        let task = runtime.spawn(async move { server.call(&name, &call_id, args).await });
        let mut task = AbortOnDrop(task);
        match (&mut task.0).await {
            Ok(r) => r,
            Err(e) => McpError::CallFailed(format!("the call's task failed: {e}")).result(),
        }
    }
}

/// Waits until every enabled server left `Starting`, each bounded by its start timeout.
async fn gate(hub: &Hub) {
    for s in &hub.servers {
        let mut changes = s.changes.subscribe();
        let limit = Duration::from_millis(s.config.startup_timeout_ms) + GATE_SLACK;
        let _ = tokio::time::timeout(
            limit,
            changes.wait_for(|_| s.status().phase != Phase::Starting),
        )
        .await;
    }
}

/// The plugin value.
#[derive(Default)]
struct McpPlugin;

impl Plugin for McpPlugin {
    type Dispatches = ();

    fn manifest(&self) -> Manifest {
        Manifest::new(PLUGIN_ID, env!("CARGO_PKG_VERSION"))
            .description(
                "MCP client: servers' tools as mcp__<server>__<tool> (stdio, streamable HTTP)",
            )
            .serves_tools()
            .optional::<Sandbox>()
            .optional::<Credentials>()
            .command(command::spec())
            // Servers are commands keel runs and URLs it sends headers to: a project layer
            // may add or change one only once the user trusted it.
            .guard_row()
            // No servers, no work: the kernel leaves the row unopened until a reload adds
            // one or `keel mcp` is asked for (issue 25 item 3).
            .idle_when_empty(&["servers"])
            .config_type::<McpConfig>()
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let config: McpConfig = ctx.config()?;
        config
            .check()
            .map_err(|m| Error::coded(ContractCode::InvalidArguments, format!("mcp: {m}")))?;
        let hub = Arc::new(Hub {
            servers: config
                .servers
                .into_iter()
                .map(|(name, c)| Arc::new(Server::new(name, c)))
                .collect(),
        });
        let tools = ctx.serve_dynamic_tools(self)?;
        ctx.serve_named::<Command, _>(
            &service_name("mcp"),
            command::List {
                ctx,
                hub: Arc::clone(&hub),
            },
        )?;
        let (stop, stopped) = watch::channel(false);
        let runtime = plugin_runtime()?;
        let supervisors: Vec<_> = hub
            .servers
            .iter()
            .filter(|s| s.config.enabled)
            .map(|s| runtime.spawn(Arc::clone(s).supervise(ctx, tools.clone(), stopped.clone())))
            .collect();
        let h = Arc::clone(&hub);
        ctx.effect("stop the MCP servers", move || async move {
            for s in &h.servers {
                if let Err(e) = tools.remove(&s.name).await {
                    tracing::debug!(server = %s.name, "unregister at unload: {e}");
                }
            }
            let _ = stop.send(true);
            let _ = spawn_bridged(async move {
                let all = futures::future::join_all(supervisors);
                let _ = tokio::time::timeout(Duration::from_secs(5), all).await;
            })
            .await;
            Ok(())
        })?;
        let h = Arc::clone(&hub);
        spawn_bridged(async move { gate(&h).await }).await?;
        for s in &hub.servers {
            match s.status().phase {
                Phase::Failed(reason) if s.config.required => {
                    return Err(McpError::Start(
                        one_line(&format!("mcp server '{}': {reason}", s.name)).into_owned(),
                    )
                    .sdk());
                }
                Phase::Failed(reason) => {
                    let line = format!(
                        "keel: mcp server '{}' did not start (required = false, retried in the background): {reason}",
                        s.name
                    );
                    let _ = ctx.write_stderr(&format!("{}\n", one_line(&line)));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

keel_plugin_api::export_plugin!(McpPlugin);
