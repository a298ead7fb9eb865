//! Helpers for the subagent suites (issue 16 item 1): a profile with the `subagent` row
//! configured, `agent` calls as the model sends them, and readers for what the tests check —
//! the children a parent's log names, their headers and logs on disk.

use keel_tests::Env;
use keel_tests::model_server::ModelServer;
use serde_json::{Value, json};

use crate::suite::agent_support::{agent_env, args, stored_events};
use crate::suite::sessions_support::jsonl_file;

/// [`agent_env`] with the `subagent` row's config replaced by `config` (a TOML inline table,
/// e.g. `{ max_concurrent = 2 }`; empty: the bundle's defaults) and `extra` appended.
pub fn sub_env(server: &ModelServer, config: &str, extra: &str) -> Env {
    let row = if config.is_empty() {
        String::new()
    } else {
        format!("[[replace]]\nid = \"subagent\"\nconfig = {config}\n")
    };
    agent_env(server, &format!("{row}\n{extra}"))
}

/// An `agent` call `(id, "agent", arguments)` with `task` and more argument keys.
pub fn agent_call(id: &str, task: &str, more: Value) -> (String, String, String) {
    let mut a = json!({ "task": task });
    if let (Some(a), Some(more)) = (a.as_object_mut(), more.as_object()) {
        a.extend(more.clone());
    }
    (id.to_owned(), "agent".to_owned(), args(a))
}

/// The `subagent/spawned` records of `parent`'s log, in order: `(call_id, child_session, data)`.
pub fn spawned(env: &Env, parent: &str) -> Vec<(String, String, Value)> {
    stored_events(env, parent)
        .into_iter()
        .filter(|e| e["type"] == "subagent/spawned")
        .map(|e| {
            let d = e["data"].clone();
            (
                d["call_id"].as_str().unwrap().to_owned(),
                d["child_session"].as_str().unwrap().to_owned(),
                d,
            )
        })
        .collect()
}

/// The `subagent/ended` records of `parent`'s log, in order.
pub fn ended(env: &Env, parent: &str) -> Vec<Value> {
    stored_events(env, parent)
        .into_iter()
        .filter(|e| e["type"] == "subagent/ended")
        .map(|e| e["data"].clone())
        .collect()
}

/// The header line of session `id`'s JSONL file.
pub fn header(env: &Env, id: &str) -> Value {
    let text = std::fs::read_to_string(jsonl_file(env, id)).unwrap();
    serde_json::from_str(text.lines().next().unwrap()).unwrap()
}

/// Every turn the log opened is closed, and the log ends with a `turn/end` (no event of a
/// turn after it). Answers the reasons of the `turn/end`s.
pub fn assert_balanced(events: &[Value], what: &str) -> Vec<Value> {
    let starts = events.iter().filter(|e| e["type"] == "turn/start").count();
    let ends: Vec<Value> = events
        .iter()
        .filter(|e| e["type"] == "turn/end")
        .map(|e| e["data"]["reason"].clone())
        .collect();
    assert_eq!(starts, ends.len(), "{what}: turns opened vs closed");
    assert!(starts > 0, "{what}: no turn at all");
    let last_turn_event = events
        .iter()
        .rev()
        .find(|e| {
            let t = e["type"].as_str().unwrap_or_default();
            t.starts_with("turn/")
                || t.starts_with("step/")
                || t.starts_with("tool/")
                || t.starts_with("assistant/")
        })
        .unwrap();
    assert_eq!(
        last_turn_event["type"], "turn/end",
        "{what}: the log does not end its last turn"
    );
    ends
}
