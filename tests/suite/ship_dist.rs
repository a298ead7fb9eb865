//! What `cargo xtask dist` builds runs what the README documents, and finds only what it ships
//! (issue 23 items 8 and 9; KRN-04, KRN-05). Each test lays out a real dist tree from the debug
//! build (`--build-dir`) and runs its `keel` from a project directory with no config path of
//! its own, against the loopback model server's Messages endpoint.
//!
//! The shipped patch is named as the README names it, `--patch anthropic`, resolved through the
//! tree's `share/` (item 15); the lock keys a patched run by the patch's file stem, so the name
//! and a path to a file of that stem meet the same lock entry.

use std::path::PathBuf;
use std::time::Duration;

use keel_tests::model_server::{ModelServer, Reply};
use keel_tests::{Run, target_dir, workspace_root};
use serde_json::Value;

use crate::suite::ship_support::{dist_into, lock_entries, shipped_env, shipped_patch};

const KEY: &str = "sk-ant-ship-7d21-canary";
const LIMIT: Duration = Duration::from_secs(60);

fn result_of(run: &Run) -> Value {
    serde_json::from_str(run.stdout.trim()).unwrap_or(Value::Null)
}

// Issue 23 items 9 and 15: `keel run --patch anthropic "task"` (the README's line, default
// profile), the patch found by name in the tree's `share/`, passes the lock `dist` wrote and reaches the Messages API;
// the lock still refuses a graph nobody locked, under the same patch name or another one, until
// `keel lock` records it.
#[test]
fn issue23_item9_the_shipped_patch_runs_on_the_dist_tree_and_unlocked_graphs_stay_refused() {
    let mut env = shipped_env(PathBuf::new());
    let tree = dist_into(&env);
    env.bin = tree.join("bin/keel");
    let env = env.var("ANTHROPIC_API_KEY", KEY);
    let entries = lock_entries(&tree);
    for name in [
        "default",
        "default --patch anthropic",
        "headless --patch anthropic",
    ] {
        assert!(
            entries.iter().any(|e| e == name),
            "no {name:?} in {entries:?}"
        );
    }

    let server = ModelServer::start(vec![
        Reply::text("Hello from the Messages API."),
        Reply::text("Hello again."),
    ]);
    let base = format!("llm-anthropic.base_url={}", server.anthropic_base_url());
    let patch = shipped_patch(&tree).to_string_lossy().into_owned();
    let run_with = |patch: &str| {
        env.keel_within(
            &[
                "run",
                "--output-format",
                "json",
                "--patch",
                patch,
                "-c",
                &base,
                "say hello",
            ],
            LIMIT,
        )
    };
    let run = run_with("anthropic");
    run.expect_code(0);
    assert_eq!(result_of(&run)["result"], "Hello from the Messages API.");
    let requests = server.anthropic_requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(
        requests[0].headers.get("x-api-key").map(String::as_str),
        Some(KEY)
    );

    // The same name with one more row: the locked entry's graph refuses it before any request.
    let patches = env.path().join("patches");
    std::fs::create_dir_all(&patches).unwrap();
    let shipped = std::fs::read_to_string(&patch).unwrap();
    let grown = patches.join("anthropic.toml");
    std::fs::write(
        &grown,
        format!("{shipped}\n[[insert]]\nid = \"extra\"\nplugin = \"llm-scripted\"\n"),
    )
    .unwrap();
    let grown_shown = grown.to_string_lossy().into_owned();
    let line = run_with(&grown_shown).one_error("LOCK_GRAPH").to_owned();
    assert!(line.contains("'llm-scripted'"), "{line}");
    assert!(
        line.contains(&format!(
            "keel lock --profile default --patch {grown_shown}"
        )),
        "{line}"
    );

    // The shipped patch under another name has no entry: the profile's entry refuses the
    // changed graph, and the hint writes the missing entry.
    let renamed = patches.join("opus.toml");
    std::fs::write(&renamed, &shipped).unwrap();
    let renamed_shown = renamed.to_string_lossy().into_owned();
    let line = run_with(&renamed_shown).one_error("LOCK_GRAPH").to_owned();
    assert!(line.contains("'llm-anthropic'"), "{line}");
    assert_eq!(
        server.anthropic_requests().len(),
        1,
        "a refused run sent a request"
    );
    env.keel(&["lock", "--profile", "default", "--patch", &renamed_shown])
        .expect_code(0);
    assert!(
        lock_entries(&tree)
            .iter()
            .any(|e| e == "default --patch opus"),
        "{:?}",
        lock_entries(&tree)
    );
    let run = run_with(&renamed_shown);
    run.expect_code(0);
    assert_eq!(result_of(&run)["result"], "Hello again.");
    // Locking a patched run left the profile's own entry in place.
    let doctor = env.keel(&["doctor"]);
    assert!(
        doctor.stdout.contains(&format!(
            "lock: locked by {}",
            tree.join("bin/keel.lock").display()
        )),
        "{}",
        doctor.stdout
    );
}

// Issue 23 item 8: a dist binary was built in this checkout, yet searches only its own tree:
// an unknown profile names the tree's `share/profiles/` alone, the shipped profiles resolve from
// the tree, and the plugin search path is the tree's `lib/` alone — never the checkout or its
// target dir.
#[test]
fn issue23_item8_a_dist_binary_searches_only_its_tree() {
    let mut env = shipped_env(PathBuf::new());
    let tree = dist_into(&env);
    env.bin = tree.join("bin/keel");
    let checkout = workspace_root().display().to_string();
    let target = target_dir().display().to_string();

    let run = env.keel(&["run", "--profile", "nosuch", "task"]);
    let line = run.one_error("CONFIG_UNKNOWN_PROFILE");
    let searched = line
        .split_once("(searched ")
        .map(|(_, rest)| rest.trim_end_matches(')'))
        .unwrap_or_else(|| panic!("no searched roots in: {line}"));
    assert_eq!(
        searched,
        tree.join("share/profiles/nosuch.toml")
            .display()
            .to_string(),
        "{line}"
    );
    assert!(
        !line.contains(&checkout) && !line.contains(&target),
        "{line}"
    );

    let dump = env.keel(&["config", "dump", "--profile", "headless", "--explain"]);
    dump.expect_code(0);
    let shipped = tree
        .join("share/profiles/headless.toml")
        .display()
        .to_string();
    assert!(dump.stdout.contains(&shipped), "{}", dump.stdout);
    assert!(!dump.stdout.contains(&checkout), "{}", dump.stdout);

    let doctor = env.keel(&["doctor", "--profile", "headless"]);
    let dirs: Vec<&str> = doctor
        .stdout
        .lines()
        .filter(|l| l.contains("plugin path:"))
        .collect();
    assert_eq!(dirs.len(), 1, "{}", doctor.stdout);
    assert!(
        dirs[0].contains(&tree.join("lib").display().to_string()),
        "{}",
        doctor.stdout
    );
}
