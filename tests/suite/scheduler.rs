//! The input scheduler through the binary (issue 16 item 3, SCH-02/06/07): interrupts sent on
//! stdin (`keel run --input-format stream-json`, `"keel":{"target":"interrupt","level":N}`) to
//! a running headless agent, against the loopback model server. Assertions are on the session
//! log, the requests the server received and the files the tools wrote.

use std::time::Duration;

use keel_tests::model_server::Reply;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::suite::agent_support::{
    agent_env, args, contract_holds, session_of, stored_events, tool_message, types, wait_for_file,
    work_file,
};
use crate::suite::stream_input_support::{Conversation, user_texts};

/// An interrupt at `level` in the stdin schema.
fn interrupt(text: &str, level: u8) -> Value {
    json!({
        "type": "user",
        "message": {"role": "user", "content": text},
        "keel": {"target": "interrupt", "level": level},
    })
}

/// The `turn/start` and `turn/end` data of the log, in order.
fn turn_marks(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["type"] == "turn/start" || e["type"] == "turn/end")
        .map(|e| json!({"type": e["type"], "data": e["data"]}))
        .collect()
}

/// The index of the `user/message` whose content is `text`, and its id.
fn user_message(events: &[Value], text: &str) -> (usize, String) {
    let i = events
        .iter()
        .position(|e| e["type"] == "user/message" && e["data"]["content"] == text)
        .unwrap_or_else(|| panic!("no user/message {text:?} in {:?}", types(events)));
    (i, events[i]["data"]["id"].as_str().unwrap().to_owned())
}

/// The result object of the conversation's last idle interval.
fn last_result(stdout: &[Value]) -> Value {
    stdout
        .iter()
        .rev()
        .find(|v| v["type"] == "result")
        .cloned()
        .unwrap_or_else(|| panic!("no result object in {stdout:#?}"))
}

// SCH-07: an interrupt sent while a shell tool runs (2 s) does not cancel it: the call's result
// is its normal success, its side effect exists, and the interrupt is logged after that call's
// `tool/result` and reaches only the requests after it.
#[test]
fn sch07_an_interrupt_during_a_tool_takes_effect_after_it_returns() {
    let server = crate::suite::agent_support::server(vec![
        Reply::tool_calls(vec![(
            "c1",
            "shell",
            args(json!({"command": "echo $$ > started.pid; sleep 2; echo done > f.txt"})),
        )]),
        Reply::text("interrupt handled"),
        Reply::text("tool work finished"),
    ]);
    let env = agent_env(&server, "");
    let mut c = Conversation::start(&env, &["run the slow tool"]);
    assert!(
        wait_for_file(&work_file(&env, "started.pid"), Duration::from_secs(30)),
        "the tool started"
    );
    assert!(
        !work_file(&env, "f.txt").exists(),
        "the interrupt is sent while the tool is still running"
    );
    c.write(&interrupt("urgent: report now", 3));
    let end = c.finish();
    assert_eq!(end.code, 0, "stderr: {}", end.stderr);
    assert_eq!(
        std::fs::read_to_string(work_file(&env, "f.txt")).unwrap(),
        "done\n",
        "the tool ran to its end"
    );
    let reqs = contract_holds(&server);
    assert_eq!(reqs.len(), 3);
    assert_eq!(user_texts(reqs[0].messages()), ["run the slow tool"]);
    assert_eq!(
        user_texts(reqs[1].messages()),
        ["run the slow tool", "urgent: report now"],
        "the interrupt reaches the request after the tool's result"
    );
    let result = tool_message(reqs[1].messages(), "c1");
    assert!(
        !result["content"]
            .as_str()
            .unwrap_or_default()
            .contains("CANCELLED"),
        "{result}"
    );
    let events = stored_events(&env, &session_of(&last_result(&end.stdout)));
    let call_result = events
        .iter()
        .position(|e| e["type"] == "tool/result" && e["data"]["call_id"] == "c1")
        .unwrap();
    assert!(
        events[call_result]["data"]["is_error"] != json!(true),
        "a normal success: {}",
        events[call_result]
    );
    let (at, id) = user_message(&events, "urgent: report now");
    assert!(at > call_result, "logged after the call's result");
    assert_eq!(
        turn_marks(&events),
        [
            json!({"type": "turn/start", "data": {"turn": 0}}),
            json!({"type": "turn/end", "data": {"turn": 0, "reason": {"kind": "suspended", "by": id}}}),
            json!({"type": "turn/start", "data": {"turn": 1}}),
            json!({"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "completed"}}}),
            json!({"type": "turn/start", "data": {"turn": 2, "resumes": 0}}),
            json!({"type": "turn/end", "data": {"turn": 2, "reason": {"kind": "completed"}}}),
        ]
    );
}

// SCH-02/03/06: an L2 interrupt preempts a multi-step followup turn at its step boundary; the
// interrupt runs as its own turn, then the suspended task resumes as a new turn that goes
// straight to the model (no new message) and completes its script. Every request keeps the
// tool-call contract.
#[test]
fn sch02_an_interrupt_preempts_a_multi_step_turn_which_resumes_and_completes() {
    let server = crate::suite::agent_support::server(vec![
        Reply::tool_calls(vec![(
            "s1",
            "shell",
            args(json!({"command": "echo one > one.txt"})),
        )])
        .delay(Duration::from_millis(1500)),
        Reply::text("noted the side question"),
        Reply::tool_calls(vec![(
            "s2",
            "shell",
            args(json!({"command": "echo two > two.txt"})),
        )]),
        Reply::text("both written"),
    ]);
    let env = agent_env(&server, "");
    let mut c = Conversation::start(&env, &["write one then two"]);
    server.wait_for(1, Duration::from_secs(30));
    c.write(&interrupt("a side question", 2));
    let end = c.finish();
    assert_eq!(end.code, 0, "stderr: {}", end.stderr);
    let result = last_result(&end.stdout);
    assert_eq!(result["result"], "both written", "{result}");
    assert!(work_file(&env, "one.txt").exists() && work_file(&env, "two.txt").exists());
    let reqs = contract_holds(&server);
    assert_eq!(reqs.len(), 4);
    assert_eq!(user_texts(reqs[0].messages()), ["write one then two"]);
    let both = ["write one then two", "a side question"];
    assert_eq!(user_texts(reqs[1].messages()), both);
    // The resumed turn adds no message: its requests carry the same user texts, the
    // interrupt's answer and its own step's result.
    assert_eq!(user_texts(reqs[2].messages()), both);
    assert_eq!(user_texts(reqs[3].messages()), both);
    tool_message(reqs[3].messages(), "s2");
    let events = stored_events(&env, &session_of(&result));
    let (_, id) = user_message(&events, "a side question");
    assert_eq!(
        turn_marks(&events),
        [
            json!({"type": "turn/start", "data": {"turn": 0}}),
            json!({"type": "turn/end", "data": {"turn": 0, "reason": {"kind": "suspended", "by": id}}}),
            json!({"type": "turn/start", "data": {"turn": 1}}),
            json!({"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "completed"}}}),
            json!({"type": "turn/start", "data": {"turn": 2, "resumes": 0}}),
            json!({"type": "turn/end", "data": {"turn": 2, "reason": {"kind": "completed"}}}),
        ]
    );
    // The resumed turn: straight to the model, two steps of its own.
    let t2 = events
        .iter()
        .position(|e| e["type"] == "turn/start" && e["data"]["turn"] == 2)
        .unwrap();
    let kinds = types(&events[t2..]);
    assert!(!kinds.iter().any(|k| k == "user/message"), "{kinds:?}");
    assert_eq!(kinds.iter().filter(|k| *k == "step/start").count(), 2);
}

// SCH-02: the frame carries the task's step budget: with `max_steps = 2`, a task suspended
// after its first step gets one more step when it resumes, then ends `max-steps`.
#[test]
fn sch02_a_resumed_task_continues_its_step_budget() {
    let server = crate::suite::agent_support::server(vec![
        Reply::tool_calls(vec![(
            "s1",
            "shell",
            args(json!({"command": "echo one > one.txt"})),
        )])
        .delay(Duration::from_millis(1500)),
        Reply::text("noted"),
        Reply::tool_calls(vec![(
            "s2",
            "shell",
            args(json!({"command": "echo two > two.txt"})),
        )]),
        Reply::text("never asked for"),
    ]);
    let env = agent_env(&server, "");
    let mut c = Conversation::start(&env, &["-c", "agent-loop.max_steps=2", "three steps"]);
    server.wait_for(1, Duration::from_secs(30));
    c.write(&interrupt("meanwhile", 1));
    let end = c.finish();
    assert_eq!(
        end.code, 1,
        "the last turn hit max-steps; stderr: {}",
        end.stderr
    );
    let reqs = contract_holds(&server);
    assert_eq!(reqs.len(), 3, "step 0, the interrupt, one resumed step");
    let events = stored_events(&env, &session_of(&last_result(&end.stdout)));
    let reasons: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "turn/end")
        .map(|e| &e["data"]["reason"]["kind"])
        .collect();
    assert_eq!(reasons, ["suspended", "completed", "max-steps"]);
}

// SCH-07 / B14: the boundary after a failed model call is not a safe point while its retry is
// pending (the attempt count is not part of the frame): an interrupt that arrives during the
// failing call waits for the retried step to close, then preempts. The retry's request
// carries the task alone; the interrupt's turn comes after it.
#[test]
fn sch07_an_interrupt_waits_for_the_retry_of_a_failed_step() {
    let server = crate::suite::agent_support::server(vec![
        Reply::rate_limited(0).delay(Duration::from_millis(1500)),
        Reply::tool_calls(vec![(
            "s1",
            "shell",
            args(json!({"command": "echo one > one.txt"})),
        )]),
        Reply::text("noted the side question"),
        Reply::text("one written"),
    ]);
    let env = agent_env(&server, "");
    let mut c = Conversation::start(&env, &["write one"]);
    server.wait_for(1, Duration::from_secs(30));
    c.write(&interrupt("a side question", 2));
    let end = c.finish();
    assert_eq!(end.code, 0, "stderr: {}", end.stderr);
    let result = last_result(&end.stdout);
    assert_eq!(result["result"], "one written", "{result}");
    assert!(work_file(&env, "one.txt").exists());
    let reqs = contract_holds(&server);
    assert_eq!(
        reqs.len(),
        4,
        "the failed call, its retry, the interrupt, the resumed step"
    );
    assert_eq!(
        user_texts(reqs[1].messages()),
        ["write one"],
        "the retry goes before the interrupt"
    );
    let both = ["write one", "a side question"];
    assert_eq!(user_texts(reqs[2].messages()), both);
    assert_eq!(user_texts(reqs[3].messages()), both);
    tool_message(reqs[3].messages(), "s1");
    let events = stored_events(&env, &session_of(&result));
    let (_, id) = user_message(&events, "a side question");
    assert_eq!(
        turn_marks(&events),
        [
            json!({"type": "turn/start", "data": {"turn": 0}}),
            json!({"type": "turn/end", "data": {"turn": 0, "reason": {"kind": "suspended", "by": id}}}),
            json!({"type": "turn/start", "data": {"turn": 1}}),
            json!({"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "completed"}}}),
            json!({"type": "turn/start", "data": {"turn": 2, "resumes": 0}}),
            json!({"type": "turn/end", "data": {"turn": 2, "reason": {"kind": "completed"}}}),
        ]
    );
    // Turn 0 ran the failed step and its retry before it was suspended.
    let suspended = events.iter().position(|e| e["type"] == "turn/end").unwrap();
    let turn0 = types(&events[..suspended]);
    assert_eq!(turn0.iter().filter(|k| *k == "llm/retry").count(), 1);
    assert_eq!(turn0.iter().filter(|k| *k == "step/start").count(), 2);
}
