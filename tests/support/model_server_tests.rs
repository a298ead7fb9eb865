//! Unit tests of the scripted model server, with a raw `TcpStream` client (no HTTP library), and
//! of the TOOL-06 request-shape check.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::*;

/// What the raw client got back.
pub(super) struct Raw {
    pub(super) status: u16,
    pub(super) headers: BTreeMap<String, String>,
    pub(super) body: String,
}

impl Raw {
    /// The `data:` payloads of an SSE body.
    pub(super) fn data(&self) -> Vec<&str> {
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .collect()
    }

    /// The JSON chunks (everything but `[DONE]`).
    pub(super) fn chunks(&self) -> Vec<Value> {
        self.data()
            .into_iter()
            .filter(|d| *d != "[DONE]")
            .map(|d| serde_json::from_str(d).expect("chunk is JSON"))
            .collect()
    }

    /// The concatenated content deltas.
    pub(super) fn content(&self) -> String {
        self.chunks()
            .iter()
            .filter_map(|c| {
                c["choices"][0]["delta"]["content"]
                    .as_str()
                    .map(str::to_owned)
            })
            .collect()
    }

    /// The finish reasons seen.
    pub(super) fn finishes(&self) -> Vec<String> {
        self.chunks()
            .iter()
            .filter_map(|c| c["choices"][0]["finish_reason"].as_str().map(str::to_owned))
            .collect()
    }
}

pub(super) fn send(server: &ModelServer, method: &str, path: &str, body: &str) -> Raw {
    send_with(server, method, path, body, None)
}

fn send_with(
    server: &ModelServer,
    method: &str,
    path: &str,
    body: &str,
    read_timeout: Option<Duration>,
) -> Raw {
    let mut s = TcpStream::connect(server.addr()).expect("connect");
    s.set_read_timeout(read_timeout.or(Some(Duration::from_secs(10))))
        .expect("timeout");
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Authorization: Bearer sk-test\r\nX-Custom-Header: Yes\r\nConnection: close\r\n\
         Content-Length: {}\r\n\r\n{body}",
        server.addr(),
        body.len()
    );
    s.write_all(req.as_bytes()).expect("write");
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8(raw).expect("utf-8 response");
    let (head, body) = text.split_once("\r\n\r\n").expect("head and body");
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .expect("status line");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Raw {
        status,
        headers,
        body: body.to_owned(),
    }
}

pub(super) const CHAT: &str = "/v1/chat/completions";

fn body() -> String {
    json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]})
        .to_string()
}

#[test]
fn text_reply_streams_deltas_then_usage_then_done() {
    let server = ModelServer::start(vec![Reply::text("Hello, world! How are you?")]);
    let r = send(&server, "POST", CHAT, &body());
    assert_eq!(r.status, 200);
    assert_eq!(r.headers["content-type"], "text/event-stream");
    assert_eq!(r.headers["connection"], "close");
    assert_eq!(r.content(), "Hello, world! How are you?");
    let content_chunks = r
        .chunks()
        .iter()
        .filter(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .is_some_and(|s| !s.is_empty())
        })
        .count();
    assert!(content_chunks >= 2, "text is split across chunks");
    assert_eq!(r.finishes(), vec!["stop"]);
    let data = r.data();
    assert_eq!(data.last(), Some(&"[DONE]"));
    let usage: Value = serde_json::from_str(data[data.len() - 2]).expect("usage chunk");
    assert_eq!(
        usage["usage"],
        json!({"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15})
    );
}

#[test]
fn tool_calls_are_split_and_interleaved_by_index() {
    let server = ModelServer::start(vec![Reply::tool_calls(vec![
        ("call_a", "read_file", r#"{"path":"src/main.rs"}"#),
        ("call_b", "shell", r#"{"command":"ls -la"}"#),
    ])]);
    let r = send(&server, "POST", CHAT, &body());
    let entries: Vec<Value> = r
        .chunks()
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"].as_array().cloned())
        .flatten()
        .collect();
    // Interleaved: the index sequence switches between the calls.
    let order: Vec<u64> = entries
        .iter()
        .map(|e| e["index"].as_u64().unwrap())
        .collect();
    assert_eq!(order[..4], [0, 1, 0, 1]);
    // Reassembled, each call is whole.
    let mut calls = BTreeMap::<u64, (String, String, String)>::new();
    for e in &entries {
        let slot = calls.entry(e["index"].as_u64().unwrap()).or_default();
        if let Some(id) = e["id"].as_str() {
            slot.0 = id.to_owned();
        }
        if let Some(n) = e["function"]["name"].as_str() {
            slot.1 = n.to_owned();
        }
        slot.2
            .push_str(e["function"]["arguments"].as_str().unwrap_or(""));
    }
    assert_eq!(
        calls[&0],
        (
            "call_a".into(),
            "read_file".into(),
            r#"{"path":"src/main.rs"}"#.into()
        )
    );
    assert_eq!(
        calls[&1],
        (
            "call_b".into(),
            "shell".into(),
            r#"{"command":"ls -la"}"#.into()
        )
    );
    let arg_pieces = entries
        .iter()
        .filter(|e| e["index"] == 0 && e["function"]["arguments"] != "")
        .count();
    assert!(arg_pieces >= 2, "arguments are split across chunks");
    assert_eq!(r.finishes(), vec!["tool_calls"]);
    assert_eq!(r.data().last(), Some(&"[DONE]"));
}

#[test]
fn text_and_calls_streams_text_first() {
    let server = ModelServer::start(vec![Reply::text_and_calls(
        "Let me look.",
        vec![("c1", "list_dir", r#"{"path":"."}"#)],
    )]);
    let r = send(&server, "POST", CHAT, &body());
    assert_eq!(r.content(), "Let me look.");
    let chunks = r.chunks();
    let first_call = chunks
        .iter()
        .position(|c| c["choices"][0]["delta"]["tool_calls"].is_array())
        .unwrap();
    let last_text = chunks
        .iter()
        .rposition(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .is_some_and(|s| !s.is_empty())
        })
        .unwrap();
    assert!(last_text < first_call);
    assert_eq!(r.finishes(), vec!["tool_calls"]);
}

#[test]
fn replies_are_consumed_in_order_then_the_script_is_exhausted() {
    let server = ModelServer::start(vec![Reply::text("one"), Reply::text("two")]);
    assert_eq!(send(&server, "POST", CHAT, &body()).content(), "one");
    assert_eq!(send(&server, "POST", CHAT, &body()).content(), "two");
    let r = send(&server, "POST", CHAT, &body());
    assert_eq!(r.status, 500);
    let err: Value = serde_json::from_str(&r.body).unwrap();
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("script exhausted"),
        "{err}"
    );
    assert_eq!(server.consumed(), 2);
}

#[test]
fn status_faults_carry_code_body_and_headers() {
    let server = ModelServer::start(vec![
        Reply::rate_limited(2),
        Reply::status(500, r#"{"error":{"message":"boom"}}"#),
        Reply::status(
            401,
            r#"{"error":{"message":"bad key","code":"invalid_api_key"}}"#,
        ),
        Reply::context_overflow(),
    ]);
    let r = send(&server, "POST", CHAT, &body());
    assert_eq!(r.status, 429);
    assert_eq!(r.headers["retry-after"], "2");
    assert_eq!(r.headers["connection"], "close");
    let r = send(&server, "POST", CHAT, &body());
    assert_eq!(
        (r.status, r.body.as_str()),
        (500, r#"{"error":{"message":"boom"}}"#)
    );
    assert_eq!(send(&server, "POST", CHAT, &body()).status, 401);
    let r = send(&server, "POST", CHAT, &body());
    assert_eq!(r.status, 400);
    let err: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(err["error"]["code"], "context_length_exceeded");
    assert_eq!(err["error"]["type"], "invalid_request_error");
}

#[test]
fn disconnect_mid_stream_has_no_finish_and_no_done() {
    let server = ModelServer::start(vec![Reply::disconnect_mid_stream()]);
    let r = send(&server, "POST", CHAT, &body());
    assert_eq!(r.status, 200);
    assert_eq!(r.content(), "partial answer");
    assert!(r.finishes().is_empty());
    assert!(!r.data().contains(&"[DONE]"));
}

#[test]
fn garbled_stream_has_a_data_line_that_is_not_json() {
    let server = ModelServer::start(vec![Reply::garbled()]);
    let r = send(&server, "POST", CHAT, &body());
    let bad: Vec<&str> = r
        .data()
        .into_iter()
        .filter(|d| *d != "[DONE]" && serde_json::from_str::<Value>(d).is_err())
        .collect();
    assert_eq!(bad.len(), 1, "{}", r.body);
}

#[test]
fn empty_reply_finishes_stop_without_content() {
    let server = ModelServer::start(vec![Reply::empty().usage(3, 0)]);
    let r = send(&server, "POST", CHAT, &body());
    assert_eq!(r.content(), "");
    assert_eq!(r.finishes(), vec!["stop"]);
    assert!(r.body.contains(r#""prompt_tokens":3"#));
    assert_eq!(r.data().last(), Some(&"[DONE]"));
}

#[test]
fn stall_sends_headers_then_silence() {
    let server = ModelServer::start(vec![Reply::stall(Duration::from_secs(3))]);
    let mut s = TcpStream::connect(server.addr()).unwrap();
    let b = body();
    write!(
        s,
        "POST {CHAT} HTTP/1.1\r\nContent-Length: {}\r\n\r\n{b}",
        b.len()
    )
    .unwrap();
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => panic!("closed before the stall ended"),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => {
                assert!(
                    matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ),
                    "{e}"
                );
                break;
            }
        }
    }
    let text = String::from_utf8(got).unwrap();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.ends_with("\r\n\r\n"), "only headers arrived: {text:?}");
}

#[test]
fn delay_holds_the_reply_back() {
    let server = ModelServer::start(vec![Reply::text("late").delay(Duration::from_millis(300))]);
    let started = Instant::now();
    let r = send(&server, "POST", CHAT, &body());
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(r.content(), "late");
}

#[test]
fn requests_are_recorded_with_lowercase_headers_and_parsed_bodies() {
    let server = ModelServer::start(vec![Reply::text("a"), Reply::text("b")]);
    send(&server, "POST", CHAT, &body());
    // Any base path works; other routes get 404 without consuming a reply.
    assert_eq!(send(&server, "GET", "/v1/models", "").status, 404);
    send(
        &server,
        "POST",
        "/openai/deployments/x/chat/completions",
        &body(),
    );
    let reqs = server.wait_for(3, Duration::from_secs(5));
    assert_eq!(reqs.len(), 3);
    assert_eq!(reqs[0].method, "POST");
    assert_eq!(reqs[0].path, CHAT);
    assert_eq!(reqs[0].headers["authorization"], "Bearer sk-test");
    assert_eq!(reqs[0].headers["x-custom-header"], "Yes");
    assert_eq!(reqs[0].messages()[0]["content"], "hi");
    assert_eq!(reqs[1].body, Value::Null);
    assert_eq!(server.completions().len(), 2);
    assert_eq!(server.consumed(), 2);
}

#[test]
fn chunked_request_bodies_are_decoded() {
    let server = ModelServer::start(vec![Reply::text("ok")]);
    let mut s = TcpStream::connect(server.addr()).unwrap();
    let b = body();
    let (a, c) = b.split_at(10);
    write!(
        s,
        "POST {CHAT} HTTP/1.1\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{c}\r\n0\r\n\r\n",
        a.len(),
        c.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.contains("data: [DONE]"));
    assert_eq!(server.requests()[0].messages()[0]["role"], "user");
}

#[test]
#[should_panic(expected = "expected 1 requests")]
fn wait_for_panics_after_the_timeout() {
    let server = ModelServer::start(vec![]);
    server.wait_for(1, Duration::from_millis(50));
}

#[test]
fn split_pieces_respects_char_boundaries() {
    assert_eq!(split_pieces("", 3), Vec::<String>::new());
    assert_eq!(split_pieces("ab", 3), vec!["a", "b"]);
    assert_eq!(split_pieces("héllo wörld", 3).concat(), "héllo wörld");
}

// ---- TOOL-06 -------------------------------------------------------------------------------

fn call(id: &str) -> Value {
    json!({"id": id, "type": "function", "function": {"name": "f", "arguments": "{}"}})
}

fn tool(id: &str) -> Value {
    json!({"role": "tool", "tool_call_id": id, "content": "r"})
}

#[test]
fn tool06_accepts_batches_answered_immediately_in_order() {
    let m = json!([
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": null, "tool_calls": [call("a"), call("b")]},
        tool("a"),
        tool("b"),
        {"role": "assistant", "content": "x", "tool_calls": []},
        {"role": "assistant", "tool_calls": [call("c")]},
        tool("c"),
        {"role": "user", "content": "next"},
    ]);
    assert_eq!(check_tool_call_contract(&m), Ok(()));
}

#[test]
fn tool06_rejects_an_insert_inside_the_batch() {
    let m = json!([
        {"role": "assistant", "tool_calls": [call("a"), call("b")]},
        tool("a"),
        {"role": "user", "content": "attachment"},
        tool("b"),
    ]);
    let e = check_tool_call_contract(&m).unwrap_err();
    assert!(e.contains("inside the tool-call batch"), "{e}");
}

#[test]
fn tool06_rejects_missing_out_of_order_and_stray_results() {
    let missing = json!([{"role": "assistant", "tool_calls": [call("a")]}]);
    assert!(
        check_tool_call_contract(&missing)
            .unwrap_err()
            .contains("array ends")
    );
    let swapped = json!([
        {"role": "assistant", "tool_calls": [call("a"), call("b")]},
        tool("b"),
        tool("a"),
    ]);
    assert!(
        check_tool_call_contract(&swapped)
            .unwrap_err()
            .contains("answers")
    );
    let extra = json!([
        {"role": "assistant", "tool_calls": [call("a")]},
        tool("a"),
        tool("a"),
    ]);
    assert!(
        check_tool_call_contract(&extra)
            .unwrap_err()
            .contains("outside")
    );
    let stray = json!([{"role": "user", "content": "u"}, tool("z")]);
    assert!(
        check_tool_call_contract(&stray)
            .unwrap_err()
            .contains("message 1")
    );
    assert!(check_tool_call_contract(&json!({})).is_err());
}

// Issue 11 item 10: ids numbered per response repeat across batches (paired by position, each
// batch with its own results) but never within one batch.
#[test]
fn tool06_ids_may_repeat_across_batches_never_within_one() {
    let m = json!([
        {"role": "user", "content": "u"},
        {"role": "assistant", "tool_calls": [call("call_0"), call("call_1")]},
        tool("call_0"),
        tool("call_1"),
        {"role": "assistant", "tool_calls": [call("call_0")]},
        tool("call_0"),
    ]);
    assert_eq!(check_tool_call_contract(&m), Ok(()));
    // The second batch's result missing is still caught, although call_0 was answered before.
    let short = json!([
        {"role": "assistant", "tool_calls": [call("call_0")]},
        tool("call_0"),
        {"role": "assistant", "tool_calls": [call("call_0")]},
    ]);
    assert!(
        check_tool_call_contract(&short)
            .unwrap_err()
            .contains("array ends")
    );
    let twice = json!([
        {"role": "assistant", "tool_calls": [call("call_0"), call("call_0")]},
        tool("call_0"),
        tool("call_0"),
    ]);
    assert!(
        check_tool_call_contract(&twice)
            .unwrap_err()
            .contains("repeats within the batch")
    );
}
