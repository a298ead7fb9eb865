//! Helpers for the hooks suites (issue 15 item 3): the agent test profile with a `hooks` row,
//! hook scripts written into the workspace (run as `sh "$CLAUDE_PROJECT_DIR/.hooks/NAME"`, so
//! the variable keel sets is part of every test), and readers for the audit events.

use keel_tests::Env;
use keel_tests::model_server::ModelServer;
use serde_json::Value;

use crate::suite::agent_support::agent_env;

/// The agent test profile with the `hooks` row's config set to `config` (inline TOML keys).
pub fn hooks_env(server: &ModelServer, config: &str) -> Env {
    hooks_env_with(server, config, "")
}

/// [`hooks_env`] plus more profile text.
pub fn hooks_env_with(server: &ModelServer, config: &str, extra: &str) -> Env {
    agent_env(
        server,
        &format!("[[replace]]\nid = \"hooks\"\nconfig = {{ {config} }}\n{extra}"),
    )
}

/// The command that runs hook script NAME ([`put`] writes it).
pub fn cmd(name: &str) -> String {
    format!("sh \"$CLAUDE_PROJECT_DIR/.hooks/{name}\"")
}

/// Writes hook script `work/.hooks/NAME`.
pub fn put(env: &Env, name: &str, body: &str) {
    env.file(&format!("work/.hooks/{name}"), body);
}

/// One event's table entry, `EVENT = [{ matcher, hooks = [{ type, command, extra… }] }]`.
pub fn on(event: &str, matcher: &str, command: &str, extra: &str) -> String {
    let extra = if extra.is_empty() {
        String::new()
    } else {
        format!(", {extra}")
    };
    format!(
        "{event} = [{{ matcher = \"{matcher}\", hooks = [{{ type = \"command\", command = '{command}'{extra} }}] }}]"
    )
}

/// `hooks = { ENTRIES }`.
pub fn table(entries: &[String]) -> String {
    format!("hooks = {{ {} }}", entries.join(", "))
}

/// The events of type `kind`, their `data`.
pub fn data_of(events: &[Value], kind: &str) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["type"] == kind)
        .map(|e| e["data"].clone())
        .collect()
}

/// The text of every message of a chat-completions request, joined.
pub fn all_text(messages: &Value) -> String {
    messages
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}
