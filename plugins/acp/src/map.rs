//! What an editor sees of a keel session: each session-log event as ACP `session/update`s, a
//! turn's end as a prompt's stop reason, a tool call as its kind, title and locations.
//!
//! One mapping for the live feed (`session/event` notices while a prompt runs) and for the
//! replay of `session/load` (the stored log), so an editor shows a reloaded session exactly as
//! it saw it live. Pure functions over the log's JSON (docs/session-format.md), no I/O.

use std::path::{Path, PathBuf};

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, Plan, PlanEntry, PlanEntryPriority, PlanEntryStatus, SessionUpdate,
    StopReason, ToolCall, ToolCallContent, ToolCallLocation, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, ToolKind,
};
use serde_json::Value;

/// What the feed knows besides the event: whether this is the replay of `session/load` (only
/// then are the user's own messages sent back: live, the editor shows what it sent), whether
/// the step's text already went out as `agent/delta` chunks (then its `assistant/message` adds
/// no text), and the session's cwd (relative paths in tool arguments are shown from there).
#[derive(Debug, Clone, Copy)]
pub struct Seen<'a> {
    /// Replaying a stored log.
    pub replay: bool,
    /// The step's text was streamed already.
    pub streamed: bool,
    /// The session's working directory.
    pub cwd: &'a Path,
}

/// The updates one log event stands for (`kind` its `type`, `data` its `data`); most events
/// stand for none.
pub fn updates(kind: &str, data: &Value, seen: Seen<'_>) -> Vec<SessionUpdate> {
    match kind {
        "user/message" if seen.replay => text_of(data.get("content"))
            .map(|t| vec![SessionUpdate::UserMessageChunk(chunk(t))])
            .unwrap_or_default(),
        "assistant/message" => {
            let message = data.get("message").unwrap_or(&Value::Null);
            let mut out = Vec::new();
            if !seen.streamed {
                if let Some(reasoning) = message.get("reasoning").and_then(Value::as_str)
                    && !reasoning.is_empty()
                {
                    out.push(SessionUpdate::AgentThoughtChunk(chunk(
                        reasoning.to_owned(),
                    )));
                }
                if let Some(text) = text_of(message.get("content")) {
                    out.push(SessionUpdate::AgentMessageChunk(chunk(text)));
                }
            }
            out
        }
        "tool/call" => tool_call(data, seen.cwd)
            .map(|c| vec![SessionUpdate::ToolCall(c)])
            .unwrap_or_default(),
        "tool/result" => tool_result(data)
            .map(|u| vec![SessionUpdate::ToolCallUpdate(u)])
            .unwrap_or_default(),
        "todo/write" => vec![SessionUpdate::Plan(plan(data))],
        _ => Vec::new(),
    }
}

fn chunk(text: String) -> ContentChunk {
    ContentChunk::new(ContentBlock::from(text))
}

/// A message's text: a string, or the text blocks of a block array joined.
fn text_of(content: Option<&Value>) -> Option<String> {
    let text = match content? {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => return None,
    };
    (!text.is_empty()).then_some(text)
}

/// The kind an editor files a keel tool under (its icon, its grouping).
pub fn kind_of(tool: &str) -> ToolKind {
    match tool {
        "read_file" | "list_dir" | "coldcontext_read" => ToolKind::Read,
        "write_file" | "edit_file" => ToolKind::Edit,
        "shell" => ToolKind::Execute,
        "grep" | "glob" | "coldcontext_search" => ToolKind::Search,
        "agent" => ToolKind::Think,
        _ => ToolKind::Other,
    }
}

/// The arguments as JSON (the log keeps the model's raw text; text that is not JSON is shown
/// as a string).
fn arguments(data: &Value) -> Value {
    match data.get("arguments") {
        Some(Value::String(raw)) => {
            serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.clone()))
        }
        Some(other) => other.clone(),
        None => Value::Null,
    }
}

/// `name: key argument` (the path, the command, the pattern), else the name.
pub fn title(tool: &str, args: &Value) -> String {
    let key = ["path", "command", "pattern", "query", "task"]
        .iter()
        .find_map(|k| args.get(*k).and_then(Value::as_str));
    match key {
        Some(k) => {
            let short: String = k.chars().take(80).collect();
            format!("{tool}: {short}")
        }
        None => tool.to_owned(),
    }
}

/// The files a call touches (its `path` argument), absolute.
pub fn locations(args: &Value, cwd: &Path) -> Vec<ToolCallLocation> {
    args.get("path")
        .and_then(Value::as_str)
        .map(|p| {
            let path = PathBuf::from(p);
            let path = if path.is_absolute() {
                path
            } else {
                cwd.join(path)
            };
            vec![ToolCallLocation::new(path)]
        })
        .unwrap_or_default()
}

fn tool_call(data: &Value, cwd: &Path) -> Option<ToolCall> {
    let id = data.get("call_id")?.as_str()?;
    let name = data.get("name").and_then(Value::as_str).unwrap_or("tool");
    let args = arguments(data);
    Some(
        ToolCall::new(id.to_owned(), title(name, &args))
            .kind(kind_of(name))
            .status(ToolCallStatus::InProgress)
            .locations(locations(&args, cwd))
            .raw_input(args),
    )
}

fn tool_result(data: &Value) -> Option<ToolCallUpdate> {
    let id = data.get("call_id")?.as_str()?;
    let failed =
        data.get("is_error").and_then(Value::as_bool) == Some(true) || data.get("error").is_some();
    let mut fields = ToolCallUpdateFields::new().status(if failed {
        ToolCallStatus::Failed
    } else {
        ToolCallStatus::Completed
    });
    if let Some(text) = text_of(data.get("content")) {
        fields = fields.content(vec![ToolCallContent::from(text)]);
    }
    if let Some(code) = data.pointer("/error/code") {
        fields = fields.raw_output(serde_json::json!({ "error": { "code": code } }));
    }
    Some(ToolCallUpdate::new(id.to_owned(), fields))
}

fn plan(data: &Value) -> Plan {
    let entries = data
        .get("todos")
        .and_then(Value::as_array)
        .map(|todos| {
            todos
                .iter()
                .filter_map(|t| {
                    let content = t.get("content")?.as_str()?;
                    let status = match t.get("status").and_then(Value::as_str) {
                        Some("completed") => PlanEntryStatus::Completed,
                        Some("in_progress" | "in-progress") => PlanEntryStatus::InProgress,
                        _ => PlanEntryStatus::Pending,
                    };
                    Some(PlanEntry::new(content, PlanEntryPriority::Medium, status))
                })
                .collect()
        })
        .unwrap_or_default();
    Plan::new(entries)
}

/// A prompt's stop reason from the last turn's `turn/end` reason kind (SURF-03: `end_turn`
/// only on normal completion; an aborted turn, or none that could be correlated, is
/// `cancelled`).
pub fn stop_reason(kind: &str) -> StopReason {
    match kind {
        "completed" => StopReason::EndTurn,
        "max-turns" | "max-steps" => StopReason::MaxTurnRequests,
        "max-tokens" => StopReason::MaxTokens,
        "blocked" => StopReason::Refusal,
        _ => StopReason::Cancelled,
    }
}

#[cfg(test)]
#[path = "map_tests.rs"]
mod tests;
