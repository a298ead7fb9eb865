//! What one `shell` call's process costs (issue 25: per step with the sandbox off), through
//! [`keel_plugin_tool_shell::run::run`] exactly as the tool runs it: `bash -c true` spawned
//! directly (no sandbox row: `fork` + parent-death signal), under the launcher as the sandbox
//! runs it in `danger-full-access` (`keel-landlock --parent <pid> --unrestricted -- bash -c
//! true`: `posix_spawn`, the launcher watches keel), the same argv forced through `fork` + the
//! parent-death signal as before (`--parent 0<pid>`: the launcher reads the same pid, the tool
//! does not recognise it), and a bare `std::process::Command` `bash -c true` as the floor.
//!
//! keel's address space is what `fork` copies, so the bench first grows its own to a keel-like
//! size (`KEEL_SPAWN_BENCH_MB`, default 48 MiB of touched heap, and 16 idle threads). Run:
//! `cargo bench -p keel-plugin-tool-shell --bench spawn -- LAUNCHER [ROUNDS]` (the launcher of a
//! build: `target/debug/keel-landlock` or `target/release/keel-landlock`); medians in µs.
//! Without a launcher argument (as under `cargo test --benches`) it does nothing.

#![allow(
    clippy::expect_used,
    clippy::panic,
    reason = "a bench fails by panicking"
)]

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use keel_plugin_tool_shell::LiveGroups;
use keel_plugin_tool_shell::run::{RunSpec, run};

fn spec(program: Option<Vec<String>>) -> RunSpec {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    RunSpec {
        command: "true".into(),
        cwd: PathBuf::from("/"),
        env: vec![(OsString::from("PATH"), path)],
        timeout: Duration::from_secs(30),
        grace: Duration::from_millis(100),
        max_output_bytes: 1 << 20,
        program: program.map(|argv| (argv, "bash")),
    }
}

/// utime + stime + cutime + cstime of this process (`/proc/self/stat`), in ticks: its own
/// threads and every child it reaped (bash, the launcher).
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    let after = &stat[stat.rfind(')').expect("comm") + 2..];
    // Fields 14-17 of stat(5) are the 12th-15th after the command name.
    after
        .split_whitespace()
        .skip(11)
        .take(4)
        .map(|f| f.parse::<u64>().expect("a tick count"))
        .sum()
}

fn median(mut xs: Vec<Duration>) -> f64 {
    xs.sort();
    xs[xs.len() / 2].as_secs_f64() * 1e6
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let Some(launcher) = args.first().cloned() else {
        eprintln!("spawn bench: give the launcher's path (see the file's doc); nothing run");
        return;
    };
    let rounds: usize = args.get(1).and_then(|r| r.parse().ok()).unwrap_or(100);
    let mb: usize = std::env::var("KEEL_SPAWN_BENCH_MB")
        .ok()
        .and_then(|m| m.parse().ok())
        .unwrap_or(48);
    // A keel-sized address space: touched heap (page tables fork must copy) and threads.
    let ballast: Vec<u8> = std::hint::black_box(vec![1; mb << 20]);
    let idle: Vec<_> = (0..16)
        .map(|_| std::thread::spawn(|| std::thread::sleep(Duration::from_secs(3600))))
        .collect();
    let pid = std::process::id();
    let under = |parent: String| {
        Some(vec![
            launcher.clone(),
            "--parent".into(),
            parent,
            "--unrestricted".into(),
            "--".into(),
            "bash".into(),
            "-c".into(),
            "true".into(),
        ])
    };
    let cases: Vec<(&str, Option<Vec<String>>)> = vec![
        ("direct bash -c (no sandbox row)", None),
        (
            "launcher, posix_spawn (danger-full-access)",
            under(pid.to_string()),
        ),
        (
            "launcher, fork + pdeathsig (before)",
            under(format!("0{pid}")),
        ),
    ];
    let groups = LiveGroups::default();
    let bare = |_: &RunSpec| {
        let status = Command::new("bash")
            .args(["-c", "true"])
            .stdin(Stdio::null())
            .status()
            .expect("bash");
        assert!(status.success());
    };
    let through_tool = |s: &RunSpec| {
        let out = run(s, &groups, &|| false).expect("spawn");
        assert_eq!(out.exit_code, Some(0), "{out:?}");
    };
    let mut rows: Vec<(String, Vec<Duration>, f64)> = Vec::new();
    let mut all: Vec<(&str, Option<Vec<String>>, bool)> = cases
        .iter()
        .map(|(name, program)| (*name, program.clone(), true))
        .collect();
    all.push(("bare Command bash -c true (floor)", None, false));
    for (name, _, _) in &all {
        rows.push(((*name).to_owned(), Vec::new(), 0.0));
    }
    // Blocks of `rounds` per case, the whole sequence twice (ABCD ABCD), so a change of load
    // during the run is shared out.
    for _ in 0..2 {
        for (i, (_, program, tool)) in all.iter().enumerate() {
            let s = spec(program.clone());
            let cpu_before = cpu_ticks();
            for _ in 0..rounds {
                let t = Instant::now();
                if *tool {
                    through_tool(&s);
                } else {
                    bare(&s);
                }
                rows[i].1.push(t.elapsed());
            }
            rows[i].2 += (cpu_ticks() - cpu_before) as f64;
        }
    }
    println!(
        "spawn bench: 2 x {rounds} rounds per case, {mb} MiB touched heap, 16 idle threads, launcher {launcher}"
    );
    println!(
        "{:<46} {:>12} {:>16}",
        "case", "wall median", "CPU per spawn"
    );
    for (name, times, ticks) in rows {
        let n = times.len() as f64;
        // Ticks of 10 ms (USER_HZ = 100 on Linux), summed over the block: process and reaped children.
        let cpu_ms = ticks * 10.0 / n;
        println!("{name:<46} {:>9.0} µs {cpu_ms:>13.2} ms", median(times));
    }
    drop(ballast);
    drop(idle);
}
