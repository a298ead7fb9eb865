//! The residual states of a resident child's teardown through the binary (issue 16 item 2;
//! SUB-02, ARCHITECTURE §13 T-4): keep, drop, park and return on `resident_stop`, and keep on
//! the plural path (the parent session closing). The child is busy when the parent acts: the
//! parent's server holds the parent's request until the child's server has the child's (a
//! hook, not a sleep), so the later inputs queue behind a running task.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use keel_tests::Env;
use keel_tests::model_server::{ModelServer, Reply};
use serde_json::{Value, json};

use crate::suite::agent_support::{run_json, session_of, stored_events};
use crate::suite::resident_support::*;

/// The stop scenario: a child busy with `t1` (its model request held open) and `t2`, `t3`
/// queued, stopped with `residual`; then `more` parent replies.
struct Stopped {
    env: Env,
    parent: String,
    events: Vec<Value>,
    child: String,
    stop: Value,
    child_server: Arc<ModelServer>,
}

fn stop_with(residual: &str, more: Vec<Reply>, child_more: Vec<Reply>) -> Stopped {
    let mut replies = vec![
        Reply::tool_calls(vec![
            call(
                "p1",
                "resident_start",
                json!({"name": "r", "agent": "worker"}),
            ),
            call("p2", "resident_send", json!({"name": "r", "message": "t1"})),
        ]),
        Reply::tool_calls(vec![
            call("p3", "resident_send", json!({"name": "r", "message": "t2"})),
            call("p4", "resident_send", json!({"name": "r", "message": "t3"})),
            call(
                "p5",
                "resident_stop",
                json!({"name": "r", "residual": residual}),
            ),
        ]),
    ];
    replies.extend(more);
    let parent = ModelServer::start(replies);
    let mut child_replies = vec![Reply::stall(Duration::from_secs(60))];
    child_replies.extend(child_more);
    let child = Arc::new(ModelServer::start(child_replies));
    let env = env(&parent, &child, "");
    // The parent's second request waits until the child is in its model request for t1: t2
    // and t3 then queue behind a running task.
    let (c, n) = (Arc::clone(&child), AtomicUsize::new(0));
    parent.on_completion(move |_| {
        if n.fetch_add(1, Ordering::SeqCst) == 1 {
            c.wait_for(1, LIMIT);
        }
    });
    let (run, result) = run_json(&env, "stop a busy resident", &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let pid = session_of(&result);
    let events = stored_events(&env, &pid);
    let child_id = result_of(&events, "p1")["child_session"]
        .as_str()
        .unwrap()
        .to_owned();
    let stop = result_of(&events, "p5");
    assert_eq!(stop["aborted"], true, "t1 was running: {stop}");
    let ids: Vec<&str> = stop["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 2, "t2 and t3 had not run: {stop}");
    // The task in hand got its terminal answer in the child's own log.
    let (_, child_events) = child_log(&env, &child_id);
    assert_eq!(user_texts(&child_events)[0], "t1");
    let first_end = child_events
        .iter()
        .find(|e| e["type"] == "turn/end")
        .unwrap();
    assert_eq!(
        first_end["data"]["reason"]["kind"], "aborted",
        "{first_end}"
    );
    assert!(temp_files(&env).is_empty());
    Stopped {
        env,
        parent: pid,
        events,
        child: child_id,
        stop,
        child_server: child,
    }
}

fn states(stop: &Value) -> Vec<String> {
    stop["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["state"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn resident_sub02_keep_requeues_the_unrun_inputs_at_the_next_start() {
    let s = stop_with(
        "keep",
        vec![
            Reply::tool_calls(vec![
                call(
                    "p6",
                    "resident_start",
                    json!({"name": "r", "agent": "worker"}),
                ),
                call("p7", "resident_view", json!({"name": "r", "wait": true})),
            ]),
            Reply::text("done"),
        ],
        vec![Reply::text("did t2"), Reply::text("did t3")],
    );
    assert_eq!(states(&s.stop), ["kept", "kept"]);
    let again = result_of(&s.events, "p6");
    assert_eq!(again["requeued"], json!({"kept": 2, "parked": 0}));
    let second = again["child_session"].as_str().unwrap();
    assert_ne!(second, s.child);
    let (_, events) = child_log(&s.env, second);
    assert_eq!(user_texts(&events), ["t2", "t3"]);
    assert_eq!(result_of(&s.events, "p7")["last_result"], "did t3");
    assert_eq!(
        residuals(&s.env, &s.parent),
        vec![],
        "re-queued items leave the store"
    );
    assert_eq!(child_requests(&s.child_server).len(), 3);
}

#[test]
fn resident_sub02_drop_logs_each_unrun_input_in_the_childs_log_and_answers_it_skipped() {
    let s = stop_with("drop", vec![Reply::text("done")], vec![]);
    assert_eq!(states(&s.stop), ["dropped", "dropped"]);
    let (_, events) = child_log(&s.env, &s.child);
    let dropped: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "resident/dropped")
        .collect();
    assert_eq!(dropped.len(), 2);
    assert_eq!(dropped[0]["data"]["content"], "t2");
    assert_eq!(dropped[1]["data"]["content"], "t3");
    assert!(dropped.iter().all(|e| e["data"]["answer"] == "skipped"));
    assert_eq!(user_texts(&events), ["t1"], "dropped inputs never ran");
    assert_eq!(residuals(&s.env, &s.parent), vec![]);
}

#[test]
fn resident_sub02_park_saves_the_inputs_until_a_start_asks_for_them() {
    let s = stop_with(
        "park",
        vec![
            Reply::tool_calls(vec![
                call(
                    "p6",
                    "resident_start",
                    json!({"name": "r", "agent": "worker"}),
                ),
                call("p7", "resident_stop", json!({"name": "r"})),
                call(
                    "p8",
                    "resident_start",
                    json!({"name": "r", "agent": "worker", "resume_parked": true}),
                ),
                call("p9", "resident_view", json!({"name": "r", "wait": true})),
            ]),
            Reply::text("done"),
        ],
        vec![Reply::text("did t2"), Reply::text("did t3")],
    );
    assert_eq!(states(&s.stop), ["parked", "parked"]);
    let plain = result_of(&s.events, "p6");
    assert_eq!(plain["requeued"], json!({"kept": 0, "parked": 0}));
    assert_eq!(
        plain["parked_waiting"], 2,
        "a plain start leaves them parked"
    );
    assert_eq!(result_of(&s.events, "p7")["inputs"], json!([]));
    let resumed = result_of(&s.events, "p8");
    assert_eq!(resumed["requeued"], json!({"kept": 0, "parked": 2}));
    let (_, events) = child_log(&s.env, resumed["child_session"].as_str().unwrap());
    assert_eq!(user_texts(&events), ["t2", "t3"]);
    assert_eq!(residuals(&s.env, &s.parent), vec![]);
}

#[test]
fn resident_sub02_return_hands_the_unrun_inputs_back_in_the_stop_result() {
    let s = stop_with("return", vec![Reply::text("done")], vec![]);
    assert_eq!(states(&s.stop), ["returned", "returned"]);
    let contents: Vec<&str> = s.stop["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["content"].as_str().unwrap())
        .collect();
    assert_eq!(contents, ["t2", "t3"]);
    assert_eq!(residuals(&s.env, &s.parent), vec![], "returned, not saved");
    let (_, events) = child_log(&s.env, &s.child);
    assert!(!events.iter().any(|e| e["type"] == "resident/dropped"));
}

#[test]
fn resident_sub02_the_parent_closing_keeps_a_busy_childs_queued_input() {
    let parent = ModelServer::start(vec![
        Reply::tool_calls(vec![
            call(
                "p1",
                "resident_start",
                json!({"name": "r", "agent": "worker"}),
            ),
            call("p2", "resident_send", json!({"name": "r", "message": "t1"})),
        ]),
        Reply::tool_calls(vec![call(
            "p3",
            "resident_send",
            json!({"name": "r", "message": "t2"}),
        )]),
        Reply::text("leaving the child behind"),
    ]);
    let child = Arc::new(ModelServer::start(vec![Reply::stall(Duration::from_secs(
        60,
    ))]));
    let env = env(&parent, &child, "on_close = \"keep\"");
    let (c, n) = (Arc::clone(&child), AtomicUsize::new(0));
    parent.on_completion(move |_| {
        if n.fetch_add(1, Ordering::SeqCst) == 1 {
            c.wait_for(1, LIMIT);
        }
    });
    let (run, result) = run_json(&env, "start and leave", &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let pid = session_of(&result);
    // The plural stop path: t2 is kept under the child's name, t1's turn ended aborted, and
    // the child's temp store is gone.
    assert_eq!(
        residuals(&env, &pid),
        [("r".to_owned(), "keep".to_owned(), "t2".to_owned())]
    );
    let events = stored_events(&env, &pid);
    let cid = result_of(&events, "p1")["child_session"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, child_events) = child_log(&env, &cid);
    let ends: Vec<&Value> = child_events
        .iter()
        .filter(|e| e["type"] == "turn/end")
        .collect();
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0]["data"]["reason"]["kind"], "aborted");
    assert!(temp_files(&env).is_empty());
}
