//! SSE event → chunk mapping (B14 chunk protocol, LLM-04 codes).

use super::*;
use serde_json::json;

fn feed_all(events: &[Value]) -> Decoder {
    let mut d = Decoder::new(Some("req_9".into()));
    for e in events {
        d.feed(&e.to_string()).unwrap();
    }
    d
}

fn delta(delta: Value) -> Value {
    json!({"choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
}

fn finish(reason: &str) -> Value {
    json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
}

fn usage(i: u64, o: u64) -> Value {
    json!({"choices": [], "usage": {"prompt_tokens": i, "completion_tokens": o, "total_tokens": i + o}})
}

fn failure_code(chunks: &[StreamChunk]) -> Option<String> {
    match chunks.last() {
        Some(StreamChunk::Finish {
            reason: FinishReason::Error { failure },
        }) => Some(failure.code.to_string()),
        _ => None,
    }
}

#[test]
fn text_then_usage_then_finish() {
    let mut d = feed_all(&[
        delta(json!({"role": "assistant", "content": ""})),
        delta(json!({"content": "Hel"})),
        delta(json!({"content": "lo"})),
        finish("stop"),
        usage(10, 2),
    ]);
    d.feed("[DONE]").unwrap();
    assert!(d.is_done());
    assert_eq!(
        d.complete(),
        vec![
            StreamChunk::TextDelta {
                index: 0,
                text: "Hel".into()
            },
            StreamChunk::TextDelta {
                index: 0,
                text: "lo".into()
            },
            StreamChunk::Usage {
                usage: Usage {
                    input_tokens: 10,
                    output_tokens: 2
                }
            },
            StreamChunk::Finish {
                reason: FinishReason::Stop
            },
        ]
    );
}

#[test]
fn reasoning_gets_its_own_block_in_order_of_appearance() {
    let d = feed_all(&[
        delta(json!({"reasoning_content": "think"})),
        delta(json!({"reasoning": "more"})),
        delta(json!({"content": "answer"})),
        finish("stop"),
    ]);
    assert_eq!(
        d.complete(),
        vec![
            StreamChunk::ReasoningDelta {
                index: 0,
                text: "think".into()
            },
            StreamChunk::ReasoningDelta {
                index: 0,
                text: "more".into()
            },
            StreamChunk::TextDelta {
                index: 1,
                text: "answer".into()
            },
            StreamChunk::Finish {
                reason: FinishReason::Stop
            },
        ]
    );
}

#[test]
fn two_parallel_tool_calls_split_across_deltas() {
    let d = feed_all(&[
        delta(
            json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
            "function": {"name": "read_file", "arguments": ""}}]}),
        ),
        delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"pa"}}]})),
        delta(
            json!({"tool_calls": [{"index": 1, "id": "call_b", "type": "function",
            "function": {"name": "glob", "arguments": "{\"pattern\""}}]}),
        ),
        delta(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "th\":\"a\"}"}},
                                    {"index": 1, "function": {"arguments": ":\"*\"}"}}]}),
        ),
        finish("tool_calls"),
        usage(5, 7),
    ]);
    let chunks = d.complete();
    assert_eq!(
        chunks,
        vec![
            StreamChunk::ToolCallDelta {
                index: 0,
                id: "call_a".into(),
                name: Some("read_file".into()),
                arguments_delta: String::new()
            },
            StreamChunk::ToolCallDelta {
                index: 0,
                id: String::new(),
                name: None,
                arguments_delta: "{\"pa".into()
            },
            StreamChunk::ToolCallDelta {
                index: 1,
                id: "call_b".into(),
                name: Some("glob".into()),
                arguments_delta: "{\"pattern\"".into()
            },
            StreamChunk::ToolCallDelta {
                index: 0,
                id: String::new(),
                name: None,
                arguments_delta: "th\":\"a\"}".into()
            },
            StreamChunk::ToolCallDelta {
                index: 1,
                id: String::new(),
                name: None,
                arguments_delta: ":\"*\"}".into()
            },
            StreamChunk::Usage {
                usage: Usage {
                    input_tokens: 5,
                    output_tokens: 7
                }
            },
            StreamChunk::Finish {
                reason: FinishReason::ToolCalls
            },
        ]
    );
}

#[test]
fn tool_calls_win_over_a_stop_reason() {
    let d = feed_all(&[
        delta(
            json!({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "glob", "arguments": "{}"}}]}),
        ),
        finish("stop"),
    ]);
    assert_eq!(
        d.complete().last(),
        Some(&StreamChunk::Finish {
            reason: FinishReason::ToolCalls
        })
    );
}

#[test]
fn length_is_max_tokens() {
    let d = feed_all(&[delta(json!({"content": "cut"})), finish("length")]);
    assert_eq!(
        d.complete().last(),
        Some(&StreamChunk::Finish {
            reason: FinishReason::MaxTokens
        })
    );
}

#[test]
fn llm_04_eof_before_finish_is_transport() {
    let d = feed_all(&[delta(json!({"content": "partial"}))]);
    assert!(!d.has_finish_reason());
    let chunks = d.complete();
    assert_eq!(
        chunks[0],
        StreamChunk::TextDelta {
            index: 0,
            text: "partial".into()
        }
    );
    assert_eq!(failure_code(&chunks).as_deref(), Some("TRANSPORT"));
}

#[test]
fn eof_after_finish_reason_is_a_complete_answer() {
    let d = feed_all(&[delta(json!({"content": "ok"})), finish("stop")]);
    assert!(d.has_finish_reason());
    assert_eq!(
        d.complete().last(),
        Some(&StreamChunk::Finish {
            reason: FinishReason::Stop
        })
    );
}

#[test]
fn llm_04_empty_answer_is_empty_response() {
    let mut d = feed_all(&[delta(json!({"content": ""})), finish("stop"), usage(3, 0)]);
    d.feed("[DONE]").unwrap();
    let chunks = d.complete();
    assert_eq!(failure_code(&chunks).as_deref(), Some("EMPTY_RESPONSE"));
    // Usage still precedes the finish.
    assert_eq!(chunks.len(), 2);
    assert!(matches!(chunks[0], StreamChunk::Usage { .. }));
}

#[test]
fn llm_04_undecodable_data_is_transport() {
    let mut d = Decoder::new(Some("req_1".into()));
    let f = d.feed("{not json").unwrap_err();
    assert_eq!(f.code.as_str(), "TRANSPORT");
    assert_eq!(f.request_id.as_deref(), Some("req_1"));
}

#[test]
fn llm_04_in_stream_error_events() {
    let mut d = Decoder::default();
    let f = d
        .feed(&json!({"error": {"message": "upstream overloaded"}}).to_string())
        .unwrap_err();
    assert_eq!(f.code.as_str(), "SERVER");
    assert!(f.message.contains("upstream overloaded"));
    let f = d
        .feed(&json!({"error": {"message": "x", "code": "context_length_exceeded"}}).to_string())
        .unwrap_err();
    assert_eq!(f.code.as_str(), "CONTEXT_WINDOW_EXCEEDED");
}

#[test]
fn nothing_is_read_after_done() {
    let mut d = feed_all(&[delta(json!({"content": "a"})), finish("stop")]);
    d.feed("[DONE]").unwrap();
    d.feed("{garbage").unwrap();
    assert_eq!(d.complete().len(), 2);
}

// ---- issue 11: the non-streamed answer, empty streams, unknown usage ------------------------

fn completion(message: Value, finish_reason: &str, usage: Option<(u64, u64)>) -> Vec<u8> {
    let mut c = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    });
    if let Some((i, o)) = usage {
        c["usage"] = json!({"prompt_tokens": i, "completion_tokens": o, "total_tokens": i + o});
    }
    c.to_string().into_bytes()
}

// Item 2: one model of the answer: a whole `chat.completion` yields the chunks its streamed
// twin yields (text, tool calls by position, usage, finish), so the loop assembles the same turn.
#[test]
fn a_whole_completion_yields_the_chunks_of_its_stream() {
    let mut whole = Decoder::new(None);
    whole
        .feed_completion(&completion(
            json!({"role": "assistant", "content": "Writing it.", "tool_calls": [
                {"id": "call_a", "type": "function",
                 "function": {"name": "write_file", "arguments": "{\"path\":\"a\"}"}},
                {"id": "call_b", "type": "function",
                 "function": {"name": "shell", "arguments": "{\"command\":\"cat a\"}"}}
            ]}),
            "tool_calls",
            Some((40, 9)),
        ))
        .unwrap();
    assert!(whole.is_done() && !whole.is_empty());
    let streamed = feed_all(&[
        delta(json!({"role": "assistant", "content": "Writing it."})),
        delta(
            json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
            "function": {"name": "write_file", "arguments": "{\"path\":\"a\"}"}}]}),
        ),
        delta(
            json!({"tool_calls": [{"index": 1, "id": "call_b", "type": "function",
            "function": {"name": "shell", "arguments": "{\"command\":\"cat a\"}"}}]}),
        ),
        finish("tool_calls"),
        usage(40, 9),
    ]);
    let chunks = whole.complete();
    assert_eq!(chunks, streamed.complete());
    assert_eq!(
        chunks[2],
        StreamChunk::ToolCallDelta {
            index: 1,
            id: "call_b".into(),
            name: Some("shell".into()),
            arguments_delta: "{\"command\":\"cat a\"}".into()
        }
    );
    assert_eq!(
        chunks.last(),
        Some(&StreamChunk::Finish {
            reason: FinishReason::ToolCalls
        })
    );
}

#[test]
fn a_whole_completion_with_text_null_content_or_an_error() {
    let mut d = Decoder::new(None);
    d.feed_completion(&completion(
        json!({"role": "assistant", "content": "hi", "reasoning_content": "think"}),
        "stop",
        Some((3, 1)),
    ))
    .unwrap();
    let chunks = d.complete();
    assert!(matches!(&chunks[0], StreamChunk::ReasoningDelta { text, .. } if text == "think"));
    assert!(matches!(&chunks[1], StreamChunk::TextDelta { text, .. } if text == "hi"));
    let mut d = Decoder::new(None);
    d.feed_completion(&completion(
        json!({"role": "assistant", "content": null}),
        "stop",
        None,
    ))
    .unwrap();
    assert_eq!(
        failure_code(&d.complete()).as_deref(),
        Some("EMPTY_RESPONSE")
    );
    let mut d = Decoder::new(Some("r".into()));
    let f = d.feed_completion(b"<html>bad gateway</html>").unwrap_err();
    assert_eq!(
        (f.code.as_str(), f.request_id.as_deref()),
        ("TRANSPORT", Some("r"))
    );
    let f = Decoder::new(None)
        .feed_completion(
            br#"{"error":{"message":"context window","code":"context_length_exceeded"}}"#,
        )
        .unwrap_err();
    assert_eq!(f.code.as_str(), "CONTEXT_WINDOW_EXCEEDED");
}

// Items 2 and 4: a stream that closes with nothing (or `[DONE]` alone) is empty; one event
// is enough not to be.
#[test]
fn an_empty_stream_is_told_apart() {
    let mut d = Decoder::new(None);
    assert!(d.is_empty());
    d.feed("").unwrap();
    d.feed("[DONE]").unwrap();
    assert!(d.is_empty());
    let d = feed_all(&[delta(json!({"role": "assistant", "content": ""}))]);
    assert!(!d.is_empty());
}

// Item 5: no usage event, or one without counts, reports no usage chunk (unknown), never
// zeros; real zeros are kept.
#[test]
fn usage_without_counts_is_unknown_not_zero() {
    let no_usage = feed_all(&[delta(json!({"content": "a"})), finish("stop")]).complete();
    assert!(
        !no_usage
            .iter()
            .any(|c| matches!(c, StreamChunk::Usage { .. }))
    );
    let empty_usage = feed_all(&[
        delta(json!({"content": "a"})),
        finish("stop"),
        json!({"choices": [], "usage": {}}),
        json!({"choices": [], "usage": null}),
    ])
    .complete();
    assert!(
        !empty_usage
            .iter()
            .any(|c| matches!(c, StreamChunk::Usage { .. }))
    );
    // Issue 23 item 19: zero prompt tokens is a server that did not count, not a count.
    for (i, o) in [(0, 0), (0, 3)] {
        let zeros =
            feed_all(&[delta(json!({"content": "a"})), finish("stop"), usage(i, o)]).complete();
        assert!(
            !zeros.iter().any(|c| matches!(c, StreamChunk::Usage { .. })),
            "{i}/{o}"
        );
    }
    let no_output =
        feed_all(&[delta(json!({"content": "a"})), finish("stop"), usage(5, 0)]).complete();
    assert_eq!(
        no_output[1],
        StreamChunk::Usage {
            usage: Usage {
                input_tokens: 5,
                output_tokens: 0
            }
        }
    );
}
