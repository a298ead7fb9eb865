//! `proof-tools`: registers ordinary tools under the names its config lists — an MCP-shaped
//! `mcp__everything__echo` among them — that answer `echo: <arguments>`. A test can then show
//! that a tool named like an MCP server's goes through the same pipeline (hooks, policy, the
//! log) as a built-in one without the MCP client being loaded (issue 15 item 3).
//!
//! Each name is one [`Tool`] whose name and schema are given at run time (`Args =
//! serde_json::Value`), served with `ctx.serve_tools` (issue 24 item 1).

use keel_plugin_api::prelude::*;
use keel_plugin_api::services::tools::{Tool, ToolCall, ToolResult, ToolSet, ToolSpec};
use serde::Deserialize;
use serde_json::json;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    /// The tool names to register.
    names: Vec<String>,
}

/// One echo tool, under a configured name.
struct Echo(String);

impl Tool for Echo {
    const NAME: &'static str = "echo";
    type Args = serde_json::Value;

    fn describe(&self) -> ToolSpec {
        ToolSpec::new("Echoes its arguments.")
            .named(self.0.clone())
            .schema(json!({"type": "object"}))
    }

    async fn run(&self, args: serde_json::Value, _call: &ToolCall) -> ToolResult {
        ToolResult::ok(format!("echo: {args}"))
    }
}

#[derive(Default)]
struct ProofTools;

impl Plugin for ProofTools {
    type Dispatches = ();

    fn manifest(&self) -> Manifest {
        Manifest::new("proof-tools", env!("CARGO_PKG_VERSION"))
            .description("echo tools under configured names")
            .serves_tools()
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let config: Config = ctx.config()?;
        let tools = config
            .names
            .into_iter()
            .fold(ToolSet::new(), |set, name| set.with(Echo(name)));
        ctx.serve_tools(self, tools).await
    }
}

keel_plugin_api::export_plugin!(ProofTools);
