//! The server's side of the wire: HTTP status answers and the OpenAI rendering of a scripted
//! [`Reply`](super::Reply), streamed (text deltas, tool-call deltas split across chunks and
//! interleaved by index, usage, `[DONE]`, and each fault) or whole (one `chat.completion`), in
//! the [`Shape`] the server's personality chose; a [`Reply::held`] one around its hold
//! ([`super::hold`]). Split from `model_server.rs` so the server's
//! bookkeeping and the byte format read separately.

use std::collections::VecDeque;
use std::io::Write;
use std::net::TcpStream;

use serde_json::{Value, json};

use super::hold;
use super::personality::calls_as_text;
use super::{Kind, MODEL, Reply, Shape};

fn reason_phrase(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        429 => "Too Many Requests",
        529 => "Overloaded",
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

/// `200`, an SSE head, and an empty body (llama.cpp's answer to a stream it cannot produce).
pub(super) fn write_empty_stream(out: &mut impl Write) -> std::io::Result<()> {
    // As uvicorn ends a response whose handler raised after the head went out: a complete,
    // empty chunked body that promises keep-alive, then (the caller) closing the socket. A
    // client that pools the connection and reuses it at once fails before the server hears it.
    out.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n\
          Cache-Control: no-store\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\
          \r\n0\r\n\r\n",
    )?;
    out.flush()
}

/// Sends `reply` in `shape`; `Ok(true)` when the connection may serve another request (a
/// complete, well-formed answer, sent with a `Content-Length` and `Connection: keep-alive`, as
/// a real provider keeps its connections). Faults and errors close the connection.
pub(super) fn respond(
    out: &mut TcpStream,
    reply: &Reply,
    shape: Shape,
    client_closes: bool,
) -> std::io::Result<bool> {
    let (text, calls) = match &reply.kind {
        Kind::Stream { text, calls } if shape.tools_off && !calls.is_empty() => (
            Some(text.clone().unwrap_or_else(|| calls_as_text(calls))),
            &[][..],
        ),
        Kind::Stream { text, calls } => (text.clone(), &calls[..]),
        _ => (None, &[][..]),
    };
    if !shape.stream {
        return respond_whole(out, reply, shape, text.as_deref(), calls, client_closes);
    }
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
        Kind::Disconnect => fault(
            out,
            reply,
            &[
                role(),
                chunk(json!({"content": "partial "}), None),
                chunk(json!({"content": "answer"}), None),
            ],
        ),
        Kind::StreamError { kind, message } => fault(
            out,
            reply,
            &[
                role(),
                chunk(json!({"content": "partial"}), None),
                json!({"error": {"message": message, "type": kind}}).to_string(),
            ],
        ),
        Kind::Garbled => fault(
            out,
            reply,
            &[
                role(),
                chunk(json!({"content": "ok"}), None),
                r#"{"choices":[{"index":0,"delta":{"content":"#.to_owned(),
                "[DONE]".to_owned(),
            ],
        ),
        Kind::Empty => {
            let mut events = vec![role(), chunk(json!({}), Some("stop"))];
            if shape.usage {
                events.push(usage_chunk(reply.usage.0, reply.usage.1));
            }
            events.push("[DONE]".to_owned());
            fault(out, reply, &events)
        }
        Kind::Stream { .. } => {
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
            event(w, &chunk(json!({}), Some(finish_reason(calls))))?;
            if shape.usage {
                event(w, &usage_chunk(reply.usage.0, reply.usage.1))?;
            }
            event(w, "[DONE]")?;
            if let Some(held) = &reply.hold {
                hold::send(out, &reply.headers, &buf, held, true, !client_closes)?;
                return Ok(!client_closes);
            }
            write_whole(out, "text/event-stream", reply, &buf, client_closes)?;
            Ok(!client_closes)
        }
    }
}

/// A close-delimited answer's events after an SSE head: each written and flushed on its own,
/// or (a [`Reply::held`] one) around the hold. The connection closes after it.
fn fault(out: &mut TcpStream, reply: &Reply, events: &[String]) -> std::io::Result<bool> {
    if let Some(held) = &reply.hold {
        let mut body = Vec::new();
        for e in events {
            event(&mut body, e)?;
        }
        hold::send(out, &reply.headers, &body, held, false, false)?;
        return Ok(false);
    }
    write_sse_head(out, &reply.headers)?;
    for e in events {
        event(out, e)?;
    }
    Ok(false)
}

fn finish_reason(calls: &[(String, String, String)]) -> &'static str {
    if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    }
}

/// A 200 with `body`, its length, and keep-alive unless the client closes.
fn write_whole(
    out: &mut impl Write,
    content_type: &str,
    reply: &Reply,
    body: &[u8],
    client_closes: bool,
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nCache-Control: no-cache\r\n\
         Content-Length: {}\r\nConnection: {}\r\n",
        body.len(),
        if client_closes { "close" } else { "keep-alive" }
    );
    for (k, v) in &reply.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let mut all = head.into_bytes();
    all.extend_from_slice(body);
    out.write_all(&all)?;
    out.flush()
}

/// The non-streamed answer (`stream: false`): one `chat.completion`, usage when the shape
/// says so; faults as a non-streaming server shows them (a body cut short, a body that is not
/// JSON, silence after the head).
fn respond_whole(
    out: &mut TcpStream,
    reply: &Reply,
    shape: Shape,
    text: Option<&str>,
    calls: &[(String, String, String)],
    client_closes: bool,
) -> std::io::Result<bool> {
    let head = |out: &mut TcpStream, length: usize| {
        let mut h = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\
             Connection: close\r\n"
        );
        for (k, v) in &reply.headers {
            h.push_str(&format!("{k}: {v}\r\n"));
        }
        h.push_str("\r\n");
        out.write_all(h.as_bytes())?;
        out.flush()
    };
    match &reply.kind {
        Kind::Status { code, body } => {
            write_status(out, *code, &reply.headers, body).map(|()| false)
        }
        Kind::Stall(silence) => {
            head(out, 1000)?;
            std::thread::sleep(*silence);
            Ok(false)
        }
        Kind::Disconnect => {
            head(out, 1000)?;
            out.write_all(br#"{"id":"chatcmpl-keel-mock","choices":[{"index":0,"message":{"#)?;
            Ok(false)
        }
        Kind::StreamError { kind, message } => {
            let body = json!({"error": {"message": message, "type": kind}}).to_string();
            write_status(out, 500, &reply.headers, &body).map(|()| false)
        }
        Kind::Garbled => {
            let body = br#"{"choices":[{"index":0,"message":{"content":"#;
            head(out, body.len())?;
            out.write_all(body)?;
            Ok(false)
        }
        Kind::Empty | Kind::Stream { .. } => {
            let mut message = json!({"role": "assistant", "content": text.unwrap_or("")});
            if !calls.is_empty() {
                if text.is_none() {
                    message["content"] = Value::Null;
                }
                let list: Vec<Value> = calls
                    .iter()
                    .map(|(id, name, args)| {
                        json!({"id": id, "type": "function",
                               "function": {"name": name, "arguments": args}})
                    })
                    .collect();
                message["tool_calls"] = Value::Array(list);
            }
            let mut body = json!({
                "id": "chatcmpl-keel-mock",
                "object": "chat.completion",
                "created": 0,
                "model": MODEL,
                "choices": [{"index": 0, "message": message,
                             "finish_reason": finish_reason(calls)}],
            });
            if shape.usage {
                let (i, o) = reply.usage;
                body["usage"] =
                    json!({"prompt_tokens": i, "completion_tokens": o, "total_tokens": i + o});
            }
            write_whole(
                out,
                "application/json",
                reply,
                body.to_string().as_bytes(),
                client_closes,
            )?;
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
