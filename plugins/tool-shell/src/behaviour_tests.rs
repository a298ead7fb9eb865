//! Behaviour tests of the `shell` tool with real processes (B12, SBX-01…03).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use keel_plugin_api::services::tools::{ToolInvocation, ToolResult};
use serde_json::{Value, json};

use crate::group::{LiveGroups, process_alive};
use crate::tool::{Shell, ShellConfig};

fn parent_env() -> Vec<(OsString, OsString)> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    vec![
        ("PATH".into(), path),
        ("HOME".into(), "/tmp".into()),
        ("MY_API_KEY".into(), "sk-secret-value".into()),
        ("KEEL_X".into(), "keel-internal".into()),
        ("Github_Token".into(), "ghp-value".into()),
        ("VISIBLE".into(), "yes".into()),
        ("UNLISTED".into(), "unlisted-value".into()),
    ]
}

fn shell(config: ShellConfig) -> Shell {
    Shell::with_parent_env(config, Arc::new(LiveGroups::default()), parent_env())
}

fn call(cwd: &str, args: Value) -> ToolInvocation {
    ToolInvocation {
        name: "shell".into(),
        call_id: "c1".into(),
        session_id: "s1".into(),
        cwd: cwd.into(),
        args,
        timeout_ms: 0,
    }
}

fn run(s: &Shell, args: Value) -> ToolResult {
    s.execute(&call("/tmp", args), &|| false)
}

fn code(r: &ToolResult) -> Option<&str> {
    r.error.as_ref().map(|e| e.code.as_str())
}

/// The pids a command printed, one per line, in its stdout section.
fn pids(content: &str) -> Vec<i32> {
    content
        .lines()
        .filter_map(|l| l.trim().parse::<i32>().ok())
        .collect()
}

fn assert_all_dead(pids: &[i32]) {
    assert!(!pids.is_empty(), "the command printed no pids");
    for &pid in pids {
        assert!(!process_alive(pid), "process {pid} survived the call");
    }
}

// B12: exit code, then stdout, then stderr, labelled.
#[test]
fn b12_result_has_exit_code_stdout_and_stderr() {
    let s = shell(ShellConfig::default());
    let r = run(&s, json!({ "command": "echo out; echo err >&2" }));
    assert!(!r.is_error, "{r:?}");
    assert_eq!(
        r.content,
        "exit code: 0\n--- stdout ---\nout\n--- stderr ---\nerr\n"
    );
    let meta = r.meta.unwrap();
    assert_eq!(meta["exit_code"], 0);
    assert_eq!(meta["truncated"], false);
    assert_eq!(meta["signal"], Value::Null);
}

#[test]
fn b12_nonzero_exit_is_an_error_with_the_output() {
    let s = shell(ShellConfig::default());
    let r = run(&s, json!({ "command": "echo partial; exit 3" }));
    assert_eq!(code(&r), Some("SHELL_EXIT"));
    assert!(
        r.content
            .contains("exit code: 3\n--- stdout ---\npartial\n"),
        "{}",
        r.content
    );
    assert_eq!(r.meta.unwrap()["exit_code"], 3);
}

#[test]
fn b12_stdin_is_null_and_bash_is_used() {
    let s = shell(ShellConfig::default());
    let r = run(
        &s,
        json!({ "command": "cat; echo \"done ${BASH_VERSION:+bash}\"" }),
    );
    assert!(r.content.contains("done bash"), "{}", r.content);
}

// B12: output is capped per stream, head and tail kept, with a note.
#[test]
fn b12_output_is_capped_per_stream_keeping_head_and_tail() {
    let s = shell(ShellConfig {
        max_output_bytes: 100,
        ..ShellConfig::default()
    });
    let r = run(
        &s,
        json!({ "command": "echo START; head -c 100000 /dev/zero | tr '\\0' a; echo; echo END; echo small >&2" }),
    );
    assert!(!r.is_error, "{r:?}");
    assert!(
        r.content.contains("--- stdout ---\nSTART\naaa"),
        "{}",
        r.content
    );
    assert!(r.content.contains("bytes cut …]\naaa"), "{}", r.content);
    assert!(
        r.content.contains("a\nEND\n--- stderr ---\nsmall\n"),
        "{}",
        r.content
    );
    assert!(r.content.len() < 400, "{}", r.content.len());
    assert_eq!(r.meta.unwrap()["truncated"], true);
}

// SBX-03, issue 23 item 1: the child sees the allow-list and `pass_env`, no credential and
// nothing of KEEL_* even when passed; explicit env is merged after.
#[test]
fn sbx03_child_env_is_scrubbed() {
    let s = shell(ShellConfig {
        env: BTreeMap::from([("ADDED".to_owned(), "by-config".to_owned())]),
        pass_env: vec!["VISIBLE".into(), "MY_API_KEY".into(), "KEEL_*".into()],
        ..ShellConfig::default()
    });
    let r = run(&s, json!({ "command": "env" }));
    assert!(!r.is_error, "{r:?}");
    for secret in [
        "MY_API_KEY",
        "sk-secret-value",
        "KEEL_X",
        "keel-internal",
        "ghp-value",
        "unlisted-value",
    ] {
        assert!(
            !r.content.contains(secret),
            "{secret} leaked: {}",
            r.content
        );
    }
    assert!(r.content.contains("VISIBLE=yes"));
    assert!(r.content.contains("ADDED=by-config"));
}

// Issue 10 item 9 (SEC-02): the firewall's secret variables reach the command's environment
// (the exact bytes, nothing run); a name outside the alias form is refused before anything
// runs, so no call can set a variable the launcher or the loader reads.
#[test]
fn sec02_secret_variables_reach_the_command_and_only_alias_names_pass() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().to_str().unwrap();
    let value = "a'b\"c`d $(touch pwned); e\nf";
    let s = shell(ShellConfig::default());
    let args = json!({
        "command": "printf '%s' \"${sec_V}\" > out",
        "keel_secret_env": {"sec_V": value},
    });
    let r = s.execute(&call(cwd, args), &|| false);
    assert!(!r.is_error, "{r:?}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out")).unwrap(),
        value
    );
    assert!(!dir.path().join("pwned").exists());
    for name in ["LD_PRELOAD", "PATH", "BASH_ENV"] {
        let r = s.execute(
            &call(
                cwd,
                json!({"command": "touch ran", "keel_secret_env": {name: "/tmp/x.so"}}),
            ),
            &|| false,
        );
        assert_eq!(code(&r), Some("INVALID_ARGUMENTS"), "{name}: {r:?}");
        assert!(r.content.contains(name), "{}", r.content);
        assert!(!dir.path().join("ran").exists(), "{name}: the command ran");
    }
}

// SBX-01: a timeout terminates the whole tree — the command and every child it started.
#[test]
fn sbx01_timeout_kills_the_command_and_its_children() {
    let s = shell(ShellConfig {
        grace_ms: 300,
        ..ShellConfig::default()
    });
    let started = Instant::now();
    let r = run(
        &s,
        json!({ "command": "sleep 100 & echo $!; sleep 100 & echo $!; echo $$; wait", "timeout_ms": 400 }),
    );
    assert_eq!(code(&r), Some("SHELL_TIMEOUT"), "{r:?}");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(r.content.contains("timed out after 400 ms"));
    let p = pids(&r.content);
    assert_eq!(p.len(), 3, "{}", r.content);
    assert_all_dead(&p);
    assert_eq!(r.meta.unwrap()["timed_out"], true);
}

// SBX-01: a tree that ignores SIGTERM is SIGKILLed after the grace period.
#[test]
fn sbx01_sigterm_ignoring_tree_is_killed_after_grace() {
    let s = shell(ShellConfig {
        grace_ms: 300,
        ..ShellConfig::default()
    });
    let started = Instant::now();
    let r = run(
        &s,
        json!({ "command": "trap '' TERM; sleep 100 & echo $!; echo $$; wait; wait", "timeout_ms": 200 }),
    );
    let took = started.elapsed();
    assert_eq!(code(&r), Some("SHELL_TIMEOUT"), "{r:?}");
    assert!(took >= Duration::from_millis(500), "{took:?}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert_all_dead(&pids(&r.content));
}

// SBX-02: background jobs die with the call when the command itself exits.
#[test]
fn sbx02_background_jobs_die_when_the_command_exits() {
    let s = shell(ShellConfig::default());
    let started = Instant::now();
    let r = run(
        &s,
        json!({ "command": "sleep 100 & echo $!; (sleep 100 &); echo spawned" }),
    );
    assert!(!r.is_error, "{r:?}");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(r.content.contains("spawned"));
    assert_all_dead(&pids(&r.content));
}

// SBX-01: the abort path (caller gone) terminates the tree too.
#[test]
fn sbx01_cancellation_terminates_the_tree() {
    let s = shell(ShellConfig {
        grace_ms: 200,
        ..ShellConfig::default()
    });
    let flag = Arc::new(AtomicBool::new(false));
    let setter = {
        let flag = flag.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            flag.store(true, Ordering::SeqCst);
        })
    };
    let started = Instant::now();
    let r = s.execute(
        &call("/tmp", json!({ "command": "sleep 100 & echo $!; wait" })),
        &|| flag.load(Ordering::SeqCst),
    );
    setter.join().unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(code(&r), Some("ABORTED"), "{r:?}");
    assert_all_dead(&pids(&r.content));
}

// SBX-02: disposal (stop_all) stops running calls.
#[test]
fn sbx02_stop_all_terminates_running_calls() {
    let groups = Arc::new(LiveGroups::default());
    let s = Shell::with_parent_env(ShellConfig::default(), groups.clone(), parent_env());
    let worker =
        std::thread::spawn(move || run(&s, json!({ "command": "sleep 100 & echo $!; wait" })));
    let started = Instant::now();
    while groups.is_empty() && started.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    groups.stop_all();
    let r = worker.join().unwrap();
    assert_eq!(code(&r), Some("ABORTED"), "{r:?}");
    assert!(groups.is_empty());
    assert_all_dead(&pids(&r.content));
}

// B12: workdir resolves against the session cwd and must exist.
#[test]
fn b12_workdir_resolves_against_cwd_and_must_exist() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let cwd = dir.path().to_string_lossy().into_owned();
    let s = shell(ShellConfig::default());
    let r = s.execute(&call(&cwd, json!({ "command": "pwd" })), &|| false);
    let root = std::fs::canonicalize(dir.path()).unwrap();
    assert!(
        r.content.contains(&format!("{}\n", root.display())),
        "{}",
        r.content
    );
    let r = s.execute(
        &call(&cwd, json!({ "command": "pwd", "workdir": "sub" })),
        &|| false,
    );
    assert!(
        r.content
            .contains(&format!("{}\n", root.join("sub").display())),
        "{}",
        r.content
    );
    let r = s.execute(
        &call(&cwd, json!({ "command": "pwd", "workdir": "nope" })),
        &|| false,
    );
    assert_eq!(code(&r), Some("SHELL_SPAWN"));
}

#[test]
fn timeouts_are_capped_and_bad_arguments_rejected() {
    let s = shell(ShellConfig {
        max_timeout_ms: 1_000,
        ..ShellConfig::default()
    });
    let r = run(&s, json!({ "command": "true", "timeout_ms": 999_999 }));
    assert_eq!(r.meta.unwrap()["timeout_ms"], 1_000);
    assert_eq!(
        code(&run(&s, json!({ "command": "" }))),
        Some("INVALID_ARGUMENTS")
    );
    assert_eq!(
        code(&run(&s, json!({ "cmd": "ls" }))),
        Some("INVALID_ARGUMENTS")
    );
}

// ARCHITECTURE §8: shell{command, timeout_ms?, workdir?}, exclusive and mutating; plus the
// sandbox's escalation arguments (SBX-08).
#[test]
fn definition_matches_the_public_contract() {
    let d = crate::tool::definition(&ShellConfig::default());
    assert_eq!(d.name, "shell");
    let props: Vec<&String> = d.parameters["properties"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(
        props,
        [
            "command",
            "timeout_ms",
            "workdir",
            "sandbox_permissions",
            "justification"
        ]
    );
    assert!(!d.parallel_safe);
    assert!(d.mutating);
}
