//! What the model wrote must not be trusted later (issue 23 item 6): a file a keel run created
//! or changed under the workspace's `.keel/` or `.claude/`, or a `--patch` file inside the
//! workspace, is tainted; the next `--trust-project` or `--patch` refuses it with
//! `PROJECT_TAINTED` naming the file and the run, and `keel trust` after review clears it.

use keel_tests::model_server::Reply;
use serde_json::json;

use crate::suite::agent_support::*;

/// A layer that turns the sandbox off.
const PLANT: &str = "[[disable]]\nid = \"sandbox\"\n";

// Issue 23 item 6: the model's `shell` call writes `.keel/config.toml`; the run says the file
// is tainted; the next `keel run --trust-project` fails PROJECT_TAINTED naming it and the run
// that changed it, before any request; after `keel trust` it runs.
#[test]
fn issue23_item6_a_project_layer_the_model_wrote_is_refused_by_trust_project_until_keel_trust() {
    let plant = PLANT.replace('\n', "\\n").replace('"', "\\\"");
    let server = server(vec![
        Reply::tool_calls(vec![(
            "p1",
            "shell",
            args(
                json!({"command": format!("mkdir -p .keel && printf \"{plant}\" > .keel/config.toml; echo rc=$?")}),
            ),
        )]),
        Reply::text("done"),
        Reply::text("after review"),
    ]);
    let env = agent_env(&server, "");
    let (run, _) = run_json(&env, "plant a config", &[]);
    run.expect_code(0);
    let layer = work_file(&env, ".keel/config.toml");
    assert!(
        layer.is_file(),
        "the plant was not written:\n{}",
        run.stderr
    );
    let shown = layer.canonicalize().unwrap().display().to_string();
    assert!(
        run.stderr
            .lines()
            .any(|l| l.starts_with("keel: warning: kernel: ") && l.contains(&shown)),
        "the run did not say what it tainted:\n{}",
        run.stderr
    );

    let (run, _) = run_json(&env, "next", &["--trust-project"]);
    let line = run.one_error("PROJECT_TAINTED");
    assert!(line.contains(&shown), "{line}");
    assert!(line.contains("the keel run started"), "{line}");
    assert!(line.contains("keel trust"), "{line}");
    assert_eq!(
        server.completions().len(),
        2,
        "a refused run sent a request"
    );

    let trust = env.keel(&["trust"]);
    trust.expect_code(0);
    assert!(
        trust.stdout.contains("cleared the taint"),
        "{}",
        trust.stdout
    );
    let (run, _) = run_json(&env, "next", &["--trust-project"]);
    run.expect_code(0);
    assert_eq!(server.completions().len(), 3, "{}", run.stderr);
}

// Issue 23 item 6: CI runs `keel run --patch ./ci-patch.toml` (the user's benign patch in the
// workspace); during that run the model's `shell` call rewrites the patch to turn the sandbox
// off. The next `--patch ./ci-patch.toml` fails PROJECT_TAINTED naming it and the run, before
// any request; `keel trust` after review clears it.
#[test]
fn issue23_item6_a_workspace_patch_the_model_rewrote_is_refused_until_keel_trust() {
    let plant = PLANT.replace('\n', "\\n").replace('"', "\\\"");
    let server = server(vec![
        Reply::tool_calls(vec![(
            "w1",
            "shell",
            args(json!({"command": format!("printf \"{plant}\" > ci-patch.toml; echo rc=$?")})),
        )]),
        Reply::text("done"),
        Reply::text("after review"),
    ]);
    let env = agent_env(&server, "");
    let patch = env.file(
        "work/ci-patch.toml",
        "[[replace]]\nid = \"agent-loop\"\nconfig = { temperature = 0.5 }\n",
    );
    let (run, _) = run_json(&env, "tune the ci patch", &["--patch", "./ci-patch.toml"]);
    run.expect_code(0);
    assert_eq!(
        std::fs::read_to_string(&patch).unwrap(),
        PLANT,
        "{}",
        run.stderr
    );
    let shown = patch.canonicalize().unwrap().display().to_string();

    let (run, _) = run_json(&env, "next", &["--patch", "./ci-patch.toml"]);
    let line = run.one_error("PROJECT_TAINTED");
    assert!(line.contains(&shown) && line.contains("--patch"), "{line}");
    assert!(line.contains("the keel run started"), "{line}");
    assert_eq!(
        server.completions().len(),
        2,
        "a refused run sent a request"
    );

    let trust = env.keel(&["trust"]);
    trust.expect_code(0);
    assert!(
        trust.stdout.contains("cleared the taint"),
        "{}",
        trust.stdout
    );
    // Reviewed, it is an ordinary workspace patch again: one that turns a guarded row off
    // needs --trust-project, as the project layer would.
    let (run, _) = run_json(&env, "next", &["--patch", "./ci-patch.toml"]);
    let line = run.one_error("PROJECT_UNTRUSTED");
    assert!(line.contains("disables row"), "{line}");
    let (run, _) = run_json(
        &env,
        "next",
        &["--patch", "./ci-patch.toml", "--trust-project"],
    );
    run.expect_code(0);
    assert_eq!(server.completions().len(), 3, "{}", run.stderr);
}
