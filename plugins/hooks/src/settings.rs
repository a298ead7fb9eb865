//! Claude Code's settings files as they are: `.claude/settings.json` and
//! `.claude/settings.local.json` under the workspace root (issue 15 item 3).
//!
//! A hook there is a command keel would run on its own, exactly what a hostile model or a
//! cloned repository would plant, so a file is read only after the project trust covers its
//! bytes ([`crate::trust`]); an untrusted one is named and ignored. A trusted file is read
//! strictly: a JSON syntax error (with its line and column) or a hook of the wrong shape
//! refuses the run before any request. Everything else in the file (permissions, env, model…)
//! is Claude Code's business and is left alone; events keel does not run (Notification,
//! SubagentStop, SessionEnd…) are skipped with a log line.

use serde_json::Value;

use crate::config::{Event, HookTable, MatcherGroup};

/// The files, relative to the workspace root, in the order they are read.
pub const FILES: [&str; 2] = [".claude/settings.json", ".claude/settings.local.json"];

/// The hook table in settings text `text` (from `name`), and the event names it skipped.
///
/// # Errors
/// One line naming `name`: a syntax error with its line and column, or the shape that is
/// wrong and where.
pub fn parse(name: &str, text: &str) -> Result<(HookTable, Vec<String>), String> {
    let doc: Value = serde_json::from_str(text).map_err(|e| {
        format!(
            "{name}: line {}, column {}: not valid JSON ({})",
            e.line(),
            e.column(),
            strip_position(&e.to_string())
        )
    })?;
    let Some(obj) = doc.as_object() else {
        return Err(format!("{name}: the settings must be a JSON object"));
    };
    if obj.get("disableAllHooks") == Some(&Value::Bool(true)) {
        return Ok((HookTable::default(), Vec::new()));
    }
    let Some(hooks) = obj.get("hooks") else {
        return Ok((HookTable::default(), Vec::new()));
    };
    let Some(hooks) = hooks.as_object() else {
        return Err(format!("{name}: `hooks` must be an object of events"));
    };
    let mut table = HookTable::default();
    let mut skipped = Vec::new();
    for (event_name, groups) in hooks {
        let Some(event) = Event::parse(event_name) else {
            skipped.push(event_name.clone());
            continue;
        };
        let Some(list) = groups.as_array() else {
            return Err(format!(
                "{name}: hooks.{event_name} must be an array of matcher groups"
            ));
        };
        let mut parsed = Vec::with_capacity(list.len());
        for (i, group) in list.iter().enumerate() {
            let g: MatcherGroup = serde_json::from_value(group.clone())
                .map_err(|e| format!("{name}: hooks.{event_name}[{i}]: {e}"))?;
            parsed.push(g);
        }
        let slot = match event {
            Event::PreToolUse => &mut table.pre_tool_use,
            Event::PostToolUse => &mut table.post_tool_use,
            Event::UserPromptSubmit => &mut table.user_prompt_submit,
            Event::Stop => &mut table.stop,
            Event::SessionStart => &mut table.session_start,
            Event::PreCompact => &mut table.pre_compact,
        };
        *slot = parsed;
    }
    Ok((table, skipped))
}

/// Bytes of a settings file read to tell whether it has hooks.
const PEEK_BYTES: u64 = 1 << 20;

/// Whether the settings file at `path` exists and has at least one hook group keel runs and
/// does not disable them all (read leniently: unreadable or broken text has none).
pub fn has_hooks(path: &std::path::Path) -> bool {
    use std::io::Read;
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    let mut text = String::new();
    if file.take(PEEK_BYTES).read_to_string(&mut text).is_err() {
        return false;
    }
    let Ok(doc) = serde_json::from_str::<Value>(&text) else {
        return false;
    };
    if doc.get("disableAllHooks") == Some(&Value::Bool(true)) {
        return false;
    }
    doc.get("hooks")
        .and_then(Value::as_object)
        .is_some_and(|events| {
            events.iter().any(|(name, groups)| {
                Event::parse(name).is_some() && groups.as_array().is_some_and(|g| !g.is_empty())
            })
        })
}

/// serde_json appends " at line L column C"; the caller says it first.
fn strip_position(message: &str) -> &str {
    message
        .rsplit_once(" at line ")
        .map_or(message, |(head, _)| head)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_claude_settings_file_is_read_as_it_is() {
        let text = r#"{
  "permissions": {"allow": ["Bash(ls)"]},
  "hooks": {
    "PreToolUse": [{"matcher": "shell", "hooks": [{"type": "command", "command": "./check.sh", "timeout": 5}]}],
    "Notification": [{"hooks": [{"type": "command", "command": "notify"}]}]
  }
}"#;
        let (table, skipped) = parse(".claude/settings.json", text).unwrap();
        assert_eq!(table.pre_tool_use[0].hooks[0].command, "./check.sh");
        assert_eq!(skipped, ["Notification"]);
    }

    // Issue 15 item 3, bad input: the file and the line and column.
    #[test]
    fn a_syntax_error_names_the_file_line_and_column() {
        let e = parse(".claude/settings.json", "{\n  \"hooks\": {,\n}").unwrap_err();
        assert!(
            e.starts_with(".claude/settings.json: line 2, column 13: not valid JSON"),
            "{e}"
        );
        assert!(!e.contains(" at line "), "{e}");
    }

    #[test]
    fn has_hooks_reads_leniently() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("settings.json");
        assert!(!has_hooks(&f), "missing");
        for (text, want) in [
            (
                r#"{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": []}]}}"#,
                true,
            ),
            (r#"{"hooks": {"PreToolUse": []}}"#, false),
            (r#"{"hooks": {"Notification": [{"hooks": []}]}}"#, false),
            (
                r#"{"disableAllHooks": true, "hooks": {"Stop": [{"hooks": []}]}}"#,
                false,
            ),
            (r#"{"permissions": {}}"#, false),
            ("{not json", false),
        ] {
            std::fs::write(&f, text).unwrap();
            assert_eq!(has_hooks(&f), want, "{text}");
        }
    }

    #[test]
    fn a_hook_of_the_wrong_shape_names_where() {
        let text = r#"{"hooks": {"Stop": [{"hooks": [{"type": "command"}]}]}}"#;
        let e = parse(".claude/settings.local.json", text).unwrap_err();
        assert!(
            e.starts_with(".claude/settings.local.json: hooks.Stop[0]: missing field `command`"),
            "{e}"
        );
        let e = parse("f", r#"{"hooks": {"Stop": {}}}"#).unwrap_err();
        assert_eq!(e, "f: hooks.Stop must be an array of matcher groups");
        let e = parse(
            "f",
            r#"{"hooks": {"Stop": [{"hooks": [{"type": "prompt", "prompt": "x"}]}]}}"#,
        )
        .unwrap_err();
        assert!(e.contains("unknown variant `prompt`"), "{e}");
    }
}
