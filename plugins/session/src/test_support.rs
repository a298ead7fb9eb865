//! Record builders for unit tests: core events at an explicit seq, bypassing the log.

use keel_plugin_api::services::session::{EventRecord, ReplaceTag, SurfaceOp};
use serde_json::json;

use crate::core_events::{self as ce, ToolCall};
use crate::validate::NewEvent;

pub fn rec(seq: u64, ev: NewEvent) -> EventRecord {
    EventRecord {
        seq,
        time: 1000 + seq,
        kind: ev.kind,
        data: ev.data,
        ignorable: ev.ignorable,
        surface_op: ev.surface_op,
        source_event_seqs: ev.source_event_seqs,
    }
}

pub fn tc(id: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: "echo".into(),
        arguments: format!("{{\"id\":\"{id}\"}}"),
    }
}

pub fn turn_start(seq: u64, turn: u64) -> EventRecord {
    rec(seq, ce::turn_start(turn))
}
pub fn turn_end(seq: u64, turn: u64) -> EventRecord {
    rec(seq, ce::turn_end(turn, "completed"))
}
pub fn step_start(seq: u64, turn: u64, step: u64) -> EventRecord {
    rec(seq, ce::step_start(turn, step))
}
pub fn step_end(seq: u64, turn: u64, step: u64) -> EventRecord {
    rec(seq, ce::step_end(turn, step))
}
pub fn chunk(seq: u64, turn: u64, step: u64) -> EventRecord {
    rec(seq, ce::assistant_chunk(turn, step, json!({"text": "…"})))
}
pub fn assistant(seq: u64, turn: u64, step: u64, calls: &[&str]) -> EventRecord {
    let calls: Vec<ToolCall> = calls.iter().map(|c| tc(c)).collect();
    rec(seq, ce::assistant_message(turn, step, "thinking", &calls))
}
pub fn call(seq: u64, turn: u64, step: u64, id: &str) -> EventRecord {
    rec(seq, ce::tool_call(turn, step, &tc(id)))
}
pub fn result(seq: u64, turn: u64, step: u64, id: &str) -> EventRecord {
    rec(
        seq,
        ce::tool_result(turn, step, id, format!("result of {id}")),
    )
}
pub fn not_started_result(seq: u64, turn: u64, step: u64, id: &str) -> EventRecord {
    rec(
        seq,
        ce::tool_error(turn, step, id, "TOOL_NOT_STARTED", "not started"),
    )
}
pub fn user(seq: u64, text: &str) -> EventRecord {
    rec(seq, ce::user_message(&format!("u{seq}"), text))
}
pub fn todo(seq: u64) -> EventRecord {
    rec(seq, ce::todo_write(json!([])))
}
pub fn replace_op(start: u64, end: u64) -> SurfaceOp {
    SurfaceOp::Replace {
        op: ReplaceTag::Replace,
        start,
        end,
    }
}
