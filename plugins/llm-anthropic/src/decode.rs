//! Anthropic Messages SSE events → keel's chunk protocol (B14), one event at a time.
//!
//! The client feeds it the `data` of each event (the `type` inside the data names the event,
//! as the `event:` line does). Block indices are Anthropic's own `index`, so text, thinking
//! and tool-use blocks keep the model's order; a tool call's `input_json_delta` pieces are
//! appended raw (a piece may end mid-token: they are only parsed once whole, by the tool), a
//! thinking block's `signature_delta` and a `redacted_thinking` block's `data` become
//! `reasoning-signature` chunks the agent loop keeps with the message. `ping` and event or
//! block types this adapter does not know are ignored (the API adds types; a stream is not
//! refused for them). An `error` event, and a stream that ends before `message_stop`, end the
//! answer with a failure, never with a success holding partial text.
//!
//! Usage: `message_start` carries the prompt's tokens, split in three (`input_tokens`,
//! `cache_creation_input_tokens`, `cache_read_input_tokens`); keel's `input_tokens` is their
//! sum — the whole prompt, which is what the context manager calibrates its estimate against.
//! `message_delta` carries the cumulative `output_tokens`.

use std::collections::BTreeMap;

use keel_plugin_api::services::llm::{FinishReason, LlmCode, LlmFailure, StreamChunk, Usage};
use serde_json::Value;

use crate::failure;

/// What a content block is, for its deltas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    Text,
    ToolUse {
        got_input: bool,
    },
    Thinking,
    /// A block type this adapter does not know: its deltas are ignored.
    Other,
}

/// Decoder state for one streamed answer.
#[derive(Debug, Default)]
pub struct Decoder {
    chunks: Vec<StreamChunk>,
    blocks: BTreeMap<u32, Block>,
    prompt_tokens: Option<u64>,
    output_tokens: Option<u64>,
    stop_reason: Option<String>,
    done: bool,
    saw_content: bool,
    saw_tool_use: bool,
    request_id: Option<String>,
}

fn u(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

impl Decoder {
    /// A decoder whose failures carry `request_id` (the `request-id` response header).
    pub fn new(request_id: Option<String>) -> Self {
        Decoder {
            request_id,
            ..Decoder::default()
        }
    }

    /// The chunks decoded so far (the client hands their text and reasoning pieces on as they
    /// come).
    pub fn chunks(&self) -> &[StreamChunk] {
        &self.chunks
    }

    /// Whether `message_stop` arrived.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Feeds one event's `data`.
    ///
    /// # Errors
    /// The failure an `error` event carries; `TRANSPORT` for data that is not JSON.
    pub fn feed(&mut self, data: &str) -> Result<(), LlmFailure> {
        let event: Value = serde_json::from_str(data).map_err(|e| {
            failure::failure(
                LlmCode::Transport,
                format!("the response stream carried an event that is not JSON: {e}"),
                self.request_id.clone(),
            )
        })?;
        let index = event
            .get("index")
            .and_then(Value::as_u64)
            .and_then(|i| u32::try_from(i).ok())
            .unwrap_or(0);
        match text(&event, "type") {
            "message_start" => {
                if let Some(usage) = event.get("message").and_then(|m| m.get("usage")) {
                    self.usage_from(usage);
                }
            }
            "content_block_start" => {
                let block = event.get("content_block").unwrap_or(&Value::Null);
                self.block_start(index, block);
            }
            "content_block_delta" => {
                let delta = event.get("delta").unwrap_or(&Value::Null);
                self.block_delta(index, delta);
            }
            "content_block_stop" => self.block_stop(index),
            "message_delta" => {
                if let Some(reason) = event
                    .get("delta")
                    .and_then(|d| d.get("stop_reason"))
                    .and_then(Value::as_str)
                {
                    self.stop_reason = Some(reason.to_owned());
                }
                if let Some(usage) = event.get("usage") {
                    self.usage_from(usage);
                }
            }
            "message_stop" => self.done = true,
            "error" => {
                let error = event.get("error").unwrap_or(&Value::Null);
                return Err(failure::from_stream_error(
                    text(error, "type"),
                    text(error, "message"),
                    self.request_id.clone(),
                ));
            }
            // `ping`, and whatever the API adds later.
            _ => {}
        }
        Ok(())
    }

    /// Prompt tokens (the three input counts summed) when the object has any; output tokens
    /// when it has them (cumulative in `message_delta`).
    fn usage_from(&mut self, usage: &Value) {
        let keys = [
            "input_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
        ];
        if keys
            .iter()
            .any(|k| usage.get(*k).is_some_and(Value::is_u64))
        {
            self.prompt_tokens = Some(keys.iter().map(|k| u(usage, k)).sum());
        }
        if let Some(out) = usage.get("output_tokens").and_then(Value::as_u64) {
            self.output_tokens = Some(out);
        }
    }

    fn block_start(&mut self, index: u32, block: &Value) {
        let kind = match text(block, "type") {
            "text" => {
                self.open(index, "text");
                let t = text(block, "text");
                if !t.is_empty() {
                    self.saw_content = true;
                    self.chunks.push(StreamChunk::TextDelta {
                        index,
                        text: t.to_owned(),
                    });
                }
                Block::Text
            }
            "tool_use" => {
                self.open(index, "tool-call");
                self.saw_tool_use = true;
                // Streamed input arrives as `input_json_delta`; a non-empty `input` here is a
                // whole input given at once.
                let input = block
                    .get("input")
                    .filter(|i| i.as_object().is_some_and(|o| !o.is_empty()));
                self.chunks.push(StreamChunk::ToolCallDelta {
                    index,
                    id: text(block, "id").to_owned(),
                    name: Some(text(block, "name").to_owned()),
                    arguments_delta: input.map(Value::to_string).unwrap_or_default(),
                });
                Block::ToolUse {
                    got_input: input.is_some(),
                }
            }
            "thinking" => {
                self.open(index, "reasoning");
                let t = text(block, "thinking");
                if !t.is_empty() {
                    self.chunks.push(StreamChunk::ReasoningDelta {
                        index,
                        text: t.to_owned(),
                    });
                }
                let s = text(block, "signature");
                if !s.is_empty() {
                    self.signature(index, s, false);
                }
                Block::Thinking
            }
            "redacted_thinking" => {
                self.open(index, "reasoning");
                self.signature(index, text(block, "data"), true);
                Block::Thinking
            }
            _ => Block::Other,
        };
        self.blocks.insert(index, kind);
    }

    fn open(&mut self, index: u32, block_type: &str) {
        self.chunks.push(StreamChunk::BlockStart {
            index,
            block_type: block_type.to_owned(),
        });
    }

    fn signature(&mut self, index: u32, signature: &str, redacted: bool) {
        self.chunks.push(StreamChunk::ReasoningSignature {
            index,
            signature: signature.to_owned(),
            redacted,
        });
    }

    fn block_delta(&mut self, index: u32, delta: &Value) {
        let block = self.blocks.get(&index).copied();
        match (text(delta, "type"), block) {
            ("text_delta", _) => {
                let t = text(delta, "text");
                self.saw_content |= !t.is_empty();
                self.chunks.push(StreamChunk::TextDelta {
                    index,
                    text: t.to_owned(),
                });
            }
            ("input_json_delta", Some(Block::ToolUse { .. })) => {
                let piece = text(delta, "partial_json");
                if !piece.is_empty() {
                    self.blocks
                        .insert(index, Block::ToolUse { got_input: true });
                    self.chunks.push(StreamChunk::ToolCallDelta {
                        index,
                        id: String::new(),
                        name: None,
                        arguments_delta: piece.to_owned(),
                    });
                }
            }
            ("thinking_delta", _) => self.chunks.push(StreamChunk::ReasoningDelta {
                index,
                text: text(delta, "thinking").to_owned(),
            }),
            ("signature_delta", _) => self.signature(index, text(delta, "signature"), false),
            // `citations_delta`, deltas of unknown blocks, new delta types.
            _ => {}
        }
    }

    fn block_stop(&mut self, index: u32) {
        match self.blocks.get(&index) {
            // A tool without parameters may stream no input at all: its input is `{}`.
            Some(Block::ToolUse { got_input: false }) => {
                self.chunks.push(StreamChunk::ToolCallDelta {
                    index,
                    id: String::new(),
                    name: None,
                    arguments_delta: "{}".to_owned(),
                });
            }
            Some(Block::Other) | None => return,
            _ => {}
        }
        self.chunks.push(StreamChunk::BlockEnd { index });
    }

    fn usage(&self) -> Option<Usage> {
        (self.prompt_tokens.is_some() || self.output_tokens.is_some()).then(|| Usage {
            input_tokens: self.prompt_tokens.unwrap_or(0),
            output_tokens: self.output_tokens.unwrap_or(0),
        })
    }

    /// The chunks of a stream that ended: usage, then the finish. A stream without
    /// `message_stop` is a `TRANSPORT` failure (it was cut); an answer with neither text nor
    /// tool use is `EMPTY_RESPONSE`.
    pub fn complete(self) -> Vec<StreamChunk> {
        if !self.done {
            let f = failure::failure(
                LlmCode::Transport,
                "the stream ended before message_stop (cut off mid-answer)".to_owned(),
                self.request_id.clone(),
            );
            return self.fail(f);
        }
        let reason = match self.stop_reason.as_deref() {
            Some("max_tokens" | "model_context_window_exceeded") => FinishReason::MaxTokens,
            _ if self.saw_tool_use => FinishReason::ToolCalls,
            _ if !self.saw_content => {
                let f = failure::failure(
                    LlmCode::EmptyResponse,
                    "the model returned neither text nor tool use".to_owned(),
                    self.request_id.clone(),
                );
                return self.fail(f);
            }
            _ => FinishReason::Stop,
        };
        let mut chunks = self.finish_chunks();
        chunks.push(StreamChunk::Finish { reason });
        chunks
    }

    /// The chunks so far, usage when known, then a terminal error with `failure`.
    pub fn fail(self, failure: LlmFailure) -> Vec<StreamChunk> {
        let mut chunks = self.finish_chunks();
        chunks.push(StreamChunk::error(failure));
        chunks
    }

    fn finish_chunks(self) -> Vec<StreamChunk> {
        let usage = self.usage();
        let mut chunks = self.chunks;
        if let Some(usage) = usage {
            chunks.push(StreamChunk::Usage { usage });
        }
        chunks
    }
}

#[cfg(test)]
#[path = "decode_tests.rs"]
mod tests;
