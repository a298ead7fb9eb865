//! The plugin author's path, end to end (issue 12 item 4): `cargo xtask new-plugin` writes a
//! crate into a temporary directory, cargo builds it there as an outside author would (its own
//! workspace, `keel-plugin-api` by path), and the built `keel` runs an agent with it against the
//! loopback model server. The model calls the generated tool; the test checks the request the
//! server received (the tool offered, its result sent back) and the session log.
//!
//! The generated crate is the worked example of `docs/plugin-authoring.md`; this is the test
//! that keeps it compiling and working. It builds into `target/out-of-tree`, the target dir the
//! other out-of-tree fixtures share (`keel-plugin-api` and its dependencies compile once for all
//! of them), using keel's own `Cargo.lock` so the dependency versions are the ones keel was
//! built and tested with. The command is the built `xtask` binary itself (what `cargo xtask`
//! runs), so a test never waits on cargo's lock of the workspace's own target dir.

use std::path::Path;
use std::process::Command;

use keel_tests::model_server::Reply;
use keel_tests::{build_dir, target_dir, workspace_root};
use serde_json::{Value, json};

use crate::suite::agent_support::*;

const NAME: &str = "hello-tool";
const TOOL: &str = "hello_tool_greet";

/// `cargo xtask new-plugin …`, without cargo.
fn xtask() -> Command {
    let mut command = Command::new(build_dir().join("xtask"));
    command.current_dir(workspace_root());
    command
}

fn new_plugin(dir: &Path) {
    let status = xtask()
        .args(["new-plugin", NAME, "--dir"])
        .arg(dir)
        .status()
        .expect("run xtask");
    assert!(status.success(), "xtask new-plugin failed");
}

/// Builds the generated crate and returns the directory holding its library.
fn build(dir: &Path) -> std::path::PathBuf {
    std::fs::copy(workspace_root().join("Cargo.lock"), dir.join("Cargo.lock"))
        .expect("copy keel's Cargo.lock");
    let out = target_dir().join("out-of-tree");
    let status = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "--offline", "--manifest-path"])
        .arg(dir.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&out)
        .status()
        .expect("run cargo build");
    assert!(status.success(), "building the generated plugin failed");
    out.join("debug")
}

#[test]
fn a_generated_plugin_builds_out_of_tree_and_the_model_calls_its_tool() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(NAME);
    new_plugin(&dir);
    let lib = build(&dir);
    assert!(
        lib.join(keel_tests::plugin_file(NAME)).is_file(),
        "no {} in {}",
        keel_tests::plugin_file(NAME),
        lib.display()
    );
    let server = server(vec![
        Reply::tool_calls(vec![("c1", TOOL, args(json!({"name": "Ada"})))]),
        Reply::text("Greeted Ada."),
    ]);
    // The generated profile row, as written, inserts the plugin.
    let row = std::fs::read_to_string(dir.join("profile.toml")).unwrap();
    let env = agent_env(&server, &row)
        .var("KEEL_PLUGIN_PATH", &lib)
        .var("KEEL_LOG", "keel::plugin=info");
    let (run, result) = run_json(&env, "greet Ada", &[]);
    run.expect_code(0);
    assert_eq!(result["turn_end_reason"], "completed", "{}", run.stderr);

    // The model was offered the tool, with the parameters derived from its argument type.
    let reqs = contract_holds(&server);
    assert_eq!(reqs.len(), 2);
    let offered = reqs[0].body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| t["function"]["name"] == TOOL)
        .cloned()
        .unwrap_or_else(|| panic!("{TOOL} not offered: {}", reqs[0].body["tools"]));
    assert_eq!(
        offered["function"]["parameters"]["properties"]["name"]["type"], "string",
        "{offered}"
    );
    // Its result went back to the model: the profile row's greeting, the model's argument.
    let answer = tool_message(reqs[1].messages(), "c1");
    assert_eq!(answer["content"], "Hello, Ada!", "{answer}");

    // The session log holds the call and its result.
    let events = stored_events(&env, &session_of(&result));
    let of = |kind: &str| -> Value {
        events
            .iter()
            .find(|e| e["type"] == kind && e["data"]["call_id"] == "c1")
            .cloned()
            .unwrap_or_else(|| panic!("no {kind} for c1 in {events:?}"))
    };
    assert_eq!(of("tool/call")["data"]["name"], TOOL);
    let logged = of("tool/result");
    assert_eq!(logged["data"]["content"], "Hello, Ada!", "{logged}");
    assert_ne!(logged["data"]["is_error"], true, "{logged}");
    // The plugin's listener saw its tool's result.
    assert!(
        run.stderr
            .contains(&format!("{TOOL} answered call c1 (1 so far)")),
        "{}",
        run.stderr
    );
}

#[test]
fn new_plugin_refuses_a_bad_name_and_a_non_empty_directory_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let run = |name: &str, dir: &Path| {
        xtask()
            .args(["new-plugin", name, "--dir"])
            .arg(dir)
            .output()
            .expect("run xtask")
    };
    let out = run("Hello_Tool", &tmp.path().join("a"));
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("invalid NAME `Hello_Tool`"), "{stderr}");
    assert!(!tmp.path().join("a").exists(), "nothing is written");

    std::fs::write(tmp.path().join("keep.txt"), "mine").unwrap();
    let out = run(NAME, tmp.path());
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("is not empty"), "{stderr}");
    assert_eq!(
        std::fs::read_dir(tmp.path()).unwrap().count(),
        1,
        "the directory is left as it was"
    );
}
