//! Resident children and a crash (issue 16 item 2; SES-06, SUB-04): the parent's log records
//! each resident child (`subagent/spawned {mode:"resident"}` flushed before it takes input,
//! `subagent/ended` when a stop path ends it), so after a SIGKILL `keel resume PARENT`
//! recovers a child the crash left with an open turn — the child's log ends balanced by its
//! recovery closers, the parent records it `interrupted` — and the new process removes the
//! dead one's temp stores.

use std::time::Duration;

use keel_tests::model_server::{ModelServer, Reply};
use serde_json::{Value, json};

use crate::suite::agent_support::*;
use crate::suite::resident_support::*;
use crate::suite::subagent_support::{assert_balanced, ended, spawned};

/// The parent session id from the stream's init line.
fn parent_of(stdout: &[u8]) -> String {
    let text = String::from_utf8_lossy(stdout);
    let first: Value = serde_json::from_str(text.lines().next().expect("the init line")).unwrap();
    first["session_id"].as_str().unwrap().to_owned()
}

/// SES-06 for a resident child: SIGKILL while the child waits on its model and the parent
/// waits on the child, then `keel resume PARENT`.
#[test]
fn resident_ses06_sigkill_with_a_child_running_then_resume_recovers_it_and_sweeps_its_temp() {
    let parent = ModelServer::start(vec![
        Reply::tool_calls(vec![
            call(
                "p1",
                "resident_start",
                json!({"name": "slow", "agent": "worker"}),
            ),
            call(
                "p2",
                "resident_send",
                json!({"name": "slow", "message": "work slowly"}),
            ),
            call("p3", "resident_view", json!({"name": "slow", "wait": true})),
        ]),
        Reply::text("carrying on without it"),
    ]);
    let child = ModelServer::start(vec![Reply::text("too late").delay(Duration::from_secs(60))]);
    let env = env(&parent, &child, "");
    let mut keel = spawn_stream_json(
        &env,
        &[
            "-c",
            "llm-openai.timeout_ms=120000",
            "start a slow resident",
        ],
    );
    let dead_pid = keel.id();
    child.wait_for(1, Duration::from_secs(60));
    keel.kill().unwrap();
    let out = keel.wait_with_output().unwrap();
    let pid = parent_of(&out.stdout);

    // Before the resume: the parent's log has the child's start and no end; the dead
    // process's temp store is still there.
    let children = spawned(&env, &pid);
    assert_eq!(children.len(), 1, "{children:?}");
    let (call_id, cid, data) = &children[0];
    assert_eq!(call_id, "p1");
    assert_eq!(data["mode"], "resident");
    assert_eq!(data["resident"], "slow");
    assert_eq!(data["agent"], "worker");
    assert_eq!(data["depth"], 1);
    assert!(ended(&env, &pid).is_empty());
    let dead_dir = store_dir(&env).join(format!("temp/{dead_pid}"));
    assert!(
        dead_dir.is_dir() && std::fs::read_dir(&dead_dir).unwrap().next().is_some(),
        "the SIGKILL left the child's temp store"
    );

    let run = env.keel(&["resume", &pid, "--profile", "t", "go on"]);
    run.expect_code(0);

    // The child's log ends balanced by its recovery closers.
    let child_events = stored_events(&env, cid);
    let reasons = assert_balanced(&child_events, "the resident child");
    assert_eq!(
        reasons.last().unwrap()["kind"],
        "interrupted",
        "{reasons:?}"
    );
    // The parent records it interrupted, once.
    let ends = ended(&env, &pid);
    assert_eq!(ends.len(), 1, "{ends:?}");
    assert_eq!(ends[0]["child_session"], cid.as_str());
    assert_eq!(ends[0]["call_id"], "p1");
    assert_eq!(ends[0]["outcome"], "interrupted");
    // The parent's own log is balanced and its next request keeps the tool-call contract.
    let events = stored_events(&env, &pid);
    let parent_reasons = assert_balanced(&events, "the parent");
    assert_eq!(parent_reasons.last().unwrap()["kind"], "completed");
    let reqs = contract_holds(&parent);
    assert_eq!(reqs.len(), 2);
    // The dead process's temp directory is gone; the resume's own children left none.
    assert!(!dead_dir.exists(), "{}", dead_dir.display());
    assert!(temp_files(&env).is_empty(), "{:?}", temp_files(&env));
}

/// Each stop path records the child's end in the parent's log: `resident_stop` while the
/// parent is live, and the parent closing at the end of `keel run` (the parent is opened
/// again for it), so a later `keel resume` has nothing to recover.
#[test]
fn resident_every_stop_path_records_the_childs_end_in_the_parent() {
    let parent = ModelServer::start(vec![
        Reply::tool_calls(vec![
            call("s1", "resident_start", json!({"name": "a"})),
            call("s2", "resident_start", json!({"name": "b"})),
            call("x1", "resident_stop", json!({"name": "a"})),
        ]),
        Reply::text("b stays until the end"),
    ]);
    let child = ModelServer::start(vec![]);
    let env = env(&parent, &child, "");
    let (run, result) = run_json(&env, "two residents", &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let pid = session_of(&result);
    let starts = spawned(&env, &pid);
    let ends = ended(&env, &pid);
    assert_eq!(starts.len(), 2, "{starts:?}");
    assert_eq!(ends.len(), 2, "{ends:#?}");
    for ((call_id, cid, data), end) in starts.iter().zip(&ends) {
        assert_eq!(data["mode"], "resident");
        assert_eq!(end["call_id"], call_id.as_str());
        assert_eq!(end["child_session"], cid.as_str());
        assert_eq!(end["outcome"], "stopped");
        assert_eq!(end["residual"], "keep");
    }
    assert_eq!(ends[0]["resident"], "a");
    assert_eq!(ends[1]["resident"], "b");

    parent.push(Reply::text("nothing to recover"));
    env.keel(&["resume", &pid, "--profile", "t", "again"])
        .expect_code(0);
    assert_eq!(ended(&env, &pid).len(), 2, "no child was left open");
}
