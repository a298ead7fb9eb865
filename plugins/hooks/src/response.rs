//! PostToolUse's `tool_response` in Claude Code's shape (issue 23 item 10).
//!
//! A hook written for Claude Code reads `.tool_response.filePath`, `.stdout`, `.file.content`,
//! `.filenames`; keel's result is `{content, is_error?, meta?}`. For each tool of the alias
//! table ([`crate::alias`]) whose Claude Code counterpart has a documented output, this builds
//! that output from keel's result — the tool's `meta` (`target`, `op`, `before`, `after`,
//! line numbers, the search root) and, where the data only exists in the text the model reads,
//! that text as its tool renders it — and keeps keel's own result beside it under
//! `keel_result`. Other tools (MCP, `list_dir`, `coldcontext_*`) get keel's result as it is.
//! Line diffs (`structuredPatch`, and the bounded unified diff the model reads after a
//! formatter hook) come from `similar`.

use std::sync::LazyLock;
use std::time::Duration;

use regex::Regex;
use serde_json::{Value, json};
use similar::{ChangeTag, TextDiff};

use crate::alias::absolute;

/// Characters of a unified diff kept for the model.
pub const DIFF_LIMIT: usize = 4_000;

/// How long a diff may search for the smallest edit before it settles for a coarser one.
const DIFF_DEADLINE: Duration = Duration::from_millis(250);

fn diff<'a>(before: &'a str, after: &'a str) -> TextDiff<'a, 'a, 'a, str> {
    TextDiff::configure()
        .timeout(DIFF_DEADLINE)
        .diff_lines(before, after)
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// `tool_response` for keel tool `name`'s successful `result` of a call with keel `args`.
pub fn hook_response(name: &str, args: &Value, result: &Value, cwd: &str) -> Value {
    let content = str_of(result, "content");
    let meta = result.get("meta").cloned().unwrap_or(Value::Null);
    let path = || {
        meta.get("target")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| absolute(cwd, str_of(args, "path")))
    };
    let mut shaped = match name {
        "shell" => bash(content, &meta),
        "write_file" => {
            let before = meta.get("before").and_then(Value::as_str);
            json!({
                "type": str_of(&meta, "op"),
                "filePath": path(),
                "content": str_of(args, "content"),
                "structuredPatch": patch(before.unwrap_or_default(), str_of(&meta, "after")),
                "originalFile": before,
            })
        }
        "edit_file" => json!({
            "filePath": path(),
            "oldString": str_of(args, "old_string"),
            "newString": str_of(args, "new_string"),
            "originalFile": meta.get("before").cloned().unwrap_or(Value::Null),
            "structuredPatch": patch(str_of(&meta, "before"), str_of(&meta, "after")),
            "userModified": false,
            "replaceAll": args.get("replace_all").and_then(Value::as_bool).unwrap_or(false),
        }),
        "read_file" => read(content, &meta, path()),
        "glob" => glob(content, &meta),
        "grep" => grep(content),
        "agent" => json!({
            "status": "completed",
            "prompt": str_of(args, "task"),
            "content": [{"type": "text", "text": content}],
        }),
        _ => return result.clone(),
    };
    if let Value::Object(m) = &mut shaped {
        m.insert("keel_result".into(), result.clone());
    }
    shaped
}

/// Bash: `{stdout, stderr, interrupted, isImage}` from `shell`'s `--- stdout ---` /
/// `--- stderr ---` sections.
fn bash(content: &str, meta: &Value) -> Value {
    const OUT: &str = "--- stdout ---\n";
    const ERR: &str = "--- stderr ---\n";
    let section = |s: &str| -> String {
        let s = s.strip_suffix('\n').unwrap_or(s);
        if s == "(empty)" {
            String::new()
        } else {
            s.to_owned()
        }
    };
    let (stdout, stderr) = match content.find(OUT) {
        Some(a) => {
            let rest = &content[a + OUT.len()..];
            match rest.rfind(ERR) {
                Some(b) => (section(&rest[..b]), section(&rest[b + ERR.len()..])),
                None => (section(rest), String::new()),
            }
        }
        None => (content.to_owned(), String::new()),
    };
    json!({
        "stdout": stdout,
        "stderr": stderr,
        "interrupted": meta.get("timed_out").and_then(Value::as_bool).unwrap_or(false),
        "isImage": false,
    })
}

/// Read: `{type: "text", file: {filePath, content, numLines, startLine, totalLines}}`, the
/// content without `read_file`'s line-number prefixes and notes.
fn read(content: &str, meta: &Value, file_path: String) -> Value {
    static NUMBERED: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"^ *[0-9]+\t").ok());
    let first = meta.get("first_line").and_then(Value::as_u64).unwrap_or(1);
    let last = meta.get("last_line").and_then(Value::as_u64).unwrap_or(0);
    let total = meta.get("total_lines").and_then(Value::as_u64).unwrap_or(0);
    let wanted = usize::try_from((last + 1).saturating_sub(first)).unwrap_or(usize::MAX);
    let mut lines = Vec::new();
    if let Some(re) = NUMBERED.as_ref() {
        for line in content.split_inclusive('\n').take(wanted) {
            let Some(m) = re.find(line) else { break };
            lines.push(&line[m.end()..]);
        }
    }
    json!({
        "type": "text",
        "file": {
            "filePath": file_path,
            "content": lines.concat(),
            "numLines": lines.len(),
            "startLine": first,
            "totalLines": total,
        },
    })
}

/// Glob: `{filenames, numFiles, truncated, durationMs}`, the paths absolute.
fn glob(content: &str, meta: &Value) -> Value {
    let root = str_of(meta, "root");
    let matches = meta.get("matches").and_then(Value::as_u64).unwrap_or(0);
    let filenames: Vec<String> = if matches == 0 {
        Vec::new()
    } else {
        content
            .lines()
            .filter(|l| !l.starts_with('['))
            .map(|l| absolute(root, l))
            .collect()
    };
    json!({
        "filenames": filenames,
        "numFiles": filenames.len(),
        "truncated": meta.get("truncated").and_then(Value::as_bool).unwrap_or(false),
        "durationMs": 0,
    })
}

/// Grep in content mode: `{mode, numFiles, filenames, content, numLines}`.
fn grep(content: &str) -> Value {
    static HIT: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"^(.*?):[0-9]+:").ok());
    let mut filenames: Vec<&str> = Vec::new();
    let mut hits = Vec::new();
    for line in content.lines() {
        let Some(file) = HIT
            .as_ref()
            .and_then(|re| re.captures(line))
            .and_then(|c| c.get(1))
        else {
            continue;
        };
        if !filenames.contains(&file.as_str()) {
            filenames.push(file.as_str());
        }
        hits.push(line);
    }
    json!({
        "mode": "content",
        "numFiles": filenames.len(),
        "filenames": filenames,
        "content": hits.join("\n"),
        "numLines": hits.len(),
    })
}

/// Claude Code's `structuredPatch`: hunks `{oldStart, oldLines, newStart, newLines, lines}`
/// with three lines of context, each line prefixed `-`, `+` or ` `.
pub fn patch(before: &str, after: &str) -> Value {
    let diff = diff(before, after);
    let hunks: Vec<Value> = diff
        .grouped_ops(3)
        .iter()
        .filter_map(|group| {
            let (first, last) = (group.first()?, group.last()?);
            let (old, new) = (first.old_range().start, first.new_range().start);
            let old_len = last.old_range().end - old;
            let new_len = last.new_range().end - new;
            let lines: Vec<String> = group
                .iter()
                .flat_map(|op| diff.iter_changes(op))
                .map(|c| {
                    let sign = match c.tag() {
                        ChangeTag::Delete => '-',
                        ChangeTag::Insert => '+',
                        ChangeTag::Equal => ' ',
                    };
                    format!("{sign}{}", c.value().trim_end_matches(['\n', '\r']))
                })
                .collect();
            Some(json!({
                "oldStart": old + 1,
                "oldLines": old_len,
                "newStart": new + 1,
                "newLines": new_len,
                "lines": lines,
            }))
        })
        .collect();
    Value::Array(hunks)
}

/// A unified diff of `before` → `after` for `path`, cut at [`DIFF_LIMIT`] characters with a
/// note saying how much was left out.
pub fn unified(path: &str, before: &str, after: &str) -> String {
    let text = diff(before, after)
        .unified_diff()
        .context_radius(3)
        .header(path, path)
        .to_string();
    match text.char_indices().nth(DIFF_LIMIT) {
        Some((cut, _)) => format!(
            "{}\n[… the diff goes on for {} more bytes; read the file to see it all]",
            &text[..cut],
            text.len() - cut
        ),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn bash_splits_shells_sections() {
        let content = "exit code: 0\n--- stdout ---\nhi\nthere\n--- stderr ---\n(empty)\n";
        let r = hook_response(
            "shell",
            &json!({"command": "x"}),
            &json!({"content": content, "meta": {"timed_out": false}}),
            "/w",
        );
        assert_eq!(r["stdout"], "hi\nthere");
        assert_eq!(r["stderr"], "");
        assert_eq!(r["interrupted"], false);
        assert_eq!(r["keel_result"]["content"], content);
    }

    #[test]
    fn write_and_edit_carry_file_path_and_a_structured_patch() {
        let result = json!({"content": "Updated", "meta": {"op": "update", "target": "/w/a.txt",
            "before": "a\nb\n", "after": "a\nc\n", "version": "v"}});
        let r = hook_response(
            "write_file",
            &json!({"path": "a.txt", "content": "a\nc\n"}),
            &result,
            "/w",
        );
        assert_eq!(r["type"], "update");
        assert_eq!(r["filePath"], "/w/a.txt");
        assert_eq!(r["content"], "a\nc\n");
        assert_eq!(r["originalFile"], "a\nb\n");
        assert_eq!(
            r["structuredPatch"],
            json!([{"oldStart": 1, "oldLines": 2, "newStart": 1, "newLines": 2,
                "lines": [" a", "-b", "+c"]}])
        );
        let r = hook_response(
            "edit_file",
            &json!({"path": "a.txt", "old_string": "b", "new_string": "c"}),
            &result,
            "/w",
        );
        assert_eq!(r["oldString"], "b");
        assert_eq!(r["replaceAll"], false);
        assert_eq!(r["userModified"], false);
    }

    #[test]
    fn read_glob_and_grep_take_claude_codes_shapes() {
        let r = hook_response(
            "read_file",
            &json!({"path": "a.txt"}),
            &json!({"content": "     2\tb\n     3\tc\n[1 more lines; continue with offset=4]",
                "meta": {"first_line": 2, "last_line": 3, "total_lines": 4}}),
            "/w",
        );
        assert_eq!(
            r["file"],
            json!({"filePath": "/w/a.txt", "content": "b\nc\n", "numLines": 2,
                "startLine": 2, "totalLines": 4})
        );
        let r = hook_response(
            "glob",
            &json!({"pattern": "*"}),
            &json!({"content": "a.rs\nb/c.rs\n[showing 2 of 3 matches; narrow the pattern]",
                "meta": {"root": "/w", "matches": 3, "truncated": true}}),
            "/w",
        );
        assert_eq!(r["filenames"], json!(["/w/a.rs", "/w/b/c.rs"]));
        assert_eq!(r["truncated"], true);
        let r = hook_response(
            "grep",
            &json!({"pattern": "x"}),
            &json!({"content": "a.rs:1:x\na.rs:4:xx\nb.rs:2:x", "meta": {}}),
            "/w",
        );
        assert_eq!(r["filenames"], json!(["a.rs", "b.rs"]));
        assert_eq!(r["numLines"], 3);
        let mcp = json!({"content": "echo"});
        assert_eq!(hook_response("mcp__e__echo", &json!({}), &mcp, "/w"), mcp);
    }

    #[test]
    fn a_long_diff_is_cut_with_a_note() {
        let before: String = (0..2_000).map(|i| format!("line {i}\n")).collect();
        let d = unified("/w/a", &before, "");
        assert!(d.len() < DIFF_LIMIT + 200, "{}", d.len());
        assert!(d.contains("more bytes; read the file"), "{d}");
        assert!(unified("/w/a", "a\n", "b\n").contains("-a\n+b\n"));
    }
}
