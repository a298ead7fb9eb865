//! A child that does not finish well (issue 16 item 1; SUB-07): its model fails, it runs past
//! its time, it calls a tool outside its profile's set, or approval refuses it. The parent's
//! model reads a coded error result naming the child's session; the child's log ends with a
//! terminal `turn/end`; the world (files) shows what the child could and could not do.

use std::time::Duration;

use keel_tests::model_server::{ModelServer, Reply};
use serde_json::json;

use crate::suite::agent_support::*;
use crate::suite::subagent_support::*;

/// The text of the parent's tool message for `call_id` in its second request.
fn parent_result(server: &ModelServer, call_id: &str) -> String {
    let reqs = server.routed(None);
    assert_eq!(reqs.len(), 2, "the parent made two requests");
    tool_message(reqs[1].messages(), call_id)["content"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn parent_script(call: (String, String, String)) -> Vec<Reply> {
    vec![
        Reply::tool_calls(vec![call]),
        Reply::text("the parent goes on"),
    ]
}

/// A child whose model answers 500 every time: its turn ends in error, and the parent reads
/// `SUBAGENT_FAILED` with the child's own code and session.
#[test]
fn a_child_whose_model_fails_is_subagent_failed_naming_its_code() {
    let server = ModelServer::start_routed(
        vec![("[bad]", Vec::new())],
        parent_script(agent_call("b1", "[bad] try", json!({}))),
    );
    let env = sub_env(&server, "", "");
    let (run, result) = run_json(&env, "delegate", &[]);
    run.expect_code(0);
    contract_holds(&server);
    let text = parent_result(&server, "b1");
    let parent = session_of(&result);
    let (_, child, _) = spawned(&env, &parent).remove(0);
    let events = stored_events(&env, &child);
    let reasons = assert_balanced(&events, "the failed child");
    let last = reasons.last().unwrap();
    assert_eq!(last["kind"], "error", "{last}");
    let code = last["error"]["code"].as_str().unwrap();
    assert!(text.starts_with("Error [SUBAGENT_FAILED]"), "{text}");
    assert!(text.contains(&format!("[{code}]")), "{text} names {code}");
    assert!(
        text.contains(&format!("keel sessions show {child}")),
        "{text}"
    );
    let ends = ended(&env, &parent);
    assert_eq!(ends[0]["outcome"], "failed");
    assert_eq!(ends[0]["code"], "SUBAGENT_FAILED");
}

/// A child past its profile's `timeout_ms` is aborted: the parent reads `SUBAGENT_TIMEOUT`
/// and the child's log ends with a terminal `turn/end`, `aborted` (SUB-07).
#[test]
fn sub07_a_child_past_its_timeout_is_aborted_and_its_log_closed() {
    let server = ModelServer::start_routed(
        vec![(
            "[slow]",
            vec![Reply::text("too late").delay(Duration::from_secs(3))],
        )],
        parent_script(agent_call(
            "t1",
            "[slow] think hard",
            json!({"agent": "slow"}),
        )),
    );
    let env = sub_env(
        &server,
        r#"{ agents = { slow = { description = "slow", timeout_ms = 300 } } }"#,
        "",
    );
    let (run, result) = run_json(&env, "delegate", &["-c", "llm-openai.timeout_ms=10000"]);
    run.expect_code(0);
    let text = parent_result(&server, "t1");
    assert!(text.starts_with("Error [SUBAGENT_TIMEOUT]"), "{text}");
    assert!(text.contains("300 ms"), "{text}");
    let parent = session_of(&result);
    let (_, child, _) = spawned(&env, &parent).remove(0);
    let events = stored_events(&env, &child);
    let reasons = assert_balanced(&events, "the timed-out child");
    assert_eq!(reasons.last().unwrap()["kind"], "aborted", "{reasons:?}");
    assert_eq!(ended(&env, &parent)[0]["outcome"], "timeout");
}

/// A named profile with a read-only tool set: the child is offered only those tools, and a
/// call outside them is `UNKNOWN_TOOL` — the file is never written.
#[test]
fn a_read_only_profile_offers_only_its_tools_and_refuses_the_rest() {
    let server = ModelServer::start_routed(
        vec![(
            "[ro]",
            vec![
                Reply::tool_calls(vec![(
                    "w1",
                    "write_file",
                    args(json!({"path": "child.txt", "content": "written"})),
                )]),
                Reply::text("could not write"),
            ],
        )],
        parent_script(agent_call(
            "r1",
            "[ro] look around",
            json!({"agent": "reader"}),
        )),
    );
    let env = sub_env(
        &server,
        r#"{ agents = { reader = { description = "reads only", tools = ["read_file", "list_dir", "grep"] } } }"#,
        "",
    );
    let (run, result) = run_json(&env, "delegate", &[]);
    run.expect_code(0);
    let child = server.routed(Some("[ro]"));
    assert_eq!(child.len(), 2);
    let offered = |r: &keel_tests::model_server::Request| {
        let mut names: Vec<String> = r.body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
            .collect();
        names.sort_unstable();
        names
    };
    assert_eq!(offered(&child[0]), ["grep", "list_dir", "read_file"]);
    let refused = tool_message(child[1].messages(), "w1");
    assert!(
        refused["content"]
            .as_str()
            .unwrap()
            .contains("UNKNOWN_TOOL"),
        "{refused}"
    );
    assert!(!work_file(&env, "child.txt").exists());
    assert_eq!(parent_result(&server, "r1"), "could not write");
    // `keel resume CHILD` runs it under the same profile: its log recorded the tool set.
    let (_, kid, _) = spawned(&env, &session_of(&result)).remove(0);
    server.push_routed("[ro]", Reply::text("still reading"));
    let resumed = env.keel(&["resume", &kid, "--profile", "t", "and again"]);
    resumed.expect_code(0);
    let child = server.routed(Some("[ro]"));
    assert_eq!(child.len(), 3, "{}", resumed.stderr);
    assert_eq!(offered(&child[2]), ["grep", "list_dir", "read_file"]);
}

/// Approval applies inside a child exactly as in the parent: under `--approval ask` with no
/// approver (headless), the parent's own `write_file` and its child's are both denied with
/// the same code, and neither file exists.
#[test]
fn a_childs_write_is_denied_like_the_parents_under_approval_ask() {
    let server = ModelServer::start_routed(
        vec![(
            "[writer]",
            vec![
                Reply::tool_calls(vec![(
                    "cw",
                    "write_file",
                    args(json!({"path": "child.txt", "content": "x"})),
                )]),
                Reply::text("the child was refused"),
            ],
        )],
        vec![
            Reply::tool_calls(vec![
                (
                    "pw".to_owned(),
                    "write_file".to_owned(),
                    args(json!({"path": "parent.txt", "content": "x"})),
                ),
                agent_call("a1", "[writer] write it", json!({})),
            ]),
            Reply::text("done"),
        ],
    );
    let env = sub_env(&server, "", "");
    let (run, _) = run_json(&env, "write", &["--approval", "ask"]);
    run.expect_code(0);
    let parents = server.routed(None);
    let parent_denial = tool_message(parents[1].messages(), "pw");
    let child = server.routed(Some("[writer]"));
    let child_denial = tool_message(child[1].messages(), "cw");
    let code = |m: &serde_json::Value| {
        let t = m["content"].as_str().unwrap();
        t.split(']').next().unwrap().to_owned()
    };
    assert!(
        code(&parent_denial).starts_with("Error [APPROVAL_"),
        "{parent_denial}"
    );
    assert_eq!(code(&child_denial), code(&parent_denial), "{child_denial}");
    assert!(!work_file(&env, "parent.txt").exists());
    assert!(!work_file(&env, "child.txt").exists());
}

/// A profile's `approval = "ask"` makes its child stricter than a `never` parent: the parent
/// writes, the child is denied.
#[test]
fn a_profile_can_make_its_child_stricter_than_the_parent() {
    let server = ModelServer::start_routed(
        vec![(
            "[careful]",
            vec![
                Reply::tool_calls(vec![(
                    "cw",
                    "write_file",
                    args(json!({"path": "child.txt", "content": "x"})),
                )]),
                Reply::text("refused"),
            ],
        )],
        vec![
            Reply::tool_calls(vec![
                (
                    "pw".to_owned(),
                    "write_file".to_owned(),
                    args(json!({"path": "parent.txt", "content": "x"})),
                ),
                agent_call("a1", "[careful] write it", json!({"agent": "careful"})),
            ]),
            Reply::text("done"),
        ],
    );
    let env = sub_env(
        &server,
        r#"{ agents = { careful = { description = "asks first", approval = "ask" } } }"#,
        "",
    );
    let (run, _) = run_json(&env, "write", &[]);
    run.expect_code(0);
    assert!(
        work_file(&env, "parent.txt").exists(),
        "the parent runs `never`"
    );
    let child = server.routed(Some("[careful]"));
    let denial = tool_message(child[1].messages(), "cw");
    assert!(
        denial["content"]
            .as_str()
            .unwrap()
            .starts_with("Error [APPROVAL_"),
        "{denial}"
    );
    assert!(!work_file(&env, "child.txt").exists());
}

/// Hooks apply inside a child exactly as in the parent (issue 16 item 1; Claude Code's hooks
/// that "do not fire inside subagents"): a PreToolUse hook that blocks `shell` blocks the
/// child's call — nothing ran — and the invocation is audited in the child's own log.
#[test]
fn a_pre_tool_use_hook_blocks_a_childs_call_as_it_would_the_parents() {
    use crate::suite::hooks_support::{cmd, data_of, on, put, table};
    let server = ModelServer::start_routed(
        vec![(
            "[hooked]",
            vec![
                Reply::tool_calls(vec![(
                    "k1",
                    "shell",
                    args(json!({"command": "touch from_child.txt"})),
                )]),
                Reply::text("blocked, as expected"),
            ],
        )],
        parent_script(agent_call("h1", "[hooked] make a file", json!({}))),
    );
    let hooks = format!(
        "[[replace]]\nid = \"hooks\"\nconfig = {{ {} }}\n",
        table(&[on("PreToolUse", "shell", &cmd("block.sh"), "")])
    );
    let env = sub_env(&server, "", &hooks);
    put(
        &env,
        "block.sh",
        "cat > /dev/null\necho 'no shell in children' >&2\nexit 2\n",
    );
    let (run, result) = run_json(&env, "delegate", &[]);
    run.expect_code(0);
    assert!(
        !work_file(&env, "from_child.txt").exists(),
        "the blocked command ran"
    );
    let child = server.routed(Some("[hooked]"));
    let seen = tool_message(child[1].messages(), "k1");
    let content = seen["content"].as_str().unwrap();
    assert!(content.contains("no shell in children"), "{content}");
    let (_, kid, _) = spawned(&env, &session_of(&result)).remove(0);
    let invoked = data_of(&stored_events(&env, &kid), "hook/invoked");
    assert_eq!(
        invoked.len(),
        1,
        "the hook ran once, in the child's session"
    );
    assert_eq!(invoked[0]["call_id"], "k1");
    assert_eq!(parent_result(&server, "h1"), "blocked, as expected");
}
