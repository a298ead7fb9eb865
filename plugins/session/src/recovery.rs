//! Crash recovery closers (SES-06, B7): a pure function from a crashed log to the events that
//! close its open tail.
//!
//! For an open last turn, in order: one `tool/result` per call of the open step that has no
//! result (declared by an `assistant/message` of the step; `TOOL_OUTCOME_UNKNOWN` when its
//! `tool/call` was logged — the side effect may have happened — and `TOOL_NOT_STARTED` when it
//! was not), then `step/end` if a step is open, then `turn/end {reason: {kind:"interrupted"}}`.
//! The closers continue the seq and reuse the last event's time, so recovering the same log
//! twice gives the same bytes (never an invented future time).
//!
//! Cost is O(tail): the scan walks back from the end to the last turn boundary and forward
//! from there; a balanced log is recognised at its last `turn/end`.
//!
//! Only turn, step and tool boundaries are closed; plugin brackets (`compaction/*`) are their
//! owners' concern. Whether to commit the closers is the caller's decision: a live session is
//! never repaired, `inspect` shows them without committing.

use keel_plugin_api::services::session::{AppendTag, EventRecord, SessionCode, SurfaceOp};
use serde_json::{Value, json};

use crate::invariants::{str_field, tool_call_ids, u64_field};

/// Error code of a closer for a call whose `tool/call` was never logged.
pub const TOOL_NOT_STARTED: &str = SessionCode::ToolNotStarted.code();
/// Error code of a closer for a call that was logged as started but has no result.
pub const TOOL_OUTCOME_UNKNOWN: &str = SessionCode::ToolOutcomeUnknown.code();

/// What the model reads for a call that started but never reported back. Like every error
/// result (`ToolResult::error`), it opens with `Error [CODE]:` so the code reaches the model.
pub fn outcome_unknown_text(name: &str) -> String {
    format!(
        "Error [TOOL_OUTCOME_UNKNOWN]: The session stopped while the `{name}` call was running, so nobody knows whether it \
         took effect: it may have completed, partly completed, or not run at all. Repeat it only \
         if it is read-only or idempotent. Otherwise first check the external state it would \
         have changed, or ask the user, before doing anything that could apply it twice."
    )
}

/// What the model reads for a call that never started.
pub fn not_started_text(name: &str) -> String {
    format!(
        "Error [TOOL_NOT_STARTED]: The session stopped before the `{name}` call was started, so it had no effect. If it \
         is still needed, it is safe to issue it again."
    )
}

/// The index of the last `turn/start` or `turn/end` at or before `end` (exclusive bound
/// `..end`), scanning backwards: the open turn's start, or `None` when every turn is closed.
pub fn open_turn_start(events: &[EventRecord], end: usize) -> Option<usize> {
    events
        .get(..end)?
        .iter()
        .rposition(|e| e.kind == "turn/start" || e.kind == "turn/end")
        .filter(|&i| events[i].kind == "turn/start")
}

struct Pending {
    call_id: String,
    name: String,
    step: Option<u64>,
    call_seq: Option<u64>,
}

/// The closers for `events` (empty when the log is balanced or empty).
pub fn closers(events: &[EventRecord]) -> Vec<EventRecord> {
    let Some(start) = open_turn_start(events, events.len()) else {
        return Vec::new();
    };
    let Some(last) = events.last() else {
        return Vec::new();
    };
    let turn = u64_field(&events[start].data, "turn");
    let mut open_step: Option<u64> = None;
    let mut pending: Vec<Pending> = Vec::new();
    for ev in &events[start..] {
        let d = &ev.data;
        let appended = !matches!(ev.surface_op, Some(SurfaceOp::Replace { .. }));
        match ev.kind.as_str() {
            // The scan starts at the open turn's own `turn/start`: no other follows it.
            "step/start" => open_step = u64_field(d, "step"),
            "step/end" => {
                open_step = None;
                pending.clear();
            }
            "assistant/message" if appended => {
                let calls = d
                    .get("message")
                    .and_then(|m| m.get("tool_calls"))
                    .and_then(Value::as_array);
                for (i, id) in tool_call_ids(d).enumerate() {
                    let Some(id) = id else { continue };
                    let name = calls
                        .and_then(|c| c.get(i))
                        .and_then(|c| c.get("name"))
                        .and_then(Value::as_str)
                        .unwrap_or("tool");
                    pending.push(Pending {
                        call_id: id.to_owned(),
                        name: name.to_owned(),
                        step: u64_field(d, "step"),
                        call_seq: None,
                    });
                }
            }
            "tool/call" => {
                if let Some(id) = str_field(d, "call_id")
                    && let Some(p) = pending.iter_mut().find(|p| p.call_id == id)
                {
                    p.call_seq = Some(ev.seq);
                }
            }
            "tool/result" if appended => {
                if let Some(id) = str_field(d, "call_id") {
                    pending.retain(|p| p.call_id != id);
                }
            }
            _ => {}
        }
    }
    let time = last.time;
    let mut seq = last.seq + 1;
    let mut out = Vec::with_capacity(pending.len() + 2);
    for p in pending {
        let (code, text) = match p.call_seq {
            Some(_) => (TOOL_OUTCOME_UNKNOWN, outcome_unknown_text(&p.name)),
            None => (TOOL_NOT_STARTED, not_started_text(&p.name)),
        };
        out.push(EventRecord {
            seq,
            time,
            kind: "tool/result".into(),
            data: json!({
                "id": format!("recovered-{}-{seq}", p.call_id),
                "turn": turn,
                "step": p.step.or(open_step),
                "call_id": p.call_id,
                "content": text,
                "is_error": true,
                "error": { "code": code },
            }),
            ignorable: false,
            surface_op: Some(SurfaceOp::Append(AppendTag::Append)),
            source_event_seqs: p.call_seq.map(|s| vec![s]),
        });
        seq += 1;
    }
    let plain = |seq, kind: &str, data| EventRecord {
        seq,
        time,
        kind: kind.into(),
        data,
        ignorable: false,
        surface_op: None,
        source_event_seqs: None,
    };
    if let Some(step) = open_step {
        out.push(plain(
            seq,
            "step/end",
            json!({ "turn": turn, "step": step }),
        ));
        seq += 1;
    }
    out.push(plain(
        seq,
        "turn/end",
        json!({ "turn": turn, "reason": { "kind": "interrupted" } }),
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::invariants::Invariants;
    use crate::projection::{Tail, check_contract, derive_messages};
    use crate::test_support::*;
    use keel_plugin_api::services::session::ReplaceTag;

    fn kinds(c: &[EventRecord]) -> Vec<&str> {
        c.iter().map(|e| e.kind.as_str()).collect()
    }

    fn code(e: &EventRecord) -> &str {
        e.data["error"]["code"].as_str().unwrap()
    }

    /// The closed log passes the invariants and the projection keeps the contract.
    fn assert_closes(mut log: Vec<EventRecord>) -> Vec<EventRecord> {
        let c = closers(&log);
        log.extend(c.clone());
        let mut inv = Invariants::new();
        for e in &log {
            inv.apply(e).unwrap();
        }
        assert_eq!(inv.open_turn(), None);
        check_contract(&derive_messages(&log).unwrap(), Tail::Closed).unwrap();
        c
    }

    #[test]
    fn b7_balanced_and_empty_logs_get_no_closers() {
        assert!(closers(&[]).is_empty());
        assert!(closers(&[user(0, "x")]).is_empty());
        let log = [
            turn_start(0, 0),
            step_start(1, 0, 0),
            step_end(2, 0, 0),
            turn_end(3, 0),
        ];
        assert!(closers(&log).is_empty());
    }

    #[test]
    fn b7_open_turn_without_step_gets_only_turn_end() {
        let c = assert_closes(vec![user(0, "x"), turn_start(1, 0)]);
        assert_eq!(kinds(&c), ["turn/end"]);
        assert_eq!(c[0].data["reason"]["kind"], "interrupted");
        assert_eq!((c[0].seq, c[0].time), (2, 1001));
    }

    #[test]
    fn b7_open_step_gets_step_end_then_turn_end() {
        let c = assert_closes(vec![turn_start(0, 0), step_start(1, 0, 0), chunk(2, 0, 0)]);
        assert_eq!(kinds(&c), ["step/end", "turn/end"]);
        assert_eq!(c[0].data, json!({"turn":0,"step":0}));
    }

    #[test]
    fn b7_ses06_call_without_tool_call_is_not_started_with_call_is_outcome_unknown() {
        let c = assert_closes(vec![
            turn_start(0, 0),
            step_start(1, 0, 0),
            assistant(2, 0, 0, &["a", "b"]),
            call(3, 0, 0, "a"),
        ]);
        assert_eq!(
            kinds(&c),
            ["tool/result", "tool/result", "step/end", "turn/end"]
        );
        assert_eq!(code(&c[0]), TOOL_OUTCOME_UNKNOWN);
        assert_eq!(c[0].source_event_seqs, Some(vec![3]));
        assert_eq!(code(&c[1]), TOOL_NOT_STARTED);
        assert_eq!(c[1].source_event_seqs, None);
        assert!(matches!(c[0].surface_op, Some(SurfaceOp::Append(_))));
        let unknown = c[0].data["content"].as_str().unwrap();
        assert!(unknown.contains("read-only or idempotent") && unknown.contains("ask the user"));
        assert!(
            c[1].data["content"]
                .as_str()
                .unwrap()
                .contains("safe to issue it again")
        );
    }

    #[test]
    fn b7_no_closer_for_answered_call_or_closed_step() {
        let c = assert_closes(vec![
            turn_start(0, 0),
            step_start(1, 0, 0),
            assistant(2, 0, 0, &["a"]),
            call(3, 0, 0, "a"),
            result(4, 0, 0, "a"),
            step_end(5, 0, 0),
            step_start(6, 0, 1),
            assistant(7, 0, 1, &["b", "c"]),
            call(8, 0, 1, "b"),
            result(9, 0, 1, "b"),
        ]);
        assert_eq!(kinds(&c), ["tool/result", "step/end", "turn/end"]);
        assert_eq!(c[0].data["call_id"], "c");
        assert_eq!(c[0].data["step"], 1);
        // A step that closed with an unanswered call (tolerated on read) gets no closer.
        let log = vec![
            turn_start(0, 0),
            step_start(1, 0, 0),
            assistant(2, 0, 0, &["a"]),
            step_end(3, 0, 0),
        ];
        assert_eq!(kinds(&closers(&log)), ["turn/end"]);
    }

    #[test]
    fn b7_only_the_still_open_turn_is_closed() {
        let c = assert_closes(vec![
            turn_start(0, 0),
            step_start(1, 0, 0),
            assistant(2, 0, 0, &["a"]),
            call(3, 0, 0, "a"),
            result(4, 0, 0, "a"),
            step_end(5, 0, 0),
            turn_end(6, 0),
            turn_start(7, 1),
        ]);
        assert_eq!(kinds(&c), ["turn/end"]);
        assert_eq!(c[0].data["turn"], 1);
    }

    #[test]
    fn b7_several_calls_closed_in_log_order() {
        let c = assert_closes(vec![
            turn_start(0, 0),
            step_start(1, 0, 0),
            assistant(2, 0, 0, &["x", "y", "z"]),
        ]);
        let ids: Vec<_> = c[..3]
            .iter()
            .map(|e| e.data["call_id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["x", "y", "z"]);
        let seqs: Vec<_> = c.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [3, 4, 5, 6, 7]);
        assert!(c.iter().all(|e| e.time == 1002));
    }

    #[test]
    fn b7_tool_call_without_assistant_entry_is_tolerated() {
        let log = vec![
            turn_start(0, 0),
            step_start(1, 0, 0),
            call(2, 0, 0, "ghost"),
        ];
        assert_eq!(kinds(&assert_closes(log)), ["step/end", "turn/end"]);
    }

    #[test]
    fn b7_recovery_is_deterministic() {
        let log = vec![
            turn_start(0, 0),
            step_start(1, 0, 0),
            assistant(2, 0, 0, &["a"]),
        ];
        assert_eq!(closers(&log), closers(&log));
    }

    // A replacement (`surface_op: replace`, e.g. a compaction) is not history being made: its
    // tool calls are not pending, and a replaced result does not answer a call (mutation-tested).
    #[test]
    fn b7_replacement_events_neither_open_nor_answer_calls() {
        let replace = |mut e: EventRecord, start: u64, end: u64| {
            e.surface_op = Some(SurfaceOp::Replace {
                op: ReplaceTag::Replace,
                start,
                end,
            });
            e
        };
        let c = closers(&[
            turn_start(0, 0),
            step_start(1, 0, 0),
            assistant(2, 0, 0, &["a", "b"]),
            replace(assistant(3, 0, 0, &["z"]), 2, 2),
            replace(result(4, 0, 0, "b"), 2, 2),
        ]);
        let answered: Vec<&str> = c
            .iter()
            .filter_map(|e| e.data["call_id"].as_str())
            .collect();
        assert_eq!(answered, ["a", "b"]);
    }
}
