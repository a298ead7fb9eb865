//! The server's side of the wire: HTTP status answers and the OpenAI SSE rendering of a
//! scripted [`Reply`](super::Reply) (text deltas, tool-call deltas split across chunks and
//! interleaved by index, usage, `[DONE]`, and each fault). Split from `model_server.rs` so the
//! server's bookkeeping and the byte format read separately.

use std::collections::VecDeque;
use std::io::Write;
use std::net::TcpStream;

use serde_json::{Value, json};

use super::{Kind, MODEL, Reply};

fn reason_phrase(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

pub(super) fn write_status(
    out: &mut impl Write,
    code: u16,
    headers: &[(String, String)],
    body: &str,
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n",
        reason_phrase(code),
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    out.write_all(head.as_bytes())?;
    out.write_all(body.as_bytes())
}

fn write_sse_head(out: &mut impl Write, headers: &[(String, String)]) -> std::io::Result<()> {
    let mut head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
                    Cache-Control: no-cache\r\nConnection: close\r\n"
        .to_owned();
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    out.write_all(head.as_bytes())?;
    out.flush()
}

fn event(out: &mut impl Write, data: &str) -> std::io::Result<()> {
    out.write_all(format!("data: {data}\n\n").as_bytes())?;
    out.flush()
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    json!({
        "id": "chatcmpl-keel-mock",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    })
    .to_string()
}

fn usage_chunk(input: u64, output: u64) -> String {
    json!({
        "id": "chatcmpl-keel-mock",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": MODEL,
        "choices": [],
        "usage": {
            "prompt_tokens": input,
            "completion_tokens": output,
            "total_tokens": input + output,
        },
    })
    .to_string()
}

/// Splits `s` into `parts` pieces at char boundaries (fewer when `s` is short; none when empty).
pub fn split_pieces(s: &str, parts: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    if chars.is_empty() {
        return Vec::new();
    }
    let size = chars.len().div_ceil(parts.max(1));
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// Sends `reply`; `Ok(true)` when the connection may serve another request (a complete,
/// well-formed stream, sent with a `Content-Length` and `Connection: keep-alive`, as a real
/// provider keeps its connections). Faults and errors close the connection.
pub(super) fn respond(
    out: &mut TcpStream,
    reply: &Reply,
    client_closes: bool,
) -> std::io::Result<bool> {
    let role = || chunk(json!({"role": "assistant", "content": ""}), None);
    match &reply.kind {
        Kind::Status { code, body } => {
            write_status(out, *code, &reply.headers, body).map(|()| false)
        }
        Kind::Stall(silence) => {
            write_sse_head(out, &reply.headers)?;
            std::thread::sleep(*silence);
            Ok(false)
        }
        Kind::Disconnect => {
            write_sse_head(out, &reply.headers)?;
            event(out, &role())?;
            event(out, &chunk(json!({"content": "partial "}), None))?;
            event(out, &chunk(json!({"content": "answer"}), None))?;
            Ok(false)
        }
        Kind::Garbled => {
            write_sse_head(out, &reply.headers)?;
            event(out, &role())?;
            event(out, &chunk(json!({"content": "ok"}), None))?;
            event(out, r#"{"choices":[{"index":0,"delta":{"content":"#)?;
            event(out, "[DONE]")?;
            Ok(false)
        }
        Kind::Empty => {
            write_sse_head(out, &reply.headers)?;
            event(out, &role())?;
            event(out, &chunk(json!({}), Some("stop")))?;
            event(out, &usage_chunk(reply.usage.0, reply.usage.1))?;
            event(out, "[DONE]")?;
            Ok(false)
        }
        Kind::Stream { text, calls } => {
            // A well-formed answer is rendered whole and sent in one write: the server answers
            // at once, so benchmarks measure keel. The chunks are still split as a provider
            // splits them; the client's SSE parser sees the same events.
            let mut buf: Vec<u8> = Vec::with_capacity(4096);
            let w = &mut buf;
            event(w, &role())?;
            for piece in text
                .as_deref()
                .map(|t| split_pieces(t, 3))
                .unwrap_or_default()
            {
                event(w, &chunk(json!({"content": piece}), None))?;
            }
            for c in call_chunks(calls) {
                event(w, &chunk(json!({"tool_calls": [c]}), None))?;
            }
            let finish = if calls.is_empty() {
                "stop"
            } else {
                "tool_calls"
            };
            event(w, &chunk(json!({}), Some(finish)))?;
            event(w, &usage_chunk(reply.usage.0, reply.usage.1))?;
            event(w, "[DONE]")?;
            let mut head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
                 Content-Length: {}\r\nConnection: {}\r\n",
                buf.len(),
                if client_closes { "close" } else { "keep-alive" }
            );
            for (k, v) in &reply.headers {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            head.push_str("\r\n");
            let mut all = head.into_bytes();
            all.extend_from_slice(&buf);
            out.write_all(&all)?;
            out.flush()?;
            Ok(!client_closes)
        }
    }
}

/// The `tool_calls` delta entries: each call opens with its id and name, then its arguments
/// follow in three pieces; calls are interleaved round-robin by `index`.
fn call_chunks(calls: &[(String, String, String)]) -> Vec<Value> {
    let mut per_call: Vec<VecDeque<Value>> = calls
        .iter()
        .enumerate()
        .map(|(index, (id, name, args))| {
            let mut q = VecDeque::new();
            q.push_back(json!({
                "index": index,
                "id": id,
                "type": "function",
                "function": {"name": name, "arguments": ""},
            }));
            for piece in split_pieces(args, 3) {
                q.push_back(json!({"index": index, "function": {"arguments": piece}}));
            }
            q
        })
        .collect();
    let mut out = Vec::new();
    while per_call.iter().any(|q| !q.is_empty()) {
        for q in &mut per_call {
            if let Some(v) = q.pop_front() {
                out.push(v);
            }
        }
    }
    out
}
