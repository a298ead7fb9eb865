//! B15 runtime invariants of the core vocabulary, checked before commit.
//!
//! [`Invariants`] is the small state machine of turn/step/tool-call balance. The log stages a
//! batch on a clone (`apply` each event in order) and only replaces its state after every event
//! of the batch passed, so a refused batch leaves no trace ("staged; the state only advances
//! after commit"). Errors are `SESSION_INVALID`, naming the rule and the seq.
//!
//! Rules (B15 unless marked K, keel's additions that make the tool-call contract of
//! ARCHITECTURE §7 a property of every valid log rather than of a well-behaved loop):
//! - `turn/start {turn}` only when no turn is open, numbered `next_turn` (turns count from 0);
//! - `turn/end {turn, reason}` names the open turn, with no step open;
//! - `step/start {turn, step}` inside the open turn, no step open, numbered `next_step` (steps
//!   count from 0 within each turn);
//! - `step/end {turn, step}` names the open step; K: every tool call declared in the step has
//!   its result (the loop writes a result for denied, skipped and aborted calls too, B9);
//! - `assistant/chunk`, `assistant/message`, `tool/call` and `tool/result` (append) name the
//!   open turn and step (both present, as integers);
//! - a tool call id is unique within its step — one `tool/call` each, never twice in the
//!   step's assistant messages — and may repeat in a later step or turn: servers that number
//!   calls per response answer `call_0` every time (issue 11 item 10). Pairing is therefore by
//!   (turn, step, id): the step's state is cleared at every `step/start`;
//! - `tool/result` (append) needs a prior `tool/call` with its `call_id` in the same step,
//!   unless it is a synthetic `TOOL_NOT_STARTED` result; K: it answers the next unanswered call
//!   of the step's assistant message (results are committed in model order, B9);
//! - K: while a call of the open step is unanswered, no other surface event is appended;
//! - a `tool/result` replacement must be inside a turn;
//! - `todo/write`, `request/header`, `request/context` must be inside a turn;
//! - `session/end-seed` and plugin types are unconstrained (their owners' concern).

use std::collections::HashSet;

use keel_plugin_api::services::session::{EventRecord, SurfaceOp};
use serde_json::Value;

use crate::error::{Result, SessionError};

/// The balance state of a log (see the module doc for the rules).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Invariants {
    next_turn: u64,
    open_turn: Option<u64>,
    next_step: u64,
    open_step: Option<u64>,
    /// Call ids declared by assistant messages of the open step, in model order.
    declared: Vec<String>,
    /// `declared[..answered]` have results.
    answered: usize,
    /// Call ids with a `tool/call` in the open step.
    called: HashSet<String>,
}

pub(crate) fn u64_field(data: &Value, key: &str) -> Option<u64> {
    data.get(key).and_then(Value::as_u64)
}

pub(crate) fn str_field<'a>(data: &'a Value, key: &str) -> Option<&'a str> {
    data.get(key).and_then(Value::as_str)
}

/// The tool-call ids of an `assistant/message` (`data.message.tool_calls[].id`), in order.
pub(crate) fn tool_call_ids(data: &Value) -> impl Iterator<Item = Option<&str>> {
    data.get("message")
        .and_then(|m| m.get("tool_calls"))
        .and_then(Value::as_array)
        .map(|a| a.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|c| c.get("id").and_then(Value::as_str))
}

/// Whether a `tool/result` is the synthetic "never started" result (B7).
pub(crate) fn is_not_started(data: &Value) -> bool {
    data.get("error")
        .and_then(|e| e.get("code"))
        .and_then(Value::as_str)
        == Some(crate::recovery::TOOL_NOT_STARTED)
}

impl Invariants {
    /// The state of an empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// The open turn, if any.
    pub fn open_turn(&self) -> Option<u64> {
        self.open_turn
    }

    /// The open step, if any.
    pub fn open_step(&self) -> Option<u64> {
        self.open_step
    }

    /// The number the next `turn/start` must carry.
    pub fn next_turn(&self) -> u64 {
        self.next_turn
    }

    /// The number the next `step/start` of the open turn must carry.
    pub fn next_step(&self) -> u64 {
        self.next_step
    }

    /// Call ids of the open step that have no result yet, in model order.
    pub fn pending_calls(&self) -> &[String] {
        self.declared.get(self.answered..).unwrap_or_default()
    }

    /// Checks `ev` against the rules and advances the state. On error the state may be partly
    /// advanced: stage on a clone.
    ///
    /// # Errors
    /// `SESSION_INVALID` naming the rule and the seq.
    pub fn apply(&mut self, ev: &EventRecord) -> Result<()> {
        let kind = ev.kind.as_str();
        let seq = ev.seq;
        let d = &ev.data;
        let fail = |rule: &str, msg: String| Err(SessionError::rule(seq, kind, rule, msg));
        let is_replace = matches!(ev.surface_op, Some(SurfaceOp::Replace { .. }));
        match kind {
            "turn/start" => {
                let Some(turn) = u64_field(d, "turn") else {
                    return fail("B15.data", "turn/start needs data.turn (integer)".into());
                };
                if let Some(open) = self.open_turn {
                    return fail("B15.turn-start", format!("turn {open} is still open"));
                }
                if turn != self.next_turn {
                    return fail(
                        "B15.turn-start",
                        format!("turn must be numbered {}, got {turn}", self.next_turn),
                    );
                }
                self.open_turn = Some(turn);
                self.next_turn = turn + 1;
                self.next_step = 0;
                self.clear_step();
            }
            "turn/end" => {
                let Some(turn) = u64_field(d, "turn") else {
                    return fail("B15.data", "turn/end needs data.turn (integer)".into());
                };
                if d.get("reason").is_none() {
                    return fail("B15.data", "turn/end needs data.reason".into());
                }
                if self.open_turn != Some(turn) {
                    return fail(
                        "B15.turn-end",
                        format!(
                            "names turn {turn} but the open turn is {:?}",
                            self.open_turn
                        ),
                    );
                }
                if let Some(step) = self.open_step {
                    return fail("B15.turn-end", format!("step {step} is still open"));
                }
                self.open_turn = None;
            }
            "step/start" => {
                let (Some(turn), Some(step)) = (u64_field(d, "turn"), u64_field(d, "step")) else {
                    return fail(
                        "B15.data",
                        "step/start needs data.turn and data.step".into(),
                    );
                };
                if self.open_turn != Some(turn) {
                    return fail(
                        "B15.step-start",
                        format!(
                            "names turn {turn} but the open turn is {:?}",
                            self.open_turn
                        ),
                    );
                }
                if let Some(open) = self.open_step {
                    return fail("B15.step-start", format!("step {open} is still open"));
                }
                if step != self.next_step {
                    return fail(
                        "B15.step-start",
                        format!("step must be numbered {}, got {step}", self.next_step),
                    );
                }
                self.open_step = Some(step);
                self.next_step = step + 1;
                self.clear_step();
            }
            "step/end" => {
                self.names_open_step(ev, "B15.step-end")?;
                if let Some(call) = self.pending_calls().first() {
                    return fail(
                        "K.step-end-pending",
                        format!("tool call '{call}' of this step has no result"),
                    );
                }
                self.open_step = None;
                self.clear_step();
            }
            "assistant/chunk" => self.names_open_step(ev, "B15.open-step")?,
            "assistant/message" if !is_replace => {
                self.names_open_step(ev, "B15.open-step")?;
                self.no_pending(ev)?;
                for id in tool_call_ids(d) {
                    let Some(id) = id.filter(|s| !s.is_empty()) else {
                        return fail(
                            "B15.data",
                            "every tool call needs a non-empty string id".into(),
                        );
                    };
                    if self.declared.iter().any(|x| x == id) {
                        return fail(
                            "B15.data",
                            format!("tool call id '{id}' repeats in this step"),
                        );
                    }
                    self.declared.push(id.to_owned());
                }
            }
            "tool/call" => {
                self.names_open_step(ev, "B15.open-step")?;
                let Some(call_id) = str_field(d, "call_id") else {
                    return fail("B15.data", "tool/call needs data.call_id (string)".into());
                };
                if !d.get("arguments").is_some_and(Value::is_string) {
                    return fail(
                        "B15.data",
                        "tool/call needs data.arguments as the raw argument string".into(),
                    );
                }
                if !self.called.insert(call_id.to_owned()) {
                    return fail(
                        "B15.data",
                        format!("tool/call '{call_id}' is logged twice in this step"),
                    );
                }
            }
            "tool/result" if is_replace && self.open_turn.is_none() => {
                return fail("B15.replace-in-turn", "no turn is open".into());
            }
            "tool/result" if is_replace => {}
            "tool/result" => {
                self.names_open_step(ev, "B15.open-step")?;
                let Some(call_id) = str_field(d, "call_id") else {
                    return fail("B15.data", "tool/result needs data.call_id (string)".into());
                };
                if !self.called.contains(call_id) && !is_not_started(d) {
                    return fail(
                        "B15.result-after-call",
                        format!("no tool/call '{call_id}' in this step"),
                    );
                }
                match self.pending_calls().first() {
                    Some(next) if next == call_id => self.answered += 1,
                    Some(next) => {
                        return fail(
                            "K.result-order",
                            format!(
                                "expected the result of '{next}' (model order), got '{call_id}'"
                            ),
                        );
                    }
                    None => {
                        return fail(
                            "K.result-order",
                            format!(
                                "'{call_id}' is not an unanswered call of this step's assistant message"
                            ),
                        );
                    }
                }
            }
            "user/message" | "assistant/message" if !is_replace => self.no_pending(ev)?,
            "todo/write" | "request/header" | "request/context" if self.open_turn.is_none() => {
                return fail("B15.in-turn", "must be inside a turn".into());
            }
            _ => {}
        }
        Ok(())
    }

    fn clear_step(&mut self) {
        self.declared.clear();
        self.answered = 0;
        self.called.clear();
    }

    fn names_open_step(&self, ev: &EventRecord, rule: &str) -> Result<()> {
        let turn = u64_field(&ev.data, "turn");
        let step = u64_field(&ev.data, "step");
        if turn.is_none() || step.is_none() {
            return Err(SessionError::rule(
                ev.seq,
                &ev.kind,
                "B15.data",
                "needs data.turn and data.step (integers)",
            ));
        }
        if self.open_turn.is_none() || turn != self.open_turn || step != self.open_step {
            return Err(SessionError::rule(
                ev.seq,
                &ev.kind,
                rule,
                format!(
                    "names turn {turn:?} step {step:?} but the open turn/step is {:?}/{:?}",
                    self.open_turn, self.open_step
                ),
            ));
        }
        Ok(())
    }

    fn no_pending(&self, ev: &EventRecord) -> Result<()> {
        match self.pending_calls().first() {
            Some(call) => Err(SessionError::rule(
                ev.seq,
                &ev.kind,
                "K.calls-pending",
                format!(
                    "tool call '{call}' is unanswered; its results come first (tool-call contract)"
                ),
            )),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
#[path = "invariants_tests.rs"]
mod tests;
