//! Builders for the JSON the suite sends (headers, envelopes, whole turns) and small call
//! helpers, so that each case reads as the behaviour it checks.

use serde_json::{Value, json};

use crate::{ContractStore, Failure};

/// A minimal header (format version 0, top level).
pub fn header(id: &str) -> Value {
    json!({
        "type": "session",
        "version": 0,
        "id": id,
        "created_at": 1_700_000_000_000_u64,
        "cwd": "/work/project",
        "delegation_depth": 0
    })
}

/// A header with every optional field set (a forked subagent session).
pub fn full_header(id: &str) -> Value {
    json!({
        "type": "session",
        "version": 0,
        "id": id,
        "created_at": 1_700_000_000_123_u64,
        "cwd": "/home/someone/ünïcode dir",
        "parent_session": "parent-1",
        "seed_length": 16,
        "parent_call_id": "call_7",
        "origin": "subagent",
        "delegation_depth": 2
    })
}

/// A plain envelope.
pub fn event(seq: u64, kind: &str, data: Value) -> Value {
    json!({ "seq": seq, "time": 1_700_000_001_000_u64 + seq, "type": kind, "data": data })
}

/// A surface envelope appending to the projected history.
pub fn surface(seq: u64, kind: &str, data: Value) -> Value {
    let mut e = event(seq, kind, data);
    e["surface_op"] = json!("append");
    e
}

/// One closed turn of 8 events starting at `seq0`: start, step, user message, tool call and
/// result, assistant message, step end, `turn/end`.
pub fn turn(seq0: u64) -> Vec<Value> {
    vec![
        event(seq0, "turn/start", json!({ "turn": seq0 })),
        event(seq0 + 1, "step/start", json!({ "step": 0 })),
        surface(
            seq0 + 2,
            "user/message",
            json!({ "text": "list the files" }),
        ),
        event(
            seq0 + 3,
            "tool/call",
            json!({ "id": "c1", "name": "ls", "arguments": "{\"path\":\".\"}" }),
        ),
        surface(
            seq0 + 4,
            "tool/result",
            json!({ "id": "c1", "content": "a\nb\n" }),
        ),
        surface(
            seq0 + 5,
            "assistant/message",
            json!({ "text": "two files" }),
        ),
        event(seq0 + 6, "step/end", json!({})),
        event(seq0 + 7, "turn/end", json!({ "reason": "done" })),
    ]
}

/// An open turn of 2 events starting at `seq0` (no `turn/end`).
pub fn open_turn(seq0: u64) -> Vec<Value> {
    vec![
        event(seq0, "turn/start", json!({ "turn": seq0 })),
        surface(seq0 + 1, "user/message", json!({ "text": "and now?" })),
    ]
}

/// Calls `append`.
pub fn append(
    store: &dyn ContractStore,
    id: &str,
    header: Option<Value>,
    events: &[Value],
    expected_next_seq: u64,
) -> Result<Value, Failure> {
    let mut args = json!({
        "session_id": id,
        "events": events,
        "expected_next_seq": expected_next_seq
    });
    if let Some(h) = header {
        args["header"] = h;
    }
    store.call("append", args)
}

/// Calls `append` and asserts it succeeded with the right `next_seq`.
pub fn append_ok(
    store: &dyn ContractStore,
    id: &str,
    header: Option<Value>,
    events: &[Value],
    expected_next_seq: u64,
) {
    let answer = append(store, id, header, events, expected_next_seq)
        .unwrap_or_else(|f| panic!("append to {id} at {expected_next_seq} failed: {f:?}"));
    let next = expected_next_seq + events.len() as u64;
    assert_eq!(answer, json!({ "next_seq": next }), "append answer");
}

/// Calls `load`.
pub fn load(store: &dyn ContractStore, id: &str, repair: bool) -> Result<Value, Failure> {
    store.call("load", json!({ "session_id": id, "repair": repair }))
}

/// Calls `load` and asserts it succeeded.
pub fn load_ok(store: &dyn ContractStore, id: &str, repair: bool) -> Value {
    load(store, id, repair).unwrap_or_else(|f| panic!("load {id} failed: {f:?}"))
}

/// Asserts that `result` is an error with `code` and returns it.
pub fn expect_code(result: Result<Value, Failure>, code: &str, what: &str) -> Failure {
    match result {
        Ok(v) => panic!("{what}: expected {code}, got success {v}"),
        Err(f) => {
            assert_eq!(f.code, code, "{what}: wrong code ({})", f.message);
            assert!(!f.message.is_empty(), "{what}: empty message");
            f
        }
    }
}
