//! `proof-tools`: registers ordinary tools under the names its config lists — an MCP-shaped
//! `mcp__everything__echo` among them — that answer `echo: <arguments>`. A test can then show
//! that a tool named like an MCP server's goes through the same pipeline (hooks, policy, the
//! log) as a built-in one without the MCP client being loaded (issue 15 item 3).

use keel_plugin_api::prelude::*;
use keel_plugin_api::services::tools::{
    ToolDefinition, ToolExecutor, ToolInvocation, ToolProvider, ToolResult, Tools,
    provider_service_name, register_until_unload,
};
use serde::Deserialize;
use serde_json::json;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    /// The tool names to register.
    names: Vec<String>,
}

struct Echo;

impl ToolExecutor for Echo {
    async fn execute(&self, call: ToolInvocation) -> Result<ToolResult> {
        Ok(ToolResult::ok(format!("echo: {}", call.args)))
    }
}

#[derive(Default)]
struct ProofTools;

impl Plugin for ProofTools {
    type Dispatches = ();

    fn manifest(&self) -> Manifest {
        Manifest::new("proof-tools", env!("CARGO_PKG_VERSION"))
            .description("echo tools under configured names")
            .provides_named(&provider_service_name("proof-tools"), false)
            .requires::<Tools>()
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let config: Config = ctx.config()?;
        let service = provider_service_name("proof-tools");
        ctx.serve_named::<ToolProvider, _>(&service, Echo)?;
        let tools = config
            .names
            .into_iter()
            .map(|name| ToolDefinition {
                name,
                description: "Echoes its arguments.".into(),
                parameters: json!({"type": "object"}),
                parallel_safe: false,
                mutating: false,
                child_only: false,
            })
            .collect();
        register_until_unload(&ctx, &service, tools, "unregister the proof tools").await?;
        Ok(())
    }
}

keel_plugin_api::export_plugin!(ProofTools);
