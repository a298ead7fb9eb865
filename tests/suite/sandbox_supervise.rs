//! Confined process trees never outlive keel or their call, through the binary (issue 23 items
//! 7, 8 and 18; B12, SBX-02): a shell command started a few milliseconds before keel is
//! SIGKILLed stops writing the workspace under bubblewrap; a hook's `setsid` grandchild is
//! killed when the hook ends under Landlock, and a shell command's when the command ends in
//! `danger-full-access` (and with the command when keel is SIGKILLed there); and a run leaves no `.keel/` or `.claude/` behind
//! in a workspace that had none.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use keel_tests::model_server::Reply;

use crate::suite::agent_support::*;
use crate::suite::hooks_support::*;
use crate::suite::landlock::{env_with_sandbox, landlock_probe};

/// The writer's loop: appends to `FILE` in the workspace every 10 ms, forever.
fn writer(file: &str) -> String {
    format!("while :; do echo tick >> {file}; sleep 0.01; done")
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// Whether `path` still grows over `window`.
fn still_growing(path: &Path, window: Duration) -> bool {
    let before = size(path);
    std::thread::sleep(window);
    size(path) != before
}

/// Kills whatever a failed check left running (found by its command line).
fn kill_leftovers(command: &str) {
    for pid in processes_with_arg(command) {
        if let Some(p) = rustix::process::Pid::from_raw(pid) {
            let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
        }
    }
}

// Issue 23 item 7: SIGKILL keel 0-40 ms after the model's answer that starts the command
// (so in the middle of the spawn: keel's fork, the launcher, bwrap's own setup), many times;
// nothing keeps writing the workspace afterwards.
#[test]
fn b12_a_command_started_just_before_keel_is_sigkilled_stops_under_bubblewrap() {
    if !sandbox_usable() {
        eprintln!("skipped: bubblewrap is not usable here");
        return;
    }
    rustix::process::set_child_subreaper(Some(rustix::process::getpid())).unwrap();
    let mut survivors = Vec::new();
    for offset_ms in (0..=40).step_by(4) {
        let command = writer("ticks.log");
        let server = server(vec![
            Reply::tool_calls(vec![("w1", "shell", args(json!({ "command": command })))]),
            Reply::text("unreachable"),
        ]);
        let env = agent_env(&server, "");
        let mut child = env
            .command(&["run", "--profile", "t", "write"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // The answer naming the command has been served: keel is about to spawn it.
        let served = Instant::now() + Duration::from_secs(30);
        while server.consumed() < 1 && Instant::now() < served {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(offset_ms));
        child.kill().unwrap();
        child.wait().unwrap();
        let log = work_file(&env, "ticks.log");
        // Let a surviving writer show itself, then watch it.
        std::thread::sleep(Duration::from_millis(300));
        if still_growing(&log, Duration::from_millis(700)) {
            survivors.push(offset_ms);
        }
        kill_leftovers(&command);
        while rustix::process::waitpid(None, rustix::process::WaitOptions::NOHANG)
            .is_ok_and(|r| r.is_some())
        {}
    }
    assert!(
        survivors.is_empty(),
        "a command outlived a SIGKILLed keel at offsets {survivors:?} ms"
    );
}

// Issue 25 (per step with the sandbox off): in `danger-full-access` keel starts the launcher
// without a parent-death signal (so std can `posix_spawn` it instead of forking keel); the
// launcher's own check and watch of keel must still take the command and its `setsid`
// grandchild down when keel is SIGKILLed 0-40 ms after the answer that starts the command.
#[test]
fn b12_an_unfenced_command_and_its_setsid_grandchild_stop_when_keel_is_sigkilled() {
    rustix::process::set_child_subreaper(Some(rustix::process::getpid())).unwrap();
    let mut survivors = Vec::new();
    for offset_ms in (0..=40).step_by(5) {
        let command = format!(
            "setsid sh -c '{}' > /dev/null 2>&1 < /dev/null & {}",
            writer("escaped.log"),
            writer("ticks.log")
        );
        let server = server(vec![
            Reply::tool_calls(vec![("u1", "shell", args(json!({ "command": command })))]),
            Reply::text("unreachable"),
        ]);
        let env = env_with_sandbox(&server, "{ mode = \"danger-full-access\" }");
        let mut child = env
            .command(&["run", "--profile", "t", "write"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let served = Instant::now() + Duration::from_secs(30);
        while server.consumed() < 1 && Instant::now() < served {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(offset_ms));
        child.kill().unwrap();
        child.wait().unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let logs = [work_file(&env, "ticks.log"), work_file(&env, "escaped.log")];
        if logs
            .iter()
            .any(|log| still_growing(log, Duration::from_millis(500)))
        {
            survivors.push(offset_ms);
        }
        kill_leftovers(&writer("ticks.log"));
        kill_leftovers(&writer("escaped.log"));
        while rustix::process::waitpid(None, rustix::process::WaitOptions::NOHANG)
            .is_ok_and(|r| r.is_some())
        {}
    }
    assert!(
        survivors.is_empty(),
        "an unfenced command outlived a SIGKILLed keel at offsets {survivors:?} ms"
    );
}

// Issue 23 item 8: a hook whose grandchild leaves its session (`setsid`) and keeps writing;
// under Landlock the launcher kills it when the hook ends, as docs/hooks.md says.
#[test]
fn a_hooks_setsid_grandchild_dies_with_the_hook_under_landlock() {
    if landlock_probe().is_none() {
        return;
    }
    let server = server(vec![
        Reply::tool_calls(vec![("c1", "shell", args(json!({"command": "echo hi"})))]),
        Reply::text("done"),
    ]);
    let hook = cmd("escape");
    let env = env_with_sandbox(
        &server,
        &format!(
            "{{ runners = [\"landlock\"] }}\n[[replace]]\nid = \"hooks\"\nconfig = {{ {} }}\n",
            table(&[on("PreToolUse", "shell", &hook, "")])
        ),
    );
    let log = work_file(&env, "escaped.log");
    put(
        &env,
        "escape",
        &format!(
            "setsid sh -c '{}' > /dev/null 2>&1 < /dev/null &\n\
             while [ ! -s {log} ]; do sleep 0.01; done\necho started\n",
            writer(&log.display().to_string()),
            log = log.display()
        ),
    );
    let (run, _) = run_json(&env, "go", &[]);
    run.expect_code(0);
    assert!(log.exists(), "the grandchild never ran");
    let growing = still_growing(&log, Duration::from_millis(700));
    kill_leftovers(&writer(&log.display().to_string()));
    assert!(!growing, "the hook's setsid grandchild outlived the hook");
}

// Issue 25 (per step with the sandbox off): in `danger-full-access` the launcher skips its
// `/proc` walk when it has no child left; a shell command's `setsid` grandchild is its child
// (re-parented to the subreaper), so it is still found and killed when the command ends.
#[test]
fn an_unfenced_commands_setsid_grandchild_dies_with_the_command() {
    // Relative to the workspace, the command's working directory.
    let command = format!(
        "setsid sh -c '{}' > /dev/null 2>&1 < /dev/null &\n\
         while [ ! -s escaped.log ]; do sleep 0.01; done; echo started",
        writer("escaped.log")
    );
    let server = server(vec![
        Reply::tool_calls(vec![("c1", "shell", args(json!({ "command": command })))]),
        Reply::text("done"),
    ]);
    let env = env_with_sandbox(&server, "{ mode = \"danger-full-access\" }");
    let (run, _) = run_json(&env, "go", &[]);
    run.expect_code(0);
    let log = work_file(&env, "escaped.log");
    assert!(log.exists(), "the grandchild never ran");
    let growing = still_growing(&log, Duration::from_millis(700));
    kill_leftovers(&writer("escaped.log"));
    assert!(
        !growing,
        "the command's setsid grandchild outlived the command"
    );
}

// Issue 23 item 18: a run in a workspace without `.keel/` and `.claude/` leaves neither behind,
// under bubblewrap and under Landlock.
#[test]
fn a_run_leaves_no_keel_or_claude_directory_in_the_workspace() {
    let runners: Vec<&str> = [
        sandbox_usable().then_some("bwrap"),
        landlock_probe().map(|_| "landlock"),
    ]
    .into_iter()
    .flatten()
    .collect();
    for runner in runners {
        let server = server(vec![
            Reply::tool_calls(vec![(
                "c1",
                "shell",
                args(json!({"command": "echo hi > out.txt; ls -a"})),
            )]),
            Reply::text("done"),
        ]);
        let env = env_with_sandbox(&server, &format!("{{ runners = [\"{runner}\"] }}"));
        let (run, _) = run_json(&env, "go", &[]);
        run.expect_code(0);
        assert_eq!(
            std::fs::read_to_string(work_file(&env, "out.txt")).unwrap(),
            "hi\n",
            "{runner}: the command ran"
        );
        for dir in [".keel", ".claude"] {
            assert!(
                !work_file(&env, dir).exists(),
                "{runner}: the run left {dir} in the workspace"
            );
        }
    }
}
