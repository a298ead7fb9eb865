//! Choosing and rendering a step: the deterministic part of the scripted adapter.
//!
//! The step index is the number of assistant messages in the request's history, so a resumed,
//! forked or retried session gets the same answer at the same point. Call ids are
//! `call_<step>_<k>`: unique across the session, stable across replays. A request with a
//! `stream_id` also gets the answer's reasoning and text as pieces, a word each ([`pieces`]),
//! for `llm/delta` (issue 26 item 1).

use std::time::Duration;

use keel_plugin_api::conversation::Message;
use keel_plugin_api::events::llm::{DeltaKind, LlmDelta};
use keel_plugin_api::sdk::Frozen;
use keel_plugin_api::services::llm::{
    FinishReason, LlmCode, LlmFailure, LlmRequest, LlmResponse, StreamChunk, Usage,
};

use crate::script::{Finish, Script, Step};

/// The code for a call past the script's last step.
pub const SCRIPT_EXHAUSTED: LlmCode = LlmCode::ScriptExhausted;

/// The step a request gets: the count of assistant messages in its history.
pub fn step_index(request: &LlmRequest) -> usize {
    request.messages.iter().filter(|m| is_assistant(m)).count()
}

/// Whether a frozen message is an assistant message. The session writes `role` first, so the
/// prefix answers without parsing the message; any other document is parsed.
fn is_assistant(message: &Frozen) -> bool {
    let text = message.as_str();
    if text.starts_with("{\"role\":") {
        return text.starts_with("{\"role\":\"assistant\"");
    }
    matches!(message.parse::<Message>(), Ok(Message::Assistant { .. }))
}

/// The answer to `request` and how long to wait before giving it.
pub fn respond(script: &Script, request: &LlmRequest) -> (LlmResponse, Duration) {
    let index = step_index(request);
    match script.steps.get(index) {
        Some(step) => (
            LlmResponse {
                chunks: render(index, step),
            },
            Duration::from_millis(step.delay_ms.unwrap_or(0)),
        ),
        None => {
            let failure = LlmFailure {
                message: format!(
                    "{} has {} step(s) and this call needs step {index} (one per assistant \
                     message in the history)",
                    script.source,
                    script.steps.len()
                ),
                code: SCRIPT_EXHAUSTED,
                status: None,
                provider_retry_after_ms: None,
                request_id: None,
            };
            (
                LlmResponse {
                    chunks: vec![StreamChunk::error(failure)],
                },
                Duration::ZERO,
            )
        }
    }
}

/// The pause between the streamed pieces of `request`'s answer (its step's `piece_delay_ms`).
pub fn piece_pause(script: &Script, request: &LlmRequest) -> Duration {
    script
        .steps
        .get(step_index(request))
        .and_then(|s| s.piece_delay_ms)
        .map_or(Duration::ZERO, Duration::from_millis)
}

/// The answer's reasoning and text as `llm/delta` pieces for `stream_id`, a word (with the
/// whitespace after it) each, in order: joined, each block is its chunk's text.
pub fn pieces(chunks: &[StreamChunk], stream_id: u64) -> Vec<LlmDelta> {
    let mut out = Vec::new();
    for chunk in chunks {
        let (index, kind, text) = match chunk {
            StreamChunk::TextDelta { index, text } => (*index, DeltaKind::Text, text),
            StreamChunk::ReasoningDelta { index, text } => (*index, DeltaKind::Reasoning, text),
            _ => continue,
        };
        for word in text.split_inclusive(char::is_whitespace) {
            out.push(LlmDelta {
                stream_id,
                index,
                kind,
                text: word.into(),
            });
        }
    }
    out
}

/// One step's chunks: reasoning, text, tool calls, usage, finish.
pub fn render(index: usize, step: &Step) -> Vec<StreamChunk> {
    let mut chunks = Vec::new();
    let mut block = 0u32;
    if let Some(text) = step.reasoning.as_deref().filter(|t| !t.is_empty()) {
        chunks.push(StreamChunk::ReasoningDelta {
            index: block,
            text: text.to_owned(),
        });
        block += 1;
    }
    let has_text = step.text.as_deref().is_some_and(|t| !t.is_empty());
    if let Some(text) = step.text.as_deref().filter(|t| !t.is_empty()) {
        chunks.push(StreamChunk::TextDelta {
            index: block,
            text: text.to_owned(),
        });
    }
    for (k, call) in step.tool_calls.iter().enumerate() {
        chunks.push(StreamChunk::ToolCallDelta {
            index: u32::try_from(k).unwrap_or(u32::MAX),
            id: format!("call_{index}_{k}"),
            name: Some(call.name.clone()),
            arguments_delta: call.raw_arguments(),
        });
    }
    if let Some(u) = step.usage {
        chunks.push(StreamChunk::Usage {
            usage: Usage {
                input_tokens: u.input_tokens,
                output_tokens: u.output_tokens,
            },
        });
    }
    let reason = if let Some(e) = &step.error {
        FinishReason::Error {
            failure: LlmFailure {
                message: e.message.clone(),
                code: e.code,
                status: None,
                provider_retry_after_ms: None,
                request_id: None,
            },
        }
    } else if step.finish == Some(Finish::Length) {
        FinishReason::MaxTokens
    } else if !step.tool_calls.is_empty() {
        FinishReason::ToolCalls
    } else if has_text {
        FinishReason::Stop
    } else {
        FinishReason::Error {
            failure: LlmFailure::new(
                LlmCode::EmptyResponse,
                format!("scripted step {index} has neither text nor tool calls"),
            ),
        }
    };
    chunks.push(StreamChunk::Finish { reason });
    chunks
}

#[cfg(test)]
#[path = "replay_tests.rs"]
mod tests;
