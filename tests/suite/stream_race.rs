//! `--input-format stream-json` under a hostile writer (issue 23 item 7): a user message and an
//! interrupt `control_request` in one write, again and again — every session log stays
//! gap-free and keeps the message, and the session writer never wedges (`SESSION_SEQ`,
//! `CHECKPOINT_FAILED`); a line that is not UTF-8 is skipped by number and later lines run; a
//! line over the cap is refused by number.

use std::time::Duration;

use keel_tests::model_server::Reply;
use serde_json::{Value, json};

use crate::suite::agent_support::{agent_env, server, session_of, stored_events};
use crate::suite::stream_input_support::{Conversation, user_line};

/// How many conversations the race test drives.
const ROUNDS: usize = 20;

fn interrupt(id: &str) -> Value {
    json!({"type": "control_request", "request_id": id, "request": {"subtype": "interrupt"}})
}

/// The seqs of a stored log are 0, 1, 2, … with no gap.
fn gap_free(events: &[Value]) -> Result<(), String> {
    for (i, e) in events.iter().enumerate() {
        if e["seq"].as_u64() != Some(i as u64) {
            return Err(format!("event {i} has seq {}: {e}", e["seq"]));
        }
    }
    Ok(())
}

#[test]
fn issue23_item7_a_message_and_an_interrupt_in_one_write_never_wedge_the_writer() {
    let replies = (0..ROUNDS * 3)
        .map(|_| Reply::text("ok").delay(Duration::from_millis(30)))
        .collect();
    let server = server(replies);
    let env = agent_env(&server, "");
    let mut failures = Vec::new();
    for round in 0..ROUNDS {
        let mut c = Conversation::start(&env, &[]);
        let text = format!("hello {round}");
        let both = format!("{}\n{}", user_line(&text), interrupt(&format!("r{round}")));
        c.write_raw(&both);
        c.wait_for("the control response", |v| v["type"] == "control_response");
        let first = c.wait_results(1);
        c.user("next");
        let second = c.wait_results(2);
        let end = c.finish();
        let id = session_of(&second);
        let events = stored_events(&env, &id);
        let mut wrong = Vec::new();
        if end.code != 0 {
            wrong.push(format!("exit {}", end.code));
        }
        for bad in ["SESSION_SEQ", "CHECKPOINT_FAILED"] {
            if end.stderr.contains(bad) {
                wrong.push(format!("stderr has {bad}"));
            }
        }
        if let Err(e) = gap_free(&events) {
            wrong.push(e);
        }
        let logged = |t: &str| {
            events
                .iter()
                .any(|e| e["type"] == "user/message" && e["data"]["content"] == t)
        };
        if !logged(&text) {
            wrong.push(format!("{text:?} is not in the log"));
        }
        if !logged("next") {
            wrong.push("\"next\" is not in the log".to_owned());
        }
        if first["turn_end_reason"] != "aborted" {
            wrong.push(format!(
                "the interrupted turn ended {}",
                first["turn_end_reason"]
            ));
        }
        if second["turn_end_reason"] != "completed" {
            wrong.push(format!("the next turn ended {}", second["turn_end_reason"]));
        }
        if !wrong.is_empty() {
            failures.push(format!(
                "round {round}: {}\nstderr: {}",
                wrong.join("; "),
                end.stderr
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {ROUNDS} rounds went wrong:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn issue23_item7_an_invalid_utf8_line_is_skipped_by_number_and_later_lines_run() {
    let server = server(vec![Reply::text("hi")]);
    let env = agent_env(&server, "");
    let mut c = Conversation::start(&env, &[]);
    c.write_bytes(b"{\"type\":\"user\",\"message\":{\"content\":\"\xff\xfe\"}}\n");
    c.user("hello");
    let r = c.wait_results(1);
    let end = c.finish();
    assert_eq!(end.code, 0, "stderr: {}", end.stderr);
    assert_eq!(r["result"], "hi", "{r}");
    let named = one_line_naming_line_1(&end.stderr);
    assert!(named.contains("UTF-8"), "{}", named);
    assert!(!end.stderr.contains("no more input"), "{}", end.stderr);
    let reqs = server.completions();
    assert_eq!(reqs.len(), 1);
}

#[test]
fn issue23_item7_a_line_over_the_cap_is_refused_by_number_and_later_lines_run() {
    let server = server(vec![Reply::text("hi")]);
    let env = agent_env(&server, "");
    let mut c = Conversation::start(&env, &[]);
    c.write(&json!({"type": "user", "message": {"content": "x".repeat(17 << 20)}}));
    c.user("hello");
    let r = c.wait_results(1);
    let end = c.finish();
    assert_eq!(end.code, 0, "stderr: {}", end.stderr);
    assert_eq!(r["result"], "hi", "{r}");
    let named = one_line_naming_line_1(&end.stderr);
    assert!(named.contains("16 MiB"), "{}", named);
    let events = stored_events(&env, &session_of(&r));
    let users: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "user/message")
        .map(|e| &e["data"]["content"])
        .collect();
    assert_eq!(users, [&json!("hello")], "the long line never ran");
}

/// The one stderr line that names stdin line 1; fails unless there is exactly one.
fn one_line_naming_line_1(stderr: &str) -> &str {
    let named: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("stdin line 1"))
        .collect();
    assert_eq!(named.len(), 1, "one line names line 1: {stderr}");
    named[0]
}
