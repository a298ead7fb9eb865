//! Unit tests of `request` (issue 15 item 2): the history, tools and system prompt in the
//! Messages API's shape, thinking replayed before tool use, tool results merged, cache marks.

use keel_plugin_api::sdk::Frozen;
use keel_plugin_api::services::llm::{LlmCode, LlmRequest};
use serde_json::{Value, json};

use super::{body, check_capabilities};
use crate::config::Config;

fn row(extra: Value) -> Config {
    let mut v = json!({"model": "claude-sonnet-4-5"});
    for (k, val) in extra.as_object().unwrap() {
        v[k] = val.clone();
    }
    serde_json::from_value(v).unwrap()
}

fn request(messages: Vec<Value>) -> LlmRequest {
    LlmRequest {
        session_id: None,
        stream_id: None,
        config: serde_json::from_value(json!({"provider": "anthropic", "model": ""})).unwrap(),
        system: Some("You are keel.".into()),
        messages: messages
            .iter()
            .map(|m| Frozen::freeze(m).unwrap())
            .collect(),
        tools: serde_json::from_value(json!([
            {"name": "read_file", "description": "r", "parameters": {"type": "object"}},
            {"name": "write_file", "description": "w", "parameters": {"type": "object",
                "properties": {"path": {"type": "string"}}}},
        ]))
        .unwrap(),
    }
}

#[test]
fn system_tools_and_the_cache_breakpoints() {
    let b = body(
        &request(vec![json!({"role": "user", "content": "hi"})]),
        &row(json!({})),
    );
    assert_eq!(b["model"], "claude-sonnet-4-5");
    assert_eq!(b["max_tokens"], 8192);
    assert_eq!(b["stream"], true);
    assert_eq!(
        b["system"],
        json!([{"type": "text", "text": "You are keel.", "cache_control": {"type": "ephemeral"}}])
    );
    assert_eq!(
        b["tools"][1]["input_schema"]["properties"]["path"]["type"],
        "string"
    );
    assert_eq!(b["tools"][1]["cache_control"], json!({"type": "ephemeral"}));
    assert!(b["tools"][0].get("cache_control").is_none());
    assert_eq!(
        b["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
    );
    assert!(b.get("thinking").is_none());
}

#[test]
fn tool_calls_and_results_map_to_blocks_and_results_merge_into_one_user_turn() {
    let b = body(
        &request(vec![
            json!({"role": "user", "content": "go"}),
            json!({"role": "assistant", "content": "Two reads.", "reasoning_blocks": [
                {"text": "plan", "signature": "sig-A"},
                {"text": "", "signature": "opaque", "redacted": true}],
                "tool_calls": [
                {"id": "toolu_1", "name": "read_file", "arguments": "{\"path\":\"a\"}"},
                {"id": "toolu_2", "name": "read_file", "arguments": ""}]}),
            json!({"role": "tool", "tool_call_id": "toolu_1", "content": "A"}),
            json!({"role": "tool", "tool_call_id": "toolu_2", "content": "nope", "is_error": true}),
            json!({"role": "user", "content": "also this"}),
        ]),
        &row(json!({})),
    );
    let m = b["messages"].as_array().unwrap();
    assert_eq!(m.len(), 3, "{m:?}");
    assert_eq!(
        m[1],
        json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "plan", "signature": "sig-A"},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "text", "text": "Two reads."},
            {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a"}},
            {"type": "tool_use", "id": "toolu_2", "name": "read_file", "input": {}},
        ]})
    );
    assert_eq!(
        m[2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "A"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "nope", "is_error": true},
            {"type": "text", "text": "also this"},
        ]})
    );
}

#[test]
fn thinking_rows_send_a_budget_and_no_temperature() {
    let r = row(json!({"thinking_budget": 2048, "temperature": 0.2, "max_tokens": 4096}));
    let b = body(&request(vec![json!({"role": "user", "content": "x"})]), &r);
    assert_eq!(
        b["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );
    assert!(b.get("temperature").is_none());
    let b = body(
        &request(vec![json!({"role": "user", "content": "x"})]),
        &row(json!({"temperature": 0.2})),
    );
    assert_eq!(b["temperature"], 0.2);
}

#[test]
fn history_system_messages_join_the_system_blocks_and_the_last_one_is_marked() {
    let b = body(
        &request(vec![
            json!({"role": "system", "content": "Summary so far."}),
            json!({"role": "user", "content": "x"}),
        ]),
        &row(json!({})),
    );
    assert_eq!(
        b["system"][0],
        json!({"type": "text", "text": "You are keel."})
    );
    assert_eq!(b["system"][1]["text"], "Summary so far.");
    assert_eq!(
        b["system"][1]["cache_control"],
        json!({"type": "ephemeral"})
    );
}

#[test]
fn an_explicit_reasoning_effort_is_refused_before_io() {
    let config = serde_json::from_value(
        json!({"provider": "anthropic", "model": "m", "reasoning_effort": "high"}),
    )
    .unwrap();
    let f = check_capabilities(&config).unwrap_err();
    assert_eq!(f.code, LlmCode::UnsupportedReasoningEffort);
    assert!(f.message.contains("thinking_budget"), "{}", f.message);
}
