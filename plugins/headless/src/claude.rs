//! Claude Code's stream-json message lines, beside keel's own `event` lines (issue 23 item 13).
//!
//! A consumer written for Claude Code (the Claude Agent SDK's message parser, editors) reads
//! `assistant`, `user`, `system` and `result` lines and skips types it does not know, so keel's
//! `event` lines pass it by. Each durable session event that has a Claude Code counterpart is
//! followed by that counterpart:
//!
//! - `assistant/message` → `{"type":"assistant","message":{"id","type":"message","role":
//!   "assistant","model","content":[text, thinking, tool_use blocks],"stop_reason","usage"},
//!   "parent_tool_use_id","session_id"}`;
//! - `tool/result` → `{"type":"user","message":{"role":"user","content":[{"type":
//!   "tool_result","tool_use_id","content","is_error"}]},"parent_tool_use_id","session_id"}`.
//!
//! `parent_tool_use_id` is `null` for the run's own session and, for a child agent's, the
//! parent's `agent` call that started it; `session_id` is always the run's (Claude Code names
//! the top session on every line). The user's own messages are not echoed (Claude Code does
//! not either, unless asked to replay them). Pure functions over the event record.

use serde_json::{Value, json};

/// Where a message line hangs: the run's session id and, for a child, the parent's call.
#[derive(Debug, Clone, Copy)]
pub struct Origin<'a> {
    /// The run's (top) session.
    pub session_id: &'a str,
    /// The `agent` call a child runs under; `None` for the run's own session.
    pub parent_tool_use_id: Option<&'a str>,
    /// The model name for `assistant` lines.
    pub model: &'a str,
}

/// The Claude Code lines for one session event record (none for most kinds).
pub fn message_lines(record: &str, origin: Origin<'_>) -> Vec<String> {
    let Ok(ev) = serde_json::from_str::<Value>(record) else {
        return Vec::new();
    };
    let data = &ev["data"];
    let line = match ev["type"].as_str() {
        Some("assistant/message") => assistant(&ev, data, origin),
        Some("tool/result") => tool_result(data, origin),
        _ => return Vec::new(),
    };
    vec![line.to_string()]
}

fn assistant(ev: &Value, data: &Value, origin: Origin<'_>) -> Value {
    let message = &data["message"];
    let mut content = Vec::new();
    for block in message["reasoning_blocks"].as_array().into_iter().flatten() {
        if block["redacted"].as_bool() != Some(true)
            && let (Some(text), Some(signature)) =
                (block["text"].as_str(), block["signature"].as_str())
        {
            content.push(json!({"type": "thinking", "thinking": text, "signature": signature}));
        }
    }
    if let Some(text) = message["content"].as_str()
        && !text.is_empty()
    {
        content.push(json!({"type": "text", "text": text}));
    }
    let calls = message["tool_calls"].as_array();
    for call in calls.into_iter().flatten() {
        content.push(json!({
            "type": "tool_use",
            "id": call["id"],
            "name": call["name"],
            "input": tool_input(&call["arguments"]),
        }));
    }
    let stop_reason = if calls.is_some_and(|c| !c.is_empty()) {
        "tool_use"
    } else {
        "end_turn"
    };
    let seq = ev["seq"].as_u64().unwrap_or_default();
    json!({
        "type": "assistant",
        "message": {
            "id": format!("msg_{}_{seq}", origin.session_id),
            "type": "message",
            "role": "assistant",
            "model": origin.model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": null,
            "usage": data.get("usage").cloned().unwrap_or(Value::Null),
        },
        "parent_tool_use_id": origin.parent_tool_use_id,
        "session_id": origin.session_id,
    })
}

/// A call's arguments as the object Claude Code's `input` is; raw text that is not a JSON
/// object stays visible under `_raw` instead of being dropped.
fn tool_input(arguments: &Value) -> Value {
    match arguments {
        Value::String(raw) => match serde_json::from_str::<Value>(raw) {
            Ok(v @ Value::Object(_)) => v,
            _ if raw.trim().is_empty() => json!({}),
            _ => json!({ "_raw": raw }),
        },
        Value::Object(_) => arguments.clone(),
        Value::Null => json!({}),
        other => json!({ "_raw": other }),
    }
}

fn tool_result(data: &Value, origin: Origin<'_>) -> Value {
    let is_error = data["is_error"].as_bool().unwrap_or(false) || data.get("error").is_some();
    json!({
        "type": "user",
        "message": {
            "role": "user",
            "content": [{
                "type": "tool_result",
                "tool_use_id": data["call_id"],
                "content": data.get("content").cloned().unwrap_or(Value::Null),
                "is_error": is_error,
            }],
        },
        "parent_tool_use_id": origin.parent_tool_use_id,
        "session_id": origin.session_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT: Origin<'static> = Origin {
        session_id: "s1",
        parent_tool_use_id: None,
        model: "m",
    };

    fn one(record: Value, origin: Origin<'_>) -> Value {
        let lines = message_lines(&record.to_string(), origin);
        assert_eq!(lines.len(), 1, "{lines:?}");
        serde_json::from_str(&lines[0]).unwrap()
    }

    #[test]
    fn an_assistant_message_becomes_text_and_tool_use_blocks() {
        let ev = json!({"seq": 4, "type": "assistant/message", "data": {"turn": 0, "step": 0,
            "message": {"content": "looking", "tool_calls": [
                {"id": "c1", "name": "read_file", "arguments": "{\"path\":\"a\"}"},
                {"id": "c2", "name": "shell", "arguments": "not json"}]},
            "usage": {"input_tokens": 3, "output_tokens": 2}}});
        let v = one(ev, ROOT);
        assert_eq!(v["type"], "assistant");
        assert_eq!(v["parent_tool_use_id"], Value::Null);
        let m = &v["message"];
        assert_eq!(
            (m["model"].as_str(), m["stop_reason"].as_str()),
            (Some("m"), Some("tool_use"))
        );
        assert_eq!(m["content"][0], json!({"type": "text", "text": "looking"}));
        assert_eq!(m["content"][1]["input"], json!({"path": "a"}));
        assert_eq!(m["content"][2]["input"], json!({"_raw": "not json"}));
        assert_eq!(m["usage"]["input_tokens"], 3);
    }

    #[test]
    fn a_tool_result_is_a_user_line_with_the_childs_parent_call() {
        let child = Origin {
            parent_tool_use_id: Some("agent_1"),
            ..ROOT
        };
        let ev = json!({"seq": 7, "type": "tool/result", "data": {"turn": 0, "step": 0,
            "call_id": "c1", "content": "no such file", "is_error": true, "error": {"code": "FS_NOT_FOUND"}}});
        let v = one(ev, child);
        assert_eq!(v["type"], "user");
        assert_eq!(v["parent_tool_use_id"], "agent_1");
        assert_eq!(v["session_id"], "s1");
        assert_eq!(
            v["message"]["content"][0],
            json!({"type": "tool_result", "tool_use_id": "c1", "content": "no such file", "is_error": true})
        );
    }

    #[test]
    fn other_events_have_no_counterpart() {
        let ev = json!({"seq": 0, "type": "turn/start", "data": {"turn": 0}});
        assert!(message_lines(&ev.to_string(), ROOT).is_empty());
        assert!(message_lines("not json", ROOT).is_empty());
    }
}
