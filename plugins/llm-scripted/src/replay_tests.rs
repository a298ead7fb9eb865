//! Step choice (by assistant-message count) and chunk rendering (B14 order: content, usage,
//! finish; tool arguments as raw text).

use super::*;
use crate::script::{ScriptCall, ScriptError, ScriptUsage};
use keel_plugin_api::services::llm::LlmCallConfig;
use serde_json::{Value, json};

fn request(messages: Vec<Value>) -> LlmRequest {
    LlmRequest {
        session_id: None,
        stream_id: None,
        config: LlmCallConfig::default(),
        system: None,
        messages: messages
            .iter()
            .map(|m| Frozen::freeze(m).unwrap())
            .collect(),
        tools: vec![],
    }
}

fn script(steps: Vec<Step>) -> Script {
    Script {
        source: "script /demo.toml".into(),
        steps,
    }
}

fn text_step(t: &str) -> Step {
    Step {
        text: Some(t.into()),
        ..Step::default()
    }
}

#[test]
fn step_is_the_number_of_assistant_messages() {
    let s = script(vec![text_step("zero"), text_step("one")]);
    let first = request(vec![json!({"role": "user", "content": "hi"})]);
    let second = request(vec![
        json!({"role": "user", "content": "hi"}),
        json!({"role": "assistant", "content": "zero"}),
        json!({"role": "user", "content": "again"}),
    ]);
    assert_eq!(step_index(&first), 0);
    assert_eq!(step_index(&second), 1);
    let text = |r: &LlmResponse| match &r.chunks[0] {
        StreamChunk::TextDelta { text, .. } => text.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(text(&respond(&s, &first).0), "zero");
    assert_eq!(text(&respond(&s, &second).0), "one");
    // A retry of the same call (same history) replays the same step.
    assert_eq!(respond(&s, &second).0, respond(&s, &second).0);
}

#[test]
fn past_the_end_is_script_exhausted_naming_the_script() {
    let s = script(vec![text_step("only")]);
    let r = respond(
        &s,
        &request(vec![json!({"role": "assistant", "content": "only"})]),
    )
    .0;
    match &r.chunks[..] {
        [
            StreamChunk::Finish {
                reason: FinishReason::Error { failure },
            },
        ] => {
            assert_eq!(failure.code, SCRIPT_EXHAUSTED);
            assert!(
                failure.message.contains("script /demo.toml"),
                "{}",
                failure.message
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn tool_call_step_renders_ids_full_arguments_usage_then_finish() {
    let step = Step {
        reasoning: Some("plan".into()),
        text: Some("reading".into()),
        tool_calls: vec![
            ScriptCall {
                name: "read_file".into(),
                arguments: Some(json!({"path": "a"})),
            },
            ScriptCall {
                name: "glob".into(),
                arguments: Some(json!("{\"pattern\":\"*\"}")),
            },
        ],
        usage: Some(ScriptUsage {
            input_tokens: 3,
            output_tokens: 2,
        }),
        ..Step::default()
    };
    assert_eq!(
        render(2, &step),
        vec![
            StreamChunk::ReasoningDelta {
                index: 0,
                text: "plan".into()
            },
            StreamChunk::TextDelta {
                index: 1,
                text: "reading".into()
            },
            StreamChunk::ToolCallDelta {
                index: 0,
                id: "call_2_0".into(),
                name: Some("read_file".into()),
                arguments_delta: "{\"path\":\"a\"}".into(),
            },
            StreamChunk::ToolCallDelta {
                index: 1,
                id: "call_2_1".into(),
                name: Some("glob".into()),
                arguments_delta: "{\"pattern\":\"*\"}".into(),
            },
            StreamChunk::Usage {
                usage: Usage {
                    input_tokens: 3,
                    output_tokens: 2
                }
            },
            StreamChunk::Finish {
                reason: FinishReason::ToolCalls
            },
        ]
    );
}

#[test]
fn finishes_stop_length_error_and_empty() {
    let last = |step: &Step| render(0, step).pop().unwrap();
    assert_eq!(
        last(&text_step("x")),
        StreamChunk::Finish {
            reason: FinishReason::Stop
        }
    );
    let length = Step {
        finish: Some(Finish::Length),
        ..text_step("x")
    };
    assert_eq!(
        last(&length),
        StreamChunk::Finish {
            reason: FinishReason::MaxTokens
        }
    );
    let error = Step {
        error: Some(ScriptError {
            code: LlmCode::RateLimit,
            message: "wait".into(),
        }),
        ..Step::default()
    };
    match last(&error) {
        StreamChunk::Finish {
            reason: FinishReason::Error { failure },
        } => {
            assert_eq!(
                (failure.code.as_str(), failure.message.as_str()),
                ("RATE_LIMIT", "wait")
            );
        }
        other => panic!("{other:?}"),
    }
    match last(&Step::default()) {
        StreamChunk::Finish {
            reason: FinishReason::Error { failure },
        } => {
            assert_eq!(failure.code.as_str(), "EMPTY_RESPONSE");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn delay_is_reported() {
    let s = script(vec![Step {
        delay_ms: Some(40),
        ..text_step("x")
    }]);
    assert_eq!(respond(&s, &request(vec![])).1, Duration::from_millis(40));
}
