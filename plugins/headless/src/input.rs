//! `--input-format stream-json` (issue 16 item 4): what a headless run reads from stdin while
//! it runs, one JSON object per line, so CI and editors can steer a run without a terminal.
//!
//! The accepted lines (docs/agent.md, next to the output schema):
//! - `{"type":"user","message":{"role":"user","content":"…" | [{"type":"text","text":"…"}]}}`
//!   — Claude Code's shape. Sent while a turn runs it is a steer (it joins the next step);
//!   sent when the agent is idle it starts the next turn. An optional
//!   `"keel":{"target":"followup"|"steer"|"inject"|"interrupt","level":1|2|3}` picks another
//!   inbox target (an `interrupt` is a task of its own at `level`, default 1).
//! - `{"type":"control_request","request_id":"…","request":{"subtype":"interrupt"}}` — also
//!   Claude Code's: aborts the running turn (the run goes on), answered on stdout with
//!   `{"type":"control_response","response":{"subtype":"success","request_id":"…"}}`.
//!
//! Parsing is pure and per line: a line that is not one of these is an error naming what is
//! wrong, which the run reports with its line number and skips.

use keel_plugin_api::services::agent::{InboxTarget, InterruptLevel};
use serde::Deserialize;
use serde_json::Value;

/// The `--input-format`s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InputFormat {
    /// The prompt is an argument (or `-`, all of stdin); nothing more is read.
    #[default]
    Text,
    /// JSON lines on stdin while the run lasts.
    StreamJson,
}

impl InputFormat {
    /// The names `--input-format` takes.
    pub const NAMES: &'static [&'static str] = &["text", "stream-json"];

    /// Parses the option (absent → text).
    ///
    /// # Errors
    /// A usage message for an unknown format.
    pub fn parse(value: Option<&str>) -> Result<InputFormat, String> {
        match value {
            None | Some("text") => Ok(InputFormat::Text),
            Some("stream-json") => Ok(InputFormat::StreamJson),
            Some(other) => Err(format!(
                "unknown input format {other:?} (expected one of: {})",
                Self::NAMES.join(", ")
            )),
        }
    }
}

/// One stdin line, understood.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputLine {
    /// A user message. `target: None` means "steer while running, next turn when idle".
    User {
        /// The text.
        content: String,
        /// The inbox target the line asked for.
        target: Option<InboxTarget>,
        /// The level of an `interrupt`.
        level: Option<InterruptLevel>,
    },
    /// Abort the running turn.
    Interrupt {
        /// Echoed in the `control_response`.
        request_id: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeelExtension {
    #[serde(default)]
    target: Option<InboxTarget>,
    #[serde(default)]
    level: Option<InterruptLevel>,
}

/// Parses one line; `Ok(None)` for a blank one.
///
/// # Errors
/// What is wrong with the line, for the run's stderr report.
pub fn parse_line(line: &str) -> Result<Option<InputLine>, String> {
    if line.trim().is_empty() {
        return Ok(None);
    }
    let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    match v.get("type").and_then(Value::as_str) {
        Some("user") => user(&v).map(Some),
        Some("control_request") => control(&v).map(Some),
        Some(other) => Err(format!(
            "unknown line type {other:?} (expected \"user\" or \"control_request\")"
        )),
        None => Err("a line needs a string \"type\"".to_owned()),
    }
}

fn user(v: &Value) -> Result<InputLine, String> {
    let message = v
        .get("message")
        .ok_or("a user line needs a \"message\" object")?;
    if let Some(role) = message.get("role").and_then(Value::as_str)
        && role != "user"
    {
        return Err(format!("the message's role is {role:?}, not \"user\""));
    }
    let content = match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => {
            let mut texts = Vec::new();
            for b in blocks {
                match b.get("type").and_then(Value::as_str) {
                    Some("text") => texts.push(
                        b.get("text")
                            .and_then(Value::as_str)
                            .ok_or("a text block needs a string \"text\"")?
                            .to_owned(),
                    ),
                    Some(other) => {
                        return Err(format!(
                            "content block type {other:?} is not supported (only \"text\")"
                        ));
                    }
                    None => return Err("a content block needs a \"type\"".to_owned()),
                }
            }
            texts.join("\n")
        }
        _ => return Err("the message needs a string or block-array \"content\"".to_owned()),
    };
    if content.trim().is_empty() {
        return Err("the message is empty".to_owned());
    }
    let ext: Option<KeelExtension> = v
        .get("keel")
        .map(|k| serde_json::from_value(k.clone()))
        .transpose()
        .map_err(|e| format!("\"keel\": {e}"))?;
    let (target, level) = ext.map_or((None, None), |k| (k.target, k.level));
    if level.is_some() && target != Some(InboxTarget::Interrupt) {
        return Err("\"keel.level\" applies only to target \"interrupt\"".to_owned());
    }
    Ok(InputLine::User {
        content,
        target,
        level,
    })
}

fn control(v: &Value) -> Result<InputLine, String> {
    let request_id = v
        .get("request_id")
        .and_then(Value::as_str)
        .ok_or("a control_request needs a string \"request_id\"")?
        .to_owned();
    match v
        .get("request")
        .and_then(|r| r.get("subtype"))
        .and_then(Value::as_str)
    {
        Some("interrupt") => Ok(InputLine::Interrupt { request_id }),
        Some(other) => Err(format!(
            "control_request subtype {other:?} is not supported (only \"interrupt\")"
        )),
        None => Err("a control_request needs \"request\":{\"subtype\":…}".to_owned()),
    }
}

/// The answer to a `control_request`.
pub fn control_response(request_id: &str) -> String {
    serde_json::json!({
        "type": "control_response",
        "response": { "subtype": "success", "request_id": request_id },
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user_line(content: &str, target: Option<InboxTarget>) -> InputLine {
        InputLine::User {
            content: content.into(),
            target,
            level: None,
        }
    }

    #[test]
    fn claude_codes_user_shapes_are_accepted() {
        let plain = r#"{"type":"user","message":{"role":"user","content":"hi"}}"#;
        assert_eq!(parse_line(plain), Ok(Some(user_line("hi", None))));
        let blocks = r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},"session_id":"x","parent_tool_use_id":null}"#;
        assert_eq!(parse_line(blocks), Ok(Some(user_line("a\nb", None))));
        assert_eq!(parse_line("   "), Ok(None));
    }

    #[test]
    fn the_keel_extension_picks_a_target_and_a_level() {
        let l =
            r#"{"type":"user","message":{"content":"x"},"keel":{"target":"interrupt","level":3}}"#;
        assert_eq!(
            parse_line(l),
            Ok(Some(InputLine::User {
                content: "x".into(),
                target: Some(InboxTarget::Interrupt),
                level: Some(InterruptLevel::L3),
            }))
        );
        let f = r#"{"type":"user","message":{"content":"x"},"keel":{"target":"followup"}}"#;
        assert_eq!(
            parse_line(f),
            Ok(Some(user_line("x", Some(InboxTarget::Followup))))
        );
    }

    #[test]
    fn control_interrupt_is_an_abort_with_its_request_id() {
        let l = r#"{"type":"control_request","request_id":"r1","request":{"subtype":"interrupt"}}"#;
        assert_eq!(
            parse_line(l),
            Ok(Some(InputLine::Interrupt {
                request_id: "r1".into()
            }))
        );
        let answer: Value = serde_json::from_str(&control_response("r1")).unwrap();
        assert_eq!(
            answer,
            serde_json::json!({"type":"control_response","response":{"subtype":"success","request_id":"r1"}})
        );
    }

    #[test]
    fn bad_lines_say_what_is_wrong() {
        let cases = [
            ("{", "not JSON"),
            (r#"{"message":{}}"#, "needs a string \"type\""),
            (r#"{"type":"assistant"}"#, "unknown line type \"assistant\""),
            (r#"{"type":"user"}"#, "needs a \"message\""),
            (
                r#"{"type":"user","message":{"role":"assistant","content":"x"}}"#,
                "not \"user\"",
            ),
            (
                r#"{"type":"user","message":{"content":7}}"#,
                "string or block-array",
            ),
            (r#"{"type":"user","message":{"content":"  "}}"#, "empty"),
            (
                r#"{"type":"user","message":{"content":[{"type":"image"}]}}"#,
                "\"image\" is not supported",
            ),
            (
                r#"{"type":"user","message":{"content":"x"},"keel":{"level":9,"target":"interrupt"}}"#,
                "level 9",
            ),
            (
                r#"{"type":"user","message":{"content":"x"},"keel":{"level":2}}"#,
                "only to target",
            ),
            (
                r#"{"type":"user","message":{"content":"x"},"keel":{"priority":2}}"#,
                "unknown field",
            ),
            (
                r#"{"type":"control_request","request":{"subtype":"interrupt"}}"#,
                "request_id",
            ),
            (
                r#"{"type":"control_request","request_id":"r","request":{"subtype":"set_model"}}"#,
                "\"set_model\" is not supported",
            ),
        ];
        for (line, want) in cases {
            let got = parse_line(line).expect_err(line);
            assert!(got.contains(want), "{line}: {got}");
        }
    }

    #[test]
    fn input_format_names_parse() {
        assert_eq!(InputFormat::parse(None), Ok(InputFormat::Text));
        assert_eq!(
            InputFormat::parse(Some("stream-json")),
            Ok(InputFormat::StreamJson)
        );
        assert!(
            InputFormat::parse(Some("jsonl"))
                .unwrap_err()
                .contains("stream-json")
        );
    }
}
