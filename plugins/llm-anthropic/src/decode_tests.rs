//! Unit tests of `decode` (issue 15 item 2): every event the Messages stream sends, split
//! deltas, unknown types, error events, and a stream cut before `message_stop`.

use keel_plugin_api::services::llm::{FinishReason, LlmCode, StreamChunk, Usage};
use serde_json::{Value, json};

use super::Decoder;

fn run(events: &[Value]) -> Vec<StreamChunk> {
    let mut d = Decoder::new(Some("req_1".into()));
    for e in events {
        if let Err(f) = d.feed(&e.to_string()) {
            return d.fail(f);
        }
    }
    d.complete()
}

fn start() -> Value {
    json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
        "role": "assistant", "content": [], "model": "claude", "stop_reason": null,
        "usage": {"input_tokens": 7, "cache_creation_input_tokens": 100,
                  "cache_read_input_tokens": 900, "output_tokens": 1}}})
}

fn stop(reason: &str, output: u64) -> [Value; 2] {
    [
        json!({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": null},
               "usage": {"output_tokens": output}}),
        json!({"type": "message_stop"}),
    ]
}

fn block_start(index: u32, block: Value) -> Value {
    json!({"type": "content_block_start", "index": index, "content_block": block})
}

fn delta(index: u32, delta: Value) -> Value {
    json!({"type": "content_block_delta", "index": index, "delta": delta})
}

fn block_stop(index: u32) -> Value {
    json!({"type": "content_block_stop", "index": index})
}

fn finish(chunks: &[StreamChunk]) -> &FinishReason {
    match chunks.last() {
        Some(StreamChunk::Finish { reason }) => reason,
        other => panic!("no finish: {other:?}"),
    }
}

fn error_code(chunks: &[StreamChunk]) -> LlmCode {
    match finish(chunks) {
        FinishReason::Error { failure } => failure.code,
        other => panic!("not an error: {other:?}"),
    }
}

fn args(chunks: &[StreamChunk], index: u32) -> String {
    chunks
        .iter()
        .filter_map(|c| match c {
            StreamChunk::ToolCallDelta {
                index: i,
                arguments_delta,
                ..
            } if *i == index => Some(arguments_delta.as_str()),
            _ => None,
        })
        .collect()
}

#[test]
fn text_then_a_tool_use_whose_input_is_split_mid_token() {
    let [md, ms] = stop("tool_use", 42);
    let chunks = run(&[
        start(),
        json!({"type": "ping"}),
        block_start(0, json!({"type": "text", "text": ""})),
        delta(0, json!({"type": "text_delta", "text": "Writing "})),
        delta(0, json!({"type": "text_delta", "text": "the file."})),
        block_stop(0),
        block_start(
            1,
            json!({"type": "tool_use", "id": "toolu_1", "name": "write_file", "input": {}}),
        ),
        delta(1, json!({"type": "input_json_delta", "partial_json": ""})),
        delta(
            1,
            json!({"type": "input_json_delta", "partial_json": "{\"pa"}),
        ),
        json!({"type": "ping"}),
        delta(
            1,
            json!({"type": "input_json_delta", "partial_json": "th\": \"a.txt\", \"content\": \"caf\\u00"}),
        ),
        delta(
            1,
            json!({"type": "input_json_delta", "partial_json": "e9 ☕\"}"}),
        ),
        block_stop(1),
        md,
        ms,
    ]);
    assert_eq!(finish(&chunks), &FinishReason::ToolCalls);
    let input = args(&chunks, 1);
    let parsed: Value = serde_json::from_str(&input).unwrap();
    assert_eq!(parsed, json!({"path": "a.txt", "content": "café ☕"}));
    assert!(chunks.contains(&StreamChunk::ToolCallDelta {
        index: 1,
        id: "toolu_1".into(),
        name: Some("write_file".into()),
        arguments_delta: String::new(),
    }));
    // The prompt is all three input counts; output is message_delta's cumulative count.
    assert!(chunks.contains(&StreamChunk::Usage {
        usage: Usage {
            input_tokens: 1007,
            output_tokens: 42
        }
    }));
    let text: String = chunks
        .iter()
        .filter_map(|c| match c {
            StreamChunk::TextDelta { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Writing the file.");
}

#[test]
fn thinking_and_its_signature_and_redacted_thinking_become_reasoning_chunks() {
    let [md, ms] = stop("tool_use", 9);
    let chunks = run(&[
        start(),
        block_start(
            0,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
        ),
        delta(
            0,
            json!({"type": "thinking_delta", "thinking": "I should "}),
        ),
        delta(
            0,
            json!({"type": "thinking_delta", "thinking": "list files."}),
        ),
        delta(
            0,
            json!({"type": "signature_delta", "signature": "EqQBCgIYAhIM"}),
        ),
        block_stop(0),
        block_start(
            1,
            json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3"}),
        ),
        block_stop(1),
        block_start(
            2,
            json!({"type": "tool_use", "id": "toolu_2", "name": "list_dir", "input": {}}),
        ),
        block_stop(2),
        md,
        ms,
    ]);
    assert!(chunks.contains(&StreamChunk::ReasoningDelta {
        index: 0,
        text: "list files.".into()
    }));
    assert!(chunks.contains(&StreamChunk::ReasoningSignature {
        index: 0,
        signature: "EqQBCgIYAhIM".into(),
        redacted: false
    }));
    assert!(chunks.contains(&StreamChunk::ReasoningSignature {
        index: 1,
        signature: "EmwKAhgBEgy3".into(),
        redacted: true
    }));
    // A tool without input streams none: its arguments are `{}`.
    assert_eq!(args(&chunks, 2), "{}");
    assert_eq!(finish(&chunks), &FinishReason::ToolCalls);
    // The empty `thinking` and `signature` of the block start add no chunks.
    assert!(chunks.contains(&StreamChunk::BlockStart {
        index: 0,
        block_type: "reasoning".into()
    }));
    let at_zero = |c: &&StreamChunk| {
        matches!(
            c,
            StreamChunk::ReasoningDelta { index: 0, .. }
                | StreamChunk::ReasoningSignature { index: 0, .. }
        )
    };
    assert_eq!(chunks.iter().filter(at_zero).count(), 3, "{chunks:?}");
}

// cargo mutants: thinking given whole in its block start (no deltas) is kept, with its
// signature, as the block's own chunks.
#[test]
fn thinking_given_in_the_block_start_is_kept() {
    let [md, ms] = stop("end_turn", 2);
    let chunks = run(&[
        start(),
        block_start(
            0,
            json!({"type": "thinking", "thinking": "whole", "signature": "sig0"}),
        ),
        block_stop(0),
        block_start(1, json!({"type": "text", "text": ""})),
        delta(1, json!({"type": "text_delta", "text": "ok"})),
        // An empty delta after real text does not make the answer empty.
        delta(1, json!({"type": "text_delta", "text": ""})),
        block_stop(1),
        md,
        ms,
    ]);
    assert_eq!(finish(&chunks), &FinishReason::Stop);
    assert!(chunks.contains(&StreamChunk::ReasoningDelta {
        index: 0,
        text: "whole".into()
    }));
    assert!(chunks.contains(&StreamChunk::ReasoningSignature {
        index: 0,
        signature: "sig0".into(),
        redacted: false
    }));
    assert!(chunks.contains(&StreamChunk::BlockEnd { index: 0 }));
}

// cargo mutants: usage is reported when only the prompt was counted, and `is_done` is what
// the client uses to tell a finished stream from a cut one.
#[test]
fn usage_with_only_input_counts_and_done_only_after_message_stop() {
    let mut d = Decoder::new(None);
    let start = json!({"type": "message_start", "message": {"usage": {"input_tokens": 5}}});
    d.feed(&start.to_string()).unwrap();
    d.feed(&block_start(0, json!({"type": "text", "text": "x"})).to_string())
        .unwrap();
    d.feed(&delta(0, json!({"type": "text_delta", "text": "x"})).to_string())
        .unwrap();
    d.feed(&json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}}).to_string())
        .unwrap();
    assert!(!d.is_done());
    d.feed(&json!({"type": "message_stop"}).to_string())
        .unwrap();
    assert!(d.is_done());
    let chunks = d.complete();
    assert!(chunks.contains(&StreamChunk::Usage {
        usage: Usage {
            input_tokens: 5,
            output_tokens: 0
        }
    }));
}

#[test]
fn unknown_events_blocks_and_deltas_are_ignored() {
    let [md, ms] = stop("end_turn", 3);
    let chunks = run(&[
        start(),
        json!({"type": "brand_new_event", "x": 1}),
        block_start(
            0,
            json!({"type": "server_tool_use", "id": "s", "name": "web_search"}),
        ),
        delta(
            0,
            json!({"type": "input_json_delta", "partial_json": "{\"q\":1}"}),
        ),
        block_stop(0),
        block_start(1, json!({"type": "text", "text": "hi"})),
        delta(1, json!({"type": "citations_delta", "citation": {}})),
        delta(1, json!({"type": "future_delta", "x": 1})),
        block_stop(1),
        md,
        ms,
    ]);
    assert_eq!(finish(&chunks), &FinishReason::Stop);
    assert!(
        !chunks
            .iter()
            .any(|c| matches!(c, StreamChunk::ToolCallDelta { .. })),
        "{chunks:?}"
    );
    assert!(chunks.contains(&StreamChunk::TextDelta {
        index: 1,
        text: "hi".into()
    }));
    // An unknown block opens nothing, so it closes nothing.
    assert!(
        !chunks.contains(&StreamChunk::BlockEnd { index: 0 }),
        "{chunks:?}"
    );
}

#[test]
fn error_events_end_the_answer_with_the_mapped_code() {
    let overloaded = run(&[
        start(),
        block_start(0, json!({"type": "text", "text": ""})),
        delta(0, json!({"type": "text_delta", "text": "par"})),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ]);
    assert_eq!(error_code(&overloaded), LlmCode::Server);
    assert!(
        overloaded
            .iter()
            .any(|c| matches!(c, StreamChunk::Usage { .. })),
        "usage so far is kept"
    );
    for (kind, code) in [
        ("api_error", LlmCode::Server),
        ("rate_limit_error", LlmCode::RateLimit),
        ("authentication_error", LlmCode::Auth),
        ("invalid_request_error", LlmCode::BadRequest),
    ] {
        let chunks = run(&[json!({"type": "error", "error": {"type": kind, "message": "m"}})]);
        assert_eq!(error_code(&chunks), code, "{kind}");
    }
}

#[test]
fn a_stream_cut_before_message_stop_is_a_transport_failure_not_partial_success() {
    let chunks = run(&[
        start(),
        block_start(0, json!({"type": "text", "text": ""})),
        delta(0, json!({"type": "text_delta", "text": "partial answer"})),
    ]);
    assert_eq!(error_code(&chunks), LlmCode::Transport);
    // Even a message_delta with a stop reason is not the end: message_stop is.
    let [md, _] = stop("end_turn", 2);
    let chunks = run(&[
        start(),
        block_start(0, json!({"type": "text", "text": "all"})),
        block_stop(0),
        md,
    ]);
    assert_eq!(error_code(&chunks), LlmCode::Transport);
}

#[test]
fn garbage_data_max_tokens_and_empty_answers() {
    let mut d = Decoder::new(None);
    let f = d.feed("{not json").unwrap_err();
    assert_eq!(f.code, LlmCode::Transport);
    let [md, ms] = stop("max_tokens", 8192);
    let chunks = run(&[
        start(),
        block_start(0, json!({"type": "text", "text": "long"})),
        md,
        ms,
    ]);
    assert_eq!(finish(&chunks), &FinishReason::MaxTokens);
    let [md, ms] = stop("end_turn", 0);
    assert_eq!(error_code(&run(&[start(), md, ms])), LlmCode::EmptyResponse);
    // A text block whose only delta is empty is still an empty answer.
    let [md, ms] = stop("end_turn", 0);
    let chunks = run(&[
        start(),
        block_start(0, json!({"type": "text", "text": ""})),
        delta(0, json!({"type": "text_delta", "text": ""})),
        block_stop(0),
        md,
        ms,
    ]);
    assert_eq!(error_code(&chunks), LlmCode::EmptyResponse);
}
