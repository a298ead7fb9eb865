//! What a headless run prints (ARCHITECTURE §11, a public contract): the three
//! `--output-format`s, the stderr lines and the exit code. Pure functions over a
//! [`RunReport`], pinned by golden-string tests, so the contract lives in one place. Every
//! stderr line is one line whatever the text it quotes holds (a provider's error body, a
//! plugin's message, a tool name from the model): [`one_line`] escapes it here, and the
//! session log keeps the text as it came (issue 11 item 9).

use std::fmt;

use keel_plugin_api::sdk::one_line;
use keel_plugin_api::services::agent::RunReport;
use serde_json::{Value, json};

/// `--output-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    /// Only the final assistant text.
    Text,
    /// One result object.
    Json,
    /// JSONL: init, one line per durable event, the result object.
    StreamJson,
}

impl OutputFormat {
    /// The names `--output-format` takes.
    pub const NAMES: &'static [&'static str] = &["text", "json", "stream-json"];

    /// Parses the kernel's option (`null` → text).
    ///
    /// # Errors
    /// A usage message for an unknown format.
    pub fn parse(value: &Value) -> Result<OutputFormat, String> {
        match value {
            Value::Null => Ok(OutputFormat::Text),
            Value::String(s) => match s.as_str() {
                "text" => Ok(OutputFormat::Text),
                "json" => Ok(OutputFormat::Json),
                "stream-json" => Ok(OutputFormat::StreamJson),
                other => Err(format!(
                    "unknown output format {other:?}: expected text, json or stream-json"
                )),
            },
            other => Err(format!(
                "output_format must be a string (text, json or stream-json), got {other}"
            )),
        }
    }
}

impl fmt::Display for OutputFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OutputFormat::Text => "text",
            OutputFormat::Json => "json",
            OutputFormat::StreamJson => "stream-json",
        })
    }
}

/// Exit codes (ARCHITECTURE §11).
pub mod exit {
    /// The turn ended `completed`.
    pub const COMPLETED: i32 = 0;
    /// The turn ended otherwise, the run failed after the session existed, or the session is
    /// locked by another keel (`SESSION_LOCKED`).
    pub const TURN_FAILED: i32 = 1;
    /// Usage, config or credential errors, before any model request.
    pub const USAGE: i32 = 2;
    // Stopped by a signal: the kernel's `interrupt` names the code (128 + the signal's number).
}

/// The exit code when `create` / `resume` fails with `code`, before any model request:
/// [`exit::TURN_FAILED`] for `SESSION_LOCKED` — another keel holds the session, a conflict
/// that passes when it finishes, not a mistake in the command — else [`exit::USAGE`].
pub fn open_failure_exit(code: &str) -> i32 {
    if code == keel_plugin_api::services::session::SessionCode::Locked.as_str() {
        exit::TURN_FAILED
    } else {
        exit::USAGE
    }
}

/// `keel: error[CODE]: message`, on one line.
pub fn error_line(code: &str, message: &str) -> String {
    one_line(&format!("keel: error[{code}]: {message}")).into_owned()
}

/// A usage error line (`keel: error[USAGE]: …`).
pub fn usage_line(message: &str) -> String {
    error_line(keel_plugin_api::codes::DriverCode::Usage.as_str(), message)
}

/// What `system/init` tells a consumer about the run besides its session (issue 23 item 13,
/// Claude Code's keys).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InitInfo {
    /// The tools the model is offered, by name.
    pub tools: Vec<String>,
    /// The MCP servers whose tools are among them (`mcp__<server>__<tool>`).
    pub mcp_servers: Vec<String>,
    /// The model of the default provider (empty when unknown).
    pub model: String,
    /// keel's approval mode (`never`, `ask`; empty when no approval row runs).
    pub approval: String,
}

impl InitInfo {
    /// Claude Code's `permissionMode` for keel's approval mode: `never` asks nothing
    /// (`bypassPermissions`), `ask` asks before mutating calls (`default`).
    pub fn permission_mode(&self) -> &'static str {
        match self.approval.as_str() {
            "ask" => "default",
            _ => "bypassPermissions",
        }
    }
}

/// The stream-json first line: keel's keys, and Claude Code's `tools`, `mcp_servers`, `model`,
/// `permissionMode`.
pub fn init_line(session_id: &str, profile: &str, cwd: &str, info: &InitInfo) -> String {
    let servers: Vec<Value> = info
        .mcp_servers
        .iter()
        .map(|name| json!({"name": name, "status": "connected"}))
        .collect();
    json!({
        "type": "system",
        "subtype": "init",
        "schema_version": 1,
        "session_id": session_id,
        "profile": profile,
        "cwd": cwd,
        "tools": info.tools,
        "mcp_servers": servers,
        "model": info.model,
        "permissionMode": info.permission_mode(),
        "approval": info.approval,
    })
    .to_string()
}

/// A stream-json event line around a session event record (the envelope JSON, embedded as
/// JSON; a record that does not parse is embedded as a string rather than dropped).
pub fn event_line(record: &str) -> String {
    let event = serde_json::from_str::<Value>(record).unwrap_or_else(|_| json!(record));
    json!({"type": "event", "event": event}).to_string()
}

/// A child session's event line (issue 16): the event with the child's session id and where it
/// hangs in the tree, so a consumer can follow every delegation.
pub fn child_event_line(
    record: &str,
    session_id: &str,
    parent_session: &str,
    parent_call_id: &str,
) -> String {
    let event = serde_json::from_str::<Value>(record).unwrap_or_else(|_| json!(record));
    json!({
        "type": "event",
        "session_id": session_id,
        "parent_session": parent_session,
        "parent_call_id": parent_call_id,
        "event": event,
    })
    .to_string()
}

/// Whether the report's turn ended `completed`.
pub fn completed(report: &RunReport) -> bool {
    report.reason_kind() == "completed"
}

/// The result's `subtype`, as Claude Code names it: `success`, `error_max_turns` (a turn or
/// step limit ended it) or `error_during_execution` (any other end).
pub fn result_subtype(report: &RunReport) -> &'static str {
    match report.reason_kind() {
        "completed" => "success",
        "max-turns" | "max-steps" => "error_max_turns",
        _ => "error_during_execution",
    }
}

/// The result object (`json`, and the last `stream-json` line), in Claude Code's shape
/// (issue 23 item 13) plus keel's `turn_end_reason` and `keel_turns`. `num_turns` counts model
/// requests, as Claude Code's does; `total_cost_usd` is `null` (keel keeps no price list).
pub fn result_object(report: &RunReport, duration_ms: u64) -> Value {
    let ok = completed(report);
    let stop_reason = match report.reason_kind() {
        "completed" => json!("end_turn"),
        "max-tokens" => json!("max_tokens"),
        _ => Value::Null,
    };
    json!({
        "type": "result",
        "subtype": result_subtype(report),
        "is_error": !ok,
        "session_id": report.session_id,
        "num_turns": report.model_requests,
        "keel_turns": report.num_turns,
        "result": report.result,
        "stop_reason": stop_reason,
        "turn_end_reason": report.reason_kind(),
        "usage": usage_object(report),
        "total_cost_usd": null,
        "duration_ms": duration_ms,
        "duration_api_ms": report.api_ms,
    })
}

/// The result's `usage` (ARCHITECTURE §11 keys): the summed counts when every model answer
/// reported usage; when some did not (a server that ignores `stream_options.include_usage`),
/// the counts are `null` and `unknown_calls` says how many answers came without, so `0`
/// always means zero tokens, never "not reported" (issue 11 item 5).
pub fn usage_object(report: &RunReport) -> Value {
    if report.usage_unknown_calls == 0 {
        return json!({
            "input_tokens": report.usage.input_tokens,
            "output_tokens": report.usage.output_tokens,
        });
    }
    json!({
        "input_tokens": null,
        "output_tokens": null,
        "unknown_calls": report.usage_unknown_calls,
    })
}

/// What `text` prints on stdout: the final assistant text and a newline (nothing when the text
/// is empty).
pub fn text_output(report: &RunReport) -> Option<String> {
    (!report.result.is_empty()).then(|| report.result.clone())
}

/// The exit code a report alone implies (0 completed, else 1).
pub fn exit_code(report: &RunReport) -> i32 {
    if completed(report) {
        exit::COMPLETED
    } else {
        exit::TURN_FAILED
    }
}

fn default_message(kind: &str) -> &'static str {
    match kind {
        "aborted" => "the turn was aborted",
        "blocked" => "the turn was blocked",
        "interrupted" => "the turn was interrupted",
        "max-turns" => "the turn limit was reached",
        "max-tokens" => "the model reached its output token limit",
        "error" => "the turn failed",
        _ => "the turn did not complete",
    }
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter()
        .try_fold(v, |v, k| v.get(*k))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// `keel: turn ended <kind>[ CODE]: <message>` for a turn that did not complete (`None` when
/// it did), on one line. Code and message come from the reason's `error` (or the reason
/// itself) when present; otherwise the message describes the kind.
pub fn turn_failure_line(report: &RunReport) -> Option<String> {
    if completed(report) {
        return None;
    }
    let reason = &report.turn_end_reason;
    let kind = report.reason_kind();
    let code = str_at(reason, &["error", "code"]).or_else(|| str_at(reason, &["code"]));
    let message = str_at(reason, &["error", "message"])
        .or_else(|| str_at(reason, &["message"]))
        .unwrap_or_else(|| default_message(kind));
    let line = match code {
        Some(code) => format!("keel: turn ended {kind} {code}: {message}"),
        None => format!("keel: turn ended {kind}: {message}"),
    };
    Some(one_line(&line).into_owned())
}

/// A report for a run whose `wait_idle` failed: the turn counts as ended by that error.
pub fn failed_report(session_id: &str, code: &str, message: &str) -> RunReport {
    RunReport {
        session_id: session_id.to_owned(),
        turn_end_reason: json!({"kind": "error", "error": {"code": code, "message": message}}),
        ..RunReport::default()
    }
}

/// A short progress line for a session event (stderr, only on a terminal), or `None` for
/// events not worth a line.
pub fn progress_line(kind: &str, record: &str) -> Option<String> {
    let data = || {
        serde_json::from_str::<Value>(record)
            .map(|r| r["data"].clone())
            .unwrap_or(Value::Null)
    };
    match kind {
        "turn/start" => Some("› turn started".to_owned()),
        "step/start" => Some("› step".to_owned()),
        "tool/call" => {
            let d = data();
            let name = str_at(&d, &["name"])
                .or_else(|| str_at(&d, &["tool_name"]))
                .or_else(|| str_at(&d, &["function", "name"]))
                .unwrap_or("?");
            Some(one_line(&format!("› tool {name}")).into_owned())
        }
        "turn/end" => {
            let d = data();
            let reason = str_at(&d, &["reason", "kind"])
                .or_else(|| str_at(&d, &["reason"]))
                .unwrap_or("?");
            Some(one_line(&format!("› turn ended {reason}")).into_owned())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use keel_plugin_api::services::llm::Usage;
    use pretty_assertions::assert_eq;

    use super::*;

    fn report(reason: Value) -> RunReport {
        RunReport {
            session_id: "s1".to_owned(),
            num_turns: 2,
            model_requests: 3,
            api_ms: 900,
            turn_end_reason: reason,
            result: "All done.".to_owned(),
            usage: Usage {
                input_tokens: 30,
                output_tokens: 7,
            },
            ..RunReport::default()
        }
    }

    #[test]
    fn surf01_output_formats_parse() {
        assert_eq!(OutputFormat::parse(&Value::Null), Ok(OutputFormat::Text));
        assert_eq!(OutputFormat::parse(&json!("text")), Ok(OutputFormat::Text));
        assert_eq!(OutputFormat::parse(&json!("json")), Ok(OutputFormat::Json));
        assert_eq!(
            OutputFormat::parse(&json!("stream-json")),
            Ok(OutputFormat::StreamJson)
        );
        assert!(
            OutputFormat::parse(&json!("yaml"))
                .unwrap_err()
                .contains("\"yaml\"")
        );
        assert!(OutputFormat::parse(&json!(1)).is_err());
        assert_eq!(OutputFormat::StreamJson.to_string(), "stream-json");
    }

    #[test]
    fn surf01_init_line_golden() {
        assert_eq!(
            init_line("s1", "default", "/work", &InitInfo::default()),
            r#"{"type":"system","subtype":"init","schema_version":1,"session_id":"s1","profile":"default","cwd":"/work","tools":[],"mcp_servers":[],"model":"","permissionMode":"bypassPermissions","approval":""}"#
        );
        let info = InitInfo {
            tools: vec!["read_file".into(), "mcp__time__now".into()],
            mcp_servers: vec!["time".into()],
            model: "m".into(),
            approval: "ask".into(),
        };
        let v: Value = serde_json::from_str(&init_line("s1", "p", "/w", &info)).unwrap();
        assert_eq!(
            v["mcp_servers"],
            json!([{"name": "time", "status": "connected"}])
        );
        assert_eq!(
            (v["model"].as_str(), v["permissionMode"].as_str()),
            (Some("m"), Some("default"))
        );
    }

    #[test]
    fn surf01_event_line_embeds_the_envelope() {
        let record = r#"{"seq":3,"time":1,"type":"turn/start","data":{"n":1}}"#;
        assert_eq!(
            event_line(record),
            r#"{"type":"event","event":{"seq":3,"time":1,"type":"turn/start","data":{"n":1}}}"#
        );
        assert_eq!(
            event_line("not json"),
            r#"{"type":"event","event":"not json"}"#
        );
    }

    #[test]
    fn surf01_result_object_golden_success() {
        let r = report(json!({"kind": "completed"}));
        assert_eq!(
            result_object(&r, 1234).to_string(),
            r#"{"type":"result","subtype":"success","is_error":false,"session_id":"s1","num_turns":3,"keel_turns":2,"result":"All done.","stop_reason":"end_turn","turn_end_reason":"completed","usage":{"input_tokens":30,"output_tokens":7},"total_cost_usd":null,"duration_ms":1234,"duration_api_ms":900}"#
        );
        assert_eq!(exit_code(&r), 0);
        assert_eq!(turn_failure_line(&r), None);
        assert_eq!(text_output(&r).as_deref(), Some("All done."));
    }

    #[test]
    fn surf01_result_object_golden_error() {
        let r = report(
            json!({"kind": "error", "error": {"code": "RATE_LIMIT", "message": "slow down"}}),
        );
        assert_eq!(
            result_object(&r, 5).to_string(),
            r#"{"type":"result","subtype":"error_during_execution","is_error":true,"session_id":"s1","num_turns":3,"keel_turns":2,"result":"All done.","stop_reason":null,"turn_end_reason":"error","usage":{"input_tokens":30,"output_tokens":7},"total_cost_usd":null,"duration_ms":5,"duration_api_ms":900}"#
        );
        assert_eq!(exit_code(&r), 1);
        assert_eq!(
            turn_failure_line(&r).as_deref(),
            Some("keel: turn ended error RATE_LIMIT: slow down")
        );
    }

    // Issue 11 item 5: answers without usage make the counts null, never zero, and say how
    // many answers that was; a report whose answers all reported usage keeps the §11 shape.
    #[test]
    fn unknown_usage_is_null_with_the_count_of_answers_without_it() {
        let mut r = report(json!({"kind": "completed"}));
        r.usage_unknown_calls = 2;
        assert_eq!(
            result_object(&r, 1)["usage"].to_string(),
            r#"{"input_tokens":null,"output_tokens":null,"unknown_calls":2}"#
        );
        r.usage_unknown_calls = 0;
        r.usage = Usage::default();
        assert_eq!(
            result_object(&r, 1)["usage"].to_string(),
            r#"{"input_tokens":0,"output_tokens":0}"#
        );
    }

    #[test]
    fn surf01_failure_lines_for_every_other_kind() {
        let line = |reason: Value| turn_failure_line(&report(reason)).unwrap();
        assert_eq!(
            line(json!({"kind": "aborted", "by": "user"})),
            "keel: turn ended aborted: the turn was aborted"
        );
        assert_eq!(
            line(json!({"kind": "max-turns"})),
            "keel: turn ended max-turns: the turn limit was reached"
        );
        assert_eq!(
            line(json!({"kind": "blocked", "message": "policy said no"})),
            "keel: turn ended blocked: policy said no"
        );
        assert_eq!(
            line(json!({"kind": "error", "code": "SERVER", "message": "500"})),
            "keel: turn ended error SERVER: 500"
        );
        assert_eq!(
            line(json!("garbage")),
            "keel: turn ended unknown: the turn did not complete"
        );
    }

    #[test]
    fn failed_report_reads_as_an_error_turn() {
        let r = failed_report("s9", "AGENT", "wait_idle failed");
        assert_eq!(r.reason_kind(), "error");
        assert_eq!(
            turn_failure_line(&r).as_deref(),
            Some("keel: turn ended error AGENT: wait_idle failed")
        );
        assert_eq!(text_output(&r), None);
    }

    #[test]
    fn error_lines_golden() {
        assert_eq!(
            error_line("CREDENTIAL_MISSING", "set llm.key"),
            "keel: error[CREDENTIAL_MISSING]: set llm.key"
        );
        assert_eq!(usage_line("no prompt"), "keel: error[USAGE]: no prompt");
    }

    /// Issue 11 item 9: quoted text never breaks a stderr line.
    #[test]
    fn issue11_item9_failure_lines_are_one_line_whatever_the_quoted_text_holds() {
        let body = "openai returned HTTP 500: line one\nline two\r\n\u{1b}[2Jcleared\n";
        let r = report(json!({"kind": "error", "error": {"code": "SERVER", "message": body}}));
        assert_eq!(
            turn_failure_line(&r).as_deref(),
            Some(
                "keel: turn ended error SERVER: openai returned HTTP 500: line one\\nline two\\r\\n\\u{001b}[2Jcleared"
            )
        );
        assert_eq!(
            error_line("AGENT", "first\nsecond\n"),
            "keel: error[AGENT]: first\\nsecond"
        );
        let rec = json!({"data": {"name": "evil\nkeel: turn ended completed"}}).to_string();
        assert_eq!(
            progress_line("tool/call", &rec).as_deref(),
            Some("› tool evil\\nkeel: turn ended completed")
        );
    }

    #[test]
    fn progress_lines_name_turns_steps_and_tools() {
        let rec = |kind: &str, data: Value| {
            json!({"seq": 0, "time": 0, "type": kind, "data": data}).to_string()
        };
        assert_eq!(
            progress_line("turn/start", &rec("turn/start", json!({}))).as_deref(),
            Some("› turn started")
        );
        assert_eq!(
            progress_line("tool/call", &rec("tool/call", json!({"name": "read_file"}))).as_deref(),
            Some("› tool read_file")
        );
        assert_eq!(
            progress_line(
                "turn/end",
                &rec("turn/end", json!({"reason": {"kind": "completed"}}))
            )
            .as_deref(),
            Some("› turn ended completed")
        );
        assert_eq!(progress_line("assistant/chunk", "{}"), None);
    }
}
