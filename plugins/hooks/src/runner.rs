//! Running one hook command: the argv (a sandbox runner's, or `bash -c`) as the leader of its
//! own process group, an allow-listed environment, the event JSON on stdin and then end of file,
//! stdout and stderr captured (capped), and a deadline: past it the whole group gets SIGTERM,
//! then SIGKILL after the grace, and the run returns only once the group is gone. When the
//! hook exits on its own, whatever it left in its group is killed too (the same rules as the
//! `shell` tool, SBX-01/02).
//!
//! Everything here blocks; [`run_async`] runs it on a std thread of its own and hands the
//! outcome back over a channel (the kernel's executor only awaits the channel).

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use futures::channel::oneshot;
use rustix::process::{Pid, Signal, kill_process_group, test_kill_process_group};

/// Bytes kept per stream.
const CAP: usize = 64 * 1024;
/// Upper bound for a killed group to go and for the readers to drain.
const SETTLE: Duration = Duration::from_secs(5);
/// Polling interval while waiting for a group to go.
const POLL: Duration = Duration::from_millis(10);

/// What to run.
#[derive(Debug, Clone)]
pub struct Spec {
    /// Program first.
    pub argv: Vec<String>,
    /// Working directory.
    pub cwd: PathBuf,
    /// The complete environment.
    pub env: Vec<(OsString, OsString)>,
    /// Written to stdin, which is then closed.
    pub stdin: Vec<u8>,
    /// Deadline.
    pub timeout: Duration,
    /// SIGTERM → SIGKILL.
    pub grace: Duration,
}

/// How one run ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Exit code when it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended it.
    pub signal: Option<i32>,
    /// Captured stdout (lossy UTF-8, capped).
    pub stdout: String,
    /// Captured stderr (lossy UTF-8, capped).
    pub stderr: String,
    /// Spawn to end.
    pub duration: Duration,
    /// It ran past its deadline and its group was killed.
    pub timed_out: bool,
    /// It could not be started (nothing ran).
    pub spawn_error: Option<String>,
}

/// [`run`] on a thread of its own.
pub async fn run_async(spec: Spec) -> Outcome {
    let (tx, rx) = oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("keel-hook".into())
        .spawn(move || {
            let _ = tx.send(run(&spec));
        });
    if let Err(e) = spawned {
        return failed(format!("no thread to run it on: {e}"));
    }
    rx.await
        .unwrap_or_else(|_| failed("the hook's worker thread died".into()))
}

fn failed(why: String) -> Outcome {
    Outcome {
        spawn_error: Some(why),
        ..Outcome::default()
    }
}

/// Runs `spec` to the end (see the module doc).
pub fn run(spec: &Spec) -> Outcome {
    let Some((program, args)) = spec.argv.split_first() else {
        return failed("empty argv".into());
    };
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // The child dies with keel, so a keel killed outright leaves no hook running (B12).
    keel_process_kit::die_with_keel(&mut cmd, "hook");
    let started = Instant::now();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return failed(format!("could not start `{program}`: {e}")),
    };
    let pgid = i32::try_from(child.id()).unwrap_or(0);
    // The event goes in on a thread of its own: a hook that never reads must not block us.
    if let Some(mut stdin) = child.stdin.take() {
        let input = spec.stdin.clone();
        let _ = std::thread::Builder::new()
            .name("keel-hook-stdin".into())
            .spawn(move || {
                let _ = stdin.write_all(&input);
            });
    }
    let (done_tx, done_rx) = mpsc::channel::<(u8, Vec<u8>)>();
    for (fd, stream) in [
        (
            1u8,
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
        ),
        (
            2u8,
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
        ),
    ] {
        if let Some(stream) = stream {
            let tx = done_tx.clone();
            let _ = std::thread::Builder::new()
                .name("keel-hook-out".into())
                .spawn(move || {
                    let _ = tx.send((fd, read_capped(stream)));
                });
        }
    }
    drop(done_tx);
    let (status_tx, status_rx) = mpsc::channel::<std::io::Result<ExitStatus>>();
    let waiter = std::thread::Builder::new()
        .name("keel-hook-wait".into())
        .spawn(move || {
            let _ = status_tx.send(child.wait());
        });
    if let Err(e) = waiter {
        kill_group(pgid);
        return failed(format!("no thread to wait on it: {e}"));
    }
    let (status, timed_out) = match status_rx.recv_timeout(spec.timeout) {
        Ok(s) => {
            // Whatever it left behind in its group dies with it (SBX-02).
            kill_group(pgid);
            (s.ok(), false)
        }
        Err(_) => {
            terminate(pgid, spec.grace);
            (
                status_rx.recv_timeout(SETTLE).ok().and_then(Result::ok),
                true,
            )
        }
    };
    let duration = started.elapsed();
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let until = Instant::now() + SETTLE;
    for _ in 0..2 {
        match done_rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok((1, bytes)) => stdout = bytes,
            Ok((_, bytes)) => stderr = bytes,
            Err(_) => break,
        }
    }
    Outcome {
        exit_code: status.and_then(|s| s.code()),
        signal: status.and_then(|s| s.signal()),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        duration,
        timed_out,
        spawn_error: None,
    }
}

/// Reads to the end, keeping the first [`CAP`] bytes.
fn read_capped(mut stream: Box<dyn Read + Send>) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let room = CAP.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    kept
}

/// Whether a live (non-zombie) member is left in group `pgid`: `kill(-pgid, 0)` alone counts
/// zombies, which a slow or absent reaper leaves forever; `/proc` tells live from dead.
fn group_alive(pgid: i32) -> bool {
    if Pid::from_raw(pgid).is_none_or(|p| test_kill_process_group(p).is_err()) {
        return false;
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .any(|pid| live_member(pid, pgid))
}

/// `/proc/<pid>/stat` is "pid (comm) S ppid pgrp …"; comm may hold spaces and parentheses.
fn live_member(pid: i32, pgid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let Some((_, after)) = stat.rsplit_once(')') else {
        return false;
    };
    let mut fields = after.split_whitespace();
    let state = fields.next().unwrap_or("Z");
    let group = fields.nth(1).and_then(|g| g.parse::<i32>().ok());
    !matches!(state, "Z" | "X" | "x") && group == Some(pgid)
}

fn signal(pgid: i32, sig: Signal) {
    if let Some(p) = Pid::from_raw(pgid) {
        // ESRCH (nobody left) is the state we want.
        let _ = kill_process_group(p, sig);
    }
}

fn wait_gone(pgid: i32, within: Duration) -> bool {
    let end = Instant::now() + within;
    while group_alive(pgid) {
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(POLL);
    }
    true
}

/// SIGKILL to the group (a no-op once it is gone).
fn kill_group(pgid: i32) {
    if group_alive(pgid) {
        signal(pgid, Signal::KILL);
        wait_gone(pgid, SETTLE);
    }
}

/// SIGTERM, up to `grace` for the group to go, then SIGKILL.
fn terminate(pgid: i32, grace: Duration) {
    signal(pgid, Signal::TERM);
    if !wait_gone(pgid, grace) {
        kill_group(pgid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(script: &str, timeout_ms: u64) -> Spec {
        Spec {
            argv: vec!["/bin/sh".into(), "-c".into(), script.into()],
            cwd: std::env::temp_dir(),
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            stdin: br#"{"hook_event_name":"Stop"}"#.to_vec(),
            timeout: Duration::from_millis(timeout_ms),
            grace: Duration::from_millis(200),
        }
    }

    #[test]
    fn stdin_goes_in_and_both_streams_and_the_exit_code_come_back() {
        let o = run(&spec("cat; echo oops >&2; exit 2", 5_000));
        assert_eq!(o.exit_code, Some(2));
        assert_eq!(o.stdout, r#"{"hook_event_name":"Stop"}"#);
        assert_eq!(o.stderr, "oops\n");
        assert!(!o.timed_out);
    }

    // A hook past its timeout is killed with its whole group: nothing survives.
    #[test]
    fn a_hanging_hook_is_killed_with_its_group() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let script = format!(
            "sleep 30 & echo $! > {}; trap '' TERM; sleep 30",
            pidfile.display()
        );
        let o = run(&spec(&script, 300));
        assert!(o.timed_out);
        assert_eq!(o.exit_code, None);
        let bg: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let gone = |pid: i32| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
                s.rsplit_once(')')
                    .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
            })
        };
        assert!(gone(bg), "the background sleep outlived the hook");
    }

    #[test]
    fn a_missing_program_is_a_spawn_error() {
        let mut s = spec("", 1_000);
        s.argv = vec!["/nonexistent/keel-hook".into()];
        assert!(
            run(&s)
                .spawn_error
                .unwrap()
                .contains("/nonexistent/keel-hook")
        );
    }
}
