//! keel's [`LlmRequest`] → an OpenAI chat-completions request body.
//!
//! The projected history (`keel.session` `messages`) is already provider-neutral; the messages
//! are renamed in [`crate::wire_messages`] (tool calls gain the `{type:"function",
//! function:{…}}` wrapper, arguments stay the raw JSON text the model produced), the system
//! prompt goes first. Capability checks that
//! must happen before any I/O (LLM-03) live here too, since they depend on the request alone.

use keel_plugin_api::services::llm::{LlmCallConfig, LlmCode, LlmFailure, LlmRequest, ModelTool};
use serde_json::{Map, Value, json};

use crate::config::Config;
use crate::wire_messages::MessageCache;
use bytes::Bytes;

/// Reasoning efforts OpenAI-compatible `reasoning_effort` accepts.
pub const REASONING_EFFORTS: &[&str] = &["minimal", "low", "medium", "high"];

/// Refuses an explicit reasoning effort the API cannot express (LLM-03: no downgrade).
///
/// # Errors
/// `UNSUPPORTED_REASONING_EFFORT` naming the value and the accepted ones.
pub fn check_capabilities(config: &LlmCallConfig) -> Result<(), LlmFailure> {
    match config.reasoning_effort.as_deref() {
        Some(effort) if !REASONING_EFFORTS.contains(&effort) => Err(LlmFailure::new(
            LlmCode::UnsupportedReasoningEffort,
            format!(
                "reasoning effort '{effort}' is not supported by the OpenAI-compatible adapter \
                 (supported: {})",
                REASONING_EFFORTS.join(", ")
            ),
        )),
        _ => Ok(()),
    }
}

/// Refuses, before any I/O, a row `tool_choice` that forces a function the request does not
/// offer (the server would refuse every request the same way).
///
/// # Errors
/// `BAD_REQUEST` naming the function and the offered tools.
pub fn check_tool_choice(request: &LlmRequest, row: &Config) -> Result<(), LlmFailure> {
    match row.tool_choice.function_name() {
        Some(name)
            if !request.tools.is_empty() && !request.tools.iter().any(|t| t.name == name) =>
        {
            let offered: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
            Err(LlmFailure::new(
                LlmCode::BadRequest,
                format!(
                    "llm-openai.tool_choice names function '{name}', which is not among the \
                     offered tools ({})",
                    offered.join(", ")
                ),
            ))
        }
        _ => Ok(()),
    }
}

/// The request body. `stream`: streamed with usage requested (`stream_options`), or one whole
/// `chat.completion` (no `stream_options`: OpenAI refuses them without streaming). With tools,
/// the row's `tool_choice` goes along (issue 11 item 1); without, none.
///
/// The history comes from `cache` ([`MessageCache`]): only messages it has not seen are parsed
/// and translated, and the body is a list of shared chunks (its length known), so the history
/// is not copied on its way to the socket.
pub fn body(
    request: &LlmRequest,
    row: &Config,
    stream: bool,
    cache: &mut MessageCache,
) -> RequestBody {
    body_with(request, row, stream, stream, cache)
}

/// [`body`], `usage` choosing whether a streamed request asks for usage (`stream_options`):
/// off once the server refused the field (issue 23 item 19).
pub fn body_with(
    request: &LlmRequest,
    row: &Config,
    stream: bool,
    usage: bool,
    cache: &mut MessageCache,
) -> RequestBody {
    let config = &request.config;
    let model = if config.model.is_empty() {
        row.model.as_str()
    } else {
        config.model.as_str()
    };
    let mut head = Map::new();
    head.insert("model".into(), json!(model));
    head.insert("stream".into(), json!(stream));
    if stream && usage {
        head.insert("stream_options".into(), json!({ "include_usage": true }));
    }
    if !request.tools.is_empty() {
        head.insert(
            "tools".into(),
            Value::Array(request.tools.iter().map(tool).collect()),
        );
        head.insert("tool_choice".into(), row.tool_choice.to_json());
    }
    if let Some(max) = config.max_tokens.or(row.max_tokens) {
        head.insert("max_tokens".into(), json!(max));
    }
    if let Some(t) = config.temperature.or(row.temperature) {
        head.insert("temperature".into(), json!(t));
    }
    if let Some(stop) = config.stop.as_ref().filter(|s| !s.is_empty()) {
        head.insert("stop".into(), json!(stop));
    }
    if let Some(effort) = config.reasoning_effort.as_deref() {
        head.insert("reasoning_effort".into(), json!(effort));
    }
    // `{"messages":[…],` then the head's fields (it always has `model`, so it is never `{}`).
    let head = Value::Object(head).to_string();
    let mut parts = vec![Bytes::from_static(b"{\"messages\":")];
    let messages = cache.message_parts(request.system.as_deref(), &request.messages, &mut parts);
    // `,` then the head's fields (it always has `model`, so it is never `{}`).
    let tail = format!(",{}", head.get(1..).unwrap_or("}"));
    let len = parts[0].len() + messages + tail.len();
    parts.push(Bytes::from(tail));
    RequestBody { parts, len }
}

/// A request body as shared chunks and their total length (sent with `Content-Length`).
#[derive(Debug)]
pub struct RequestBody {
    /// The chunks, in order.
    pub parts: Vec<Bytes>,
    /// Their total length in bytes.
    pub len: usize,
}

fn tool(t: &ModelTool) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": t.name,
            "description": t.description,
            "parameters": t.parameters,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire_messages::message;
    use keel_plugin_api::sdk::Frozen;
    use keel_plugin_api::services::llm::LlmCallConfig;

    fn body(request: &LlmRequest, row: &Config, stream: bool) -> Value {
        let body = super::body(request, row, stream, &mut MessageCache::default());
        let text = body.parts.concat();
        assert_eq!(text.len(), body.len);
        serde_json::from_slice(&text).unwrap()
    }

    fn row() -> Config {
        serde_json::from_value(json!({
            "base_url": "http://x/v1", "model": "row-model", "max_tokens": 100, "temperature": 0.5
        }))
        .unwrap()
    }

    fn request(messages: Vec<Value>) -> LlmRequest {
        let messages = messages
            .iter()
            .map(|m| Frozen::freeze(m).unwrap())
            .collect();
        LlmRequest {
            session_id: None,
            stream_id: None,
            config: LlmCallConfig {
                provider: "openai".into(),
                model: String::new(),
                ..LlmCallConfig::default()
            },
            system: Some("be brief".into()),
            messages,
            tools: vec![ModelTool {
                name: "read_file".into(),
                description: "reads".into(),
                parameters: json!({"type": "object"}),
            }],
        }
    }

    #[test]
    fn body_converts_the_projected_history() {
        let req = request(vec![
            json!({"role": "user", "content": "hi"}),
            json!({"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "name": "read_file", "arguments": "{\"path\":\"a\"}"},
                {"id": "c2", "name": "read_file", "arguments": {"path": "b"}}
            ]}),
            json!({"role": "tool", "tool_call_id": "c1", "content": "A", "is_error": false}),
            json!({"role": "tool", "tool_call_id": "c2", "content": "B"}),
            json!({"role": "assistant", "content": "done"}),
        ]);
        let b = body(&req, &row(), true);
        assert_eq!(
            b,
            json!({
                "model": "row-model",
                "messages": [
                    {"role": "system", "content": "be brief"},
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "", "tool_calls": [
                        {"id": "c1", "type": "function",
                         "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}},
                        {"id": "c2", "type": "function",
                         "function": {"name": "read_file", "arguments": "{\"path\":\"b\"}"}}
                    ]},
                    {"role": "tool", "tool_call_id": "c1", "content": "A"},
                    {"role": "tool", "tool_call_id": "c2", "content": "B"},
                    {"role": "assistant", "content": "done"}
                ],
                "stream": true,
                "stream_options": {"include_usage": true},
                "tools": [{"type": "function", "function": {
                    "name": "read_file", "description": "reads", "parameters": {"type": "object"}
                }}],
                "tool_choice": "auto",
                "max_tokens": 100,
                "temperature": 0.5
            })
        );
    }

    #[test]
    fn call_config_wins_over_row_defaults() {
        let mut req = request(vec![json!({"role": "user", "content": "hi"})]);
        req.config.model = "call-model".into();
        req.config.max_tokens = Some(7);
        req.config.temperature = Some(0.0);
        req.config.stop = Some(vec!["END".into()]);
        req.config.reasoning_effort = Some("low".into());
        let b = body(&req, &row(), true);
        assert_eq!(b["model"], "call-model");
        assert_eq!(b["max_tokens"], 7);
        assert_eq!(b["temperature"], 0.0);
        assert_eq!(b["stop"], json!(["END"]));
        assert_eq!(b["reasoning_effort"], "low");
    }

    // Issue 11 item 1: tool_choice goes with tools (the row's value), never without them.
    #[test]
    fn tool_choice_is_sent_with_tools_only() {
        let mut req = request(vec![json!({"role": "user", "content": "hi"})]);
        assert_eq!(body(&req, &row(), true)["tool_choice"], "auto");
        let mut r = row();
        r.tool_choice = serde_json::from_value(json!("required")).unwrap();
        assert_eq!(body(&req, &r, true)["tool_choice"], "required");
        req.tools.clear();
        let b = body(&req, &r, true);
        assert!(
            b.get("tool_choice").is_none() && b.get("tools").is_none(),
            "{b}"
        );
    }

    // Issue 11 item 2: the non-streamed body says so and asks for no stream options.
    #[test]
    fn a_non_streamed_body_has_no_stream_options() {
        let req = request(vec![json!({"role": "user", "content": "hi"})]);
        let b = body(&req, &row(), false);
        assert_eq!(b["stream"], false);
        assert!(b.get("stream_options").is_none(), "{b}");
        assert_eq!(b["tool_choice"], "auto");
    }

    // Issue 11 item 3: an assistant turn with calls and no text carries "" (never null); one
    // with text keeps it.
    #[test]
    fn assistant_tool_call_turns_never_carry_null_content() {
        let calls = json!([{"id": "c1", "name": "read_file", "arguments": "{}"}]);
        for content in [json!(null), json!(""), Value::Null] {
            let mut m = json!({"role": "assistant", "tool_calls": calls});
            if !content.is_null() {
                m["content"] = content;
            }
            assert_eq!(message(&m)["content"], json!(""), "{m}");
        }
        let m = json!({"role": "assistant", "content": "let me look", "tool_calls": calls});
        assert_eq!(message(&m)["content"], "let me look");
    }

    #[test]
    fn a_named_tool_choice_must_name_an_offered_tool() {
        let req = request(vec![json!({"role": "user", "content": "hi"})]);
        let mut r = row();
        assert!(check_tool_choice(&req, &r).is_ok());
        r.tool_choice =
            serde_json::from_value(json!({"type": "function", "function": {"name": "read_file"}}))
                .unwrap();
        assert!(check_tool_choice(&req, &r).is_ok());
        assert_eq!(
            body(&req, &r, true)["tool_choice"],
            json!({"type": "function", "function": {"name": "read_file"}})
        );
        r.tool_choice =
            serde_json::from_value(json!({"type": "function", "function": {"name": "nope"}}))
                .unwrap();
        let f = check_tool_choice(&req, &r).unwrap_err();
        assert_eq!(f.code.as_str(), "BAD_REQUEST");
        assert!(
            f.message.contains("'nope'") && f.message.contains("read_file"),
            "{}",
            f.message
        );
    }

    #[test]
    fn llm_03_unknown_reasoning_effort_is_refused() {
        let mut c = LlmCallConfig::default();
        assert!(check_capabilities(&c).is_ok());
        c.reasoning_effort = Some("high".into());
        assert!(check_capabilities(&c).is_ok());
        c.reasoning_effort = Some("extreme".into());
        let f = check_capabilities(&c).unwrap_err();
        assert_eq!(f.code.as_str(), "UNSUPPORTED_REASONING_EFFORT");
        assert!(f.message.contains("extreme"));
    }
}
