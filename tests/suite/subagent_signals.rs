//! Children and the process's end (issue 16 item 1; SUB-07, SES-06): SIGINT or SIGTERM while
//! children run converges each of them to a terminal `turn/end` before keel exits; SIGKILL
//! leaves them open, and `keel resume PARENT` recovers the parent and every child
//! deterministically (recovery closers on each log) before the parent's next request, which
//! keeps the tool-call contract.

use std::process::Child;
use std::time::Duration;

use keel_tests::Env;
use keel_tests::model_server::{ModelServer, Reply};
use rustix::process::{Pid, Signal, kill_process};
use serde_json::{Value, json};

use crate::suite::agent_support::*;
use crate::suite::subagent_support::*;

/// A parent that starts two children whose models answer only after a minute.
fn two_slow_children(after: Vec<Reply>) -> ModelServer {
    let slow = || vec![Reply::text("too late").delay(Duration::from_secs(60))];
    let mut parent = vec![Reply::tool_calls(vec![
        agent_call("k1", "[kid-a] work slowly", json!({})),
        agent_call("k2", "[kid-b] work slowly", json!({})),
    ])];
    parent.extend(after);
    ModelServer::start_routed(vec![("[kid-a]", slow()), ("[kid-b]", slow())], parent)
}

/// `keel run … stream-json` in the background, once both children's requests arrived.
fn run_until_children_wait(env: &Env, server: &ModelServer) -> Child {
    let child = spawn_stream_json(env, &["-c", "llm-openai.timeout_ms=120000", "delegate two"]);
    server.wait_for(3, Duration::from_secs(60));
    child
}

/// The parent session id from the stream's init line.
fn parent_of(stdout: &[u8]) -> String {
    let first: Value = serde_json::from_str(
        String::from_utf8_lossy(stdout)
            .lines()
            .next()
            .expect("the init line"),
    )
    .unwrap();
    first["session_id"].as_str().unwrap().to_owned()
}

/// SES-06 for a tree: SIGKILL while two children wait on their models, then `keel resume`:
/// every log (parent and children) is balanced by recovery closers, the parent records each
/// child `interrupted`, and its next request carries both calls' `TOOL_OUTCOME_UNKNOWN`.
#[test]
fn ses06_sigkill_with_children_running_then_resume_recovers_every_log() {
    let server = two_slow_children(vec![Reply::text("carrying on without them")]);
    let env = sub_env(&server, "", "");
    let mut child = run_until_children_wait(&env, &server);
    child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    let parent = parent_of(&out.stdout);
    let children = spawned(&env, &parent);
    assert_eq!(
        children.len(),
        2,
        "both children were logged before the kill"
    );
    assert!(ended(&env, &parent).is_empty());

    let run = env.keel(&["resume", &parent, "--profile", "t", "go on"]);
    run.expect_code(0);
    let reqs = contract_holds(&server);
    let last = reqs.last().unwrap();
    assert_eq!(last.route, None, "the parent's request comes last");
    for call in ["k1", "k2"] {
        let m = tool_message(last.messages(), call);
        assert!(
            m["content"]
                .as_str()
                .unwrap()
                .contains("TOOL_OUTCOME_UNKNOWN"),
            "{m}"
        );
    }
    let events = stored_events(&env, &parent);
    let reasons = assert_balanced(&events, "the parent");
    assert_eq!(reasons[0]["kind"], "interrupted", "{reasons:?}");
    assert_eq!(reasons.last().unwrap()["kind"], "completed");
    let ends = ended(&env, &parent);
    for (call_id, child, _) in &children {
        let end = ends
            .iter()
            .find(|e| e["child_session"] == child.as_str())
            .unwrap_or_else(|| panic!("no subagent/ended for {child}: {ends:?}"));
        assert_eq!(end["outcome"], "interrupted");
        assert_eq!(end["call_id"], call_id.as_str());
        let reasons = assert_balanced(&stored_events(&env, child), child);
        assert_eq!(reasons.last().unwrap()["kind"], "interrupted", "{child}");
    }
    // Recovery is done once: a second resume finds nothing more to settle.
    server.push(Reply::text("still fine"));
    env.keel(&["resume", &parent, "--profile", "t", "again"])
        .expect_code(0);
    assert_eq!(ended(&env, &parent).len(), 2);
}

/// SUB-07: a signal while children run stops them too — each child's log ends with a
/// terminal `turn/end` written by keel itself (not a recovery closer), and keel exits with
/// the signal's code.
fn a_signal_converges_running_children(signal: Signal, code: i32) {
    let server = two_slow_children(Vec::new());
    let env = sub_env(&server, "", "");
    let child = run_until_children_wait(&env, &server);
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    kill_process(pid, signal).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{stderr}");
    let parent = parent_of(&out.stdout);
    let reasons = assert_balanced(&stored_events(&env, &parent), "the parent");
    assert_eq!(reasons.last().unwrap()["kind"], "aborted");
    let children = spawned(&env, &parent);
    assert_eq!(children.len(), 2);
    for (_, child, _) in &children {
        let reasons = assert_balanced(&stored_events(&env, child), child);
        assert_eq!(
            reasons.last().unwrap()["kind"],
            "aborted",
            "{child}: {reasons:?}\n{stderr}"
        );
    }
}

#[test]
fn sub07_sigint_with_children_running_closes_every_child_and_exits_130() {
    a_signal_converges_running_children(Signal::INT, 130);
}

#[test]
fn sub07_sigterm_with_children_running_closes_every_child_and_exits_143() {
    a_signal_converges_running_children(Signal::TERM, 143);
}
