//! `keel run --input-format stream-json` (issue 16 item 4): messages, steers and interrupts
//! read from stdin while the run lasts, through the binary against the loopback model server.
//! Assertions are on what the server received and on the session log.

use std::time::Duration;

use keel_tests::model_server::Reply;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::suite::agent_support::{
    agent_env, args, contract_holds, server, session_of, stored_events, types,
};
use crate::suite::stream_input_support::{Conversation, user_texts};

fn reasons(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["type"] == "turn/end")
        .map(|e| e["data"]["reason"]["kind"].clone())
        .collect()
}

// A steer sent while the model works on step 0 joins step 1's request, in the same turn.
#[test]
fn issue16_item4_a_steer_sent_mid_turn_reaches_the_next_steps_request() {
    let server = server(vec![
        Reply::tool_calls(vec![("c1", "read_file", args(json!({"path": "a.txt"})))])
            .delay(Duration::from_millis(1500)),
        Reply::text("done"),
    ]);
    let env = agent_env(&server, "");
    env.file("work/a.txt", "alpha\n");
    let mut c = Conversation::start(&env, &["read a.txt"]);
    server.wait_for(1, Duration::from_secs(30));
    c.user("also check b");
    let end = c.finish();
    assert_eq!(end.code, 0, "stderr: {}", end.stderr);
    let reqs = contract_holds(&server);
    assert_eq!(reqs.len(), 2);
    assert_eq!(user_texts(reqs[0].messages()), ["read a.txt"]);
    assert_eq!(
        user_texts(reqs[1].messages()),
        ["read a.txt", "also check b"],
        "the steer joins the next step"
    );
    let result = end.stdout.last().unwrap();
    assert_eq!(result["type"], "result");
    let events = stored_events(&env, &session_of(result));
    let t = types(&events);
    assert_eq!(t.iter().filter(|k| *k == "turn/start").count(), 1, "{t:?}");
    // The steer is logged in step 1, after the call's result.
    let steer = events
        .iter()
        .position(|e| e["type"] == "user/message" && e["data"]["content"] == "also check b")
        .unwrap();
    let result_at = t.iter().position(|k| k == "tool/result").unwrap();
    assert!(steer > result_at, "{t:?}");
}

// A message sent when the agent is idle starts the next turn; each turn's result object is
// printed as it ends, and the run ends when stdin closes.
#[test]
fn issue16_item4_a_message_sent_when_idle_starts_the_next_turn() {
    let server = server(vec![Reply::text("one"), Reply::text("two")]);
    let env = agent_env(&server, "");
    let mut c = Conversation::start(&env, &["first"]);
    let r1 = c.wait_results(1);
    assert_eq!(r1["result"], "one");
    c.user("second");
    let r2 = c.wait_results(2);
    assert_eq!(r2["result"], "two");
    let end = c.finish();
    assert_eq!(end.code, 0, "stderr: {}", end.stderr);
    let results: Vec<&Value> = end
        .stdout
        .iter()
        .filter(|v| v["type"] == "result")
        .collect();
    assert_eq!(
        results.len(),
        2,
        "one result per idle interval, none repeated"
    );
    assert_eq!(end.stdout[0]["type"], "system", "init first");
    let reqs = contract_holds(&server);
    assert_eq!(user_texts(reqs[1].messages()), ["first", "second"]);
    let events = stored_events(&env, &session_of(&r2));
    assert_eq!(reasons(&events), [json!("completed"), json!("completed")]);
}

// Claude Code's control_request interrupt aborts the running turn; the run goes on and the
// next message runs a turn of its own.
#[test]
fn issue16_item4_a_control_interrupt_aborts_the_running_turn_and_the_run_goes_on() {
    let server = server(vec![
        Reply::text("too late").delay(Duration::from_secs(5)),
        Reply::text("ok"),
    ]);
    let env = agent_env(&server, "");
    let mut c = Conversation::start(&env, &["slow"]);
    server.wait_for(1, Duration::from_secs(30));
    c.write(&json!({"type": "control_request", "request_id": "req_7", "request": {"subtype": "interrupt"}}));
    let answer = c.wait_for("the control response", |v| v["type"] == "control_response");
    assert_eq!(answer["response"]["request_id"], "req_7");
    let r1 = c.wait_results(1);
    assert_eq!(r1["turn_end_reason"], "aborted", "{r1}");
    c.user("next");
    c.wait_results(2);
    let end = c.finish();
    assert_eq!(
        end.code, 0,
        "the last turn completed; stderr: {}",
        end.stderr
    );
    let events = stored_events(&env, &session_of(&r1));
    assert_eq!(reasons(&events), [json!("aborted"), json!("completed")]);
}

// A malformed line is named with its number on stderr and skipped; the run goes on.
#[test]
fn issue16_item4_a_bad_line_is_reported_with_its_number_and_skipped() {
    let server = server(vec![Reply::text("hi")]);
    let env = agent_env(&server, "");
    let mut c = Conversation::start(&env, &[]);
    c.write_raw("not json");
    c.write(&json!({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": "hello"}]}}));
    c.wait_results(1);
    let end = c.finish();
    assert_eq!(end.code, 0, "stderr: {}", end.stderr);
    assert!(
        end.stderr.contains("stdin line 1 skipped: not JSON"),
        "{}",
        end.stderr
    );
    let reqs = server.completions();
    assert_eq!(reqs.len(), 1);
    assert_eq!(user_texts(reqs[0].messages()), ["hello"]);
}

// `-` would read the prompt from the stream itself: refused before anything runs; a stream
// closed before any message runs nothing and says so.
#[test]
fn issue16_item4_dash_is_refused_and_an_empty_stream_runs_nothing() {
    let server = server(vec![]);
    let env = agent_env(&server, "");
    let run = env.keel(&[
        "run",
        "--profile",
        "t",
        "--input-format",
        "stream-json",
        "-",
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("--input-format stream-json"),
        "{}",
        run.stderr
    );
    let c = Conversation::start(&env, &[]);
    let end = c.finish();
    assert_eq!(end.code, 1, "{}", end.stderr);
    assert!(end.stderr.contains("NO_INPUT"), "{}", end.stderr);
    assert!(server.completions().is_empty());
}
