//! The loopback model server's Anthropic Messages endpoint (issue 15 item 2): `POST
//! …/v1/messages` consumes the next scripted [`Reply`] from the same script as chat completions
//! (same arrival log, same request capture) and answers it as Anthropic's SSE stream:
//! `message_start` (usage: `input_tokens`, `cache_creation_input_tokens`,
//! `cache_read_input_tokens`), a `ping`, the content blocks (`thinking` with `thinking_delta`s
//! and a `signature_delta`, `redacted_thinking`, `text` in several `text_delta`s, one `tool_use`
//! per call with its input in several `input_json_delta`s cut mid-token), `message_delta`
//! (`stop_reason`, `output_tokens`) and `message_stop`.
//!
//! Faults: [`Reply::status`] with [`anthropic_error_body`] (e.g. HTTP 529 `overloaded_error`
//! with `retry-after`), [`Reply::stream_error`] (an SSE `error` event mid-answer, as the API
//! sends `overloaded_error`), [`Reply::disconnect_mid_stream`] (the socket closes before
//! `message_stop`), [`Reply::garbled`], [`Reply::stall`], [`Reply::empty`].
//!
//! A stream is written in two parts, cut inside the first multi-byte UTF-8 character of the
//! body (when there is one), with a pause between them, so the client's SSE parser really
//! meets a chunk boundary in the middle of a character — unless the reply is
//! [`Reply::held`]: then it goes out around its hold ([`super::hold`]), chunked when whole.

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{Value, json};

use super::hold;
use super::wire::{split_pieces, write_status};
use super::{Kind, MODEL, ModelServer, Reply, Request, Screen, Shape};

/// What only the Messages endpoint renders of a [`Reply`].
#[derive(Debug, Clone, Default)]
pub(super) struct Extras {
    /// Signed thinking blocks `(text, signature)` before the content.
    thinking: Vec<(String, String)>,
    /// `redacted_thinking` blocks' data, after the thinking blocks.
    redacted: Vec<String>,
    /// `cache_creation_input_tokens`, `cache_read_input_tokens`.
    cache: (u64, u64),
}

/// Every Messages request is served, streamed, with usage (no window, no personality).
pub(super) fn screen() -> Screen {
    Screen::Serve(Shape {
        stream: true,
        usage: true,
        tools_off: false,
    })
}

/// The Anthropic side of the script's vocabulary (the rest of [`Reply`] applies too).
impl Reply {
    /// 200 and a few deltas, then an error event of `kind` (e.g. Anthropic's
    /// `overloaded_error`) mid-stream, then the socket closes.
    pub fn stream_error(kind: &str, message: &str) -> Reply {
        Reply::of(Kind::StreamError {
            kind: kind.to_owned(),
            message: message.to_owned(),
        })
    }

    /// Anthropic: a signed thinking block before the content (modifier; repeatable).
    #[must_use]
    pub fn thinking(mut self, text: &str, signature: &str) -> Reply {
        self.anthropic
            .thinking
            .push((text.to_owned(), signature.to_owned()));
        self
    }

    /// Anthropic: a `redacted_thinking` block with `data` (modifier; repeatable).
    #[must_use]
    pub fn redacted_thinking(mut self, data: &str) -> Reply {
        self.anthropic.redacted.push(data.to_owned());
        self
    }

    /// Anthropic: the prompt's cached tokens, written and read (modifier; default none).
    #[must_use]
    pub fn cache_usage(mut self, creation: u64, read: u64) -> Reply {
        self.anthropic.cache = (creation, read);
        self
    }
}

impl ModelServer {
    /// The Anthropic Messages API requests so far (`POST …/v1/messages`).
    pub fn anthropic_requests(&self) -> Vec<Request> {
        self.requests().into_iter().filter(is_messages).collect()
    }

    /// The Anthropic base URL, `http://127.0.0.1:PORT` (no `/v1`, as Anthropic's SDKs take it).
    pub fn anthropic_base_url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// An Anthropic error body: `{"type":"error","error":{"type":KIND,"message":…}}`.
pub fn anthropic_error_body(kind: &str, message: &str) -> String {
    json!({"type": "error", "error": {"type": kind, "message": message}}).to_string()
}

/// Whether `r` is a Messages API request.
pub(super) fn is_messages(r: &Request) -> bool {
    r.method == "POST"
        && r.path
            .split('?')
            .next()
            .unwrap_or("")
            .ends_with("/v1/messages")
}

fn event(out: &mut Vec<u8>, data: &Value) {
    let kind = data["type"].as_str().unwrap_or("unknown");
    out.extend_from_slice(format!("event: {kind}\ndata: {data}\n\n").as_bytes());
}

fn message_start(reply: &Reply) -> Value {
    let (creation, read) = reply.anthropic.cache;
    json!({"type": "message_start", "message": {
        "id": "msg_keel_mock", "type": "message", "role": "assistant", "content": [],
        "model": MODEL, "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": reply.usage.0, "cache_creation_input_tokens": creation,
                  "cache_read_input_tokens": read, "output_tokens": 1}}})
}

fn block_start(index: usize, block: Value) -> Value {
    json!({"type": "content_block_start", "index": index, "content_block": block})
}

fn delta(index: usize, delta: Value) -> Value {
    json!({"type": "content_block_delta", "index": index, "delta": delta})
}

fn block_stop(index: usize) -> Value {
    json!({"type": "content_block_stop", "index": index})
}

/// The thinking and redacted-thinking blocks of `reply`, from `index` on; returns the next
/// index.
fn reasoning_blocks(out: &mut Vec<u8>, reply: &Reply, mut index: usize) -> usize {
    for (text, signature) in &reply.anthropic.thinking {
        event(
            out,
            &block_start(
                index,
                json!({"type": "thinking", "thinking": "", "signature": ""}),
            ),
        );
        for piece in split_pieces(text, 2) {
            event(
                out,
                &delta(index, json!({"type": "thinking_delta", "thinking": piece})),
            );
        }
        event(
            out,
            &delta(
                index,
                json!({"type": "signature_delta", "signature": signature}),
            ),
        );
        event(out, &block_stop(index));
        index += 1;
    }
    for data in &reply.anthropic.redacted {
        event(
            out,
            &block_start(index, json!({"type": "redacted_thinking", "data": data})),
        );
        event(out, &block_stop(index));
        index += 1;
    }
    index
}

fn text_block(out: &mut Vec<u8>, index: usize, text: &str) {
    event(
        out,
        &block_start(index, json!({"type": "text", "text": ""})),
    );
    for piece in split_pieces(text, 3) {
        event(
            out,
            &delta(index, json!({"type": "text_delta", "text": piece})),
        );
    }
    event(out, &block_stop(index));
}

/// One `tool_use` block: its input as an empty first piece (as the API sends) then three
/// pieces cut wherever the thirds fall — mid-key, mid-string, mid-escape.
fn tool_block(out: &mut Vec<u8>, index: usize, (id, name, args): &(String, String, String)) {
    event(
        out,
        &block_start(
            index,
            json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
        ),
    );
    event(
        out,
        &delta(
            index,
            json!({"type": "input_json_delta", "partial_json": ""}),
        ),
    );
    for piece in split_pieces(args, 3) {
        event(
            out,
            &delta(
                index,
                json!({"type": "input_json_delta", "partial_json": piece}),
            ),
        );
    }
    event(out, &block_stop(index));
}

fn end(out: &mut Vec<u8>, stop_reason: &str, output_tokens: u64) {
    event(
        out,
        &json!({"type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": null},
        "usage": {"output_tokens": output_tokens}}),
    );
    event(out, &json!({"type": "message_stop"}));
}

/// Sends `reply` as the Messages API would; `Ok(true)` when the connection may serve another
/// request (a whole, well-formed stream).
pub(super) fn respond(
    out: &mut TcpStream,
    reply: &Reply,
    client_closes: bool,
) -> std::io::Result<bool> {
    let mut body = Vec::with_capacity(4096);
    let b = &mut body;
    let mut whole = false;
    match &reply.kind {
        Kind::Status { code, body } => {
            return write_status(out, *code, &reply.headers, body).map(|()| false);
        }
        Kind::Stall(silence) => {
            write_head(out, reply, None, false)?;
            std::thread::sleep(*silence);
            return Ok(false);
        }
        Kind::Stream { text, calls } => {
            event(b, &message_start(reply));
            event(b, &json!({"type": "ping"}));
            let mut index = reasoning_blocks(b, reply, 0);
            if let Some(text) = text {
                text_block(b, index, text);
                index += 1;
            }
            for call in calls {
                tool_block(b, index, call);
                index += 1;
            }
            end(
                b,
                if calls.is_empty() {
                    "end_turn"
                } else {
                    "tool_use"
                },
                reply.usage.1,
            );
            whole = true;
        }
        Kind::Empty => {
            event(b, &message_start(reply));
            end(b, "end_turn", 0);
            whole = true;
        }
        Kind::Disconnect => {
            event(b, &message_start(reply));
            event(b, &json!({"type": "ping"}));
            event(b, &block_start(0, json!({"type": "text", "text": ""})));
            event(
                b,
                &delta(0, json!({"type": "text_delta", "text": "partial "})),
            );
            event(
                b,
                &delta(0, json!({"type": "text_delta", "text": "answer"})),
            );
        }
        Kind::Garbled => {
            event(b, &message_start(reply));
            b.extend_from_slice(b"event: content_block_start\ndata: {\"type\":\"content_bl\n\n");
        }
        Kind::StreamError { kind, message } => {
            event(b, &message_start(reply));
            event(b, &json!({"type": "ping"}));
            event(b, &block_start(0, json!({"type": "text", "text": ""})));
            event(
                b,
                &delta(0, json!({"type": "text_delta", "text": "I will"})),
            );
            event(
                b,
                &json!({"type": "error", "error": {"type": kind, "message": message}}),
            );
        }
    }
    let keep = whole && !client_closes;
    if let Some(held) = &reply.hold {
        hold::send(out, &reply.headers, &body, held, whole, keep)?;
        return Ok(keep);
    }
    write_head(out, reply, whole.then_some(body.len()), keep)?;
    // Cut inside the first multi-byte character, so one read ends mid-character.
    let cut = body
        .iter()
        .position(|byte| *byte >= 0xC0)
        .map_or(body.len() / 2, |i| i + 1);
    out.write_all(&body[..cut])?;
    out.flush()?;
    std::thread::sleep(Duration::from_millis(15));
    out.write_all(&body[cut..])?;
    out.flush()?;
    Ok(keep)
}

/// `200` and an SSE head: with a length and keep-alive for a whole stream, else `close` (the
/// body ends when the socket does).
fn write_head(
    out: &mut TcpStream,
    reply: &Reply,
    length: Option<usize>,
    keep: bool,
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
         request-id: req_keel_mock\r\nConnection: {}\r\n",
        if keep { "keep-alive" } else { "close" }
    );
    if let Some(n) = length {
        head.push_str(&format!("Content-Length: {n}\r\n"));
    }
    for (k, v) in &reply.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    out.write_all(head.as_bytes())?;
    out.flush()
}
