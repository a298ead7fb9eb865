//! Hooks fire for real MCP tools exactly as for built-ins (issue 15 item 3: "hooks fire the
//! same way … for MCP tools"): the MCP tool is an ordinary registered tool named
//! `mcp__<server>__<tool>`, so a PreToolUse hook matched on that name blocks the call before
//! the server sees it, and a PostToolUse hook reads the server's real answer.

use keel_tests::model_server::Reply;
use serde_json::{Value, json};

use crate::suite::agent_support::*;
use crate::suite::hooks_support::*;
use crate::suite::mcp_support::*;

/// The test profile with `hooks` (inline row config) and the `mcp` row's `servers` tables.
fn env_with(
    server: &keel_tests::model_server::ModelServer,
    hooks: &str,
    servers: &str,
) -> keel_tests::Env {
    agent_env(
        server,
        &format!(
            "[[replace]]\nid = \"hooks\"\nconfig = {{ {hooks} }}\n\n\
             [[replace]]\nid = \"mcp\"\n[replace.config]\n{servers}"
        ),
    )
}

// Issue 15 items 1 and 3: a PreToolUse hook on `mcp__probe__.*` that exits 2 stops the call;
// the probe server's own log shows it listed its tools and never received the call.
#[test]
fn a_pre_tool_use_hook_blocks_a_real_mcp_call_before_the_server_sees_it() {
    let server = server(vec![
        Reply::tool_calls(vec![("m1", "mcp__probe__slow", args(json!({"ms": 1})))]),
        Reply::text("understood"),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("probe.log");
    let probe = node_server(
        "probe",
        &probe_js(),
        &[],
        &format!(
            "env = {{ PROBE_LOG = {} }}",
            lit(&log.display().to_string())
        ),
    );
    let block = cmd("block.sh");
    let env = env_with(
        &server,
        &table(&[on("PreToolUse", "mcp__probe__.*", &block, "")]),
        &probe,
    );
    put(
        &env,
        "block.sh",
        "cat > /dev/null\necho 'no MCP calls in this repository' >&2\nexit 2\n",
    );
    let (run, result) = run_json(&env, "call the probe", &[]);
    run.expect_code(0);
    let events = stored_events(&env, &session_of(&result));
    let blocked = result_of(&events, "m1");
    assert_eq!(blocked["is_error"], true, "{blocked}");
    let content = blocked["content"].as_str().unwrap_or_default();
    assert!(
        content.contains("no MCP calls in this repository"),
        "{content}"
    );
    let invoked = data_of(&events, "hook/invoked");
    assert_eq!(invoked.len(), 1, "{invoked:?}");
    assert_eq!(invoked[0]["call_id"], "m1");
    let seen = std::fs::read_to_string(&log).unwrap();
    assert!(seen.contains("tools/list"), "the probe ran: {seen}");
    assert!(
        !seen.contains("tools/call"),
        "the blocked call reached the server: {seen}"
    );
}

// Issue 15 items 1 and 3: a PostToolUse hook on a real server-everything call gets Claude
// Code's fields on stdin: the tool's `mcp__…` name, the model's input and the server's answer.
#[test]
fn a_post_tool_use_hook_reads_the_real_mcp_result() {
    let server = server(vec![
        Reply::tool_calls(vec![(
            "e1",
            "mcp__everything__echo",
            args(json!({"message": "hello hooks"})),
        )]),
        Reply::text("ok"),
    ]);
    let record = cmd("record.sh");
    let env = env_with(
        &server,
        &table(&[on("PostToolUse", "mcp__everything__echo", &record, "")]),
        &node_server("everything", &everything_js(), &["stdio"], ""),
    );
    put(
        &env,
        "record.sh",
        "cat > \"$CLAUDE_PROJECT_DIR/post.json\"\n",
    );
    let (run, _) = run_json(&env, "echo", &[]);
    run.expect_code(0);
    let text = std::fs::read_to_string(work_file(&env, "post.json")).unwrap();
    let input: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(input["hook_event_name"], "PostToolUse");
    assert_eq!(input["tool_name"], "mcp__everything__echo");
    assert_eq!(input["tool_input"]["message"], "hello hooks");
    assert!(
        input["tool_response"]
            .to_string()
            .contains("Echo: hello hooks"),
        "{input}"
    );
}
