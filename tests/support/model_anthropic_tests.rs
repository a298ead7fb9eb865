//! Unit tests of the model server's Messages endpoint (issue 15 item 2), with the raw client
//! of `model_server_tests`: the events it emits for each scripted reply.

use serde_json::{Value, json};

use super::tests::send;
use super::*;

const MESSAGES: &str = "/v1/messages";

fn events(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).expect("event is JSON"))
        .collect()
}

fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e["delta"]["type"].as_str() {
            Some(d) => d.to_owned(),
            None => e["type"].as_str().unwrap_or_default().to_owned(),
        })
        .collect()
}

#[test]
fn a_reply_streams_ping_thinking_text_split_tool_input_usage_and_message_stop() {
    let args = r#"{"path": "a.txt", "content": "é"}"#;
    let server = ModelServer::start(vec![
        Reply::text_and_calls("Hi", vec![("toolu_1", "write_file", args)])
            .thinking("hmm", "sig")
            .cache_usage(3, 4),
    ]);
    let raw = send(&server, "POST", MESSAGES, r#"{"stream": true}"#);
    assert_eq!(raw.status, 200);
    let ev = events(&raw.body);
    let k = kinds(&ev);
    assert_eq!(k[..2], ["message_start", "ping"]);
    assert!(k.contains(&"thinking_delta".to_owned()) && k.contains(&"signature_delta".to_owned()));
    assert_eq!(k.last().map(String::as_str), Some("message_stop"));
    let pieces: Vec<&str> = ev
        .iter()
        .filter_map(|e| e["delta"]["partial_json"].as_str())
        .collect();
    assert!(pieces.len() >= 3, "{pieces:?}");
    assert_eq!(pieces.concat(), args);
    assert_eq!(
        ev[0]["message"]["usage"]["cache_read_input_tokens"],
        json!(4)
    );
    let stop = ev.iter().find(|e| e["type"] == "message_delta").unwrap();
    assert_eq!(stop["delta"]["stop_reason"], "tool_use");
    assert_eq!(server.anthropic_requests().len(), 1);
}

#[test]
fn faults_end_without_message_stop() {
    let server = ModelServer::start(vec![
        Reply::stream_error("overloaded_error", "Overloaded"),
        Reply::disconnect_mid_stream(),
        Reply::status(529, anthropic_error_body("overloaded_error", "Overloaded"))
            .header("retry-after", "1"),
    ]);
    let k = kinds(&events(&send(&server, "POST", MESSAGES, "{}").body));
    assert_eq!(k.last().map(String::as_str), Some("error"));
    let k = kinds(&events(&send(&server, "POST", MESSAGES, "{}").body));
    assert!(!k.contains(&"message_stop".to_owned()), "{k:?}");
    let raw = send(&server, "POST", MESSAGES, "{}");
    assert_eq!(raw.status, 529);
    assert_eq!(
        raw.headers.get("retry-after").map(String::as_str),
        Some("1")
    );
    assert!(raw.body.contains("overloaded_error"));
}
