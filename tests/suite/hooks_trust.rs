//! Hooks from the project's `.claude/settings*.json` run only under project trust, and bad
//! hook input refuses the run before any request (issue 15 item 3: trust, bad input).

use keel_tests::model_server::Reply;

use crate::suite::agent_support::*;
use crate::suite::hooks_support::*;

const SETTINGS: &str = r#"{
  "permissions": {"allow": []},
  "hooks": {
    "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "touch \"$CLAUDE_PROJECT_DIR/marker\""}]}]
  }
}
"#;

fn claude_env(server: &keel_tests::model_server::ModelServer, settings: &str) -> keel_tests::Env {
    let env = hooks_env(server, "claude_settings = true");
    env.file("work/.claude/settings.json", settings);
    env
}

/// An untrusted `.claude/settings.json` is named on stderr in one line (why, and how to trust
/// it) and ignored: its hook never ran, the run went on.
#[test]
fn an_untrusted_claude_settings_file_is_named_and_never_run() {
    let server = server(vec![Reply::text("hi")]);
    let env = claude_env(&server, SETTINGS);
    let (run, _) = run_json(&env, "hello", &[]);
    run.expect_code(0);
    assert!(!work_file(&env, "marker").exists(), "an untrusted hook ran");
    let lines: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains(".claude/settings.json"))
        .collect();
    assert_eq!(lines.len(), 1, "{}", run.stderr);
    assert!(
        lines[0].starts_with("keel: hooks: ignoring ")
            && lines[0].contains("keel trust")
            && lines[0].contains("--trust-project"),
        "{}",
        lines[0]
    );
    assert_eq!(server.completions().len(), 1);
}

/// `keel trust DIR` makes the same file run; editing it afterwards makes it untrusted again.
#[test]
fn keel_trust_makes_the_settings_hooks_run_until_they_change() {
    let server = server(vec![Reply::text("one"), Reply::text("two")]);
    let env = claude_env(&server, SETTINGS);
    env.keel(&["trust", &env.work().display().to_string()])
        .expect_code(0);
    let (run, _) = run_json(&env, "hello", &[]);
    run.expect_code(0);
    assert!(
        work_file(&env, "marker").exists(),
        "the trusted hook did not run"
    );
    assert!(!run.stderr.contains("ignoring"), "{}", run.stderr);

    std::fs::remove_file(work_file(&env, "marker")).unwrap();
    env.file(
        "work/.claude/settings.json",
        &SETTINGS.replace("marker", "marker2"),
    );
    let (run, _) = run_json(&env, "again", &[]);
    run.expect_code(0);
    assert!(!work_file(&env, "marker2").exists(), "a changed file ran");
    assert!(
        run.stderr.contains("keel: hooks: ignoring "),
        "{}",
        run.stderr
    );
}

/// `--trust-project` vouches for one run.
#[test]
fn trust_project_vouches_for_the_settings_for_one_run() {
    let server = server(vec![Reply::text("hi")]);
    let env = claude_env(&server, SETTINGS);
    let (run, _) = run_json(&env, "hello", &["--trust-project"]);
    run.expect_code(0);
    assert!(work_file(&env, "marker").exists());
}

/// A trusted file with a JSON syntax error refuses the run before any request: exit 2, one
/// line naming the file, the line and the column.
#[test]
fn a_syntax_error_in_trusted_settings_is_exit_2_naming_the_file_and_line() {
    let server = server(vec![Reply::text("never")]);
    let env = claude_env(&server, "{\n  \"hooks\": {\n    \"Stop\": [,]\n  }\n}\n");
    let (run, _) = run_json(&env, "hello", &["--trust-project"]);
    run.expect_code(2);
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    assert!(
        run.stderr
            .contains(".claude/settings.json: line 3, column 14"),
        "{}",
        run.stderr
    );
    assert!(server.completions().is_empty());
}

/// A hook of the wrong shape — in a trusted file or in the row — is exit 2 before any
/// request, one line naming the file or the row and where.
#[test]
fn a_hook_of_the_wrong_shape_is_exit_2_naming_the_file_or_the_row() {
    let server = server(vec![Reply::text("never")]);
    let env = claude_env(
        &server,
        r#"{"hooks": {"PreToolUse": [{"matcher": "shell(", "hooks": [{"type": "command", "command": "true"}]}]}}"#,
    );
    let (run, _) = run_json(&env, "hello", &["--trust-project"]);
    run.expect_code(2);
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    assert!(
        run.stderr
            .contains(".claude/settings.json: hooks.PreToolUse[0].matcher: `shell(`"),
        "{}",
        run.stderr
    );

    let env = hooks_env(
        &server,
        "hooks = { Stop = [{ hooks = [{ type = \"command\", command = \"\" }] }] }",
    );
    let (run, _) = run_json(&env, "hello", &[]);
    run.expect_code(2);
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("row 'hooks'")
            && run
                .stderr
                .contains("hooks.Stop[0].hooks[0].command is empty"),
        "{}",
        run.stderr
    );
    let env = hooks_env(
        &server,
        "hooks = { Stop = [{ hooks = [{ type = \"prompt\", command = \"x\" }] }] }",
    );
    let (run, _) = run_json(&env, "hello", &[]);
    run.expect_code(2);
    assert!(run.stderr.contains("hooks"), "{}", run.stderr);
    assert!(server.completions().is_empty());
}
