//! Resident children through the binary (issue 16 item 2; SUB-01, SUB-04, SUB-06, MEM-07):
//! a child's queue and two-level memory, no residue after N start/stop cycles, the child's
//! message to its parent, the tools' errors. The residual states are in `resident_stop`.
//!
//! The parent runs on `llm-openai` at one loopback server, its resident children on
//! `llm-anthropic` at another (the `worker` profile's own model row), so each side's script is
//! in order whatever the interleaving. The assertions read the world: the parent's and the
//! children's logs, the stores on disk, the requests each server received.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use keel_tests::model_server::{ModelServer, Reply};
use serde_json::{Value, json};

use crate::suite::agent_support::{run_json, session_of, stored_events};
use crate::suite::resident_support::*;

#[test]
fn resident_sub01_mem07_a_child_takes_two_messages_writes_temp_and_the_parent_promotes_one_key() {
    let parent = ModelServer::start(vec![
        Reply::tool_calls(vec![
            call(
                "p1",
                "resident_start",
                json!({"name": "scout", "agent": "worker"}),
            ),
            call(
                "p2",
                "resident_send",
                json!({"name": "scout", "message": "first: remember the plan"}),
            ),
            call(
                "p3",
                "resident_send",
                json!({"name": "scout", "message": "second: write the result"}),
            ),
            call(
                "p4",
                "resident_view",
                json!({"name": "scout", "wait": true}),
            ),
        ]),
        Reply::tool_calls(vec![
            call(
                "p5",
                "resident_promote",
                json!({"name": "scout", "keys": ["plan"]}),
            ),
            call("p6", "resident_view", json!({"name": "scout"})),
        ]),
        Reply::text("the parent is done"),
    ]);
    let child = ModelServer::start(vec![
        Reply::tool_calls(vec![call(
            "c1",
            "memory_write",
            json!({"key": "plan", "text": "three steps"}),
        )]),
        Reply::text("plan noted"),
        Reply::tool_calls(vec![call(
            "c2",
            "memory_write",
            json!({"key": "result", "text": "42"}),
        )]),
        Reply::tool_calls(vec![call("c3", "memory_read", json!({}))]),
        Reply::text("result written"),
    ]);
    let env = env(&parent, &child, "");
    // The main store as the parent's next request finds it: after the child wrote temp, then
    // after the promote.
    let snapshots: Arc<Mutex<Vec<Vec<Pair>>>> = Arc::default();
    let (seen, dir, n) = (Arc::clone(&snapshots), store_dir(&env), AtomicUsize::new(0));
    parent.on_completion(move |_| {
        if n.fetch_add(1, Ordering::SeqCst) > 0 {
            let main = std::fs::read_dir(dir.join("main"))
                .unwrap()
                .next()
                .unwrap()
                .unwrap();
            seen.lock().unwrap().push(records(&main.path()));
        }
    });
    let (run, result) = run_json(&env, "use a resident", &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let pid = session_of(&result);
    let events = stored_events(&env, &pid);

    let started = result_of(&events, "p1");
    let cid = started["child_session"].as_str().unwrap().to_owned();
    assert_eq!(started["depth"], 1);
    for p in ["p2", "p3"] {
        assert!(
            result_of(&events, p)["message_id"]
                .as_str()
                .is_some_and(|s| !s.is_empty())
        );
    }
    let view = result_of(&events, "p4");
    assert_eq!(view["running"], false);
    assert_eq!(view["pending"], 0);
    assert_eq!(view["last_result"], "result written");
    assert_eq!(
        view["temp_memory"],
        json!([{"key": "plan", "text": "three steps"}, {"key": "result", "text": "42"}])
    );
    assert_eq!(result_of(&events, "p5")["promoted"], 1);

    // MEM-07: the child's writes landed in temp only; main changed with the promote alone.
    assert_eq!(
        *snapshots.lock().unwrap(),
        vec![vec![], vec![("plan".to_owned(), "three steps".to_owned())]]
    );
    let main = store_dir(&env).join(format!("main/{pid}.db"));
    assert_eq!(
        records(&main),
        [("plan".to_owned(), "three steps".to_owned())]
    );

    // SUB-01: the child's own session took both messages, one turn each, in order.
    let (header, child_events) = child_log(&env, &cid);
    assert_eq!(header["origin"], "resident");
    assert_eq!(header["parent_session"], pid.as_str());
    assert_eq!(header["delegation_depth"], 1);
    assert_eq!(
        user_texts(&child_events),
        ["first: remember the plan", "second: write the result"]
    );
    let read = result_of(&child_events, "c3");
    assert_eq!(read["records"].as_array().unwrap().len(), 2, "{read}");
    assert!(
        read["records"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["level"] == "temp")
    );

    // The child ran on its profile's model row; memory tools are offered to children only.
    let child_reqs = child_requests(&child);
    assert_eq!(child_reqs.len(), 5);
    assert!(child_reqs.iter().all(|r| r.body["model"] == "child-model"));
    assert!(offered(&child_reqs[0]).contains(&"memory_write".to_owned()));
    let parent_tools = offered(&parent.completions()[0]);
    assert!(parent_tools.contains(&"resident_start".to_owned()));
    assert!(
        !parent_tools
            .iter()
            .any(|t| t.starts_with("memory_") || t == "notify_parent")
    );

    // The child is gone with its parent: no temp store left behind.
    assert_eq!(temp_files(&env), Vec::<PathBuf>::new());
}

#[test]
fn resident_sub04_n_start_stop_cycles_leave_no_temp_files() {
    const N: usize = 20;
    let mut calls = Vec::new();
    for i in 0..N {
        calls.push(call(
            &format!("s{i}"),
            "resident_start",
            json!({"name": format!("r{i}")}),
        ));
        calls.push(call(
            &format!("x{i}"),
            "resident_stop",
            json!({"name": format!("r{i}")}),
        ));
    }
    let parent = ModelServer::start(vec![Reply::tool_calls(calls), Reply::text("done")]);
    let child = ModelServer::start(vec![]);
    let env = env(&parent, &child, "max_children = 1");
    // Before the parent's second request — the process still up, every child stopped by
    // `resident_stop` alone — the temp directory is empty.
    let (dir, n) = (store_dir(&env), AtomicUsize::new(0));
    let left: Arc<Mutex<Option<Vec<PathBuf>>>> = Arc::default();
    let seen = Arc::clone(&left);
    parent.on_completion(move |_| {
        if n.fetch_add(1, Ordering::SeqCst) == 1 {
            let files: Vec<PathBuf> = std::fs::read_dir(dir.join("temp"))
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .collect();
            *seen.lock().unwrap() = Some(files);
        }
    });
    let (run, result) = run_json(&env, "cycle residents", &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let events = stored_events(&env, &session_of(&result));
    let mut children = std::collections::BTreeSet::new();
    for i in 0..N {
        children.insert(
            result_of(&events, &format!("s{i}"))["child_session"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
        assert_eq!(result_of(&events, &format!("x{i}"))["inputs"], json!([]));
    }
    assert_eq!(children.len(), N, "a fresh child each time");
    assert_eq!(
        *left.lock().unwrap(),
        Some(vec![]),
        "no temp residue mid-run"
    );
    assert!(temp_files(&env).is_empty());
    assert_eq!(child_requests(&child).len(), 0);
}

#[test]
fn resident_sub06_notify_parent_reaches_the_parent_as_a_message() {
    let parent = ModelServer::start(vec![
        Reply::tool_calls(vec![
            call(
                "p1",
                "resident_start",
                json!({"name": "r", "agent": "worker"}),
            ),
            call(
                "p2",
                "resident_send",
                json!({"name": "r", "message": "look and tell me"}),
            ),
            call("p3", "resident_view", json!({"name": "r", "wait": true})),
        ]),
        Reply::text("first answer"),
        Reply::text("second answer"),
    ]);
    let child = ModelServer::start(vec![
        Reply::tool_calls(vec![call(
            "c1",
            "notify_parent",
            json!({"message": "found the bug in parser.rs"}),
        )]),
        Reply::text("told the parent"),
    ]);
    let env = env(&parent, &child, "");
    let (run, result) = run_json(&env, "watch a resident", &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let pid = session_of(&result);
    let events = stored_events(&env, &pid);
    let cid = result_of(&events, "p1")["child_session"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, child_events) = child_log(&env, &cid);
    assert_eq!(
        result_of(&child_events, "c1")["parent_session"],
        pid.as_str()
    );
    // The parent's log holds the child's message as a user message of its own, and the
    // parent's model was asked with it.
    let notes: Vec<String> = user_texts(&events)
        .into_iter()
        .filter(|t| t.contains("found the bug in parser.rs"))
        .collect();
    assert_eq!(notes.len(), 1, "{:?}", user_texts(&events));
    assert!(notes[0].contains("\"r\""), "names the child: {}", notes[0]);
    let asked = parent.completions().iter().any(|r| {
        r.messages()
            .as_array()
            .into_iter()
            .flatten()
            .any(|m| m["role"] == "user" && m["content"].to_string().contains("found the bug"))
    });
    assert!(asked, "a parent request carried the child's message");
    assert_eq!(parent.completions().len(), 3);
}

#[test]
fn resident_errors_name_the_child_and_the_profile() {
    let parent = ModelServer::start(vec![
        Reply::tool_calls(vec![
            call(
                "e1",
                "resident_send",
                json!({"name": "ghost", "message": "hi"}),
            ),
            call(
                "e2",
                "resident_start",
                json!({"name": "r", "agent": "nobody"}),
            ),
            call("e3", "resident_start", json!({"name": "r"})),
            call("e4", "resident_start", json!({"name": "r"})),
            call("e5", "resident_start", json!({"name": "bad name"})),
        ]),
        Reply::text("done"),
    ]);
    let child = ModelServer::start(vec![]);
    let env = env(&parent, &child, "");
    let (run, result) = run_json(&env, "misuse residents", &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let events = stored_events(&env, &session_of(&result));
    let code = |id: &str| {
        events
            .iter()
            .find(|e| e["type"] == "tool/result" && e["data"]["call_id"] == id)
            .map(|e| e["data"]["error"]["code"].clone())
            .unwrap()
    };
    assert_eq!(code("e1"), "RESIDENT_UNKNOWN");
    assert_eq!(code("e2"), "RESIDENT_PROFILE");
    assert_eq!(code("e3"), Value::Null);
    assert_eq!(code("e4"), "RESIDENT_EXISTS");
    assert_eq!(code("e5"), "INVALID_ARGUMENTS");
}

/// SUB-06 contextfull, shared: the parent starts a child, gives it work and waits for it;
/// the child's model refuses the request as over its window. Answers the child's turn-ending
/// code. The child only signals: the parent's log gets one `user/message` naming the child
/// (an interrupt, clamped to L3), and a later parent request carries it.
fn child_out_of_context(env_of: impl Fn(&ModelServer, &ModelServer) -> keel_tests::Env) -> String {
    let parent = ModelServer::start(vec![
        Reply::tool_calls(vec![
            call(
                "p1",
                "resident_start",
                json!({"name": "big", "agent": "worker"}),
            ),
            call(
                "p2",
                "resident_send",
                json!({"name": "big", "message": "read the whole repository"}),
            ),
            call("p3", "resident_view", json!({"name": "big", "wait": true})),
        ]),
        Reply::text("first answer"),
        Reply::text("second answer"),
    ]);
    let child = ModelServer::start(vec![Reply::context_overflow()]);
    let env = env_of(&parent, &child);
    let (run, result) = run_json(&env, "use a big resident", &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let pid = session_of(&result);
    let events = stored_events(&env, &pid);
    let cid = result_of(&events, "p1")["child_session"]
        .as_str()
        .unwrap()
        .to_owned();

    // The child's one turn ended out of context.
    let (_, child_events) = child_log(&env, &cid);
    let ends: Vec<&Value> = child_events
        .iter()
        .filter(|e| e["type"] == "turn/end")
        .map(|e| &e["data"]["reason"])
        .collect();
    assert_eq!(ends.len(), 1, "{ends:?}");
    assert_eq!(ends[0]["kind"], "error", "{}", ends[0]);
    let code = ends[0]["error"]["code"].as_str().unwrap().to_owned();
    assert_eq!(child_requests(&child).len(), 1);

    // The parent holds one signal, naming the child, its session and the code.
    let signals: Vec<String> = user_texts(&events)
        .into_iter()
        .filter(|t| t.contains("ran out of context"))
        .collect();
    assert_eq!(signals.len(), 1, "{:?}", user_texts(&events));
    assert!(
        signals[0].starts_with(&format!(
            "Resident child \"big\" (session {cid}) ran out of context: [{code}]"
        )),
        "{}",
        signals[0]
    );
    assert!(signals[0].ends_with("resident_view it or resident_stop it"));
    let reqs = parent.completions();
    assert_eq!(reqs.len(), 3);
    let carried =
        reqs.iter().skip(1).any(|r| {
            r.messages().as_array().into_iter().flatten().any(|m| {
                m["role"] == "user" && m["content"].to_string().contains("ran out of context")
            })
        });
    assert!(carried, "a later parent request carried the signal");
    // Only a signal: the child is still there, idle, for the parent to view or stop.
    assert_eq!(result_of(&events, "p3")["running"], false);
    code
}

/// With the agent bundle's `context` row: the request cannot be made to fit (nothing to
/// compact), so the child's turn ends `CONTEXT_OVERFLOW` (the loop's `agent/error` path).
#[test]
fn resident_sub06_a_child_out_of_context_signals_its_parent() {
    let code = child_out_of_context(|p, c| env(p, c, ""));
    assert_eq!(code, "CONTEXT_OVERFLOW");
}

/// Without a `context` row the server's refusal ends the child's turn
/// `CONTEXT_WINDOW_EXCEEDED` with no `agent/error`: the signal still comes (it follows the
/// child's `turn/end`).
#[test]
fn resident_sub06_a_window_exceeded_without_a_context_row_signals_too() {
    let code = child_out_of_context(|p, c| {
        let extra = "[[disable]]\nid = \"context\"\n";
        let env = env(p, c, "");
        let path = env.path().join("config/profiles/t.toml");
        let text = std::fs::read_to_string(&path).unwrap();
        env.profile("t", &format!("{text}\n{extra}"));
        env
    });
    assert_eq!(code, "CONTEXT_WINDOW_EXCEEDED");
}
