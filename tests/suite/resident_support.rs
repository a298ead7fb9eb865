//! Helpers for the resident suites (issue 16 item 2): the profile (the parent on
//! `llm-openai` at one loopback server, the `worker` profile on `llm-anthropic` at another),
//! and readers of what the tests assert on: the logs, the resident stores under
//! `$KEEL_HOME/data/subagent/resident`, the requests each server received.

use std::path::PathBuf;
use std::time::Duration;

use keel_tests::Env;
use keel_tests::model_server::{ModelServer, Request};
use serde_json::Value;

use crate::suite::agent_support::{agent_env, stored_events};
use crate::suite::sessions_support::jsonl_file;

/// The credential reference of the children's model row.
pub const CHILD_KEY_REF: &str = "ANTHROPIC_API_KEY";
/// A safety net for the hooks that wait on the child's server.
pub const LIMIT: Duration = Duration::from_secs(30);

/// The test profile: the parent at `parent`, the `subagent` row with a `worker` profile on
/// `llm-anthropic` at `child`, and `resident` settings.
pub fn env(parent: &ModelServer, child: &ModelServer, resident: &str) -> Env {
    let extra = format!(
        r#"
[[insert]]
id = "llm-anthropic"
plugin = "llm-anthropic"
config = {{ base_url = "{child}", model = "child-model", api_key_ref = "{CHILD_KEY_REF}", timeout_ms = 120000 }}

[[replace]]
id = "subagent"
config = {{ agents = {{ worker = {{ provider = "anthropic", model = "child-model" }} }}, resident = {{ enabled = true{sep}{resident} }} }}
"#,
        child = child.anthropic_base_url(),
        sep = if resident.is_empty() { "" } else { ", " },
    );
    agent_env(parent, &extra).var(CHILD_KEY_REF, "sk-ant-resident-test")
}

pub fn call(id: &str, name: &str, args: Value) -> (String, String, String) {
    (id.to_owned(), name.to_owned(), args.to_string())
}

/// The resident store directory.
pub fn store_dir(env: &Env) -> PathBuf {
    env.home().join("data/subagent/resident")
}

/// Every file under the temp stores (any process).
pub fn temp_files(env: &Env) -> Vec<PathBuf> {
    fn walk(dir: &std::path::Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&store_dir(env).join("temp"), &mut out);
    out
}

/// A memory record, `(key, text)`.
pub type Pair = (String, String);

/// `key → text` of a memory store.
pub fn records(path: &std::path::Path) -> Vec<Pair> {
    let conn =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut stmt = conn
        .prepare("SELECT key, text FROM memory ORDER BY key")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// `(name, state, content)` rows of a parent's residual store (none when it does not exist).
pub fn residuals(env: &Env, parent: &str) -> Vec<(String, String, String)> {
    let path = store_dir(env).join(format!("residual/{parent}.db"));
    if !path.exists() {
        return Vec::new();
    }
    let conn = rusqlite::Connection::open(&path).unwrap();
    let mut stmt = conn
        .prepare("SELECT name, state, content FROM residual ORDER BY seq")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// The parsed content of the `tool/result` answering `call_id` in `events`.
pub fn result_of(events: &[Value], call_id: &str) -> Value {
    let ev = events
        .iter()
        .find(|e| e["type"] == "tool/result" && e["data"]["call_id"] == call_id)
        .unwrap_or_else(|| panic!("no tool/result for {call_id}"));
    assert!(
        ev["data"]["is_error"] != true,
        "{call_id} failed: {}",
        ev["data"]["content"]
    );
    serde_json::from_str(ev["data"]["content"].as_str().unwrap())
        .unwrap_or_else(|e| panic!("{call_id}: {e}: {ev}"))
}

/// The child's header and events (no file: a child that never logged anything).
pub fn child_log(env: &Env, id: &str) -> (Value, Vec<Value>) {
    let path = jsonl_file(env, id);
    let text = std::fs::read_to_string(&path).unwrap();
    let header = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    (header, stored_events(env, id))
}

pub fn user_texts(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["type"] == "user/message")
        .map(|e| e["data"]["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The Messages requests a child server received.
pub fn child_requests(server: &ModelServer) -> Vec<Request> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/messages"))
        .collect()
}

/// Tool names a request offered (OpenAI or Anthropic shape).
pub fn offered(request: &Request) -> Vec<String> {
    request.body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| {
            t["function"]["name"]
                .as_str()
                .or_else(|| t["name"].as_str())
                .map(str::to_owned)
        })
        .collect()
}
