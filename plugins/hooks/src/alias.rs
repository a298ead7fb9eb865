//! keel's tools under Claude Code's names (issue 23 item 10): the one table that lets a
//! `.claude/settings.json` written for Claude Code work unchanged.
//!
//! Each row pairs a keel tool with the Claude Code tools it stands for and the argument fields
//! whose names differ. The table is used four ways: matching (a matcher is tested against the
//! keel name and every Claude Code name, so `Bash` matches `shell` and `shell` still does),
//! `tool_name` on stdin (Claude Code's first name), `tool_input` (keel's arguments with Claude
//! Code's field names beside them: `file_path`, absolute, next to `path`), and the way back: a
//! PreToolUse `updatedInput` written with Claude Code's field names becomes keel's arguments
//! before `tools/rewrite`. A tool with no row (MCP tools, `coldcontext_*`) keeps its name and
//! arguments.

use std::path::{Component, Path, PathBuf};

use serde_json::Value;

/// One keel tool and its Claude Code counterparts.
#[derive(Debug)]
pub struct Alias {
    /// keel's tool name.
    pub keel: &'static str,
    /// Claude Code's names; the first is the `tool_name` hooks see.
    pub claude: &'static [&'static str],
    /// (keel field, Claude Code field) pairs whose names differ. Fields named alike in both
    /// (`command`, `content`, `old_string`, `pattern`, …) need no pair.
    pub fields: &'static [(&'static str, &'static str)],
    /// Claude Code fields that only label a call (dropped from an `updatedInput`); any other
    /// field keel's tool lacks is left for the tool's schema to refuse.
    pub labels: &'static [&'static str],
}

/// The table. `path` ↔ `file_path` is the one pair whose Claude Code side is an absolute path.
pub const TABLE: &[Alias] = &[
    Alias {
        keel: "shell",
        claude: &["Bash"],
        fields: &[("timeout_ms", "timeout")],
        labels: &["description"],
    },
    Alias {
        keel: "read_file",
        claude: &["Read"],
        fields: &[("path", "file_path")],
        labels: &[],
    },
    Alias {
        keel: "write_file",
        claude: &["Write"],
        fields: &[("path", "file_path")],
        labels: &[],
    },
    Alias {
        keel: "edit_file",
        claude: &["Edit", "MultiEdit"],
        fields: &[("path", "file_path")],
        labels: &[],
    },
    Alias {
        keel: "glob",
        claude: &["Glob"],
        fields: &[],
        labels: &[],
    },
    Alias {
        keel: "grep",
        claude: &["Grep"],
        fields: &[],
        labels: &[],
    },
    Alias {
        keel: "list_dir",
        claude: &["LS"],
        fields: &[],
        labels: &[],
    },
    Alias {
        keel: "agent",
        claude: &["Task", "Agent"],
        fields: &[("task", "prompt"), ("agent", "subagent_type")],
        labels: &[],
    },
];

/// The row of keel tool `name`.
pub fn of(name: &str) -> Option<&'static Alias> {
    TABLE.iter().find(|a| a.keel == name)
}

/// Every name a matcher is tested against: keel's, then Claude Code's.
pub fn names(name: &str) -> Vec<&str> {
    let mut out = vec![name];
    if let Some(a) = of(name) {
        out.extend(a.claude.iter().copied());
    }
    out
}

/// The `tool_name` hooks see: Claude Code's name where keel's tool has one.
pub fn hook_name(name: &str) -> &str {
    of(name)
        .and_then(|a| a.claude.first().copied())
        .unwrap_or(name)
}

/// `path` made absolute against the call's working directory, lexically (Claude Code's
/// `file_path` is absolute; nothing is resolved on disk).
pub fn absolute(cwd: &str, path: &str) -> String {
    let joined = Path::new(cwd).join(path);
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out.to_string_lossy().into_owned()
}

fn claude_value(keel_field: &str, value: &Value, cwd: &str) -> Value {
    match (keel_field, value) {
        ("path", Value::String(p)) => absolute(cwd, p).into(),
        _ => value.clone(),
    }
}

/// `tool_input`: keel's arguments with Claude Code's fields beside them.
pub fn hook_input(name: &str, args: &Value, cwd: &str) -> Value {
    let (Some(a), Value::Object(obj)) = (of(name), args) else {
        return args.clone();
    };
    let mut out = obj.clone();
    for (k, c) in a.fields {
        if let Some(v) = obj.get(*k)
            && !obj.contains_key(*c)
        {
            out.insert((*c).to_owned(), claude_value(k, v, cwd));
        }
    }
    Value::Object(out)
}

/// A PreToolUse `updatedInput` as keel's arguments. `sent` is the `tool_input` the hook got:
/// a Claude Code field the hook changed (or gave alone) wins over keel's; an unchanged echo
/// leaves keel's field as the hook returned it. Claude Code's fields and labels are removed.
pub fn keel_input(name: &str, updated: Value, sent: &Value) -> Value {
    let (Some(a), Value::Object(mut obj)) = (of(name), updated.clone()) else {
        return updated;
    };
    for (k, c) in a.fields {
        let Some(cv) = obj.remove(*c) else { continue };
        let changed = sent.get(*c) != Some(&cv);
        if changed || !obj.contains_key(*k) {
            obj.insert((*k).to_owned(), cv);
        }
    }
    for label in a.labels {
        obj.remove(*label);
    }
    Value::Object(obj)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn tools_carry_claude_codes_names_for_matching_and_stdin() {
        assert_eq!(names("shell"), ["shell", "Bash"]);
        assert_eq!(names("edit_file"), ["edit_file", "Edit", "MultiEdit"]);
        assert_eq!(names("mcp__git__status"), ["mcp__git__status"]);
        assert_eq!(hook_name("write_file"), "Write");
        assert_eq!(hook_name("agent"), "Task");
        assert_eq!(hook_name("coldcontext_read"), "coldcontext_read");
    }

    #[test]
    fn tool_input_has_claude_codes_fields_beside_keels() {
        let input = hook_input(
            "write_file",
            &json!({"path": "src/../a.txt", "content": "x"}),
            "/w",
        );
        assert_eq!(
            input,
            json!({"path": "src/../a.txt", "file_path": "/w/a.txt", "content": "x"})
        );
        let input = hook_input("shell", &json!({"command": "ls", "timeout_ms": 5}), "/w");
        assert_eq!(input["timeout"], 5);
        assert_eq!(input["command"], "ls");
        let untouched = json!({"message": "hi"});
        assert_eq!(hook_input("mcp__e__echo", &untouched, "/w"), untouched);
    }

    #[test]
    fn an_updated_input_in_claude_codes_names_becomes_keels_arguments() {
        let sent = hook_input("write_file", &json!({"path": "a", "content": "x"}), "/w");
        // Claude Code's names only.
        let back = keel_input(
            "write_file",
            json!({"file_path": "/w/b", "content": "y"}),
            &sent,
        );
        assert_eq!(back, json!({"path": "/w/b", "content": "y"}));
        // The echo with file_path changed: the change wins.
        let mut echo = sent.clone();
        echo["file_path"] = "/w/c".into();
        assert_eq!(keel_input("write_file", echo, &sent)["path"], "/w/c");
        // The echo with path changed: keel's field wins.
        let mut echo = sent.clone();
        echo["path"] = "d".into();
        let back = keel_input("write_file", echo, &sent);
        assert_eq!(back, json!({"path": "d", "content": "x"}));
        // Bash's label goes; its timeout becomes timeout_ms.
        let back = keel_input(
            "shell",
            json!({"command": "ls -la", "description": "list", "timeout": 9}),
            &json!({}),
        );
        assert_eq!(back, json!({"command": "ls -la", "timeout_ms": 9}));
    }

    #[test]
    fn absolute_paths_are_lexical() {
        assert_eq!(absolute("/w", "/etc/x"), "/etc/x");
        assert_eq!(absolute("/w/s", "./a/../b"), "/w/s/b");
    }
}
