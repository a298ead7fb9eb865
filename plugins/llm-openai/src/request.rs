//! keel's [`LlmRequest`] → an OpenAI chat-completions request body.
//!
//! The projected history (`keel.session` `"messages"`) is already provider-neutral; this module
//! only renames: tool calls gain the `{type:"function", function:{…}}` wrapper, arguments stay
//! the raw JSON text the model produced, and the system prompt goes first. Capability checks that
//! must happen before any I/O (LLM-03) live here too, since they depend on the request alone.

use keel_plugin_api::services::llm::{
    FailureCode, LlmCallConfig, LlmFailure, LlmRequest, ModelTool,
};
use serde_json::{Map, Value, json};

use crate::config::Config;

/// Reasoning efforts OpenAI-compatible `reasoning_effort` accepts.
pub const REASONING_EFFORTS: &[&str] = &["minimal", "low", "medium", "high"];

/// Refuses an explicit reasoning effort the API cannot express (LLM-03: no downgrade).
///
/// # Errors
/// `UNSUPPORTED_REASONING_EFFORT` naming the value and the accepted ones.
pub fn check_capabilities(config: &LlmCallConfig) -> Result<(), LlmFailure> {
    match config.reasoning_effort.as_deref() {
        Some(effort) if !REASONING_EFFORTS.contains(&effort) => Err(LlmFailure {
            message: format!(
                "reasoning effort '{effort}' is not supported by the OpenAI-compatible adapter \
                 (supported: {})",
                REASONING_EFFORTS.join(", ")
            ),
            code: "UNSUPPORTED_REASONING_EFFORT".to_owned(),
            status: None,
            provider_retry_after_ms: None,
            request_id: None,
        }),
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
                FailureCode::BadRequest,
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
pub fn body(request: &LlmRequest, row: &Config, stream: bool) -> Value {
    let config = &request.config;
    let model = if config.model.is_empty() {
        row.model.as_str()
    } else {
        config.model.as_str()
    };
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
        messages.push(json!({ "role": "system", "content": system }));
    }
    messages.extend(request.messages.iter().map(message));

    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("messages".into(), Value::Array(messages));
    body.insert("stream".into(), json!(stream));
    if stream {
        body.insert("stream_options".into(), json!({ "include_usage": true }));
    }
    if !request.tools.is_empty() {
        body.insert(
            "tools".into(),
            Value::Array(request.tools.iter().map(tool).collect()),
        );
        body.insert("tool_choice".into(), row.tool_choice.to_json());
    }
    if let Some(max) = config.max_tokens.or(row.max_tokens) {
        body.insert("max_tokens".into(), json!(max));
    }
    if let Some(t) = config.temperature.or(row.temperature) {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(stop) = config.stop.as_ref().filter(|s| !s.is_empty()) {
        body.insert("stop".into(), json!(stop));
    }
    if let Some(effort) = config.reasoning_effort.as_deref() {
        body.insert("reasoning_effort".into(), json!(effort));
    }
    Value::Object(body)
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

/// Text content as a string (structured content is passed on as JSON text).
fn text(v: Option<&Value>) -> Value {
    match v {
        None | Some(Value::Null) => json!(""),
        Some(Value::String(s)) => json!(s),
        Some(other) => json!(other.to_string()),
    }
}

/// Raw argument text: a string as is, anything else serialised.
fn arguments(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "{}".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

fn message(m: &Value) -> Value {
    let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
    match role {
        "assistant" => {
            let calls: Vec<Value> = m
                .get("tool_calls")
                .and_then(Value::as_array)
                .map(|calls| {
                    calls
                        .iter()
                        .map(|c| {
                            json!({
                                "id": c.get("id").and_then(Value::as_str).unwrap_or_default(),
                                "type": "function",
                                "function": {
                                    "name": c.get("name").and_then(Value::as_str).unwrap_or_default(),
                                    "arguments": arguments(c.get("arguments")),
                                }
                            })
                        })
                        .collect()
                })
                .unwrap_or_default();
            // With tool calls and no text the content is "", never null: OpenAI takes either,
            // llama-cpp-python refuses null (HTTP 500), every server takes "" (issue 11 item 3).
            let content = text(m.get("content"));
            if calls.is_empty() {
                json!({ "role": "assistant", "content": content })
            } else {
                json!({ "role": "assistant", "content": content, "tool_calls": calls })
            }
        }
        "tool" => json!({
            "role": "tool",
            "tool_call_id": m.get("tool_call_id").and_then(Value::as_str).unwrap_or_default(),
            "content": text(m.get("content")),
        }),
        // `user`, `system` and anything newer: role and content as they are.
        other => {
            let content = match m.get("content") {
                Some(c @ Value::Array(_)) => c.clone(),
                c => text(c),
            };
            json!({ "role": other, "content": content })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_plugin_api::services::llm::LlmCallConfig;

    fn row() -> Config {
        serde_json::from_value(json!({
            "base_url": "http://x/v1", "model": "row-model", "max_tokens": 100, "temperature": 0.5
        }))
        .unwrap()
    }

    fn request(messages: Vec<Value>) -> LlmRequest {
        LlmRequest {
            session_id: None,
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
        assert_eq!(f.code, "BAD_REQUEST");
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
        assert_eq!(f.code, "UNSUPPORTED_REASONING_EFFORT");
        assert!(f.message.contains("extreme"));
    }
}
