//! UserPromptSubmit, SessionStart and Stop hooks through the binary, headless runs, and what
//! the log keeps of a hook (issue 15 item 3).

use keel_tests::model_server::Reply;
use serde_json::{Value, json};

use crate::suite::agent_support::*;
use crate::suite::hooks_support::*;

fn recorded(env: &keel_tests::Env, rel: &str) -> Value {
    let text = std::fs::read_to_string(work_file(env, rel))
        .unwrap_or_else(|e| panic!("{rel} was not written: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{rel}: {e}: {text}"))
}

/// Issue 15 item 3: a UserPromptSubmit hook that exits 2 rejects the prompt before any model
/// request; the reason is one stderr line, and the hook read the prompt on stdin.
#[test]
fn a_user_prompt_submit_hook_exiting_2_rejects_the_prompt() {
    let server = server(vec![Reply::text("never sent")]);
    let gate = cmd("gate.sh");
    let env = hooks_env(&server, &table(&[on("UserPromptSubmit", "", &gate, "")]));
    put(
        &env,
        "gate.sh",
        "cat > \"$CLAUDE_PROJECT_DIR/.hooks/prompt.json\"\necho 'no deploys on fridays' >&2\nexit 2\n",
    );
    let (run, _) = run_json(&env, "deploy to production", &[]);
    assert!(
        server.completions().is_empty(),
        "a rejected prompt reached the model"
    );
    let line = run
        .stderr
        .lines()
        .find(|l| l.contains("UserPromptSubmit hook blocked the prompt"))
        .unwrap_or_else(|| panic!("no line for the block: {}", run.stderr));
    assert!(
        line.starts_with("keel: hooks: ") && line.contains("no deploys on fridays"),
        "{line}"
    );
    let input = recorded(&env, ".hooks/prompt.json");
    assert_eq!(input["hook_event_name"], "UserPromptSubmit");
    assert_eq!(input["prompt"], "deploy to production");
    assert!(input["session_id"].as_str().is_some_and(|s| !s.is_empty()));
    assert_eq!(
        input["cwd"],
        env.work().canonicalize().unwrap().display().to_string()
    );
}

/// Issue 15 item 3: SessionStart (source `startup`) and UserPromptSubmit (plain stdout) add
/// context the model reads in its first request.
#[test]
fn session_start_and_user_prompt_submit_add_context_for_the_model() {
    let server = server(vec![Reply::text("hello")]);
    let start = cmd("start.sh");
    let prompt = cmd("prompt.sh");
    let env = hooks_env(
        &server,
        &table(&[
            on("SessionStart", "startup", &start, ""),
            on("UserPromptSubmit", "*", &prompt, ""),
        ]),
    );
    put(
        &env,
        "start.sh",
        "cat > \"$CLAUDE_PROJECT_DIR/.hooks/start.json\"\necho '{\"hookSpecificOutput\":{\"hookEventName\":\"SessionStart\",\"additionalContext\":\"on branch main\"}}'\n",
    );
    put(
        &env,
        "prompt.sh",
        "cat > /dev/null\necho 'the build is green'\n",
    );
    let (run, result) = run_json(&env, "status?", &[]);
    run.expect_code(0);
    let reqs = contract_holds(&server);
    let text = all_text(reqs[0].messages());
    assert!(text.contains("status?"), "{text}");
    assert!(text.contains("on branch main"), "{text}");
    assert!(text.contains("the build is green"), "{text}");
    let input = recorded(&env, ".hooks/start.json");
    assert_eq!(input["hook_event_name"], "SessionStart");
    assert_eq!(input["source"], "startup");
    let events = stored_events(&env, &session_of(&result));
    let decided: Vec<String> = data_of(&events, "hook/result")
        .iter()
        .map(|d| {
            format!(
                "{} {}",
                d["event"].as_str().unwrap(),
                d["decision"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        decided,
        ["SessionStart context", "UserPromptSubmit context"]
    );
}

/// Issue 15 item 3: a Stop hook that asks to continue once — the server gets one more request
/// carrying the reason, and the second Stop input says `stop_hook_active: true`. Run headless
/// with stream-json: hooks fire the same.
#[test]
fn a_stop_hook_continues_the_turn_once_with_its_reason() {
    let server = server(vec![Reply::text("all done"), Reply::text("tests pass now")]);
    let gate = cmd("stop.sh");
    let env = hooks_env(&server, &table(&[on("Stop", "", &gate, "")]));
    put(
        &env,
        "stop.sh",
        "d=\"$CLAUDE_PROJECT_DIR/.hooks\"\nn=$(ls \"$d\"/stop_*.json 2>/dev/null | wc -l)\ncat > \"$d/stop_$n.json\"\nif [ \"$n\" -eq 0 ]; then echo 'run the test suite before stopping' >&2; exit 2; fi\nexit 0\n",
    );
    let run = env.keel(&[
        "run",
        "--profile",
        "t",
        "--output-format",
        "stream-json",
        "fix the bug",
    ]);
    run.expect_code(0);
    let reqs = contract_holds(&server);
    assert_eq!(reqs.len(), 2, "one continuation");
    let second = all_text(reqs[1].messages());
    assert!(
        second.contains("run the test suite before stopping"),
        "{second}"
    );
    assert_eq!(
        recorded(&env, ".hooks/stop_0.json")["stop_hook_active"],
        false
    );
    assert_eq!(
        recorded(&env, ".hooks/stop_1.json")["stop_hook_active"],
        true
    );
    assert!(!work_file(&env, ".hooks/stop_2.json").exists());
    assert!(run.stdout.contains("tests pass now"), "{}", run.stdout);
}

/// Issue 15 item 3: a Stop hook that always objects is capped (`max_stop_continuations`) and
/// the cap is said on stderr.
#[test]
fn a_stop_hook_that_always_objects_is_capped() {
    let server = server(vec![Reply::text("a"), Reply::text("b"), Reply::text("c")]);
    let nag = cmd("nag.sh");
    let env = hooks_env(
        &server,
        &format!(
            "{}, max_stop_continuations = 1",
            table(&[on("Stop", "", &nag, "")])
        ),
    );
    put(
        &env,
        "nag.sh",
        "cat > /dev/null\necho '{\"decision\":\"block\",\"reason\":\"keep going\"}'\n",
    );
    let (run, result) = run_json(&env, "go", &[]);
    run.expect_code(0);
    assert_eq!(server.completions().len(), 2);
    assert_eq!(result["result"], "b");
    assert!(
        run.stderr.contains("max_stop_continuations = 1"),
        "{}",
        run.stderr
    );
}

/// Issue 15 item 3, SEC-03: a hook's stderr holding a secret's value reaches the log scrubbed
/// (hook/result goes through session/persist like every event).
#[test]
fn a_secret_in_a_hooks_stderr_is_scrubbed_in_the_log() {
    let secret = "hunter2-hook-canary-9d1f";
    let server = server(vec![
        Reply::tool_calls(vec![("s1", "shell", args(json!({"command": "true"})))]),
        Reply::text("ok"),
    ]);
    let leak = cmd("leak.sh");
    let env = hooks_env(&server, &table(&[on("PreToolUse", "*", &leak, "")]));
    put(
        &env,
        "leak.sh",
        &format!("cat > /dev/null\necho 'token is {secret}' >&2\nexit 1\n"),
    );
    set_secret(&env, "HOOK_TOKEN", secret);
    let (run, result) = run_json(&env, "go", &[]);
    run.expect_code(0);
    let file = crate::suite::sessions_support::jsonl_file(&env, &session_of(&result));
    let log = std::fs::read_to_string(file).unwrap();
    assert!(log.contains("hook/result"), "{log}");
    assert!(log.contains("token is "), "the stderr excerpt is logged");
    assert!(!log.contains(secret), "the secret reached the log");
    assert!(
        !run.stderr.contains(secret),
        "the secret reached stderr: {}",
        run.stderr
    );
}
