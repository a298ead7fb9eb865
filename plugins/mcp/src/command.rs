//! `keel mcp list [--json]` (issue 15 item 1): the configured servers, each with its state
//! (connected, failed and why, restarting, disabled), its transport, how it is confined, and
//! its tools. The row's activation already waited for the servers to start, so the states are
//! the answers of this process's own connections.

use std::sync::Arc;

use keel_plugin_api::codes::ContractCode;
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::command::{
    ArgSpec, CommandInvocation, CommandOutcome, CommandProvider, CommandSpec,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::Hub;
use crate::config::Transport;
use crate::server::Server;

/// The grammar.
pub fn spec() -> CommandSpec {
    CommandSpec::new("mcp", "MCP servers of this profile.").subcommand(
        CommandSpec::new(
            "list",
            "Configured servers, their state (connected, failed: why, disabled), sandbox and tools.",
        )
        .arg(ArgSpec::flag("json", "JSON output.")),
    )
}

/// The arguments, as [`spec`] shapes them.
#[derive(Debug, Deserialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
enum McpArgs {
    List {
        #[serde(default)]
        json: bool,
    },
}

/// The command's provider.
pub struct List {
    /// For printing through the kernel's redactions.
    pub ctx: Context,
    /// The servers.
    pub hub: Arc<Hub>,
}

/// One server as JSON.
pub fn server_json(s: &Server) -> Value {
    let st = s.status();
    let tools: Vec<Value> = st
        .tools
        .iter()
        .map(|t| {
            json!({
                "name": t.public,
                "mcp_name": t.original,
                "mutating": t.definition.mutating,
                "description": t.definition.description,
            })
        })
        .collect();
    let transport = match s.config.transport() {
        Transport::Stdio => "stdio",
        Transport::Http => "http",
    };
    json!({
        "name": s.name,
        "transport": transport,
        "state": st.phase.describe(),
        "required": s.config.required,
        "sandbox": st.confinement,
        "tools": tools,
    })
}

/// The text listing.
pub fn text(servers: &[Value]) -> String {
    let mut out = String::new();
    if servers.is_empty() {
        out.push_str("no MCP servers configured (row 'mcp', key `servers`)\n");
    }
    for s in servers {
        let str_of = |k: &str| s[k].as_str().unwrap_or_default().to_owned();
        let tools = s["tools"].as_array().cloned().unwrap_or_default();
        let sandbox = str_of("sandbox");
        let sandbox = if sandbox.is_empty() {
            String::new()
        } else {
            format!(", sandbox: {sandbox}")
        };
        out.push_str(&format!(
            "{}: {} ({}{sandbox}), {} tools\n",
            str_of("name"),
            str_of("state"),
            str_of("transport"),
            tools.len()
        ));
        for t in tools {
            let flag = if t["mutating"].as_bool().unwrap_or(true) {
                "mutating"
            } else {
                "read-only"
            };
            out.push_str(&format!(
                "  {}  [{flag}]  {}\n",
                t["name"].as_str().unwrap_or_default(),
                t["description"]
                    .as_str()
                    .unwrap_or_default()
                    .lines()
                    .next()
                    .unwrap_or_default()
            ));
        }
    }
    out
}

impl CommandProvider for List {
    async fn run(&self, request: CommandInvocation) -> Result<CommandOutcome> {
        let McpArgs::List { json } = request.parse_args::<McpArgs>().map_err(|e| {
            Error::coded(
                ContractCode::InvalidArguments,
                format!("`keel {}`: {e}", request.command),
            )
        })?;
        let servers: Vec<Value> = self.hub.servers.iter().map(|s| server_json(s)).collect();
        let out = if json {
            format!("{}\n", json!({ "servers": servers }))
        } else {
            text(&servers)
        };
        let _ = self.ctx.write_stdout(&out);
        Ok(CommandOutcome { exit_code: 0 })
    }
}
