//! keel's stream-json read by the real Claude Agent SDK (issue 23 item 13): the binary runs
//! against the loopback model server, and its stdout goes through the SDK's own
//! `parse_message` (tests/claude-sdk/parse_stream.py, in the venv `cargo xtask claude-sdk`
//! makes). The SDK must find the assistant's text and tool use, the tool result, a child's
//! lines under the parent's call, and the result's subtype and model-turn count; with
//! `--include-partial-messages`, the pieces as `StreamEvent`s (issue 26 item 1).

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use keel_tests::model_server::{ModelServer, Reply};
use serde_json::{Value, json};

use crate::suite::agent_support::{agent_env, args, server};
use crate::suite::subagent_support::{agent_call, sub_env};

/// The venv's python; a missing venv fails the test, naming the command that makes it.
fn sdk_python() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"),
        PathBuf::from,
    );
    let python = target.join("claude-sdk-venv/bin/python");
    assert!(
        python.is_file(),
        "the Claude Agent SDK venv is missing ({}): run `cargo xtask claude-sdk` \
         (`cargo xtask test` runs it too)",
        python.display()
    );
    python
}

/// Feeds `stdout` through the SDK's parser; the summary it prints.
fn parsed_by_the_sdk(stdout: &str) -> Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("claude-sdk/parse_stream.py");
    let mut child = Command::new(sdk_python())
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the SDK parser");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdout.as_bytes())
        .expect("feed the parser");
    let out = child.wait_with_output().expect("the parser ran");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the SDK refused keel's stream: {stderr}\nstream:\n{stdout}"
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("the parser's summary is not JSON ({e}); stderr: {stderr}"))
}

fn stream_json(env: &keel_tests::Env, extra: &[&str], prompt: &str) -> (i32, String, String) {
    let mut all = vec!["run", "--profile", "t", "--output-format", "stream-json"];
    all.extend_from_slice(extra);
    all.push(prompt);
    let run = env.keel(&all);
    (run.code, run.stdout, run.stderr)
}

#[test]
fn issue23_item13_the_sdk_reads_text_tool_use_tool_result_and_the_result() {
    let server = server(vec![
        Reply::text_and_calls(
            "reading it",
            vec![("call_1", "read_file", args(json!({"path": "a.txt"})))],
        ),
        Reply::text("a.txt says alpha"),
    ]);
    let env = agent_env(&server, "");
    env.file("work/a.txt", "alpha\n");
    let (code, stdout, stderr) = stream_json(&env, &[], "what does a.txt say?");
    assert_eq!(code, 0, "stderr: {stderr}");
    let s = parsed_by_the_sdk(&stdout);
    let classes: Vec<&str> = s["classes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        classes,
        [
            "SystemMessage",
            "AssistantMessage",
            "UserMessage",
            "AssistantMessage",
            "ResultMessage"
        ],
        "{s}"
    );
    assert_eq!(s["texts"], json!(["reading it", "a.txt says alpha"]));
    let uses = &s["tool_uses"];
    assert_eq!(uses[0]["id"], "call_1");
    assert_eq!(uses[0]["name"], "read_file");
    assert_eq!(uses[0]["input"], json!({"path": "a.txt"}));
    assert_eq!(uses[0]["parent_tool_use_id"], Value::Null);
    assert_eq!(uses[0]["model"], "test-model");
    let results = &s["tool_results"];
    assert_eq!(results[0]["tool_use_id"], "call_1");
    assert_eq!(results[0]["is_error"], false);
    assert!(
        results[0]["content"].to_string().contains("alpha"),
        "{results}"
    );
    let init = &s["init"];
    assert_eq!(init["model"], "test-model");
    assert_eq!(init["permissionMode"], "bypassPermissions");
    assert!(
        init["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("read_file")),
        "{init}"
    );
    assert!(init["cwd"].as_str().is_some() && init["mcp_servers"].is_array());
    let r = &s["results"][0];
    assert_eq!(r["subtype"], "success");
    assert_eq!(r["is_error"], false);
    assert_eq!(r["num_turns"], 2, "two model requests: {r}");
    assert_eq!(r["result"], "a.txt says alpha");
    assert_eq!(r["stop_reason"], "end_turn");
    assert_eq!(r["total_cost_usd"], Value::Null);
    assert!(r["duration_api_ms"].as_u64().is_some(), "{r}");
    assert_eq!(r["session_id"], init["session_id"]);
    // keel's own lines stay beside them.
    assert!(stdout.lines().any(|l| l.starts_with(r#"{"type":"event""#)));
}

#[test]
fn issue23_item13_a_childs_lines_carry_the_parents_agent_call() {
    let server = ModelServer::start_routed(
        vec![(
            "[child]",
            vec![
                Reply::tool_calls(vec![("cc1", "list_dir", args(json!({"path": "."})))]),
                Reply::text("child done"),
            ],
        )],
        vec![
            Reply::tool_calls(vec![agent_call("p1", "[child] look around", json!({}))]),
            Reply::text("parent done"),
        ],
    );
    let env = sub_env(&server, "", "");
    let (code, stdout, stderr) = stream_json(&env, &[], "delegate");
    assert_eq!(code, 0, "stderr: {stderr}");
    let s = parsed_by_the_sdk(&stdout);
    let uses = s["tool_uses"].as_array().unwrap();
    let by_id = |id: &str| uses.iter().find(|u| u["id"] == id).cloned();
    let parent_call = by_id("p1").unwrap_or_else(|| panic!("{s}"));
    assert_eq!(parent_call["name"], "agent");
    assert_eq!(parent_call["parent_tool_use_id"], Value::Null);
    let child_call = by_id("cc1").unwrap_or_else(|| panic!("{s}"));
    assert_eq!(child_call["parent_tool_use_id"], "p1", "{s}");
    let results = s["tool_results"].as_array().unwrap();
    let child_result = results
        .iter()
        .find(|r| r["tool_use_id"] == "cc1")
        .unwrap_or_else(|| panic!("{s}"));
    assert_eq!(child_result["parent_tool_use_id"], "p1");
    assert!(
        s["texts"]
            .as_array()
            .unwrap()
            .contains(&json!("child done")),
        "{s}"
    );
    let r = &s["results"][0];
    assert_eq!(r["subtype"], "success");
    assert_eq!(r["num_turns"], 2, "the parent's model requests: {r}");
    assert_eq!(r["result"], "parent done");
}

#[test]
fn issue23_item13_a_step_limit_is_error_max_turns() {
    let server = server(vec![
        Reply::tool_calls(vec![("c1", "read_file", args(json!({"path": "a.txt"})))]),
        Reply::tool_calls(vec![("c2", "read_file", args(json!({"path": "a.txt"})))]),
        Reply::text("never asked"),
    ]);
    let env = agent_env(&server, "");
    env.file("work/a.txt", "alpha\n");
    let (code, stdout, stderr) =
        stream_json(&env, &["-c", "agent-loop.max_steps=2"], "keep reading");
    assert_eq!(code, 1, "stderr: {stderr}");
    let s = parsed_by_the_sdk(&stdout);
    let r = &s["results"][0];
    assert_eq!(r["subtype"], "error_max_turns", "{r}");
    assert_eq!(r["is_error"], true);
    assert_eq!(r["num_turns"], 2, "{r}");
    assert_eq!(r["stop_reason"], Value::Null);
    assert_eq!(s["tool_results"].as_array().map(Vec::len), Some(2), "{s}");
}

#[test]
fn issue26_item1_the_sdk_reads_partial_messages_as_stream_events() {
    let server = server(vec![Reply::text("pieces as they come")]);
    let env = agent_env(&server, "");
    let (code, stdout, stderr) = stream_json(&env, &["--include-partial-messages"], "hi");
    assert_eq!(code, 0, "stderr: {stderr}");
    let s = parsed_by_the_sdk(&stdout);
    let events = s["stream_events"].as_array().unwrap();
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(kinds.first(), Some(&"message_start"), "{s}");
    assert_eq!(kinds.last(), Some(&"message_stop"), "{s}");
    let text: String = events.iter().filter_map(|e| e["text"].as_str()).collect();
    assert_eq!(text, "pieces as they come");
    let session = &s["init"]["session_id"];
    assert!(events.iter().all(|e| &e["session_id"] == session), "{s}");
    assert!(events.iter().all(|e| e["parent_tool_use_id"].is_null()));
    // The message the pieces made is still the one assistant line, after them.
    let classes: Vec<&str> = s["classes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let last_event = classes.iter().rposition(|c| *c == "StreamEvent").unwrap();
    let answer = classes
        .iter()
        .position(|c| *c == "AssistantMessage")
        .unwrap();
    assert!(last_event < answer, "{classes:?}");
    assert_eq!(s["texts"], json!(["pieces as they come"]));
}
