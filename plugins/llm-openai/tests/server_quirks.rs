//! The adapter against the quirks of OpenAI-compatible servers that are not OpenAI (issue 11,
//! llama-cpp-python's server): `tool_choice` sent with tools, the non-streamed request path,
//! the empty stream asked again without streaming (and, under `stream = "auto"`, streaming
//! turned off for the rest of the run), and a request-validation 500 told from a server error.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails by panicking"
)]

mod support;

use std::sync::Once;

use keel_plugin_api::services::llm::{LlmRequest, ModelTool, StreamChunk, Usage};
use keel_plugin_llm_openai::Adapter;
use keel_plugin_llm_openai::config::StreamMode;
use serde_json::{Value, json};
use support::*;

const KEY_REF: &str = "KEEL_TEST_QUIRKS_OPENAI_KEY";

fn set_key() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        #[allow(
            unsafe_code,
            reason = "std::env::set_var is unsafe; this test owns the variable"
        )]
        // SAFETY: set once, before any adapter in this binary reads it; the only other readers
        // are Rust `std::env` calls (which share std's env lock).
        unsafe {
            std::env::set_var(KEY_REF, "sk-quirks");
        }
    });
}

fn adapter(mock: &Mock, stream: StreamMode) -> Adapter {
    set_key();
    let mut c = config(&mock.base_url, KEY_REF);
    c.stream = stream;
    Adapter::new(c).unwrap()
}

fn with_tools(text: &str) -> LlmRequest {
    let mut r = request(text);
    r.tools = vec![ModelTool {
        name: "write_file".into(),
        description: "writes".into(),
        parameters: json!({"type": "object"}),
    }];
    r
}

/// A whole `chat.completion` (200, `application/json`) with one tool call, or text.
fn completion(message: Value, finish: &str, usage: Option<(u64, u64)>) -> Reply {
    let mut c = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    });
    if let Some((i, o)) = usage {
        c["usage"] = json!({"prompt_tokens": i, "completion_tokens": o, "total_tokens": i + o});
    }
    status(200, &[], &c.to_string())
}

fn call_message() -> Value {
    json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "write_file", "arguments": "{\"path\":\"a\"}"}}]})
}

fn text_message(t: &str) -> Value {
    json!({"role": "assistant", "content": t})
}

/// 200, an SSE head, and nothing: the connection closes.
fn empty_stream() -> Reply {
    vec![sse_head()]
}

fn streams(mock: &Mock) -> Vec<Value> {
    mock.requests()
        .iter()
        .map(|r| r.body["stream"].clone())
        .collect()
}

fn tool_call_of(chunks: &[StreamChunk]) -> Option<(String, String)> {
    chunks.iter().find_map(|c| match c {
        StreamChunk::ToolCallDelta {
            id, name: Some(n), ..
        } => Some((id.clone(), n.clone())),
        _ => None,
    })
}

// Item 1: tools go with `tool_choice` ("auto" unless the row says otherwise).
#[tokio::test]
async fn tool_choice_goes_with_the_tools() {
    let mock = Mock::start(vec![sse(&[text_delta("x"), finish_event("stop")])]);
    let r = adapter(&mock, StreamMode::Auto)
        .generate(with_tools("hi"))
        .await;
    assert!(failure_of(&r.chunks).is_none(), "{r:?}");
    let body = &mock.requests()[0].body;
    assert_eq!(body["tool_choice"], "auto");
    assert_eq!(body["tools"][0]["function"]["name"], "write_file");
}

// Item 2: `stream = false` sends one non-streamed request (no stream options, JSON accepted)
// and reads the whole answer into the chunks a stream would give, usage included.
#[tokio::test]
async fn stream_false_reads_a_whole_completion() {
    let mock = Mock::start(vec![completion(
        call_message(),
        "tool_calls",
        Some((21, 4)),
    )]);
    let r = adapter(&mock, StreamMode::Never)
        .generate(with_tools("go"))
        .await;
    assert_eq!(
        tool_call_of(&r.chunks),
        Some(("call_1".into(), "write_file".into()))
    );
    let n = r.chunks.len();
    assert_eq!(
        r.chunks[n - 2],
        StreamChunk::Usage {
            usage: Usage {
                input_tokens: 21,
                output_tokens: 4
            }
        }
    );
    assert!(failure_of(&r.chunks).is_none(), "{r:?}");
    let req = &mock.requests()[0];
    assert_eq!(req.body["stream"], false);
    assert!(req.body.get("stream_options").is_none());
    assert_eq!(req.header("accept"), Some("application/json"));
}

// Item 2: under "auto", an empty stream for a request with tools is asked again without
// streaming within the same attempt; the answer is used, and the row streams no more.
#[tokio::test]
async fn auto_falls_back_after_an_empty_stream_with_tools_and_remembers_it() {
    let mock = Mock::start(vec![
        empty_stream(),
        completion(call_message(), "tool_calls", Some((5, 2))),
        completion(text_message("done"), "stop", Some((9, 1))),
    ]);
    let a = adapter(&mock, StreamMode::Auto);
    assert!(a.streams());
    let r = a.generate(with_tools("go")).await;
    assert_eq!(
        tool_call_of(&r.chunks),
        Some(("call_1".into(), "write_file".into()))
    );
    assert!(!a.streams(), "the fallback is remembered for the row");
    let r = a.generate(with_tools("next")).await;
    assert!(failure_of(&r.chunks).is_none(), "{r:?}");
    assert_eq!(
        streams(&mock),
        vec![json!(true), json!(false), json!(false)]
    );
}

// The switch is for streams that fail with tools: without tools, or with `stream = true`, the
// empty stream is still asked again (its answer used) but the row keeps streaming.
#[tokio::test]
async fn the_switch_needs_auto_and_tools() {
    let mock = Mock::start(vec![
        empty_stream(),
        completion(text_message("a"), "stop", None),
        sse(&[text_delta("b"), finish_event("stop")]),
    ]);
    let a = adapter(&mock, StreamMode::Auto);
    let r = a.generate(request("no tools")).await;
    assert!(failure_of(&r.chunks).is_none(), "{r:?}");
    assert!(a.streams());
    assert!(failure_of(&a.generate(request("again")).await.chunks).is_none());
    assert_eq!(streams(&mock), vec![json!(true), json!(false), json!(true)]);

    let mock = Mock::start(vec![
        empty_stream(),
        completion(text_message("a"), "stop", None),
        sse(&[text_delta("b"), finish_event("stop")]),
    ]);
    let a = adapter(&mock, StreamMode::Always);
    assert!(failure_of(&a.generate(with_tools("go")).await.chunks).is_none());
    assert!(a.streams());
    assert!(failure_of(&a.generate(with_tools("again")).await.chunks).is_none());
    assert_eq!(streams(&mock), vec![json!(true), json!(false), json!(true)]);
}

// Item 4: an empty stream for an oversized prompt is asked again without streaming, and the
// attempt ends with the real error (CONTEXT_WINDOW_EXCEEDED), not TRANSPORT; the row keeps
// streaming (nothing was answered).
#[tokio::test]
async fn an_empty_stream_learns_the_real_error_without_streaming() {
    let overflow = json!({"error": {
        "message": "This model's maximum context length is 512 tokens. However, you requested 900 tokens (900 in the messages, None in the completion). Please reduce the length of the messages or completion.",
        "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}});
    let mock = Mock::start(vec![
        empty_stream(),
        status(400, &[], &overflow.to_string()),
    ]);
    let a = adapter(&mock, StreamMode::Auto);
    let r = a.generate(with_tools("huge")).await;
    let f = failure_of(&r.chunks).unwrap();
    assert_eq!(f.code.as_str(), "CONTEXT_WINDOW_EXCEEDED");
    assert!(
        f.message.contains("maximum context length is 512"),
        "{}",
        f.message
    );
    assert!(f.message.contains("without streaming"), "{}", f.message);
    assert_eq!(r.chunks.len(), 1);
    assert!(a.streams());
    assert_eq!(streams(&mock), vec![json!(true), json!(false)]);
}

// Item 4: both empty: the attempt is TRANSPORT, after exactly two requests.
#[tokio::test]
async fn an_empty_stream_then_an_empty_body_is_transport() {
    let mock = Mock::start(vec![empty_stream(), status(200, &[], "")]);
    let r = adapter(&mock, StreamMode::Auto)
        .generate(request("x"))
        .await;
    let f = failure_of(&r.chunks).unwrap();
    assert_eq!(f.code.as_str(), "TRANSPORT");
    assert!(f.message.contains("empty body"), "{}", f.message);
    assert_eq!(mock.requests().len(), 2);
}

// Item 3: llama-cpp-python's answer to `content: null` (its route handler wraps the
// validation error in an OpenAI error with HTTP 500) is INVALID_REQUEST, not SERVER.
#[tokio::test]
async fn a_validation_500_is_invalid_request() {
    let body = json!({"error": {
        "message": "1 validation error:\n  {'type': 'string_type', 'loc': ('body', 'messages', 2, 'typed-dict', 'content'), 'msg': 'Input should be a valid string', 'input': None}\n",
        "type": "internal_server_error", "param": null, "code": null}});
    let mock = Mock::start(vec![status(500, &[], &body.to_string())]);
    let r = adapter(&mock, StreamMode::Auto)
        .generate(request("x"))
        .await;
    let f = failure_of(&r.chunks).unwrap();
    assert_eq!((f.code.as_str(), f.status), ("INVALID_REQUEST", Some(500)));
    assert_eq!(
        mock.requests().len(),
        1,
        "a refused request is not asked again"
    );
}
