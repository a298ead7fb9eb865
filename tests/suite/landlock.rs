//! The Landlock runner through the binary (SBX-04, SBX-06, SBX-07, SBX-09, B10): the second
//! link of the runner chain confines `shell` when bubblewrap is not there, reports how fully it
//! enforces (`partial` on kernels older than the ABI keel asks for), tells a child's own exit 1
//! from a launcher failure, and fails closed when no link of the chain is usable.

use serde_json::{Value, json};

use keel_tests::Env;
use keel_tests::model_server::{ModelServer, Reply};

use crate::suite::agent_support::*;

/// `keel-landlock --probe` beside the built `keel`: `Some(enforcement)` when Landlock works
/// here, else `None` with the reason printed.
fn landlock_enforcement() -> Option<String> {
    landlock_probe().map(|(enforcement, _)| enforcement)
}

/// The launcher's probe: `Some((enforcement, effective ABI))` when Landlock works here, else
/// `None` with the reason printed.
pub(crate) fn landlock_probe() -> Option<(String, i64)> {
    let launcher = keel_tests::keel_bin().with_file_name("keel-landlock");
    let out = std::process::Command::new(&launcher)
        .arg("--probe")
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!(
            "skipped: Landlock is not usable on this machine: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        return None;
    }
    let v: Value = serde_json::from_slice(&out.stdout).ok()?;
    Some((v["enforcement"].as_str()?.to_owned(), v["abi"].as_i64()?))
}

/// Profile `t` with the sandbox row on `sandbox_config` (always present, unlike
/// [`agent_env`]'s row, which is dropped where bwrap is unusable). `$KEEL_HOME` lives outside
/// `/tmp`: Landlock refuses to confine while keel's home lies inside a writable root.
pub(crate) fn env_with_sandbox(server: &ModelServer, sandbox_config: &str) -> Env {
    // `agent_env` already drops the shipped row where bwrap is unusable.
    let disable = if sandbox_usable() {
        "[[disable]]\nid = \"sandbox\"\n"
    } else {
        ""
    };
    let extra = format!(
        "{disable}\n[[insert]]\nid = \"sandbox-ll\"\nplugin = \"sandbox\"\nconfig = {sandbox_config}\n"
    );
    agent_env(server, &extra).home_outside_tmp()
}

fn outside(name: &str) -> std::path::PathBuf {
    outside_workspace("landlock", name)
}

fn results(env: &Env, result: &Value) -> Vec<Value> {
    stored_events(env, &session_of(result))
        .into_iter()
        .filter(|e| e["type"] == "tool/result")
        .collect()
}

#[test]
fn sbx04_sbx07_landlock_confines_shell_and_reports_its_enforcement() {
    let Some(enforcement) = landlock_enforcement() else {
        return;
    };
    let escape = outside("shell");
    let target = ModelServer::start(vec![]);
    let net = format!(
        "printf 'GET /probe HTTP/1.0\\r\\n\\r\\n' > /dev/tcp/127.0.0.1/{}",
        target.addr().port()
    );
    let server = server(vec![
        Reply::tool_calls(vec![
            (
                "l1",
                "shell",
                args(json!({"command": format!("echo x > {}", escape.display())})),
            ),
            (
                "l2",
                "shell",
                args(
                    json!({"command": "echo in > inside.txt; echo t > /tmp/keel-ll-ok && rm /tmp/keel-ll-ok"}),
                ),
            ),
            ("l3", "shell", args(json!({ "command": net }))),
            // SBX-09: grep without a match exits 1: the child's failure, not the runner's.
            (
                "l4",
                "shell",
                args(json!({"command": "grep -q needle inside.txt"})),
            ),
        ]),
        Reply::text("done"),
    ]);
    // bwrap first but missing: the chain falls through to Landlock.
    let env = env_with_sandbox(
        &server,
        r#"{ runners = ["bwrap", "landlock"], bwrap = "/nonexistent/bwrap" }"#,
    );
    let (run, result) = run_json(&env, "confined", &[]);
    run.expect_code(0);
    let escaped = escape.exists();
    let _ = std::fs::remove_file(&escape);
    assert!(!escaped, "the Landlock-confined shell wrote to $HOME");
    assert_eq!(
        std::fs::read_to_string(work_file(&env, "inside.txt")).unwrap(),
        "in\n"
    );
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(
        target
            .requests()
            .iter()
            .filter(|r| r.path == "/probe")
            .count(),
        0,
        "the Landlock-confined shell reached a TCP listener"
    );

    let by_id = |id: &str| {
        results(&env, &result)
            .into_iter()
            .find(|e| e["data"]["call_id"] == id)
            .unwrap_or_else(|| panic!("no result for {id}"))
    };
    for id in ["l1", "l2", "l3", "l4"] {
        let sandbox = &by_id(id)["data"]["meta"]["sandbox"];
        assert_eq!(sandbox["runner"], "landlock", "{id}: {sandbox}");
        // SBX-07: what the launcher's probe said, reported on every result.
        assert_eq!(
            sandbox["enforcement"],
            enforcement.as_str(),
            "{id}: {sandbox}"
        );
    }
    let l1 = by_id("l1");
    let denied = l1["data"]["content"].as_str().unwrap();
    assert!(
        denied.contains("[sandbox: file access denied under workspace-write mode]"),
        "{denied}"
    );
    assert_eq!(l1["data"]["error"]["code"], "SHELL_EXIT");
    assert!(by_id("l2")["data"]["error"].is_null(), "{}", by_id("l2"));
    assert_eq!(by_id("l4")["data"]["error"]["code"], "SHELL_EXIT");
}

#[test]
fn sbx06_no_usable_link_in_the_chain_runs_nothing() {
    let server = server(vec![
        Reply::tool_calls(vec![(
            "u1",
            "shell",
            args(json!({"command": "echo ran > ran.txt"})),
        )]),
        Reply::text("done"),
    ]);
    let env = env_with_sandbox(
        &server,
        r#"{ runners = ["bwrap", "landlock"], bwrap = "/nonexistent/bwrap", landlock = "/nonexistent/keel-landlock" }"#,
    );
    let (run, result) = run_json(&env, "unconfinable", &[]);
    run.expect_code(0);
    assert!(!work_file(&env, "ran.txt").exists(), "it ran unconfined");
    let r = &results(&env, &result)[0]["data"];
    assert_eq!(r["error"]["code"], "SANDBOX_UNAVAILABLE", "{r}");
    let why = r["content"].as_str().unwrap();
    assert!(
        why.contains("bwrap: ") && why.contains("landlock: "),
        "the refusal names each link's reason: {why}"
    );
}

/// B12 / SBX-02: a keel killed outright leaves no orphans — not the shell, not a background
/// grandchild — both under the Landlock runner and in `danger-full-access`, where the launcher
/// supervises the command without fencing it.
#[test]
fn b12_a_sigkilled_keel_leaves_no_grandchildren() {
    if landlock_enforcement().is_none() {
        return;
    }
    for (label, config, extra) in [
        ("landlock", r#"{ runners = ["landlock"] }"#, None),
        ("danger-full-access", "{}", Some("danger-full-access")),
    ] {
        let server = server(vec![
            Reply::tool_calls(vec![(
                "o1",
                "shell",
                args(json!({"command": "sleep 30 & echo $! > gc.pid; echo $$ > sh.pid; wait"})),
            )]),
            Reply::text("unreachable"),
        ]);
        let env = env_with_sandbox(&server, config);
        let mut argv = vec!["run", "--profile", "t"];
        if let Some(mode) = extra {
            argv.extend(["--sandbox", mode]);
        }
        argv.push("go");
        let survivors = survivors_of_a_sigkilled_keel(&env, &argv, &["gc.pid", "sh.pid"]);
        assert!(
            survivors.is_empty(),
            "{label}: {survivors:?} outlived the SIGKILLed keel"
        );
    }
}

/// SBX-07: a row that needs an absolute boundary (`require_full_enforcement`) refuses a runner
/// that enforces only part of the policy here: with Landlock the only link and a kernel older
/// than the ABI keel asks for, nothing runs and the refusal says why. Where Landlock enforces
/// fully, the same row confines the command instead.
#[test]
fn sbx07_a_row_that_requires_full_enforcement_refuses_a_partial_runner() {
    let Some(enforcement) = landlock_enforcement() else {
        return;
    };
    let server = server(vec![
        Reply::tool_calls(vec![(
            "p1",
            "shell",
            args(json!({"command": "echo ran > ran.txt"})),
        )]),
        Reply::text("done"),
    ]);
    let env = env_with_sandbox(
        &server,
        r#"{ runners = ["landlock"], require_full_enforcement = true }"#,
    );
    let (run, result) = run_json(&env, "needs a full boundary", &[]);
    run.expect_code(0);
    let r = &results(&env, &result)[0]["data"];
    if enforcement == "full" {
        eprintln!("Landlock enforces fully here: the row confines instead of refusing");
        assert!(work_file(&env, "ran.txt").exists(), "{r}");
        assert_eq!(r["meta"]["sandbox"]["enforcement"], "full", "{r}");
        return;
    }
    assert!(
        !work_file(&env, "ran.txt").exists(),
        "it ran on a partial runner"
    );
    assert_eq!(r["error"]["code"], "SANDBOX_UNAVAILABLE", "{r}");
    let why = r["content"].as_str().unwrap();
    assert!(
        why.contains("landlock: enforcement is partial")
            && why.contains("require_full_enforcement"),
        "{why}"
    );
}
