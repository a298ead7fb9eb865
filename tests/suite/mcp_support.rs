//! Helpers for the mcp suites (issue 15 item 1): where the real servers are, profiles that
//! add them to the test profile, and readers for tool results in the session log.

use std::path::PathBuf;
use std::time::Duration;

use keel_tests::Env;
use keel_tests::model_server::ModelServer;
use serde_json::Value;

use crate::suite::agent_support::agent_env;

/// `@modelcontextprotocol/server-everything`'s entry point, as `cargo xtask test` installs it
/// (`tests/mcp-servers`, pinned). Missing is a failure, never a skip.
pub fn everything_js() -> PathBuf {
    let p = keel_tests::target_dir()
        .join("mcp-servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        p.is_file(),
        "{} is missing: `cargo xtask test` installs the pinned MCP test servers (npm ci of \
         tests/mcp-servers into target/mcp-servers; needs node and npm)",
        p.display()
    );
    p
}

/// The probe server of `tests/fixtures/mcp`.
pub fn probe_js() -> PathBuf {
    keel_tests::workspace_root().join("tests/fixtures/mcp/probe.mjs")
}

/// A TOML string literal.
pub fn lit(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

/// `[replace.config.servers.NAME]` for a node script with `args`, plus `extra` keys.
pub fn node_server(name: &str, script: &std::path::Path, args: &[&str], extra: &str) -> String {
    let mut all = vec![lit(&script.display().to_string())];
    all.extend(args.iter().map(|a| lit(a)));
    format!(
        "[replace.config.servers.{name}]\ncommand = \"node\"\nargs = [{}]\n{extra}\n",
        all.join(", ")
    )
}

/// The test profile with the `mcp` row replaced by `servers` (`[replace.config.servers.*]`
/// tables) and `extra` rows after it.
pub fn mcp_env(server: &ModelServer, servers: &str, extra: &str) -> Env {
    agent_env(
        server,
        &format!("{extra}\n[[replace]]\nid = \"mcp\"\n[replace.config]\n{servers}"),
    )
}

/// The `tool/result` of `call_id` in `events` (its `data`).
pub fn result_of(events: &[Value], call_id: &str) -> Value {
    events
        .iter()
        .find(|e| e["type"] == "tool/result" && e["data"]["call_id"] == call_id)
        .map(|e| e["data"].clone())
        .unwrap_or_else(|| panic!("no tool/result for {call_id} in {events:?}"))
}

/// The tool definition named `name` in a chat-completions request body.
pub fn offered_tool(body: &Value, name: &str) -> Option<Value> {
    body["tools"]
        .as_array()?
        .iter()
        .find(|t| t["function"]["name"] == name)
        .map(|t| t["function"].clone())
}

/// Lines of a file, waiting up to `limit` for one containing `needle`.
pub fn wait_for_line(path: &std::path::Path, needle: &str, limit: Duration) -> bool {
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        if std::fs::read_to_string(path).is_ok_and(|t| t.contains(needle)) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Pids of live processes whose command line contains `marker`.
pub fn pids_with(marker: &str) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
        })
        .filter(|pid| crate::suite::agent_support::alive(*pid))
        .collect()
}

/// A free loopback port.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}
