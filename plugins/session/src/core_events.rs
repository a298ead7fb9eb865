//! Constructors for the core durable events: the data shapes every keel component writes and
//! reads (the contract the agent loop builds on). Each returns a [`NewEvent`] for
//! `SessionLog::append`.
//!
//! | type | surface | `data` |
//! |---|---|---|
//! | `turn/start` | no | `{turn, resumes?}` (turns count from 0; `resumes` names the suspended turn a resumed task continues, issue 16) |
//! | `turn/end` | no | `{turn, reason: {kind: "completed"\|"aborted"\|"blocked"\|"error"\|"max-tokens"\|"max-turns"\|"max-steps"\|"suspended"\|"interrupted", …}}` (only crash repair writes `interrupted`; `suspended` carries `by`, the preempting message) |
//! | `step/start`, `step/end` | no | `{turn, step}` (steps count from 0 within a turn) |
//! | `user/message` | yes | `{id, content}` (`content`: a string or an array of content blocks) |
//! | `assistant/chunk` | no | `{turn, step, chunk}` (replay/UI only; never projected) |
//! | `assistant/message` | yes | `{turn, step, message: {content, tool_calls: [{id, name, arguments}]}, usage?}`; empty (no content, no calls) projects to nothing |
//! | `tool/call` | no | `{turn, step, call_id, name, arguments}` — `arguments` is the raw string the model produced |
//! | `tool/result` | yes | `{turn, step, call_id, content, is_error?, error?: {code}, id?}` |
//! | `todo/write` | no | `{todos: [{content, status}]}` (whole list; last write wins) |
//! | `request/header` | no | `{header, reason}` |
//! | `request/context` | no | `{provider, model, context_window?}` |
//! | `session/end-seed` | no | `{}` (written by fork straight after the seed) |
//! | `session/profile` | no | `{name, digest}` (ignorable; written by `create`: the profile the session was created under) |
//!
//! Surface events carry `surface_op` (`"append"`, or `{op:"replace",start,end}` listing every
//! shadowed seq in `source_event_seqs`); nothing else does.

use keel_plugin_api::services::driver::ProfileIdentity;
use keel_plugin_api::services::session::PROFILE_EVENT;
use serde_json::{Value, json};

use crate::validate::NewEvent;

/// `turn/start {turn}`.
pub fn turn_start(turn: u64) -> NewEvent {
    NewEvent::new("turn/start", json!({ "turn": turn }))
}

/// `turn/end {turn, reason: {kind}}`.
pub fn turn_end(turn: u64, reason_kind: &str) -> NewEvent {
    NewEvent::new(
        "turn/end",
        json!({ "turn": turn, "reason": { "kind": reason_kind } }),
    )
}

/// `step/start {turn, step}`.
pub fn step_start(turn: u64, step: u64) -> NewEvent {
    NewEvent::new("step/start", json!({ "turn": turn, "step": step }))
}

/// `step/end {turn, step}`.
pub fn step_end(turn: u64, step: u64) -> NewEvent {
    NewEvent::new("step/end", json!({ "turn": turn, "step": step }))
}

/// `user/message {id, content}`, appended.
pub fn user_message(id: &str, content: impl Into<Value>) -> NewEvent {
    NewEvent::surface(
        "user/message",
        json!({ "id": id, "content": content.into() }),
    )
}

/// `assistant/chunk {turn, step, chunk}`.
pub fn assistant_chunk(turn: u64, step: u64, chunk: Value) -> NewEvent {
    NewEvent::new(
        "assistant/chunk",
        json!({ "turn": turn, "step": step, "chunk": chunk }),
    )
}

/// One tool call of an assistant message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The model's call id.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Raw argument string as the model produced it.
    pub arguments: String,
}

/// `assistant/message {turn, step, message: {content, tool_calls}}`, appended.
pub fn assistant_message(
    turn: u64,
    step: u64,
    content: impl Into<Value>,
    calls: &[ToolCall],
) -> NewEvent {
    let calls: Vec<Value> = calls
        .iter()
        .map(|c| json!({ "id": c.id, "name": c.name, "arguments": c.arguments }))
        .collect();
    NewEvent::surface(
        "assistant/message",
        json!({
            "turn": turn,
            "step": step,
            "message": { "content": content.into(), "tool_calls": calls },
        }),
    )
}

/// `tool/call {turn, step, call_id, name, arguments}`.
pub fn tool_call(turn: u64, step: u64, call: &ToolCall) -> NewEvent {
    NewEvent::new(
        "tool/call",
        json!({
            "turn": turn, "step": step, "call_id": call.id, "name": call.name,
            "arguments": call.arguments,
        }),
    )
}

/// `tool/result {turn, step, call_id, content}`, appended.
pub fn tool_result(turn: u64, step: u64, call_id: &str, content: impl Into<Value>) -> NewEvent {
    NewEvent::surface(
        "tool/result",
        json!({ "turn": turn, "step": step, "call_id": call_id, "content": content.into() }),
    )
}

/// `tool/result` with `is_error: true` and `error: {code}`, appended.
pub fn tool_error(
    turn: u64,
    step: u64,
    call_id: &str,
    code: &str,
    content: impl Into<Value>,
) -> NewEvent {
    NewEvent::surface(
        "tool/result",
        json!({
            "turn": turn, "step": step, "call_id": call_id, "content": content.into(),
            "is_error": true, "error": { "code": code },
        }),
    )
}

/// `todo/write {todos}`.
pub fn todo_write(todos: Value) -> NewEvent {
    NewEvent::new("todo/write", json!({ "todos": todos }))
}

/// `session/end-seed {}`.
pub fn end_seed() -> NewEvent {
    NewEvent::new("session/end-seed", json!({}))
}

/// `session/profile {name, digest, overrides?, patches?}`, ignorable (a reader that predates
/// it skips it); the run's recorded `-c` and `--patch` layers only when it had some (issue 23
/// item 3).
pub fn session_profile(profile: &ProfileIdentity) -> NewEvent {
    NewEvent::new(
        PROFILE_EVENT,
        serde_json::to_value(profile)
            .unwrap_or_else(|_| json!({ "name": profile.name, "digest": profile.digest })),
    )
    .ignorable()
}
