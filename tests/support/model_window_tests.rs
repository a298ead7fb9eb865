//! Unit tests of the server's context window (issue 14 item 1) with a raw `TcpStream` client:
//! a request over the window is refused as OpenAI refuses it and consumes nothing; a served
//! reply bills the counted tokens; every recorded request carries its count.

use serde_json::{Value, json};

use super::tests::{CHAT, Raw, send};
use super::*;

/// A chat body whose one user message is `chars` bytes of `z`, optionally with `max_tokens`.
fn body(stream: bool, chars: usize, max_tokens: Option<u64>) -> Value {
    let mut b = json!({
        "model": "m",
        "stream": stream,
        "messages": [{"role": "user", "content": "z".repeat(chars)}],
    });
    if let Some(m) = max_tokens {
        b["max_tokens"] = json!(m);
    }
    b
}

fn post(server: &ModelServer, b: &Value) -> Raw {
    send(server, "POST", CHAT, &b.to_string())
}

fn json_of(r: &Raw) -> Value {
    serde_json::from_str(&r.body).unwrap_or_else(|e| panic!("{e}: {}", r.body))
}

fn usage_of_stream(r: &Raw) -> Value {
    r.chunks()
        .into_iter()
        .find(|c| !c["usage"].is_null())
        .map(|c| c["usage"].clone())
        .unwrap_or_else(|| panic!("no usage chunk: {}", r.body))
}

#[test]
fn tokens_are_the_json_bytes_of_messages_and_tools_over_bytes_per_token() {
    let messages = json!([{"role": "user", "content": "z".repeat(400)}]);
    let tools = json!([{"type": "function", "function": {"name": "t", "parameters": {}}}]);
    let bytes = messages.to_string().len();
    let b = json!({"model": "m", "messages": messages});
    assert_eq!(tokens_at(&b, 4.0), u64::try_from(bytes / 4).unwrap());
    assert_eq!(tokens_at(&b, 2.0), u64::try_from(bytes / 2).unwrap());
    // The llama.cpp personality's estimate is the same count at four bytes a token.
    assert_eq!(estimated_tokens(&b), tokens_at(&b, DEFAULT_BYTES_PER_TOKEN));
    let with_tools = json!({"messages": b["messages"], "tools": tools});
    let both = bytes + tools.to_string().len();
    assert_eq!(tokens_at(&with_tools, 1.0), u64::try_from(both).unwrap());
    assert_eq!(Window::new(7), Window::new(7).bytes_per_token(4.0));
}

#[test]
fn a_request_over_the_window_is_refused_naming_both_numbers_and_consumes_no_reply() {
    let server = ModelServer::start_windowed(Window::new(100), vec![Reply::text("fits")]);
    assert_eq!(server.window(), Some(Window::new(100)));
    for stream in [true, false] {
        let r = post(&server, &body(stream, 800, None));
        assert_eq!(r.status, 400, "{}", r.body);
        let e = &json_of(&r)["error"];
        assert_eq!(e["code"], "context_length_exceeded");
        assert_eq!(e["type"], "invalid_request_error");
        let counted = server.requests().last().unwrap().prompt_tokens();
        assert!(counted > 100, "{counted}");
        let message = e["message"].as_str().unwrap();
        assert!(
            message.starts_with(&format!(
                "This model's maximum context length is 100 tokens. However, your messages \
                 resulted in {counted} tokens."
            )),
            "{message}"
        );
    }
    assert_eq!(server.consumed(), 0);
    // A request that fits gets the reply the refused ones did not consume.
    let r = post(&server, &body(true, 40, None));
    assert_eq!((r.status, r.content().as_str()), (200, "fits"));
    assert_eq!(server.consumed(), 1);
    let fits = server.requests().last().unwrap().prompt_tokens();
    assert!(fits <= 100 && fits > 0, "{fits}");
}

// OpenAI counts the completion the request asks for against the window too.
#[test]
fn max_tokens_counts_against_the_window() {
    let server = ModelServer::start_windowed(Window::new(100), vec![Reply::text("ok")]);
    let r = post(&server, &body(false, 200, Some(90)));
    assert_eq!(r.status, 400, "{}", r.body);
    let prompt = server.requests()[0].prompt_tokens();
    let message = json_of(&r)["error"]["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains(&format!(
            "you requested {} tokens ({prompt} in the messages, 90 in the completion)",
            prompt + 90
        )),
        "{message}"
    );
    assert_eq!(server.consumed(), 0);
    let r = post(&server, &body(false, 200, Some(10)));
    assert_eq!(r.status, 200, "{}", r.body);
}

#[test]
fn a_served_reply_bills_the_counted_tokens_unless_its_usage_was_set() {
    let server = ModelServer::start_windowed(
        Window::new(10_000).bytes_per_token(2.0),
        vec![
            Reply::text("streamed"),
            Reply::text("whole"),
            Reply::text("explicit").usage(7, 2),
        ],
    );
    let streamed = post(&server, &body(true, 300, None));
    let whole = json_of(&post(&server, &body(false, 500, None)));
    let explicit = post(&server, &body(true, 300, None));
    let requests = server.requests();
    let counted: Vec<u64> = requests.iter().map(Request::prompt_tokens).collect();
    assert_eq!(
        counted[0],
        tokens_at(&body(true, 300, None), 2.0),
        "counted at the window's bytes per token"
    );
    let u = usage_of_stream(&streamed);
    assert_eq!(u["prompt_tokens"], counted[0]);
    assert_eq!(u["completion_tokens"], DEFAULT_OUTPUT_TOKENS);
    assert_eq!(whole["usage"]["prompt_tokens"], counted[1]);
    assert_eq!(usage_of_stream(&explicit)["prompt_tokens"], 7);
}

// Without a window nothing changes: no refusal, the default usage, and the count recorded at
// four bytes a token.
#[test]
fn an_unwindowed_server_records_counts_and_keeps_the_default_usage() {
    let server = ModelServer::start(vec![Reply::text("big")]);
    assert_eq!(server.window(), None);
    let b = body(true, 100_000, None);
    let r = post(&server, &b);
    assert_eq!(r.status, 200);
    assert_eq!(usage_of_stream(&r)["prompt_tokens"], DEFAULT_INPUT_TOKENS);
    assert_eq!(server.requests()[0].prompt_tokens(), tokens_at(&b, 4.0));
}
