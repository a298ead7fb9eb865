//! The session-log events one call writes (B9): `tool/call` with the model's raw argument text,
//! `tool/rewrite` with the arguments every later stage sees (issue 15 item 3), and the durable
//! `tool/result`. Their JSON shapes are the session format's (ARCHITECTURE §7), so they live
//! apart from the stages that decide when each is written.

use keel_plugin_api::events::tools::ToolExecution;
use keel_plugin_api::services::tools::{BatchRequest, ModelCall, ToolResult};
use serde_json::{Value, json};

/// The `tool/call` event (raw argument text, B9).
pub fn tool_call_event(request: &BatchRequest, call: &ModelCall) -> Value {
    json!({
        "type": "tool/call",
        "data": {
            "turn": request.turn,
            "step": request.step,
            "call_id": call.id,
            "name": call.name,
            "arguments": call.arguments,
        },
    })
}

/// The `tool/result` event: the result's model-facing fields under the model's call id.
pub fn tool_result_event(request: &BatchRequest, call_id: &str, result: &ToolResult) -> Value {
    let mut data = serde_json::Map::new();
    data.insert("turn".into(), request.turn.into());
    data.insert("step".into(), request.step.into());
    data.insert("call_id".into(), call_id.into());
    data.insert("content".into(), result.content.as_str().into());
    if result.is_error {
        data.insert("is_error".into(), true.into());
    }
    if let Some(error) = &result.error {
        data.insert("error".into(), json!({"code": error.code}));
    }
    if let Some(meta) = &result.meta {
        data.insert("meta".into(), meta.clone());
    }
    json!({"type": "tool/result", "data": data, "surface_op": "append"})
}

/// The `tool/rewrite` event: the arguments every later stage sees, beside the model's raw
/// text in `tool/call` (issue 15 item 3).
pub fn tool_rewrite_event(exec: &ToolExecution, args: &Value, by: &str) -> Value {
    json!({
        "type": "tool/rewrite",
        "ignorable": true,
        "data": {
            "turn": exec.turn,
            "step": exec.step,
            "call_id": exec.call_id.as_str(),
            "args": args,
            "by": by,
        },
    })
}
