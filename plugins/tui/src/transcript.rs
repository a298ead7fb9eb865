//! What the session log's events look like in the terminal: a tool call as one compact line
//! (name, the key argument, outcome code, duration), a turn's end when it is not a plain
//! completion, the text of a model answer that was not streamed. The records are the session
//! format's (docs/session-format.md); anything unexpected in them is shown as far as it can be
//! read, never an error: the terminal is a view, the log stays the truth.

use std::time::Duration;

use serde_json::Value;

use crate::view::{Line, Tone};

/// The argument most worth showing for a tool call: the first of the usual keys, else the first
/// string argument. At most `max` characters, on one line.
pub fn key_argument(arguments: &str, max: usize) -> String {
    let parsed: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
    const KEYS: &[&str] = &[
        "command",
        "path",
        "file_path",
        "pattern",
        "url",
        "query",
        "task",
        "prompt",
        "name",
    ];
    let found = KEYS
        .iter()
        .find_map(|k| parsed.get(*k).and_then(Value::as_str))
        .or_else(|| {
            parsed
                .as_object()
                .and_then(|o| o.values().find_map(Value::as_str))
        })
        .unwrap_or_default();
    shorten(&found.replace('\n', " "), max)
}

/// `text` cut to `max` characters with an ellipsis.
pub fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// A tool call the model made, until its result arrives.
#[derive(Debug, Clone)]
pub struct Call {
    /// The model's call id.
    pub call_id: String,
    /// Tool name.
    pub name: String,
    /// The key argument ([`key_argument`]).
    pub key: String,
    /// When `tool/call` was seen.
    pub started: std::time::Instant,
    /// The child agent this call started (the `agent` tool), as far as its log told.
    pub child: Option<Child>,
}

/// What a running child agent did so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Child {
    /// Its session.
    pub session: String,
    /// Model answers so far.
    pub steps: u64,
    /// Tokens its model answers reported (input + output).
    pub tokens: u64,
    /// Its latest tool call (name and key argument).
    pub doing: Option<String>,
}

impl Call {
    /// From a `tool/call` record's `data`.
    pub fn from_data(data: &Value) -> Option<Call> {
        Some(Call {
            call_id: data.get("call_id")?.as_str()?.to_owned(),
            name: data.get("name")?.as_str()?.to_owned(),
            key: key_argument(
                data.get("arguments").and_then(Value::as_str).unwrap_or(""),
                60,
            ),
            started: std::time::Instant::now(),
            child: None,
        })
    }

    /// The live line while it runs (a child agent's step, tokens and latest call with it).
    pub fn running(&self) -> Line {
        let child = self
            .child
            .as_ref()
            .map(|c| {
                let doing = c
                    .doing
                    .as_deref()
                    .map(|d| format!(" · {d}"))
                    .unwrap_or_default();
                format!(" · step {} · {} tokens{doing}", c.steps, c.tokens)
            })
            .unwrap_or_default();
        Line::new(Tone::Dim, format!("  ⋯ {} {}{child}", self.name, self.key))
    }

    /// The finished line for its `tool/result` record's `data`.
    pub fn finished(&self, data: &Value, took: Duration) -> Line {
        let code = data
            .get("error")
            .and_then(|e| e.get("code"))
            .and_then(Value::as_str);
        let is_error = data
            .get("is_error")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let (mark, outcome, tone) = match (code, is_error) {
            (Some(code), _) => ("✗", code.to_owned(), Tone::Bad),
            (None, true) => ("✗", "error".to_owned(), Tone::Bad),
            (None, false) => ("✓", "ok".to_owned(), Tone::Good),
        };
        Line::new(
            tone,
            format!(
                "  {mark} {} {} · {outcome} · {}",
                self.name,
                self.key,
                duration(took)
            ),
        )
    }
}

/// `1.2s`, `340ms`.
pub fn duration(d: Duration) -> String {
    if d.as_millis() < 1000 {
        format!("{}ms", d.as_millis())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// A `turn/end` reason as the session format spells it (`{kind, error?: {code, message}}`).
#[derive(Debug, Default, serde::Deserialize)]
struct EndReason {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    error: Option<EndError>,
}

#[derive(Debug, Default, serde::Deserialize)]
struct EndError {
    #[serde(default)]
    code: String,
    #[serde(default)]
    message: String,
}

/// The note for a `turn/end` record's `data`: `None` for a completed turn.
pub fn turn_end(data: &Value) -> Option<Line> {
    let reason: EndReason = serde_json::from_value(data.get("reason")?.clone()).ok()?;
    if reason.kind == "completed" {
        return None;
    }
    let detail = reason
        .error
        .map(|e| format!(": {} {}", e.code, shorten(&e.message, 120)))
        .unwrap_or_default();
    let tone = if reason.kind == "aborted" {
        Tone::Dim
    } else {
        Tone::Bad
    };
    Some(Line::new(
        tone,
        format!("  turn ended {}{detail}", reason.kind),
    ))
}

/// The assistant text and usage of an `assistant/message` record's `data`.
pub fn assistant(data: &Value) -> (String, Option<(u64, u64)>) {
    let text = data
        .get("message")
        .and_then(|m| m.get("content"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let usage = data.get("usage").map(|u| {
        (
            u.get("input_tokens").and_then(Value::as_u64).unwrap_or(0),
            u.get("output_tokens").and_then(Value::as_u64).unwrap_or(0),
        )
    });
    (text, usage)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_key_argument_is_the_one_a_person_recognises() {
        assert_eq!(key_argument(r#"{"command":"sleep 30"}"#, 60), "sleep 30");
        assert_eq!(
            key_argument(r#"{"content":"x","path":"a.txt"}"#, 60),
            "a.txt"
        );
        assert_eq!(key_argument(r#"{"n":1,"other":"v"}"#, 60), "v");
        assert_eq!(key_argument("not json", 60), "");
        assert_eq!(key_argument(r#"{"command":"abcdef"}"#, 4), "abc…");
    }

    #[test]
    fn a_finished_call_names_its_outcome_code() {
        let call = Call::from_data(&json!({"call_id": "c1", "name": "shell",
            "arguments": "{\"command\":\"ls\"}"}))
        .unwrap();
        let ok = call.finished(&json!({"content": "x"}), Duration::from_millis(12));
        assert_eq!(ok.text, "  ✓ shell ls · ok · 12ms");
        let denied = call.finished(
            &json!({"is_error": true, "error": {"code": "APPROVAL_DENIED"}}),
            Duration::from_millis(1500),
        );
        assert_eq!(denied.text, "  ✗ shell ls · APPROVAL_DENIED · 1.5s");
        assert_eq!(denied.tone, Tone::Bad);
    }

    #[test]
    fn a_running_child_shows_its_step_tokens_and_latest_call() {
        let mut call = Call::from_data(&json!({"call_id": "a1", "name": "agent",
            "arguments": "{\"task\":\"count the files\"}"}))
        .unwrap();
        assert_eq!(call.running().text, "  ⋯ agent count the files");
        call.child = Some(Child {
            session: "c".into(),
            steps: 2,
            tokens: 40,
            doing: Some("shell ls".into()),
        });
        assert_eq!(
            call.running().text,
            "  ⋯ agent count the files · step 2 · 40 tokens · shell ls"
        );
    }

    #[test]
    fn only_an_unusual_turn_end_is_noted() {
        assert_eq!(turn_end(&json!({"reason": {"kind": "completed"}})), None);
        let aborted = turn_end(&json!({"reason": {"kind": "aborted"}})).unwrap();
        assert_eq!(aborted.text, "  turn ended aborted");
        let error = turn_end(&json!({"reason": {"kind": "error",
            "error": {"code": "LLM_HTTP", "message": "502"}}}))
        .unwrap();
        assert_eq!(error.text, "  turn ended error: LLM_HTTP 502");
    }
}
