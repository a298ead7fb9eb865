//! The tool-call contract (ARCHITECTURE §7, from [000]) as a checker over projected messages:
//! every assistant message with tool calls is followed immediately by exactly one tool message
//! per call id, in call order; nothing stands between; no tool message stands anywhere else.
//! The log's rules (invariants K.*, projection replace rules) make it hold for every valid log;
//! this checker is what the property tests and embedders assert with.

use serde_json::Value;

/// Whether the history may end with a call group still waiting for results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tail {
    /// Every group must be complete (what a model request sees).
    Closed,
    /// The last group may lack its last results (a step in flight).
    InFlight,
}

/// Checks the tool-call contract (ARCHITECTURE §7) over projected messages.
///
/// # Errors
/// A one-line description of the first violation.
pub fn check_contract(messages: &[Value], tail: Tail) -> std::result::Result<(), String> {
    let role = |m: &Value| m.get("role").and_then(Value::as_str).map(str::to_owned);
    let mut i = 0;
    while i < messages.len() {
        let m = &messages[i];
        match role(m).as_deref() {
            Some("tool") => {
                return Err(format!(
                    "message {i}: orphan tool result (not right after its call)"
                ));
            }
            Some("assistant") => {
                let calls = m
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .map_or(&[][..], Vec::as_slice);
                for (k, c) in calls.iter().enumerate() {
                    let id = c.get("id").and_then(Value::as_str);
                    match messages.get(i + 1 + k) {
                        None if tail == Tail::InFlight => return Ok(()),
                        None => {
                            return Err(format!(
                                "message {i}: dangling call {id:?} (history ends before its result)"
                            ));
                        }
                        Some(r) => {
                            let rid = r.get("tool_call_id").and_then(Value::as_str);
                            if role(r).as_deref() != Some("tool") || rid != id {
                                return Err(format!(
                                    "message {}: expected the result of call {id:?}, found {}",
                                    i + 1 + k,
                                    r
                                ));
                            }
                        }
                    }
                }
                i += calls.len();
            }
            _ => {}
        }
        i += 1;
    }
    Ok(())
}
