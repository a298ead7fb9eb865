//! The agent survives its failures (issue 4 acceptance): SIGKILL during a tool then `keel
//! resume` (B7 closers reach the model, SES-06), a plugin listener that panics inside
//! `tools/pre-execute` or `llm/stream` (LOOP-08: the turn ends with an error, the session stays
//! valid, the next turn runs), and a turn-stopping objection that steers (LOOP-09/12).

use std::time::Duration;

use keel_tests::model_server::Reply;
use serde_json::{Value, json};

use crate::suite::agent_support::*;

fn hooks_row(env: &keel_tests::Env, seam: &str, action: &str) -> String {
    let marker = env.path().join("hook-fired");
    format!(
        "[[insert]]\nid = \"proof-hooks\"\nplugin = \"proof-agent-hooks\"\nconfig = {{ seam = \"{seam}\", action = \"{action}\", marker = \"{}\" }}\n",
        marker.display()
    )
}

/// A profile `t` with the proof hooks row for `seam` (the marker lives in the env's dir).
fn env_with_hook(
    server: &keel_tests::model_server::ModelServer,
    seam: &str,
    action: &str,
) -> keel_tests::Env {
    let env = agent_env(server, "");
    let row = hooks_row(&env, seam, action);
    // Re-write the profile with the extra row (agent_env wrote it without).
    let path = env.path().join("config/profiles/t.toml");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(&row);
    std::fs::write(&path, text).unwrap();
    env
}

/// LOOP-08 through the binary: one panicking listener ends one turn.
fn panic_then_resume(seam: &str, first_run_requests: usize) {
    let server = server(vec![
        Reply::tool_calls(vec![("p1", "list_dir", args(json!({"path": "."})))]),
        Reply::text("second turn ran"),
        Reply::text("third"),
    ]);
    let env = env_with_hook(&server, seam, "panic");
    let (run, result) = run_json(&env, "first", &[]);
    run.expect_code(1);
    assert!(run.stderr.contains("error"), "{}", run.stderr);
    assert_eq!(server.completions().len(), first_run_requests);
    let id = session_of(&result);
    let events = stored_events(&env, &id);
    let reason = last_reason(&events);
    assert_eq!(reason["kind"], "error", "{reason}");
    assert!(
        reason["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("on purpose"),
        "{reason}"
    );
    // The session is valid: `keel sessions show` reads it without repair.
    let show = env.keel(&["sessions", "show", &id, "--json", "--profile", "t"]);
    show.expect_code(0);
    // The next turn runs.
    let run = env.keel(&["resume", &id, "--profile", "t", "go on"]);
    run.expect_code(0);
    contract_holds(&server);
    let events = stored_events(&env, &id);
    assert_eq!(last_reason(&events)["kind"], "completed");
    assert_eq!(
        events.iter().filter(|e| e["type"] == "turn/start").count(),
        2
    );
}

#[test]
fn loop08_a_panicking_pre_execute_listener_ends_only_its_turn() {
    panic_then_resume("tools/pre-execute", 1);
}

#[test]
fn loop08_a_panicking_llm_stream_listener_ends_only_its_turn() {
    panic_then_resume("llm/stream", 0);
}

/// LOOP-09/12: a turn-stopping objection steers, and the same turn runs another step.
#[test]
fn loop12_an_objection_at_turn_stopping_continues_the_same_turn() {
    let server = server(vec![Reply::text("first answer"), Reply::text("goodbye")]);
    let env = env_with_hook(&server, "agent/turn-stopping", "steer");
    let (run, result) = run_json(&env, "hello", &[]);
    run.expect_code(0);
    assert_eq!(result["result"], "goodbye");
    let reqs = contract_holds(&server);
    assert_eq!(reqs.len(), 2);
    let last = reqs[1]
        .messages()
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["content"], "One more thing: say goodbye.");
    let events = stored_events(&env, &session_of(&result));
    assert_eq!(
        events.iter().filter(|e| e["type"] == "turn/start").count(),
        1
    );
}

/// SES-06 + B7 through the binary: SIGKILL while a tool runs, then `keel resume`: the model's
/// next request carries that call's `TOOL_OUTCOME_UNKNOWN` result and the conversation goes on.
#[test]
fn ses06_sigkill_during_a_tool_then_resume_shows_outcome_unknown() {
    let server = server(vec![
        Reply::tool_calls(vec![(
            "k1",
            "shell",
            args(json!({"command": "echo $$ > started.pid; sleep 30"})),
        )]),
        Reply::text("carrying on"),
    ]);
    let env = agent_env(&server, "");
    let id = sigkill_while_the_tool_runs(&env);
    let run = env.keel(&["resume", &id, "--profile", "t", "what happened?"]);
    run.expect_code(0);
    let reqs = contract_holds(&server);
    assert_eq!(reqs.len(), 2);
    let unknown = tool_message(reqs[1].messages(), "k1");
    assert!(
        unknown["content"]
            .as_str()
            .unwrap()
            .contains("TOOL_OUTCOME_UNKNOWN"),
        "{unknown}"
    );
    let events = stored_events(&env, &id);
    let headers: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "request/header")
        .collect();
    assert_eq!(headers.last().unwrap()["data"]["reason"], "resume");
    assert_eq!(last_reason(&events)["kind"], "completed");
}

/// B12 / SBX-02: with no sandbox row (nothing supervises the command), the shell itself still
/// dies with a keel that is killed outright: the shell tool arms the parent-death signal in the
/// child before exec.
#[test]
fn b12_an_unsupervised_command_dies_with_a_sigkilled_keel() {
    let server = server(vec![
        Reply::tool_calls(vec![(
            "d1",
            "shell",
            args(json!({"command": "echo $$ > started.pid; exec sleep 30"})),
        )]),
        Reply::text("unreachable"),
    ]);
    // `agent_env` already drops the row where bwrap is unusable.
    let no_sandbox = if sandbox_usable() {
        "[[disable]]\nid = \"sandbox\"\n"
    } else {
        ""
    };
    let env = agent_env(&server, no_sandbox);
    let survivors =
        survivors_of_a_sigkilled_keel(&env, &["run", "--profile", "t", "run it"], &["started.pid"]);
    assert!(
        survivors.is_empty(),
        "{survivors:?} outlived the SIGKILLed keel"
    );
}

/// §11 exit 130: SIGINT during a model request aborts the turn, flushes and closes the session,
/// prints the result line, and exits 130.
#[test]
fn sigint_aborts_the_turn_flushes_and_exits_130() {
    let server = server(vec![Reply::stall(Duration::from_secs(30))]);
    let env = agent_env(&server, "");
    let child = spawn_stream_json(&env, &["-c", "llm-openai.timeout_ms=60000", "wait"]);
    server.wait_for(1, Duration::from_secs(30));
    let pid = child.id().to_string();
    let pid = rustix::process::Pid::from_raw(pid.parse().unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let id = lines[0]["session_id"].as_str().unwrap().to_owned();
    assert_eq!(lines.last().unwrap()["type"], "result", "{stdout}");
    let events = stored_events(&env, &id);
    let reason = last_reason(&events);
    assert_eq!(reason["kind"], "aborted", "{reason}");
    assert_eq!(
        events.last().unwrap()["type"],
        "turn/end",
        "the session was closed cleanly"
    );
}
