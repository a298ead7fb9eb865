//! Tools and the loop, through the binary: a long tool does not hold the agent loop (SBX-10:
//! deadlines end the call and its whole process tree, and the loop goes on), and a confined
//! command runs a layer apart from keel and the user's programs (SBX-11). Bounded concurrency,
//! the other half of SBX-10, is TOOL-10 in `agent_run`.

use std::process::Command;
use std::time::{Duration, Instant};

use keel_tests::model_server::Reply;
use serde_json::json;

use crate::suite::agent_support::*;
use crate::suite::landlock::{env_with_sandbox, landlock_probe};

/// SBX-10: a command past its own `timeout_ms` ends as `SHELL_TIMEOUT`; one that asks for more
/// than the pipeline allows ends at the pipeline's deadline (`tools.default_timeout_ms`) as
/// `TOOL_TIMEOUT`. Either way the whole tree (the shell and a background grandchild) is gone,
/// its late side effect never happens, and the loop carries on to its next request long before
/// the commands' own sleeps would have ended.
#[test]
fn sbx10_a_long_tool_ends_at_its_deadline_with_its_tree_and_the_loop_goes_on() {
    // Unique per test process, so parallel tests never see each other's sleeps.
    let naps: Vec<String> = (1..=2)
        .map(|n| format!("3{n}.{}", std::process::id()))
        .collect();
    let command = |n: usize| {
        let nap = &naps[n - 1];
        format!("sleep {nap} & echo started > started{n}.txt; sleep {nap}; touch late{n}.txt")
    };
    let server = server(vec![
        Reply::tool_calls(vec![(
            "t1",
            "shell",
            args(json!({"command": command(1), "timeout_ms": 400})),
        )]),
        Reply::tool_calls(vec![(
            "t2",
            "shell",
            args(json!({"command": command(2), "timeout_ms": 60_000})),
        )]),
        Reply::text("done"),
    ]);
    let env = agent_env(&server, "");
    let started = Instant::now();
    let (run, _) = run_json(
        &env,
        "run long things",
        &["-c", "tools.default_timeout_ms=1500"],
    );
    let took = started.elapsed();
    run.expect_code(0);
    assert!(
        took < Duration::from_secs(25),
        "the loop waited for the commands' sleeps: {took:?}"
    );
    for n in [1, 2] {
        assert!(
            work_file(&env, &format!("started{n}.txt")).exists(),
            "command {n} never started"
        );
    }

    let reqs = contract_holds(&server);
    assert_eq!(reqs.len(), 3, "the loop went on after each timeout");
    let t1 = tool_message(reqs[1].messages(), "t1");
    assert!(
        t1["content"].as_str().unwrap().contains("SHELL_TIMEOUT"),
        "{t1}"
    );
    let t2 = tool_message(reqs[2].messages(), "t2");
    assert!(
        t2["content"].as_str().unwrap().contains("TOOL_TIMEOUT"),
        "{t2}"
    );

    // Neither tree outlives its call (keel has exited; give the kill a moment to land).
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut left: Vec<i32> = Vec::new();
    while Instant::now() < deadline {
        left = naps
            .iter()
            .flat_map(|nap| processes_with_arg(nap))
            .collect();
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for pid in &left {
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_raw(*pid).unwrap(),
            rustix::process::Signal::KILL,
        );
    }
    assert!(left.is_empty(), "{left:?} outlived their timed-out call");
    for n in [1, 2] {
        assert!(!work_file(&env, &format!("late{n}.txt")).exists());
    }
}

/// SBX-11: `shell` runs a layer apart from keel and the user's programs. A confined command
/// cannot signal a process outside its sandbox — under bwrap (its own PID namespace) and under
/// Landlock (the signal scope, ABI 6 and later) — while the same command in
/// `danger-full-access` (the control, unfenced) can.
#[test]
fn sbx11_a_confined_command_cannot_signal_a_process_outside_its_layer() {
    let mut cases: Vec<(&str, &str, &[&str], bool)> = Vec::new();
    if sandbox_usable() {
        cases.push(("bwrap", r#"{ runners = ["bwrap"] }"#, &[], false));
    } else {
        eprintln!("skipped bwrap: bubblewrap is not usable on this machine");
    }
    match landlock_probe() {
        Some((_, abi)) if abi >= 6 => {
            cases.push(("landlock", r#"{ runners = ["landlock"] }"#, &[], false));
        }
        Some((_, abi)) => eprintln!("skipped landlock: ABI {abi} has no signal scope (needs 6)"),
        None => {}
    }
    if cases.is_empty() {
        eprintln!("skipped: no sandbox runner is usable on this machine");
        return;
    }
    cases.push((
        "danger-full-access (control)",
        "{}",
        &["--sandbox", "danger-full-access"],
        true,
    ));
    for (label, config, flags, reaches) in cases {
        let mut victim = Command::new("sleep").arg("60").spawn().unwrap();
        let pid = victim.id();
        let server = server(vec![
            Reply::tool_calls(vec![(
                "k1",
                "shell",
                args(json!({"command": format!("kill -TERM {pid}; echo $? > kill.txt")})),
            )]),
            Reply::text("done"),
        ]);
        let env = env_with_sandbox(&server, config);
        let (run, _) = run_json(&env, "signal the neighbour", flags);
        let status = std::fs::read_to_string(work_file(&env, "kill.txt")).unwrap_or_default();
        // A delivered SIGTERM ends `sleep` at once; wait for it to be reapable.
        let mut ended = None;
        for _ in 0..100 {
            ended = victim.try_wait().unwrap();
            if ended.is_some() || !reaches {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = victim.kill();
        let _ = victim.wait();
        run.expect_code(0);
        if reaches {
            assert_eq!(status.trim(), "0", "{label}: kill failed");
            assert!(ended.is_some(), "{label}: the neighbour survived");
        } else {
            assert!(
                !status.trim().is_empty() && status.trim() != "0",
                "{label}: kill reported {status:?}"
            );
            assert!(ended.is_none(), "{label}: the confined command killed it");
        }
    }
}
