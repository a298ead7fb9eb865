//! keel's [`LlmRequest`] → a Messages API request body.
//!
//! - The system prompt goes to the top-level `system`, as text blocks (a `system` message
//!   inside the history becomes one more block: the Messages API has no system role).
//! - Tools go to `tools` with their JSON Schema as `input_schema`.
//! - An assistant message becomes content blocks in the order the API requires when it is
//!   replayed: its signed reasoning blocks first (`thinking` with its `signature`, or
//!   `redacted_thinking` with its `data`), then its text, then one `tool_use` per call (the
//!   call's raw argument text parsed back into the `input` object).
//! - Tool results become `tool_result` blocks (`is_error` kept) in a user message; consecutive
//!   results, and a user message that follows them, merge into ONE user message, since the
//!   API wants every result of an assistant turn in the next user turn.
//!
//! Prompt caching: `cache_control: {"type": "ephemeral"}` on the last system block and on the
//! last tool. The cache key is the prefix in the API's order (tools, then system, then
//! messages): the breakpoint after the tools caches them alone (they stay the same for a whole
//! run even when the system prompt changes), the one after the system prompt caches both. The
//! history changes every step, so it is not marked (docs/llm-anthropic.md).
//!
//! Capability checks that must happen before any I/O (LLM-03) live here too.

use keel_plugin_api::conversation::{Content, Message, ReasoningBlock, ToolCall};
use keel_plugin_api::services::llm::{LlmCallConfig, LlmCode, LlmFailure, LlmRequest, ModelTool};
use serde_json::{Map, Value, json};

use crate::config::Config;

/// Refuses an explicit reasoning effort: this adapter thinks by `thinking_budget` (a row key),
/// and will not guess a budget for a named effort (LLM-03: no silent downgrade).
///
/// # Errors
/// `UNSUPPORTED_REASONING_EFFORT` naming the value and the key to use instead.
pub fn check_capabilities(config: &LlmCallConfig) -> Result<(), LlmFailure> {
    match config.reasoning_effort.as_deref() {
        Some(effort) => Err(LlmFailure::new(
            LlmCode::UnsupportedReasoningEffort,
            format!(
                "reasoning effort '{effort}' is not supported by the Anthropic adapter; set the \
                 llm-anthropic row's thinking_budget (tokens) instead"
            ),
        )),
        None => Ok(()),
    }
}

fn ephemeral() -> Value {
    json!({ "type": "ephemeral" })
}

/// The request body (always streamed).
pub fn body(request: &LlmRequest, row: &Config) -> Value {
    let config = &request.config;
    let model = if config.model.is_empty() {
        &row.model
    } else {
        &config.model
    };
    let mut system: Vec<Value> = request
        .system
        .iter()
        .filter(|s| !s.is_empty())
        .map(|s| json!({ "type": "text", "text": s }))
        .collect();
    let messages = messages(request, &mut system);
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert(
        "max_tokens".into(),
        json!(config.max_tokens.unwrap_or(row.max_tokens)),
    );
    body.insert("stream".into(), json!(true));
    if let Some(last) = system.last_mut() {
        last["cache_control"] = ephemeral();
        body.insert("system".into(), Value::Array(system));
    }
    if !request.tools.is_empty() {
        let mut tools: Vec<Value> = request.tools.iter().map(tool).collect();
        if let Some(last) = tools.last_mut() {
            last["cache_control"] = ephemeral();
        }
        body.insert("tools".into(), Value::Array(tools));
    }
    match row.thinking_budget {
        Some(budget) => {
            body.insert(
                "thinking".into(),
                json!({ "type": "enabled", "budget_tokens": budget }),
            );
        }
        None => {
            if let Some(t) = config.temperature.or(row.temperature) {
                body.insert("temperature".into(), json!(t));
            }
        }
    }
    if let Some(stop) = config.stop.as_ref().filter(|s| !s.is_empty()) {
        body.insert("stop_sequences".into(), json!(stop));
    }
    body.insert("messages".into(), Value::Array(messages));
    Value::Object(body)
}

fn tool(t: &ModelTool) -> Value {
    json!({
        "name": t.name,
        "description": t.description,
        "input_schema": t.parameters,
    })
}

/// The history as Messages API turns; `system` messages in it are appended to `system`.
fn messages(request: &LlmRequest, system: &mut Vec<Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::with_capacity(request.messages.len());
    for frozen in &request.messages {
        let message = frozen.parse::<Message>().unwrap_or_else(|_| Message::User {
            content: Some(Content::Text(frozen.as_str().to_owned())),
        });
        match message {
            Message::System { content } => {
                system.push(json!({ "type": "text", "text": text(content.as_ref()) }));
            }
            Message::User { content } => {
                let blocks = match content {
                    Some(Content::Parts(parts)) => parts,
                    other => vec![json!({ "type": "text", "text": text(other.as_ref()) })],
                };
                push(&mut out, "user", blocks);
            }
            Message::Assistant {
                content,
                tool_calls,
                reasoning_blocks,
            } => {
                let mut blocks: Vec<Value> = reasoning_blocks.iter().map(reasoning).collect();
                let t = text(content.as_ref());
                if !t.is_empty() {
                    blocks.push(json!({ "type": "text", "text": t }));
                }
                blocks.extend(tool_calls.iter().map(tool_use));
                if !blocks.is_empty() {
                    push(&mut out, "assistant", blocks);
                }
            }
            Message::Tool {
                tool_call_id,
                content,
                is_error,
            } => {
                let mut block = json!({
                    "type": "tool_result",
                    "tool_use_id": tool_call_id,
                    "content": text(content.as_ref()),
                });
                if is_error {
                    block["is_error"] = json!(true);
                }
                push(&mut out, "user", vec![block]);
            }
        }
    }
    out
}

/// Appends `blocks` as a `role` turn, merged into the previous turn when it has the same role
/// (tool results after tool results, a steering message after the results).
fn push(out: &mut Vec<Value>, role: &str, blocks: Vec<Value>) {
    if let Some(last) = out.last_mut()
        && last["role"] == role
        && let Some(content) = last["content"].as_array_mut()
    {
        content.extend(blocks);
        return;
    }
    out.push(json!({ "role": role, "content": blocks }));
}

fn reasoning(b: &ReasoningBlock) -> Value {
    if b.redacted {
        json!({ "type": "redacted_thinking", "data": b.signature })
    } else {
        json!({ "type": "thinking", "thinking": b.text, "signature": b.signature })
    }
}

/// A keel tool call as a `tool_use` block: the raw argument text parsed back into the object
/// the API wants (`{}` for empty text; text that is not a JSON object is kept under
/// `arguments`, so nothing the model said is lost).
fn tool_use(c: &ToolCall) -> Value {
    let input = match serde_json::from_str::<Value>(&c.arguments) {
        Ok(Value::Object(o)) => Value::Object(o),
        _ if c.arguments.trim().is_empty() => json!({}),
        _ => json!({ "arguments": c.arguments }),
    };
    json!({ "type": "tool_use", "id": c.id, "name": c.name, "input": input })
}

/// Text content: a string as is, parts and other JSON as their JSON text, nothing as "".
fn text(content: Option<&Content>) -> String {
    content.map(Content::to_text).unwrap_or_default()
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
