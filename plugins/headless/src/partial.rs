//! `--include-partial-messages` (issue 26 item 1): the model's text and reasoning as it
//! arrives, printed as Claude Code prints it — `{"type":"stream_event","event":{…},
//! "session_id","parent_tool_use_id","uuid"}` lines whose `event` is the Anthropic Messages
//! stream event:
//!
//! - the first piece of a request opens a message: `message_start` (id, model, empty content);
//! - a piece of a new block: `content_block_stop` for the open one, then `content_block_start`
//!   (`text` or `thinking`), then one `content_block_delta` per piece (`text_delta` /
//!   `thinking_delta`);
//! - the step's `assistant/message` closes it: `content_block_stop`, `message_delta`
//!   (`stop_reason`, `usage.output_tokens`) and `message_stop`, printed before the `assistant`
//!   line; a step that ends without one (the stream failed; a retry streams again with the
//!   next attempt) closes it with `content_block_stop` and `message_stop` at its `step/end`, or
//!   when the next attempt's first piece arrives.
//!
//! Pieces come from `agent/delta`, never from the log: they are printed as they arrive, not
//! held for durability, and a crash loses the ones not yet printed. Tool calls are not
//! streamed (their `assistant` line carries them whole). Pure state over strings; the output
//! thread ([`crate::feed`]) owns one [`Partial`] per run.

use std::collections::HashMap;

use serde_json::{Value, json};

/// One piece, as the `agent/delta` listener hands it to the output thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    /// The session whose step streams.
    pub session_id: String,
    /// Its turn, step and attempt: a new triple is a new message.
    pub turn: u64,
    /// Step.
    pub step: u64,
    /// Attempt.
    pub attempt: u32,
    /// The content block's index.
    pub index: u32,
    /// Reasoning (`thinking`) rather than text.
    pub reasoning: bool,
    /// The text.
    pub text: String,
}

/// Where the lines hang: the run's session and, for a child's pieces, the parent's call.
#[derive(Debug, Clone, Copy)]
pub struct Origin<'a> {
    /// The run's (top) session: every line names it, as Claude Code's do.
    pub session_id: &'a str,
    /// The `agent` call a child runs under; `None` for the run's own session.
    pub parent_tool_use_id: Option<&'a str>,
    /// The model name for `message_start`.
    pub model: &'a str,
}

/// An open message of one session.
#[derive(Debug)]
struct Open {
    at: (u64, u64, u32),
    /// The open block: index and whether it is reasoning.
    block: Option<(u32, bool)>,
}

/// The stream events of one run.
#[derive(Debug, Default)]
pub struct Partial {
    open: HashMap<String, Open>,
    lines: u64,
}

impl Partial {
    /// The lines for one piece.
    pub fn piece(&mut self, p: &Piece, origin: Origin<'_>) -> Vec<String> {
        let at = (p.turn, p.step, p.attempt);
        let mut events = Vec::new();
        if self.open.get(&p.session_id).is_some_and(|o| o.at != at) {
            events.extend(self.close(&p.session_id, None));
        }
        let open = self.open.entry(p.session_id.clone()).or_insert_with(|| {
            events.push(json!({"type": "message_start", "message": {
                "id": format!("msg_{}_{}_{}_{}", p.session_id, p.turn, p.step, p.attempt),
                "type": "message", "role": "assistant", "model": origin.model,
                "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": 0, "output_tokens": 0}}}));
            Open { at, block: None }
        });
        if open.block != Some((p.index, p.reasoning)) {
            if let Some((index, _)) = open.block {
                events.push(json!({"type": "content_block_stop", "index": index}));
            }
            let block = if p.reasoning {
                json!({"type": "thinking", "thinking": "", "signature": ""})
            } else {
                json!({"type": "text", "text": ""})
            };
            events.push(json!({"type": "content_block_start", "index": p.index,
                               "content_block": block}));
            open.block = Some((p.index, p.reasoning));
        }
        let delta = if p.reasoning {
            json!({"type": "thinking_delta", "thinking": p.text})
        } else {
            json!({"type": "text_delta", "text": p.text})
        };
        events.push(json!({"type": "content_block_delta", "index": p.index, "delta": delta}));
        self.wrap(events, origin)
    }

    /// The lines a durable session event ends the session's open message with (before the
    /// event's own lines): `assistant/message` with its stop reason and usage, `step/end`
    /// without. None when nothing is open.
    pub fn event(&mut self, session_id: &str, record: &str, origin: Origin<'_>) -> Vec<String> {
        if !self.open.contains_key(session_id) {
            return Vec::new();
        }
        let Ok(ev) = serde_json::from_str::<Value>(record) else {
            return Vec::new();
        };
        let events = match ev["type"].as_str() {
            Some("assistant/message") => self.close(session_id, Some(&ev["data"])),
            Some("step/end" | "turn/end") => self.close(session_id, None),
            _ => return Vec::new(),
        };
        self.wrap(events, origin)
    }

    /// Closes the session's open message: the open block, then (for an answer) its
    /// `message_delta`, then `message_stop`.
    fn close(&mut self, session_id: &str, answer: Option<&Value>) -> Vec<Value> {
        let Some(open) = self.open.remove(session_id) else {
            return Vec::new();
        };
        let mut events = Vec::new();
        if let Some((index, _)) = open.block {
            events.push(json!({"type": "content_block_stop", "index": index}));
        }
        if let Some(data) = answer {
            let calls = data["message"]["tool_calls"]
                .as_array()
                .is_some_and(|c| !c.is_empty());
            let output = data["usage"]["output_tokens"].as_u64().unwrap_or(0);
            events.push(json!({"type": "message_delta",
                "delta": {"stop_reason": if calls { "tool_use" } else { "end_turn" },
                          "stop_sequence": null},
                "usage": {"output_tokens": output}}));
        }
        events.push(json!({"type": "message_stop"}));
        events
    }

    fn wrap(&mut self, events: Vec<Value>, origin: Origin<'_>) -> Vec<String> {
        events
            .into_iter()
            .map(|event| {
                self.lines += 1;
                json!({
                    "type": "stream_event",
                    "event": event,
                    "session_id": origin.session_id,
                    "parent_tool_use_id": origin.parent_tool_use_id,
                    "uuid": uuid_like(origin.session_id, self.lines),
                })
                .to_string()
            })
            .collect()
    }
}

/// A UUID-shaped id, unique within the run (the session id's hash, then the line's number):
/// Claude Code's consumers read `uuid` as an opaque string.
fn uuid_like(session_id: &str, n: u64) -> String {
    // FNV-1a: stable, no dependency, enough to tell runs apart.
    let h = session_id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        h >> 32,
        (h >> 16) & 0xffff,
        h & 0xfff,
        (n >> 48) & 0xfff,
        n & 0xffff_ffff_ffff
    )
}

#[cfg(test)]
#[path = "partial_tests.rs"]
mod tests;
