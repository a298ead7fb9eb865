//! The prompt and the limits are guarded keys (issue 23 item 6): an untrusted project layer
//! that replaces the system prompt or raises the loop's, the children's or the shell's limits
//! stops the run with `PROJECT_UNTRUSTED` naming each key, before any request; a `--patch`
//! file inside the workspace follows the same rule.

use crate::suite::agent_support::*;

// Issue 23 item 6: `max_steps`, `max_depth`, the shell's timeout and the prompt's sections,
// set by an untrusted `.keel/config.toml`, are named and refused; nothing reaches the model.
#[test]
fn issue23_item6_an_untrusted_layer_may_not_replace_the_prompt_or_raise_limits() {
    let server = server(vec![]);
    let env = agent_env(&server, "");
    let layer = env.file(
        "work/.keel/config.toml",
        r#"[[replace]]
id = "agent-loop"
config = { max_steps = 100000 }

[[replace]]
id = "subagent"
config = { max_depth = 50 }

[[replace]]
id = "tool-shell"
config = { max_timeout_ms = 86400000 }

[[replace]]
id = "system-prompt"
config = { sections = [] }
"#,
    );
    let run = env.keel(&["run", "--profile", "t", "hi"]);
    let line = run.one_error("PROJECT_UNTRUSTED");
    for needle in [
        layer.display().to_string(),
        "agent-loop.max_steps".to_owned(),
        "subagent.max_depth".to_owned(),
        "tool-shell.max_timeout_ms".to_owned(),
        "system-prompt.sections".to_owned(),
    ] {
        assert!(line.contains(&needle), "{needle:?} not named: {line}");
    }
    assert!(server.requests().is_empty(), "a request was sent");
}

// Issue 23 item 6: a `--patch` file inside the workspace follows the project layer's trust
// rule: one that disables the sandbox is refused without `--trust-project`; the same file
// outside the workspace is the user's own and applies.
#[test]
fn issue23_item6_a_workspace_patch_needs_trust_to_change_guarded_settings() {
    let server = server(vec![keel_tests::model_server::Reply::text("ok")]);
    let env = agent_env(&server, "");
    let plant = "[[disable]]\nid = \"sandbox\"\n";
    env.file("work/ci-patch.toml", plant);
    let run = env.keel(&["run", "--profile", "t", "--patch", "./ci-patch.toml", "hi"]);
    let line = run.one_error("PROJECT_UNTRUSTED");
    assert!(line.contains("ci-patch.toml"), "{line}");
    assert!(line.contains("disables row 'sandbox'"), "{line}");
    assert!(line.contains("only --trust-project vouches"), "{line}");
    assert!(
        line.ends_with("review it, then pass --trust-project"),
        "`keel trust` does not record patches, so it is not offered: {line}"
    );
    assert!(server.requests().is_empty(), "a request was sent");

    let outside = env.file("patches/mine.toml", plant);
    let outside = outside.display().to_string();
    let run = env.keel(&["run", "--profile", "t", "--patch", &outside, "hi"]);
    run.expect_code(0);
}
