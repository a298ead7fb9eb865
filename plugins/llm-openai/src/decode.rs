//! Chat-completions answers → keel [`StreamChunk`]s (B14), as a pure state machine.
//!
//! The client feeds it the `data` of each SSE event; it yields text, reasoning and tool-call
//! deltas as they come, remembers the finish reason and the usage (which OpenAI sends in a
//! separate, choice-less event after the finish reason), and emits `usage` then `finish` only
//! when the stream is complete, so nothing ever follows `finish`. A non-streamed answer (one
//! whole `chat.completion`) goes through the same machine ([`Decoder::feed_completion`]): its
//! `message` is read as one delta, so both paths yield the same chunks (issue 11 item 2).
//! Usage is reported only when the provider sent its counts; none is unknown, never zero.

use keel_plugin_api::services::llm::{FinishReason, LlmCode, LlmFailure, StreamChunk, Usage};
use serde_json::Value;

use crate::failure::{self, mentions_context_overflow};

/// The stream decoder for one response.
#[derive(Debug, Default)]
pub struct Decoder {
    chunks: Vec<StreamChunk>,
    text_block: Option<u32>,
    reasoning_block: Option<u32>,
    next_block: u32,
    saw_text: bool,
    saw_tool_call: bool,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    done: bool,
    /// JSON events fed so far (`[DONE]` and blank data not counted).
    events: usize,
    request_id: Option<String>,
}

impl Decoder {
    /// A decoder whose failures carry `request_id`.
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

    /// Whether `[DONE]` was seen: the caller stops reading.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Whether the model already said why it stopped (the answer is complete even if the
    /// connection closes before `[DONE]`).
    pub fn has_finish_reason(&self) -> bool {
        self.finish_reason.is_some()
    }

    /// Whether nothing but `[DONE]` (if that) has arrived: a stream that ends so is empty, not
    /// an answer (issue 11 items 2 and 4: the client asks again without streaming).
    pub fn is_empty(&self) -> bool {
        self.events == 0
    }

    /// Feeds one SSE event's data.
    ///
    /// # Errors
    /// `TRANSPORT` for data that is not JSON; the provider's failure for an in-stream `error`.
    pub fn feed(&mut self, data: &str) -> Result<(), LlmFailure> {
        let data = data.trim();
        if data.is_empty() || self.done {
            return Ok(());
        }
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let event: Value = serde_json::from_str(data).map_err(|e| {
            failure::failure(
                LlmCode::Transport,
                format!("undecodable stream event from the provider: {e}"),
                self.request_id.clone(),
            )
        })?;
        self.event(&event, |choice| choice.get("delta"))
    }

    /// Feeds a whole non-streamed answer (`chat.completion`): its `choices[0].message` is read
    /// as one delta, its `finish_reason` and `usage` as a stream's, and the answer is done.
    ///
    /// # Errors
    /// `TRANSPORT` for a body that is not JSON; the provider's failure for an `error` body.
    pub fn feed_completion(&mut self, body: &[u8]) -> Result<(), LlmFailure> {
        let completion: Value = serde_json::from_slice(body).map_err(|e| {
            failure::failure(
                LlmCode::Transport,
                format!("undecodable completion from the provider: {e}"),
                self.request_id.clone(),
            )
        })?;
        self.event(&completion, |choice| choice.get("message"))?;
        self.done = true;
        Ok(())
    }

    /// One event (or whole answer): `error`, choice 0 (its delta found by `delta`), usage.
    fn event(
        &mut self,
        event: &Value,
        delta: impl Fn(&Value) -> Option<&Value>,
    ) -> Result<(), LlmFailure> {
        self.events += 1;
        if let Some(error) = event.get("error").filter(|e| !e.is_null()) {
            return Err(self.stream_error(error));
        }
        if let Some(choices) = event.get("choices").and_then(Value::as_array) {
            for choice in choices {
                if choice.get("index").and_then(Value::as_u64).unwrap_or(0) == 0 {
                    if let Some(d) = delta(choice) {
                        self.delta(d);
                    }
                    if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                        self.finish_reason = Some(reason.to_owned());
                    }
                }
            }
        }
        // Counts the provider sent, or nothing: `usage: {}` is unknown, not zero, and so is a
        // prompt of zero tokens (no request has none: the server did not count; issue 23 item
        // 19), which would otherwise teach the context manager nothing and the totals a lie.
        if let Some(usage) = event.get("usage") {
            let count = |k: &str| usage.get(k).and_then(Value::as_u64);
            if let (Some(input_tokens @ 1..), Some(output_tokens)) =
                (count("prompt_tokens"), count("completion_tokens"))
            {
                self.usage = Some(Usage {
                    input_tokens,
                    output_tokens,
                });
            }
        }
        Ok(())
    }

    fn delta(&mut self, delta: &Value) {
        let reasoning = delta
            .get("reasoning_content")
            .and_then(Value::as_str)
            .or_else(|| delta.get("reasoning").and_then(Value::as_str))
            .filter(|s| !s.is_empty());
        if let Some(text) = reasoning {
            let index = block(&mut self.reasoning_block, &mut self.next_block);
            self.chunks.push(StreamChunk::ReasoningDelta {
                index,
                text: text.to_owned(),
            });
        }
        if let Some(text) = delta
            .get("content")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            let index = block(&mut self.text_block, &mut self.next_block);
            self.saw_text = true;
            self.chunks.push(StreamChunk::TextDelta {
                index,
                text: text.to_owned(),
            });
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for (position, call) in calls.iter().enumerate() {
                self.tool_call(position, call);
            }
        }
    }

    fn tool_call(&mut self, position: usize, call: &Value) {
        let index = call
            .get("index")
            .and_then(Value::as_u64)
            .and_then(|i| u32::try_from(i).ok())
            .unwrap_or_else(|| u32::try_from(position).unwrap_or(u32::MAX));
        let function = call.get("function");
        let name = function
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        let arguments_delta = function
            .and_then(|f| f.get("arguments"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let id = call
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        self.saw_tool_call = true;
        self.chunks.push(StreamChunk::ToolCallDelta {
            index,
            id,
            name,
            arguments_delta,
        });
    }

    fn stream_error(&self, error: &Value) -> LlmFailure {
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .map_or_else(|| error.to_string(), str::to_owned);
        let code = if mentions_context_overflow(&error.to_string()) {
            LlmCode::ContextWindowExceeded
        } else {
            LlmCode::Server
        };
        failure::failure(
            code,
            format!("the provider reported an error in its answer: {message}"),
            self.request_id.clone(),
        )
    }

    /// Ends a stream that stopped (`[DONE]`, or the connection closed): the chunks, then
    /// `usage`, then `finish`. A stream cut before the model finished is `TRANSPORT`; a finished
    /// answer with neither text nor tool calls is `EMPTY_RESPONSE`.
    pub fn complete(mut self) -> Vec<StreamChunk> {
        if !self.done && self.finish_reason.is_none() {
            let f = failure::failure(
                LlmCode::Transport,
                "the provider closed the stream before the answer was complete".to_owned(),
                self.request_id.clone(),
            );
            return self.fail(f);
        }
        let reason = match self.finish_reason.as_deref() {
            Some("length") => FinishReason::MaxTokens,
            _ if self.saw_tool_call => FinishReason::ToolCalls,
            _ if !self.saw_text => {
                let f = failure::failure(
                    LlmCode::EmptyResponse,
                    "the model returned neither text nor tool calls".to_owned(),
                    self.request_id.clone(),
                );
                return self.fail(f);
            }
            _ => FinishReason::Stop,
        };
        if let Some(usage) = self.usage {
            self.chunks.push(StreamChunk::Usage { usage });
        }
        self.chunks.push(StreamChunk::Finish { reason });
        self.chunks
    }

    /// Ends the stream with `failure`, keeping what arrived before it (and the usage, if the
    /// provider had already reported it).
    pub fn fail(mut self, failure: LlmFailure) -> Vec<StreamChunk> {
        if let Some(usage) = self.usage {
            self.chunks.push(StreamChunk::Usage { usage });
        }
        self.chunks.push(StreamChunk::error(failure));
        self.chunks
    }
}

/// The block index for a kind, assigned in order of first appearance.
fn block(slot: &mut Option<u32>, next: &mut u32) -> u32 {
    *slot.get_or_insert_with(|| {
        let i = *next;
        *next += 1;
        i
    })
}

#[cfg(test)]
#[path = "decode_tests.rs"]
mod tests;
