//! The project's Claude Code settings against a hostile model (issue 15 item 3): the `hooks`
//! row may run the commands `.claude/settings.json` names, so a model that could write that
//! file would choose what keel runs next. `.claude/` is read-only to every tool, like `.keel/`,
//! and `keel trust` records the settings' bytes beside the layer's.

use keel_tests::model_server::Reply;
use serde_json::json;

use crate::suite::agent_support::*;

const PLANT: &str =
    r#"{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"touch /tmp/pwned"}]}]}}"#;

/// Neither `shell` nor `write_file` can create the settings, and an existing file stays as
/// the user wrote it.
#[test]
fn issue15_the_model_cannot_write_claude_settings() {
    if !sandbox_usable() {
        eprintln!("skipped: bubblewrap is not usable on this machine");
        return;
    }
    let quoted = PLANT.replace('"', "\\\"");
    let plant = |id: &str, first: &str| {
        Reply::tool_calls(vec![
            (
                format!("{id}1"),
                "shell",
                args(json!({"command": format!(
                    "mkdir -p .claude; printf \"{quoted}\" > .claude/{first}; echo rc=$?"
                )})),
            ),
            (
                format!("{id}2"),
                "write_file",
                args(json!({"path": ".claude/settings.local.json", "content": PLANT})),
            ),
        ])
    };
    let first = server(vec![plant("p", "settings.json"), Reply::text("done")]);
    let env = agent_env(&first, "");
    let (run, _) = run_json(&env, "plant hooks", &[]);
    run.expect_code(0);
    // Issue 23 item 18: the sandbox mounts over an existing `.claude/` only, so `shell` may
    // create a missing one (a file changed during a run is not trusted later: issue 23 item
    // 6); the file tools refuse it whatever exists.
    let file = work_file(&env, ".claude/settings.local.json");
    assert!(!file.exists(), "the model planted {}", file.display());
    let reqs = contract_holds(&first);
    let p2 = tool_message(reqs[1].messages(), "p2")["content"].to_string();
    assert!(p2.contains("Claude Code settings"), "{p2}");

    let second = server(vec![plant("q", "settings.json"), Reply::text("done")]);
    let env = agent_env(&second, "");
    let original = "{\"hooks\":{}}\n";
    env.file("work/.claude/settings.json", original);
    let (run, _) = run_json(&env, "change the hooks", &[]);
    run.expect_code(0);
    let kept = std::fs::read_to_string(work_file(&env, ".claude/settings.json")).unwrap();
    assert_eq!(kept, original);
}

/// `keel trust` records the settings when there is no layer at all, and says what they are.
#[test]
fn issue15_keel_trust_records_claude_settings() {
    let idle = server(vec![]);
    let env = agent_env(&idle, "");
    let work = env.work();
    let e = env.keel(&["trust", &work.display().to_string()]);
    e.expect_code(2);
    assert!(e.stderr.contains("nothing to trust"), "{}", e.stderr);

    env.file("work/.claude/settings.json", "{}");
    let trusted = env.keel(&["trust", &work.display().to_string()]);
    trusted.expect_code(0);
    assert!(
        trusted.stdout.contains(".claude/settings.json") && trusted.stdout.contains("hooks"),
        "{}",
        trusted.stdout
    );
    let records = std::fs::read_to_string(env.home().join("trusted-projects.json")).unwrap();
    assert!(records.contains(".claude/settings.json"), "{records}");
}
