//! `--include-partial-messages` (issue 26 item 1): the model's text and reasoning as it
//! arrives, printed as Claude Code prints it — `{"type":"stream_event","event":{…},
//! "session_id","parent_tool_use_id","uuid"}` lines whose `event` is the Anthropic Messages
//! stream event:
//!
//! - the first piece of a request opens a message: `message_start` (id, model, empty content);
//! - a piece of a new block: `content_block_stop` for the open one, then `content_block_start`
//!   (`text` or `thinking`), then a `content_block_delta` per piece (`text_delta` /
//!   `thinking_delta`) up to its last whitespace: the last word waits for the next piece or
//!   the block's end (at most [`MAX_HELD`] bytes), so a word split across two pieces — a
//!   secret the model repeats — meets the kernel's output redactions (SEC-03) whole;
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

/// The most of a block's text held back for the next piece (see [`split_held`]).
pub const MAX_HELD: usize = 256;

/// An open message of one session.
#[derive(Debug)]
struct Open {
    at: (u64, u64, u32),
    /// The open block: index and whether it is reasoning.
    block: Option<(u32, bool)>,
    /// The open block's last word, not printed yet.
    held: String,
}

fn delta_event(index: u32, reasoning: bool, text: &str) -> Value {
    let delta = if reasoning {
        json!({"type": "thinking_delta", "thinking": text})
    } else {
        json!({"type": "text_delta", "text": text})
    };
    json!({"type": "content_block_delta", "index": index, "delta": delta})
}

/// `text` cut after its last whitespace: what to print now, and the last word, held for the
/// next piece — so a word (a secret the model repeats, split across two pieces) reaches the
/// kernel's output redactions (SEC-03) in one line. A last word over [`MAX_HELD`] bytes is
/// printed at once.
fn split_held(mut text: String) -> (String, String) {
    let cut = text
        .char_indices()
        .rev()
        .find(|(_, c)| c.is_whitespace())
        .map_or(0, |(i, c)| i + c.len_utf8());
    if text.len() - cut > MAX_HELD {
        return (text, String::new());
    }
    let held = text.split_off(cut);
    (text, held)
}

/// The open block's held word as its last delta, then its `content_block_stop`.
fn stop_block(open: &mut Open, events: &mut Vec<Value>) {
    if let Some((index, reasoning)) = open.block {
        let held = std::mem::take(&mut open.held);
        if !held.is_empty() {
            events.push(delta_event(index, reasoning, &held));
        }
        events.push(json!({"type": "content_block_stop", "index": index}));
    }
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
            Open {
                at,
                block: None,
                held: String::new(),
            }
        });
        if open.block != Some((p.index, p.reasoning)) {
            stop_block(open, &mut events);
            let block = if p.reasoning {
                json!({"type": "thinking", "thinking": "", "signature": ""})
            } else {
                json!({"type": "text", "text": ""})
            };
            events.push(json!({"type": "content_block_start", "index": p.index,
                               "content_block": block}));
            open.block = Some((p.index, p.reasoning));
        }
        let (now, held) = split_held(std::mem::take(&mut open.held) + &p.text);
        open.held = held;
        if !now.is_empty() {
            events.push(delta_event(p.index, p.reasoning, &now));
        }
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
        let Some(mut open) = self.open.remove(session_id) else {
            return Vec::new();
        };
        let mut events = Vec::new();
        stop_block(&mut open, &mut events);
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
