//! The resident tools' definitions and their dispatch (issue 16 item 2). Parent-side:
//! `resident_start`, `resident_send`, `resident_view`, `resident_promote`, `resident_stop`.
//! Child-side (`child_only`, offered only to child agents): `memory_write`, `memory_read`,
//! `notify_parent`. Every tool is exclusive (`parallel_safe: false`) so one parent's calls on
//! its children run in the order the model wrote them.

use std::sync::Arc;

use keel_plugin_api::codes::ContractCode;
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::tools::{
    ToolCode, ToolDefinition, ToolExecutor, ToolInvocation, ToolResult,
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::Host;

fn def(name: &str, description: &str, parameters: Value, child_only: bool) -> ToolDefinition {
    ToolDefinition {
        name: name.into(),
        description: description.into(),
        parameters,
        parallel_safe: false,
        mutating: false,
        child_only,
    }
}

fn name_param() -> Value {
    json!({ "type": "string", "description": "The resident child's name (letters, digits, _ and -)." })
}

/// The eight definitions registered with `keel.tools`.
pub fn definitions() -> Vec<ToolDefinition> {
    vec![
        def(
            "resident_start",
            "Start a long-lived named child agent (a resident) with its own input queue and \
             memory. It idles until `resident_send` gives it work and lives until \
             `resident_stop` or until this session ends. Inputs kept at its last stop are \
             queued again; parked ones only with `resume_parked`.",
            json!({
                "type": "object",
                "properties": {
                    "name": name_param(),
                    "agent": { "type": "string", "description": "A named child profile of the subagent row (its model, tools, budgets)." },
                    "resume_parked": { "type": "boolean", "description": "Queue again the inputs parked at the last stop of this name." }
                },
                "required": ["name"],
                "additionalProperties": false
            }),
            false,
        ),
        def(
            "resident_send",
            "Give a resident child a message. It is queued on the child's own queue as an \
             interrupt (it runs before the child's queued work) and the call returns at once; \
             read the answer later with `resident_view`.",
            json!({
                "type": "object",
                "properties": { "name": name_param(), "message": { "type": "string" } },
                "required": ["name", "message"],
                "additionalProperties": false
            }),
            false,
        ),
        def(
            "resident_view",
            "Look at a resident child without interrupting it: running or idle, its last \
             answer, its waiting inputs and its temp memory. `wait: true` first waits until \
             it is idle.",
            json!({
                "type": "object",
                "properties": { "name": name_param(), "wait": { "type": "boolean" } },
                "required": ["name"],
                "additionalProperties": false
            }),
            false,
        ),
        def(
            "resident_promote",
            "Copy records of a resident child's temp memory into this session's main memory, \
             which every resident child of this session reads.",
            json!({
                "type": "object",
                "properties": {
                    "name": name_param(),
                    "keys": { "type": "array", "items": { "type": "string" }, "minItems": 1 }
                },
                "required": ["name", "keys"],
                "additionalProperties": false
            }),
            false,
        ),
        def(
            "resident_stop",
            "Stop a resident child. Its inputs not yet run are kept (queued again at the next \
             start of the name; the default), dropped (logged and answered skipped), parked \
             (saved until a start asks for them) or returned (in this result). A running task \
             is aborted. Its temp memory is deleted.",
            json!({
                "type": "object",
                "properties": {
                    "name": name_param(),
                    "residual": { "type": "string", "enum": ["keep", "drop", "park", "return"] }
                },
                "required": ["name"],
                "additionalProperties": false
            }),
            false,
        ),
        def(
            "memory_write",
            "Write a record to your temp memory (a resident child's own; your parent may \
             promote it to main memory). The same key replaces the record.",
            json!({
                "type": "object",
                "properties": { "key": { "type": "string", "minLength": 1 }, "text": { "type": "string" } },
                "required": ["key", "text"],
                "additionalProperties": false
            }),
            true,
        ),
        def(
            "memory_read",
            "Read your memory: your temp records and your parent's main records (temp wins on \
             the same key). `query` keeps records whose key or text contains it.",
            json!({
                "type": "object",
                "properties": { "query": { "type": "string" } },
                "additionalProperties": false
            }),
            true,
        ),
        def(
            "notify_parent",
            "Send your parent agent a message now (it interrupts the parent's queued work).",
            json!({
                "type": "object",
                "properties": { "message": { "type": "string", "minLength": 1 } },
                "required": ["message"],
                "additionalProperties": false
            }),
            true,
        ),
    ]
}

/// The tool provider over the host.
pub struct ResidentTools(pub Arc<Host>);

/// Parses `call`'s arguments.
///
/// # Errors
/// `INVALID_ARGUMENTS` naming the tool.
pub(super) fn args<T: DeserializeOwned>(call: &ToolInvocation) -> Result<T> {
    serde_json::from_value(call.args.clone()).map_err(|e| {
        Error::coded(
            ContractCode::InvalidArguments,
            format!("{}: {e}", call.name),
        )
    })
}

/// A successful result whose content is `value` as JSON (what the model reads and the log
/// keeps), also in `meta`.
pub(super) fn json_result(value: &impl serde::Serialize) -> ToolResult {
    let v = serde_json::to_value(value).unwrap_or(Value::Null);
    ToolResult {
        content: v.to_string(),
        meta: Some(v),
        ..ToolResult::default()
    }
}

impl ToolExecutor for ResidentTools {
    async fn execute(&self, call: ToolInvocation) -> Result<ToolResult> {
        let host = &self.0;
        let result = match call.name.as_str() {
            "resident_start" => host.start(&call).await,
            "resident_send" => host.send(&call).await,
            "resident_view" => host.view(&call).await,
            "resident_promote" => host.promote(&call),
            "resident_stop" => host.stop_tool(&call).await,
            "memory_write" => host.memory_write(&call),
            "memory_read" => host.memory_read(&call),
            "notify_parent" => host.notify_parent(&call).await,
            other => Ok(ToolResult::error(
                ToolCode::UnknownTool,
                format!("the subagent row has no resident tool '{other}'"),
            )),
        };
        Ok(result.unwrap_or_else(|e| ToolResult::from_error(&e)))
    }
}
