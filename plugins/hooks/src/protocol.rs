//! Claude Code's hook protocol: what a hook reads on stdin and what its exit code and stdout
//! mean (issue 15 item 3).
//!
//! Exit 0 is success, and its stdout may be JSON with decisions ([`Output`]); exit 2 blocks,
//! with stderr as the reason; any other exit, a timeout or a failure to start is a
//! non-blocking error (logged, one stderr line) — except that `on_timeout = "deny"` turns a
//! PreToolUse timeout into a denial. [`interpret`] reduces one run to an [`Answer`];
//! [`Answer::merge`] combines the hooks of one event (they run in parallel): any block blocks,
//! an ask beats an allow, the last rewrite in configuration order wins.

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::config::{Event, Hook};
use crate::runner::Outcome;

/// The JSON a hook may print on stdout at exit 0 (the fields keel reads; others are ignored).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Output {
    /// `false` stops: the call is denied, the prompt rejected (Stop ignores it).
    #[serde(rename = "continue")]
    pub proceed: Option<bool>,
    /// Why, with `continue: false`.
    pub stop_reason: Option<String>,
    /// Legacy decision: `"block"` (or, for PreToolUse, `"approve"`).
    pub decision: Option<String>,
    /// Why, with `decision`.
    pub reason: Option<String>,
    /// The event-specific part.
    pub hook_specific_output: Option<Specific>,
}

/// `hookSpecificOutput`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Specific {
    /// PreToolUse: `allow`, `deny` or `ask`.
    pub permission_decision: Option<String>,
    /// Why.
    pub permission_decision_reason: Option<String>,
    /// PreToolUse: the arguments to use instead (a JSON object).
    pub updated_input: Option<Value>,
    /// PostToolUse, UserPromptSubmit, SessionStart: text added for the model.
    pub additional_context: Option<String>,
}

/// What one hook (or all hooks of an event, merged) decided.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answer {
    /// Block / deny, with the reason the model (or, for a prompt, the user) reads.
    pub block: Option<String>,
    /// PreToolUse asked for approval (with its reason).
    pub ask: Option<Option<String>>,
    /// PreToolUse allowed (which never loosens keel's own policy).
    pub allow: bool,
    /// PreToolUse's replacement arguments, and the command that gave them.
    pub rewrite: Option<(Value, String)>,
    /// Text for the model.
    pub context: Vec<String>,
    /// A non-blocking error (non-zero exit other than 2, timeout, spawn failure, bad output).
    pub error: Option<String>,
    /// How many hooks ran (0: none matched).
    pub ran: usize,
}

impl Answer {
    /// The audit word for `hook/result`.
    pub fn decision(&self) -> &'static str {
        if self.block.is_some() {
            "block"
        } else if self.ask.is_some() {
            "ask"
        } else if self.rewrite.is_some() {
            "rewrite"
        } else if self.allow {
            "allow"
        } else if !self.context.is_empty() {
            "context"
        } else if self.error.is_some() {
            "error"
        } else {
            "none"
        }
    }

    /// Combines answers in configuration order.
    pub fn merge(answers: impl IntoIterator<Item = Answer>) -> Answer {
        let mut out = Answer::default();
        let mut blocks = Vec::new();
        for a in answers {
            blocks.extend(a.block);
            if out.ask.is_none() {
                out.ask = a.ask;
            }
            out.allow |= a.allow;
            if a.rewrite.is_some() {
                out.rewrite = a.rewrite;
            }
            out.context.extend(a.context);
            if out.error.is_none() {
                out.error = a.error;
            }
            out.ran += a.ran;
        }
        if !blocks.is_empty() {
            out.block = Some(blocks.join("\n"));
        }
        out
    }
}

/// The fields every stdin document carries (Claude Code's common input).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Common {
    /// The session.
    pub session_id: String,
    /// The JSONL transcript written for the hooks ([`crate::transcript`]); `None` when it
    /// could not be written (the field is then `null`).
    pub transcript_path: Option<String>,
    /// The session's working directory.
    pub cwd: String,
    /// Claude Code's word for keel's approval mode: `default` (`ask`) or `bypassPermissions`
    /// (`never`, or no approval row).
    pub permission_mode: &'static str,
    /// The id of the user prompt whose turn this is (`<session>-<turn>`), when known.
    pub prompt_id: Option<String>,
}

/// The stdin document: Claude Code's common fields and `fields`.
pub fn input(event: Event, common: &Common, fields: Map<String, Value>) -> Value {
    let mut doc = Map::new();
    doc.insert("session_id".into(), common.session_id.clone().into());
    doc.insert(
        "transcript_path".into(),
        common
            .transcript_path
            .clone()
            .map_or(Value::Null, Value::from),
    );
    doc.insert("cwd".into(), common.cwd.clone().into());
    doc.insert("permission_mode".into(), common.permission_mode.into());
    doc.insert("hook_event_name".into(), event.name().into());
    if let Some(id) = &common.prompt_id {
        doc.insert("prompt_id".into(), id.clone().into());
    }
    doc.extend(fields);
    Value::Object(doc)
}

/// One run's answer. `deny_on_timeout`: the row's `on_timeout = "deny"` (PreToolUse only).
pub fn interpret(hook: &Hook, o: &Outcome, deny_on_timeout: bool) -> Answer {
    let who = format!("{} hook `{}`", hook.event.name(), hook.command);
    if let Some(e) = &o.spawn_error {
        return error(format!("{who} did not run: {e}"));
    }
    if o.timed_out {
        let secs = hook.timeout.as_secs();
        if deny_on_timeout && hook.event == Event::PreToolUse {
            return Answer {
                block: Some(format!(
                    "{who} timed out after {secs} s (on_timeout = \"deny\")"
                )),
                error: Some(format!("{who} timed out after {secs} s")),
                ..Answer::default()
            };
        }
        return error(format!("{who} timed out after {secs} s and was killed"));
    }
    match o.exit_code {
        Some(0) => success(hook, &who, o),
        Some(2) => {
            let stderr = o.stderr.trim();
            let reason = if stderr.is_empty() {
                format!("blocked by {who}")
            } else {
                stderr.to_owned()
            };
            Answer {
                block: Some(reason),
                ..Answer::default()
            }
        }
        Some(code) => error(format!("{who} exited {code}: {}", first_line(&o.stderr))),
        None => error(format!(
            "{who} was killed by signal {}",
            o.signal.unwrap_or_default()
        )),
    }
}

fn error(message: String) -> Answer {
    Answer {
        error: Some(message),
        ..Answer::default()
    }
}

fn first_line(text: &str) -> &str {
    text.trim().lines().next().unwrap_or("(no stderr)")
}

/// Exit 0: JSON decisions when stdout is a JSON object, else plain text (context for the
/// events that take it).
fn success(hook: &Hook, who: &str, o: &Outcome) -> Answer {
    let text = o.stdout.trim();
    let takes_text = matches!(hook.event, Event::UserPromptSubmit | Event::SessionStart);
    let parsed = text
        .starts_with('{')
        .then(|| serde_json::from_str::<Output>(text));
    let out = match parsed {
        Some(Ok(out)) => out,
        Some(Err(e)) if !takes_text => {
            return error(format!("{who} printed JSON keel cannot read: {e}"));
        }
        _ => {
            let mut a = Answer::default();
            if takes_text && !text.is_empty() {
                a.context.push(text.to_owned());
            }
            return a;
        }
    };
    let mut a = Answer::default();
    let specific = out.hook_specific_output.unwrap_or_default();
    if out.proceed == Some(false) && hook.event != Event::Stop {
        a.block = Some(
            out.stop_reason
                .clone()
                .unwrap_or_else(|| format!("{who} answered continue: false")),
        );
    }
    match out.decision.as_deref() {
        Some("block") => {
            let reason = out
                .reason
                .clone()
                .unwrap_or_else(|| format!("blocked by {who}"));
            a.block.get_or_insert(reason);
        }
        Some("approve") if hook.event == Event::PreToolUse => a.allow = true,
        _ => {}
    }
    if hook.event == Event::PreToolUse {
        let reason = specific.permission_decision_reason.clone();
        match specific.permission_decision.as_deref() {
            Some("deny") => {
                a.block
                    .get_or_insert_with(|| reason.unwrap_or_else(|| format!("denied by {who}")));
            }
            Some("ask") => a.ask = Some(reason),
            Some("allow") => a.allow = true,
            _ => {}
        }
        match specific.updated_input {
            Some(args @ Value::Object(_)) => a.rewrite = Some((args, hook.command.clone())),
            Some(_) => a.error = Some(format!("{who}: updatedInput is not a JSON object; ignored")),
            None => {}
        }
    }
    if let Some(extra) = specific.additional_context.filter(|c| !c.trim().is_empty()) {
        a.context.push(extra);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::HookSet;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn hook(event: &str) -> Hook {
        let table = serde_json::from_value(json!({event: [{"hooks": [
            {"type": "command", "command": "h.sh", "timeout": 2}]}]}))
        .unwrap();
        let mut set = HookSet::default();
        set.add(&table, "row 'hooks'", 60).unwrap();
        set.matching(Event::parse(event).unwrap(), &[]).remove(0)
    }

    fn exited(code: i32, stdout: &str, stderr: &str) -> Outcome {
        Outcome {
            exit_code: Some(code),
            stdout: stdout.into(),
            stderr: stderr.into(),
            ..Outcome::default()
        }
    }

    #[test]
    fn exit_two_blocks_with_stderr_and_other_codes_are_non_blocking() {
        let h = hook("PreToolUse");
        let a = interpret(&h, &exited(2, "", "no rm here\n"), false);
        assert_eq!(a.block.as_deref(), Some("no rm here"));
        let a = interpret(&h, &exited(1, "", "boom\nmore"), false);
        assert_eq!(a.block, None);
        assert_eq!(
            a.error.as_deref(),
            Some("PreToolUse hook `h.sh` exited 1: boom")
        );
        assert_eq!(a.decision(), "error");
    }

    #[test]
    fn pre_tool_use_json_decisions_and_rewrites() {
        let h = hook("PreToolUse");
        let out = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
            "permissionDecision": "deny", "permissionDecisionReason": "not today"}});
        let a = interpret(&h, &exited(0, &out.to_string(), ""), false);
        assert_eq!(a.block.as_deref(), Some("not today"));
        let out = json!({"hookSpecificOutput": {"permissionDecision": "allow",
            "updatedInput": {"path": "b"}}});
        let a = interpret(&h, &exited(0, &out.to_string(), ""), false);
        assert!(a.allow);
        assert_eq!(a.rewrite, Some((json!({"path": "b"}), "h.sh".to_owned())));
        assert_eq!(a.decision(), "rewrite");
        let a = interpret(
            &h,
            &exited(0, r#"{"decision":"block","reason":"legacy"}"#, ""),
            false,
        );
        assert_eq!(a.block.as_deref(), Some("legacy"));
        let a = interpret(
            &h,
            &exited(
                0,
                r#"{"hookSpecificOutput":{"permissionDecision":"ask"}}"#,
                "",
            ),
            false,
        );
        assert_eq!(a.ask, Some(None));
    }

    #[test]
    fn a_timeout_proceeds_or_denies_per_config() {
        let h = hook("PreToolUse");
        let o = Outcome {
            timed_out: true,
            ..Outcome::default()
        };
        assert_eq!(interpret(&h, &o, false).block, None);
        assert!(
            interpret(&h, &o, true)
                .block
                .unwrap()
                .contains("timed out after 2 s")
        );
        assert_eq!(interpret(&hook("PostToolUse"), &o, true).block, None);
    }

    #[test]
    fn prompt_hooks_add_plain_stdout_or_additional_context() {
        let h = hook("UserPromptSubmit");
        assert_eq!(
            interpret(&h, &exited(0, "the build is green\n", ""), false).context,
            ["the build is green"]
        );
        let out = r#"{"hookSpecificOutput":{"additionalContext":"ctx"}}"#;
        assert_eq!(interpret(&h, &exited(0, out, ""), false).context, ["ctx"]);
        // Stop ignores continue: false; a block with a reason continues the turn.
        let s = hook("Stop");
        let a = interpret(
            &s,
            &exited(
                0,
                r#"{"continue":false,"decision":"block","reason":"tests fail"}"#,
                "",
            ),
            false,
        );
        assert_eq!(a.block.as_deref(), Some("tests fail"));
    }

    #[test]
    fn merging_blocks_beats_ask_beats_allow_and_the_last_rewrite_wins() {
        let a = Answer::merge([
            Answer {
                allow: true,
                rewrite: Some((json!({"a": 1}), "x".into())),
                ..Answer::default()
            },
            Answer {
                ask: Some(Some("why".into())),
                rewrite: Some((json!({"a": 2}), "y".into())),
                ..Answer::default()
            },
            Answer {
                block: Some("no".into()),
                ..Answer::default()
            },
            Answer {
                block: Some("never".into()),
                ..Answer::default()
            },
        ]);
        assert_eq!(a.block.as_deref(), Some("no\nnever"));
        assert_eq!(a.ask, Some(Some("why".into())));
        assert_eq!(a.rewrite.unwrap().1, "y");
    }

    // cargo mutants on this file: each case below was a surviving mutant.
    #[test]
    fn stdin_carries_the_common_fields_and_the_events_own() {
        let mut fields = Map::new();
        fields.insert("tool_name".into(), "shell".into());
        let common = Common {
            session_id: "s1".into(),
            transcript_path: Some("/t/s1.jsonl".into()),
            cwd: "/w".into(),
            permission_mode: "default",
            prompt_id: Some("s1-0".into()),
        };
        let doc = input(Event::PreToolUse, &common, fields);
        assert_eq!(
            doc,
            json!({"session_id": "s1", "transcript_path": "/t/s1.jsonl", "cwd": "/w",
                "permission_mode": "default", "hook_event_name": "PreToolUse",
                "prompt_id": "s1-0", "tool_name": "shell"})
        );
        let doc = input(Event::Stop, &Common::default(), Map::new());
        assert_eq!(doc["transcript_path"], Value::Null);
        assert!(doc.get("prompt_id").is_none());
    }

    #[test]
    fn an_allow_survives_a_later_silent_hook_and_a_timeout_deny_is_also_an_error() {
        let a = Answer::merge([
            Answer {
                allow: true,
                ..Answer::default()
            },
            Answer::default(),
        ]);
        assert!(a.allow);
        let o = Outcome {
            timed_out: true,
            ..Outcome::default()
        };
        let denied = interpret(&hook("PreToolUse"), &o, true);
        assert!(denied.error.unwrap().contains("timed out"));
    }

    #[test]
    fn only_prompt_and_start_hooks_take_plain_or_broken_stdout_as_context() {
        let post = hook("PostToolUse");
        let a = interpret(&post, &exited(0, "plain words\n", ""), false);
        assert_eq!(a, Answer::default(), "plain stdout is ignored after a tool");
        let a = interpret(&post, &exited(0, "{not json", ""), false);
        assert!(a.error.unwrap().contains("JSON keel cannot read"));
        let prompt = hook("UserPromptSubmit");
        let a = interpret(&prompt, &exited(0, "{not json", ""), false);
        assert_eq!(a.context, ["{not json"]);
        assert_eq!(a.error, None);
        let a = interpret(&prompt, &exited(0, "  \n", ""), false);
        assert!(a.context.is_empty(), "empty stdout adds no context");
    }

    #[test]
    fn permission_words_count_only_for_pre_tool_use() {
        let approve = r#"{"decision":"approve"}"#;
        assert!(interpret(&hook("PreToolUse"), &exited(0, approve, ""), false).allow);
        let post = hook("PostToolUse");
        assert!(!interpret(&post, &exited(0, approve, ""), false).allow);
        let deny = r#"{"hookSpecificOutput":{"permissionDecision":"deny","updatedInput":{"a":1}}}"#;
        let a = interpret(&post, &exited(0, deny, ""), false);
        assert_eq!((a.block, a.rewrite), (None, None), "{deny}");
    }
}
