//! Helpers for the Anthropic suites (issue 15 item 2): the agent test profile switched to
//! `llm-anthropic` by the shipped patch `profiles/patches/anthropic.toml` (the documented way),
//! pointed at the loopback model server's Messages endpoint with `-c`, and the key set through
//! the environment under the default reference `ANTHROPIC_API_KEY`.

use std::time::Duration;

use keel_tests::model_server::{ModelServer, Request};
use keel_tests::{Env, Run, workspace_root};
use serde_json::Value;

use crate::suite::agent_support::agent_env;

/// The default credential reference of `llm-anthropic`.
pub const ANTHROPIC_KEY_REF: &str = "ANTHROPIC_API_KEY";
/// A recognisable key value.
pub const ANTHROPIC_KEY: &str = "sk-ant-test-5e7f-canary";
/// A safety net for hangs, far above any fault's deadline.
pub const LIMIT: Duration = Duration::from_secs(60);

/// The agent test profile `t` (llm-openai at `server`) with the key in the environment.
pub fn anthropic_env(server: &ModelServer) -> Env {
    agent_env(server, "").var(ANTHROPIC_KEY_REF, ANTHROPIC_KEY)
}

/// `keel run|resume …` under profile `t`, patched to llm-anthropic at `server`, plus `args`.
pub fn keel_anthropic(env: &Env, server: &ModelServer, command: &[&str], args: &[&str]) -> Run {
    let patch = workspace_root().join("profiles/patches/anthropic.toml");
    let base = format!("llm-anthropic.base_url={}", server.anthropic_base_url());
    let mut all: Vec<&str> = command.to_vec();
    all.extend_from_slice(&["--profile", "t", "--output-format", "json", "--patch"]);
    let patch = patch.to_string_lossy().into_owned();
    all.push(&patch);
    all.extend_from_slice(&["-c", &base, "-c", "llm-anthropic.timeout_ms=3000"]);
    all.extend_from_slice(args);
    env.keel_within(&all, LIMIT)
}

/// The run's result object (`Null` when stdout is not one JSON object).
pub fn result_of(run: &Run) -> Value {
    serde_json::from_str(run.stdout.trim()).unwrap_or(Value::Null)
}

/// The content blocks of the last user turn of a Messages request.
pub fn last_user_blocks(request: &Request) -> Vec<Value> {
    request.body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_array())
        .cloned()
        .unwrap_or_default()
}

/// The assistant turns of a Messages request.
pub fn assistant_turns(request: &Request) -> Vec<Value> {
    request.body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "assistant")
        .cloned()
        .collect()
}
