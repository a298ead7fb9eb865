//! Unit tests of the server's personalities with a raw `TcpStream` client: OpenAI's whole
//! (`stream: false`) answer, and the llama.cpp personality reproducing issue 11 items 1–5.

use serde_json::{Value, json};

use super::tests::{CHAT, Raw, send};
use super::*;

const TOOLS: &str = r#"[{"type":"function","function":{"name":"write_file","parameters":{}}}]"#;

/// A request body: `stream`, optional `tool_choice` (`Value::Null` = absent), tools or not,
/// and `messages`.
fn body(stream: bool, tools: bool, tool_choice: Value, messages: Value) -> String {
    let mut b = json!({"model": "m", "stream": stream, "messages": messages});
    if stream {
        b["stream_options"] = json!({"include_usage": true});
    }
    if tools {
        b["tools"] = serde_json::from_str(TOOLS).unwrap();
    }
    if !tool_choice.is_null() {
        b["tool_choice"] = tool_choice;
    }
    b.to_string()
}

fn hi() -> Value {
    json!([{"role": "user", "content": "hi"}])
}

fn call() -> Reply {
    Reply::tool_calls(vec![("call_1", "write_file", r#"{"path":"a.txt"}"#)])
}

fn llama(replies: Vec<Reply>) -> ModelServer {
    ModelServer::start_as(Personality::llama_cpp(), replies)
}

fn json_body(r: &Raw) -> Value {
    serde_json::from_str(&r.body).unwrap_or_else(|e| panic!("{e}: {}", r.body))
}

fn has_usage(r: &Raw) -> bool {
    r.chunks().iter().any(|c| !c["usage"].is_null())
}

#[test]
fn openai_answers_stream_false_with_one_whole_completion() {
    let server = ModelServer::start(vec![call(), Reply::text("done").usage(7, 2)]);
    let r = send(
        &server,
        "POST",
        CHAT,
        &body(false, true, json!("auto"), hi()),
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.headers["content-type"], "application/json");
    let c = json_body(&r);
    assert_eq!(c["object"], "chat.completion");
    let choice = &c["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["message"]["content"], Value::Null);
    assert_eq!(
        choice["message"]["tool_calls"][0],
        json!({"id": "call_1", "type": "function",
               "function": {"name": "write_file", "arguments": r#"{"path":"a.txt"}"#}})
    );
    let c = json_body(&send(
        &server,
        "POST",
        CHAT,
        &body(false, true, json!("auto"), hi()),
    ));
    assert_eq!(c["choices"][0]["message"]["content"], "done");
    assert_eq!(c["usage"]["prompt_tokens"], 7);
    assert_eq!(server.consumed(), 2);
}

// Item 1: with tools but no tool_choice (or "none"), the model answers in text and calls
// nothing; the reply is consumed.
#[test]
fn llama_cpp_reads_a_missing_tool_choice_as_none() {
    let server = llama(vec![call(), call()]);
    for choice in [Value::Null, json!("none")] {
        let r = send(&server, "POST", CHAT, &body(true, true, choice, hi()));
        assert_eq!(r.status, 200);
        assert_eq!(r.finishes(), vec!["stop"]);
        assert!(
            r.content().contains("I would call write_file"),
            "{}",
            r.body
        );
        assert!(!r.body.contains("tool_calls"), "{}", r.body);
    }
    assert_eq!(server.consumed(), 2);
}

// Item 2: streaming with tools and tool_choice "auto" is 200 with an empty body, and the
// model never ran (no reply consumed); the same request unstreamed gets the tool call.
#[test]
fn llama_cpp_cannot_stream_with_auto_tool_choice() {
    let server = llama(vec![call()]);
    let r = send(
        &server,
        "POST",
        CHAT,
        &body(true, true, json!("auto"), hi()),
    );
    assert_eq!(r.status, 200);
    assert!(r.headers["content-type"].starts_with("text/event-stream"));
    // uvicorn's ending: an empty chunked body that promises keep-alive, then a closed socket.
    assert_eq!(r.headers["connection"], "keep-alive");
    assert_eq!(r.body, "0\r\n\r\n");
    assert_eq!(server.consumed(), 0);
    let r = send(
        &server,
        "POST",
        CHAT,
        &body(false, true, json!("auto"), hi()),
    );
    let c = json_body(&r);
    assert_eq!(
        c["choices"][0]["message"]["tool_calls"][0]["function"]["name"],
        "write_file"
    );
    assert_eq!(server.consumed(), 1);
}

// A named function can be streamed (chatml-function-calling's "tool choice by user" case).
#[test]
fn llama_cpp_streams_a_named_tool_choice() {
    let server = llama(vec![call()]);
    let named = json!({"type": "function", "function": {"name": "write_file"}});
    let r = send(&server, "POST", CHAT, &body(true, true, named, hi()));
    assert_eq!(r.finishes(), vec!["tool_calls"]);
    assert!(!has_usage(&r));
}

// Item 3: `content: null` anywhere fails validation with a 500; "" passes. No reply consumed.
#[test]
fn llama_cpp_rejects_null_content_with_a_500_validation_error() {
    let server = llama(vec![Reply::text("ok")]);
    let history = |content: Value| {
        json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": content, "tool_calls": [{"id": "c1",
             "type": "function", "function": {"name": "write_file", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "written"},
        ])
    };
    let r = send(
        &server,
        "POST",
        CHAT,
        &body(false, true, json!("auto"), history(Value::Null)),
    );
    assert_eq!(r.status, 500);
    let e = json_body(&r);
    assert_eq!(e["error"]["type"], "internal_server_error");
    let message = e["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("1 validation error"), "{message}");
    assert!(message.contains("'messages', 1,"), "{message}");
    assert_eq!(server.consumed(), 0);
    let r = send(
        &server,
        "POST",
        CHAT,
        &body(false, true, json!("auto"), history(json!(""))),
    );
    assert_eq!(json_body(&r)["choices"][0]["message"]["content"], "ok");
}

// Item 4: over the context window, a stream is 200 and empty; the unstreamed request gets
// llama-cpp-python's 400 context_length_exceeded. No reply consumed.
#[test]
fn llama_cpp_overflow_is_an_empty_stream_or_a_400() {
    let server =
        ModelServer::start_as(Personality::LlamaCpp { n_ctx: 100 }, vec![Reply::text("x")]);
    let big = json!([{"role": "user", "content": "y".repeat(1000)}]);
    let r = send(
        &server,
        "POST",
        CHAT,
        &body(true, false, Value::Null, big.clone()),
    );
    assert_eq!((r.status, r.body.as_str()), (200, "0\r\n\r\n"));
    let r = send(&server, "POST", CHAT, &body(false, false, Value::Null, big));
    assert_eq!(r.status, 400);
    let e = json_body(&r)["error"].clone();
    assert_eq!(e["code"], "context_length_exceeded");
    assert_eq!(e["param"], "messages");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "This model's maximum context length is 100 tokens. However, you requested"
        ),
        "{message}"
    );
    assert_eq!(server.consumed(), 0);
    // A request that fits is served.
    let r = send(&server, "POST", CHAT, &body(true, false, Value::Null, hi()));
    assert_eq!(r.content(), "x");
}

// Item 5: a stream never carries usage, whatever stream_options says; a whole answer does.
#[test]
fn llama_cpp_streams_carry_no_usage() {
    let server = llama(vec![Reply::text("hello"), Reply::text("again")]);
    let r = send(&server, "POST", CHAT, &body(true, false, Value::Null, hi()));
    assert_eq!(r.content(), "hello");
    assert_eq!(r.data().last(), Some(&"[DONE]"));
    assert!(!has_usage(&r), "{}", r.body);
    let c = json_body(&send(
        &server,
        "POST",
        CHAT,
        &body(false, false, Value::Null, hi()),
    ));
    assert_eq!(c["usage"]["completion_tokens"], DEFAULT_OUTPUT_TOKENS);
}

#[test]
fn token_estimate_is_four_bytes_of_messages_and_tools() {
    let b = json!({"messages": [{"role": "user", "content": "z".repeat(400)}]});
    let t = estimated_tokens(&b);
    assert!((100..=110).contains(&t), "{t}");
    assert_eq!(Personality::default(), Personality::OpenAi);
    assert_eq!(
        Personality::llama_cpp(),
        Personality::LlamaCpp {
            n_ctx: LLAMA_CPP_N_CTX
        }
    );
}
