//! PreToolUse and PostToolUse hooks through the binary (issue 15 item 3): real shell scripts
//! as hooks, the loopback model server, and the world afterwards — files on disk, the session
//! log, the requests the model server received, the processes left.

use std::time::{Duration, Instant};

use keel_tests::model_server::Reply;
use serde_json::json;

use crate::suite::agent_support::*;
use crate::suite::hooks_support::*;

/// Issue 15 item 3: a PreToolUse hook that exits 2 blocks the call — nothing ran, the result
/// the model reads carries the hook's stderr, and the invocation is audited in the log.
#[test]
fn a_pre_tool_use_hook_exiting_2_blocks_the_call_with_its_stderr() {
    let server = server(vec![
        Reply::tool_calls(vec![(
            "c1",
            "shell",
            args(json!({"command": "touch side_effect.txt"})),
        )]),
        Reply::text("understood"),
    ]);
    let block = cmd("block.sh");
    let env = hooks_env(&server, &table(&[on("PreToolUse", "shell", &block, "")]));
    put(
        &env,
        "block.sh",
        "cat > /dev/null\necho 'touching files is not allowed today' >&2\nexit 2\n",
    );
    let (run, result) = run_json(&env, "make a file", &[]);
    run.expect_code(0);
    assert_eq!(result["result"], "understood");
    assert!(
        !work_file(&env, "side_effect.txt").exists(),
        "the blocked command ran"
    );
    let reqs = contract_holds(&server);
    let seen = tool_message(reqs[1].messages(), "c1");
    let content = seen["content"].as_str().unwrap();
    assert!(content.contains("TOOL_DENIED"), "{content}");
    assert!(
        content.contains("touching files is not allowed today"),
        "{content}"
    );
    let events = stored_events(&env, &session_of(&result));
    let invoked = data_of(&events, "hook/invoked");
    assert_eq!(invoked.len(), 1);
    assert_eq!(invoked[0]["event"], "PreToolUse");
    assert_eq!(invoked[0]["matcher"], "shell");
    assert_eq!(invoked[0]["call_id"], "c1");
    let results = data_of(&events, "hook/result");
    assert_eq!(results[0]["exit_code"], 2);
    assert_eq!(results[0]["decision"], "block");
    assert_eq!(results[0]["timed_out"], false);
    assert!(
        results[0]["stderr"]
            .as_str()
            .unwrap()
            .contains("not allowed today")
    );
}

/// Issue 15 item 3: a PreToolUse hook's `updatedInput` rewrites the call: the file on disk has
/// the hook's content at the hook's path, and the log has the model's text (`tool/call`) and
/// the arguments that ran (`tool/rewrite`).
#[test]
fn a_pre_tool_use_hook_rewrites_the_arguments_and_the_log_shows_both() {
    let model_args = args(json!({"path": "model.txt", "content": "from the model\n"}));
    let server = server(vec![
        Reply::tool_calls(vec![("w1", "write_file", model_args.clone())]),
        Reply::text("written"),
    ]);
    let rewritten = json!({"path": "hook.txt", "content": "from the hook\n"});
    let out = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "allow", "updatedInput": rewritten}});
    let fix = cmd("fix.sh");
    let env = hooks_env(&server, &table(&[on("PreToolUse", "write_file", &fix, "")]));
    put(
        &env,
        "fix.sh",
        &format!("cat > /dev/null\nprintf '%s' '{out}'\n"),
    );
    let (run, result) = run_json(&env, "write it", &[]);
    run.expect_code(0);
    assert_eq!(
        std::fs::read_to_string(work_file(&env, "hook.txt")).unwrap(),
        "from the hook\n"
    );
    assert!(!work_file(&env, "model.txt").exists());
    let events = stored_events(&env, &session_of(&result));
    let calls = data_of(&events, "tool/call");
    assert_eq!(calls[0]["arguments"], model_args);
    let rewrites = data_of(&events, "tool/rewrite");
    assert_eq!(rewrites.len(), 1);
    assert_eq!(rewrites[0]["args"], rewritten);
    assert_eq!(rewrites[0]["call_id"], "w1");
    assert!(rewrites[0]["by"].as_str().unwrap().contains("fix.sh"));
    assert_eq!(data_of(&events, "hook/result")[0]["decision"], "rewrite");
}

/// Issue 15 item 3, TOOL-02: a hook's "allow" never loosens keel's approval — in `ask` mode
/// with nobody to ask, the write is still refused, and the file is not written.
#[test]
fn a_hook_allow_does_not_loosen_the_approval_policy() {
    let server = server(vec![
        Reply::tool_calls(vec![(
            "w1",
            "write_file",
            args(json!({"path": "a.txt", "content": "x"})),
        )]),
        Reply::text("ok"),
    ]);
    let allow = cmd("allow.sh");
    let env = hooks_env_with(
        &server,
        &table(&[on("PreToolUse", "*", &allow, "")]),
        "[[replace]]\nid = \"approval\"\nconfig = { mode = \"ask\" }\n",
    );
    put(
        &env,
        "allow.sh",
        "cat > /dev/null\necho '{\"hookSpecificOutput\":{\"permissionDecision\":\"allow\"}}'\n",
    );
    let (run, _) = run_json(&env, "write", &[]);
    run.expect_code(0);
    assert!(!work_file(&env, "a.txt").exists());
    let reqs = contract_holds(&server);
    let seen = tool_message(reqs[1].messages(), "w1");
    assert!(
        seen["content"]
            .as_str()
            .unwrap()
            .contains("APPROVAL_UNAVAILABLE"),
        "{seen}"
    );
}

/// Runs a model that calls `shell` once (`touch ran.txt`) under a PreToolUse hook that hangs
/// (`sleep TOKEN`, timeout 1 s) with `on_timeout`; answers (ran.txt exists, what the model
/// read, hook processes still alive after keel exited).
fn hanging(on_timeout: &str, token: &str) -> (bool, String, Vec<i32>) {
    let server = server(vec![
        Reply::tool_calls(vec![(
            "s1",
            "shell",
            args(json!({"command": "touch ran.txt"})),
        )]),
        Reply::text("done"),
    ]);
    let hang = cmd("hang.sh");
    let config = format!(
        "{}, on_timeout = \"{on_timeout}\", grace_ms = 200",
        table(&[on("PreToolUse", "shell", &hang, "timeout = 1")])
    );
    let env = hooks_env(&server, &config);
    put(&env, "hang.sh", &format!("sleep {token}\n"));
    let started = Instant::now();
    let (run, result) = run_json(&env, "run it", &[]);
    run.expect_code(0);
    assert!(started.elapsed() < Duration::from_secs(30));
    let left = processes_with_arg(token);
    for pid in &left {
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_raw(*pid).unwrap(),
            rustix::process::Signal::KILL,
        );
    }
    let reqs = contract_holds(&server);
    let seen = tool_message(reqs[1].messages(), "s1")["content"]
        .as_str()
        .unwrap()
        .to_owned();
    let events = stored_events(&env, &session_of(&result));
    let hook = &data_of(&events, "hook/result")[0];
    assert_eq!(hook["timed_out"], true, "{hook}");
    assert!(run.stderr.contains("timed out after 1 s"), "{}", run.stderr);
    (work_file(&env, "ran.txt").exists(), seen, left)
}

/// Issue 15 item 3: a hanging hook is killed at its timeout with nothing left behind; with
/// `on_timeout = "proceed"` the call runs.
#[test]
fn a_hanging_hook_is_killed_at_its_timeout_and_the_call_proceeds() {
    let (ran, seen, left) = hanging("proceed", "91.731");
    assert!(left.is_empty(), "{left:?} survived the hook's timeout");
    assert!(ran, "the call did not run: {seen}");
}

/// Issue 15 item 3: with `on_timeout = "deny"` the same hang denies the call: nothing ran.
#[test]
fn a_hanging_hook_with_on_timeout_deny_denies_the_call() {
    let (ran, seen, left) = hanging("deny", "91.732");
    assert!(left.is_empty(), "{left:?} survived the hook's timeout");
    assert!(!ran, "the denied call ran");
    assert!(
        seen.contains("TOOL_DENIED") && seen.contains("timed out"),
        "{seen}"
    );
}

/// Issue 15 item 3: PostToolUse runs after the body; exit 2 blocks the result (the model
/// reads the reason; the command did run), and a tool named like an MCP server's tool
/// (`mcp__everything__echo`, an ordinary registered tool) is matched by `mcp__everything__.*`
/// and gets the hook's additionalContext.
#[test]
fn post_tool_use_blocks_or_adds_context_and_matches_mcp_names() {
    let server = server(vec![
        Reply::tool_calls(vec![(
            "s1",
            "shell",
            args(json!({"command": "echo hi > post.txt"})),
        )]),
        Reply::tool_calls(vec![(
            "m1",
            "mcp__everything__echo",
            args(json!({"message": "ping"})),
        )]),
        Reply::text("done"),
    ]);
    let object = cmd("object.sh");
    let context = cmd("context.sh");
    let env = hooks_env_with(
        &server,
        &format!(
            "hooks = {{ PostToolUse = [{{ matcher = \"shell\", hooks = [{{ type = \"command\", command = '{object}' }}] }}, {{ matcher = \"mcp__everything__.*\", hooks = [{{ type = \"command\", command = '{context}' }}] }}] }}"
        ),
        "[[insert]]\nid = \"proof-tools\"\nplugin = \"proof-tools\"\nconfig = { names = [\"mcp__everything__echo\"] }\n",
    );
    put(
        &env,
        "object.sh",
        "cat > /dev/null\necho 'post.txt must not be written' >&2\nexit 2\n",
    );
    put(
        &env,
        "context.sh",
        "cat > \"$CLAUDE_PROJECT_DIR/.hooks/post_input.json\"\necho '{\"hookSpecificOutput\":{\"hookEventName\":\"PostToolUse\",\"additionalContext\":\"the echo server is a test double\"}}'\n",
    );
    let (run, _) = run_json(&env, "go", &[]);
    run.expect_code(0);
    assert!(
        work_file(&env, "post.txt").exists(),
        "PostToolUse runs after the body"
    );
    let reqs = contract_holds(&server);
    let s1 = tool_message(reqs[1].messages(), "s1")["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        s1.contains("TOOL_BLOCKED") && s1.contains("post.txt must not be written"),
        "{s1}"
    );
    let m1 = tool_message(reqs[2].messages(), "m1")["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(m1.contains("echo: {\"message\":\"ping\"}"), "{m1}");
    assert!(m1.contains("the echo server is a test double"), "{m1}");
    let input: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(work_file(&env, ".hooks/post_input.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(input["hook_event_name"], "PostToolUse");
    assert_eq!(input["tool_name"], "mcp__everything__echo");
    assert_eq!(input["tool_input"], json!({"message": "ping"}));
    assert_eq!(input["tool_use_id"], "m1");
    assert!(
        input["tool_response"]["content"]
            .as_str()
            .unwrap()
            .starts_with("echo:")
    );
}
