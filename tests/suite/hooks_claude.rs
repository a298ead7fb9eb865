//! Claude Code's own `.claude/settings.json`, as its docs write it, under keel (issue 23 items
//! 10–12): matchers in Claude Code's tool names (`Bash`, `Write|Edit|MultiEdit`, `Read`,
//! `Glob`, `Grep`), scripts that read `.tool_input.file_path` / `.tool_input.command` with jq,
//! a formatter that rewrites the file it was told about. Checked on the world: what is on disk,
//! what the hooks wrote down from their stdin, what the model server received, stderr.

use std::os::unix::fs::PermissionsExt;

use keel_tests::Env;
use keel_tests::model_server::{ModelServer, Reply};
use serde_json::{Value, json};

use crate::suite::agent_support::*;
use crate::suite::hooks_support::*;

/// A settings file as Claude Code's hooks docs show one: script hooks under
/// `$CLAUDE_PROJECT_DIR/.claude/hooks`, matchers in Claude Code's tool names (and one for a
/// tool keel does not have).
const SETTINGS: &str = r#"{
  "permissions": {
    "allow": ["Bash(npm run lint)"]
  },
  "hooks": {
    "PreToolUse": [
      {
        "matcher": "Bash",
        "hooks": [
          { "type": "command", "command": "\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/block-rm.sh" }
        ]
      },
      {
        "matcher": "Read|Glob|Grep",
        "hooks": [
          { "type": "command", "command": "\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/log.sh", "timeout": 30 }
        ]
      },
      {
        "matcher": "WebFetch",
        "hooks": [
          { "type": "command", "command": "\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/log.sh" }
        ]
      }
    ],
    "PostToolUse": [
      {
        "matcher": "Write|Edit|MultiEdit",
        "hooks": [
          { "type": "command", "command": "\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/format.sh" }
        ]
      }
    ]
  }
}
"#;

/// Blocks `rm -rf` the way Claude Code's docs do: the command from stdin, exit 2, stderr.
const BLOCK_RM: &str = r#"#!/bin/bash
command=$(jq -r '.tool_input.command')
if echo "$command" | grep -q 'rm -rf'; then
  echo "Blocked: rm -rf is not allowed in this repository" >&2
  exit 2
fi
exit 0
"#;

/// Writes down what it was given, and keeps a copy of the transcript it was pointed at.
const LOG: &str = r#"#!/bin/bash
input=$(cat)
echo "$input" | jq -c '{hook_event_name, tool_name, permission_mode, prompt_id, session_id,
  transcript_path, file_path: .tool_input.file_path, pattern: .tool_input.pattern}' \
  >> "$CLAUDE_PROJECT_DIR/hook-log.jsonl"
transcript=$(echo "$input" | jq -r '.transcript_path')
if [ -r "$transcript" ]; then cp "$transcript" "$CLAUDE_PROJECT_DIR/transcript-copy.jsonl"; fi
exit 0
"#;

/// A formatter: `x=1` → `x = 1` in the file Claude Code names, and a note of the response.
const FORMAT: &str = r#"#!/bin/bash
input=$(cat)
file=$(echo "$input" | jq -r '.tool_input.file_path')
echo "$input" | jq -c '{tool_name, file_path: .tool_input.file_path,
  response_path: .tool_response.filePath, response_type: .tool_response.type}' \
  >> "$CLAUDE_PROJECT_DIR/format-log.jsonl"
sed -i 's/\([a-z]\)=\([0-9]\)/\1 = \2/g' "$file"
"#;

fn claude_project(server: &ModelServer) -> Env {
    let env = hooks_env(server, "claude_settings = true");
    env.file("work/.claude/settings.json", SETTINGS);
    for (name, body) in [
        ("block-rm.sh", BLOCK_RM),
        ("log.sh", LOG),
        ("format.sh", FORMAT),
    ] {
        let path = env.file(&format!("work/.claude/hooks/{name}"), body);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    env
}

fn jsonl(env: &Env, rel: &str) -> Vec<Value> {
    let path = work_file(env, rel);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (the hook did not run)", path.display()));
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Issue 23 item 10: Claude Code's `Bash` matcher and a script reading `.tool_input.command`
/// block keel's `shell` running `rm -rf` (nothing is removed; the model reads the script's
/// reason); `Read|Glob|Grep` hooks see Claude Code's tool names, an absolute
/// `tool_input.file_path`, `permission_mode`, `prompt_id` and a `transcript_path` they can
/// read; a matcher no keel tool answers to (`WebFetch`) is named once on stderr.
#[test]
fn a_verbatim_claude_code_settings_file_guards_keels_tools() {
    let server = server(vec![
        Reply::tool_calls(vec![(
            "b1",
            "shell",
            args(json!({"command": "rm -rf data"})),
        )]),
        Reply::tool_calls(vec![(
            "r1",
            "read_file",
            args(json!({"path": "notes.txt"})),
        )]),
        Reply::tool_calls(vec![("g1", "glob", args(json!({"pattern": "*.txt"})))]),
        Reply::tool_calls(vec![("g2", "grep", args(json!({"pattern": "keel"})))]),
        Reply::text("done"),
    ]);
    let env = claude_project(&server);
    env.file("work/data/keep.txt", "precious\n");
    env.file("work/notes.txt", "keel notes\n");
    let (run, result) = run_json(&env, "tidy up", &["--trust-project"]);
    run.expect_code(0);
    assert!(
        work_file(&env, "data/keep.txt").exists(),
        "rm -rf ran: the Bash hook did not guard shell"
    );
    let reqs = contract_holds(&server);
    let blocked = tool_message(reqs[1].messages(), "b1")["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        blocked.contains("TOOL_DENIED") && blocked.contains("rm -rf is not allowed"),
        "{blocked}"
    );

    let log = jsonl(&env, "hook-log.jsonl");
    let names: Vec<&str> = log
        .iter()
        .map(|l| l["tool_name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Read", "Glob", "Grep"]);
    let read = &log[0];
    let notes = std::fs::canonicalize(work_file(&env, "notes.txt")).unwrap();
    assert_eq!(read["file_path"], notes.display().to_string());
    assert_eq!(read["hook_event_name"], "PreToolUse");
    assert_eq!(
        read["permission_mode"], "bypassPermissions",
        "approval never"
    );
    let session = session_of(&result);
    assert_eq!(read["session_id"], session.as_str());
    assert!(
        read["prompt_id"].as_str().is_some_and(|p| !p.is_empty()),
        "{read}"
    );
    assert_eq!(log[1]["pattern"], "*.txt");
    // The transcript was readable by the confined hook and holds the conversation so far.
    let transcript = jsonl(&env, "transcript-copy.jsonl");
    assert_eq!(transcript[0]["type"], "user");
    assert_eq!(transcript[0]["message"]["content"], "tidy up");
    assert_eq!(transcript[0]["sessionId"], session.as_str());
    let uses: Vec<&Value> = transcript
        .iter()
        .filter(|l| l["type"] == "assistant")
        .flat_map(|l| l["message"]["content"].as_array().unwrap())
        .filter(|b| b["type"] == "tool_use")
        .collect();
    assert_eq!(uses[0]["name"], "Bash");
    assert_eq!(uses[0]["input"]["command"], "rm -rf data");
    assert!(
        transcript
            .iter()
            .any(|l| l["message"]["content"][0]["type"] == "tool_result"),
        "{transcript:?}"
    );
    let path = read["transcript_path"].as_str().unwrap();
    assert!(
        !path.starts_with(&env.work().display().to_string()),
        "the transcript is not written into the workspace: {path}"
    );

    let warned: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("matches no tool"))
        .collect();
    assert_eq!(warned.len(), 1, "{}", run.stderr);
    assert!(
        warned[0].starts_with("keel: hooks: ")
            && warned[0].contains(".claude/settings.json")
            && warned[0].contains("`WebFetch`"),
        "{}",
        warned[0]
    );
}

/// Issue 23 items 10 and 12: the `Write|Edit|MultiEdit` formatter from the same file runs
/// after keel's `write_file`, sees Claude Code's `file_path` and `tool_response`, rewrites the
/// file — and the model's next `edit_file`, written against the formatted text it was shown,
/// succeeds on disk.
#[test]
fn after_a_claude_code_formatter_hook_the_next_edit_succeeds() {
    let server = server(vec![
        Reply::tool_calls(vec![(
            "w1",
            "write_file",
            args(json!({"path": "calc.py", "content": "x=1\ny=2\n"})),
        )]),
        Reply::tool_calls(vec![(
            "e1",
            "edit_file",
            args(json!({"path": "calc.py", "old_string": "y = 2", "new_string": "y = 3"})),
        )]),
        Reply::text("done"),
    ]);
    let env = claude_project(&server);
    let (run, _) = run_json(&env, "write calc.py", &["--trust-project"]);
    run.expect_code(0);
    assert_eq!(
        std::fs::read_to_string(work_file(&env, "calc.py")).unwrap(),
        "x = 1\ny = 3\n"
    );
    let log = jsonl(&env, "format-log.jsonl");
    let calc = std::fs::canonicalize(work_file(&env, "calc.py")).unwrap();
    assert_eq!(log[0]["tool_name"], "Write");
    assert_eq!(log[0]["file_path"], calc.display().to_string());
    assert_eq!(log[0]["response_path"], calc.display().to_string());
    assert_eq!(log[0]["response_type"], "create");
    assert_eq!(log[1]["tool_name"], "Edit");
    let reqs = contract_holds(&server);
    let wrote = tool_message(reqs[1].messages(), "w1")["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        wrote.contains("-x=1") && wrote.contains("+x = 1"),
        "the model was not shown what the hook changed: {wrote}"
    );
    let edited = tool_message(reqs[2].messages(), "e1")["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(!edited.contains("FS_STALE_VERSION"), "{edited}");
}

/// Issue 23 item 12, on keel's own names (so it fails on main for this reason alone): a
/// PostToolUse hook that rewrites the file keeps the next edit valid; a change by anything
/// else — here a later `shell` command — is still stale.
#[test]
fn a_file_rewritten_by_a_post_tool_use_hook_is_observed_and_other_changes_are_stale() {
    let server = server(vec![
        Reply::tool_calls(vec![(
            "w1",
            "write_file",
            args(json!({"path": "a.txt", "content": "one\n"})),
        )]),
        Reply::tool_calls(vec![(
            "e1",
            "edit_file",
            args(json!({"path": "a.txt", "old_string": "ONE", "new_string": "two"})),
        )]),
        Reply::tool_calls(vec![(
            "s1",
            "shell",
            args(json!({"command": "echo three > a.txt"})),
        )]),
        Reply::tool_calls(vec![(
            "e2",
            "edit_file",
            args(json!({"path": "a.txt", "old_string": "three", "new_string": "four"})),
        )]),
        Reply::text("done"),
    ]);
    let upper = cmd("upper.sh");
    let env = hooks_env(
        &server,
        &table(&[on("PostToolUse", "write_file", &upper, "")]),
    );
    put(
        &env,
        "upper.sh",
        "f=$(sed -n 's/.*\"path\":\"\\([^\"]*\\)\".*/\\1/p')\ntr a-z A-Z < \"$f\" > \"$f.tmp\" && mv \"$f.tmp\" \"$f\"\n",
    );
    let (run, _) = run_json(&env, "go", &[]);
    run.expect_code(0);
    let reqs = contract_holds(&server);
    let e1 = tool_message(reqs[2].messages(), "e1")["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(e1.starts_with("Edited "), "{e1}");
    let e2 = tool_message(reqs[4].messages(), "e2")["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(e2.contains("FS_STALE_VERSION"), "{e2}");
    assert_eq!(
        std::fs::read_to_string(work_file(&env, "a.txt")).unwrap(),
        "three\n"
    );
}

/// Issue 23 item 10: a PreToolUse `updatedInput` in Claude Code's field names
/// (`file_path`, `content`) rewrites keel's `write_file` call.
#[test]
fn an_updated_input_in_claude_codes_field_names_rewrites_the_call() {
    let server = server(vec![
        Reply::tool_calls(vec![(
            "w1",
            "write_file",
            args(json!({"path": "model.txt", "content": "from the model\n"})),
        )]),
        Reply::text("written"),
    ]);
    let fix = cmd("fix.sh");
    let env = hooks_env(&server, &table(&[on("PreToolUse", "Write", &fix, "")]));
    put(
        &env,
        "fix.sh",
        "jq -c '{hookSpecificOutput: {hookEventName: \"PreToolUse\", permissionDecision: \"allow\",\n  updatedInput: {file_path: (.tool_input.file_path | sub(\"model\"; \"hook\")), content: \"from the hook\\n\"}}}'\n",
    );
    let (run, _) = run_json(&env, "write it", &[]);
    run.expect_code(0);
    assert_eq!(
        std::fs::read_to_string(work_file(&env, "hook.txt")).unwrap(),
        "from the hook\n"
    );
    assert!(!work_file(&env, "model.txt").exists());
}

/// Issue 23 item 11: with `claude_settings` off (the default), a settings file with hooks is
/// named once on stderr with the key that uses it; one without hooks says nothing.
#[test]
fn a_claude_settings_file_with_hooks_is_named_while_claude_settings_is_off() {
    let server = server(vec![Reply::text("hi"), Reply::text("hi")]);
    let env = hooks_env(&server, "");
    env.file("work/.claude/settings.json", SETTINGS);
    let (run, _) = run_json(&env, "hello", &[]);
    run.expect_code(0);
    let lines: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("settings.json"))
        .collect();
    assert_eq!(lines.len(), 1, "{}", run.stderr);
    assert!(
        lines[0].starts_with("keel: hooks: ")
            && lines[0].contains("has hooks; set hooks.claude_settings = true to use them"),
        "{}",
        lines[0]
    );
    env.file(
        "work/.claude/settings.json",
        r#"{"permissions": {"allow": []}}"#,
    );
    let (run, _) = run_json(&env, "hello", &[]);
    run.expect_code(0);
    assert!(!run.stderr.contains("settings.json"), "{}", run.stderr);
}
