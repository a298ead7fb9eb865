//! A tiny scripted HTTP/1.1 server on loopback (std `TcpListener` on a thread): each accepted
//! connection gets the next [`Reply`], and every request it read is kept for assertions.

#![allow(dead_code, reason = "each test binary uses part of the shared support")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use keel_plugin_api::services::llm::{FinishReason, LlmCallConfig, LlmRequest, StreamChunk};
use keel_plugin_llm_openai::Config;
use serde_json::{Value, json};

/// One step of a reply.
#[derive(Debug, Clone)]
pub enum Step {
    /// Write these bytes.
    Write(Vec<u8>),
    /// Wait.
    Sleep(Duration),
    /// Wait up to this long for the client to close the connection; records whether it did.
    AwaitClose(Duration),
}

/// What one connection gets, in order; the connection is closed afterwards.
pub type Reply = Vec<Step>;

/// A request the server read.
#[derive(Debug, Clone)]
pub struct Received {
    pub request_line: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

pub struct Mock {
    pub base_url: String,
    pub received: Arc<Mutex<Vec<Received>>>,
    /// One entry per `AwaitClose` step: whether the client closed in time.
    pub closed: Arc<Mutex<Vec<bool>>>,
}

impl Mock {
    /// Serves `replies`, one per connection, then stops accepting.
    pub fn start(replies: Vec<Reply>) -> Mock {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let received = Arc::new(Mutex::new(Vec::new()));
        let closed = Arc::new(Mutex::new(Vec::new()));
        let (log, closes) = (Arc::clone(&received), Arc::clone(&closed));
        thread::spawn(move || {
            for reply in replies {
                let Ok((stream, _)) = listener.accept() else {
                    return;
                };
                serve(stream, reply, &log, &closes);
            }
        });
        Mock {
            base_url,
            received,
            closed,
        }
    }

    pub fn requests(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

fn serve(
    mut stream: TcpStream,
    reply: Reply,
    log: &Mutex<Vec<Received>>,
    closes: &Mutex<Vec<bool>>,
) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
        return;
    }
    let mut headers = Vec::new();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((n, v)) = line.split_once(':') {
            let (n, v) = (n.trim().to_owned(), v.trim().to_owned());
            if n.eq_ignore_ascii_case("content-length") {
                length = v.parse().unwrap_or(0);
            }
            headers.push((n, v));
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).unwrap();
    log.lock().unwrap().push(Received {
        request_line: request_line.trim_end().to_owned(),
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    });
    for step in reply {
        match step {
            Step::Write(bytes) => {
                if stream.write_all(&bytes).is_err() {
                    return;
                }
                let _ = stream.flush();
            }
            Step::Sleep(d) => thread::sleep(d),
            Step::AwaitClose(d) => {
                stream.set_read_timeout(Some(d)).unwrap();
                let mut buf = [0u8; 64];
                let closed = matches!(reader.read(&mut buf), Ok(0));
                closes.lock().unwrap().push(closed);
            }
        }
    }
    let _ = stream.shutdown(Shutdown::Both);
}

/// A 200 SSE response head (no length: the body ends when the connection closes).
pub fn sse_head() -> Step {
    Step::Write(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nx-request-id: req_mock\r\nConnection: close\r\n\r\n"
            .to_vec(),
    )
}

/// One SSE `data:` event.
pub fn event(data: &Value) -> Step {
    Step::Write(format!("data: {data}\n\n").into_bytes())
}

pub fn done() -> Step {
    Step::Write(b"data: [DONE]\n\n".to_vec())
}

/// A complete SSE reply of `events` followed by `[DONE]`.
pub fn sse(events: &[Value]) -> Reply {
    let mut r = vec![sse_head()];
    r.extend(events.iter().map(event));
    r.push(done());
    r
}

/// A non-streaming error reply.
pub fn status(code: u16, extra_headers: &[(&str, &str)], body: &str) -> Reply {
    let mut head = format!(
        "HTTP/1.1 {code} Error\r\nContent-Type: application/json\r\nContent-Length: {}\r\nx-request-id: req_err\r\nConnection: close\r\n",
        body.len()
    );
    for (n, v) in extra_headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str("\r\n");
    vec![
        Step::Write(head.into_bytes()),
        Step::Write(body.as_bytes().to_vec()),
    ]
}

pub fn text_delta(t: &str) -> Value {
    json!({"choices": [{"index": 0, "delta": {"content": t}, "finish_reason": null}]})
}

pub fn finish_event(reason: &str) -> Value {
    json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
}

pub fn usage_event(i: u64, o: u64) -> Value {
    json!({"choices": [], "usage": {"prompt_tokens": i, "completion_tokens": o}})
}

pub fn config(base_url: &str, key_ref: &str) -> Config {
    serde_json::from_value(json!({
        "base_url": base_url,
        "model": "mock-model",
        "api_key_ref": key_ref,
        "timeout_ms": 2000,
        "connect_timeout_ms": 2000,
    }))
    .unwrap()
}

pub fn request(text: &str) -> LlmRequest {
    LlmRequest {
        session_id: None,
        stream_id: None,
        config: LlmCallConfig {
            provider: "openai".into(),
            model: "mock-model".into(),
            ..LlmCallConfig::default()
        },
        system: None,
        messages: vec![
            keel_plugin_api::sdk::Frozen::freeze(&json!({"role": "user", "content": text}))
                .unwrap(),
        ],
        tools: vec![],
    }
}

/// The failure of a response's terminal chunk, if it is an error.
pub fn failure_of(chunks: &[StreamChunk]) -> Option<keel_plugin_api::services::llm::LlmFailure> {
    match chunks.last() {
        Some(StreamChunk::Finish {
            reason: FinishReason::Error { failure },
        }) => Some(failure.clone()),
        _ => None,
    }
}
