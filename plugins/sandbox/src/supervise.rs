//! The launcher's supervision (B12, issue 23 items 7 and 8): `keel-landlock` runs every
//! confined process keel starts — a `shell` command, a hook, an MCP stdio server, with
//! bubblewrap or Landlock, or none in `danger-full-access` — as its child, and makes sure no
//! descendant outlives it.
//!
//! The launcher is a *child subreaper* (`PR_SET_CHILD_SUBREAPER`): whatever its command starts
//! and orphans — a `setsid` grandchild, bubblewrap's sandbox init whose monitor died, a
//! double-forked daemon — is re-parented to the launcher, never to PID 1, so [`sweep`] can
//! find every descendant by walking `/proc` from this process down, and kills them until none
//! is left. A sweep runs when the command ends (so nothing it started survives it, whatever
//! session or group it moved to), and when keel is gone ([`watch`]: keel's pid, given
//! as `--parent`, is no longer the parent, even after a SIGKILL of keel). SIGTERM, SIGINT and
//! SIGHUP sent to the launcher (the runner's timeout, disposal) are passed on to every
//! descendant, and shortly after, the descendants that left the launcher's process group (the
//! runner's group kill cannot reach them) are killed ([`watch`]).
//!
//! The launcher starts nothing unless keel (`--parent`) is still its parent ([`take_over_from`]),
//! so a keel that dies before the launcher runs leaves nothing; a keel that dies later is seen
//! by [`watch`]. The hooks arm a parent-death SIGKILL on it before exec as well, which the
//! launcher clears (it must outlive keel long enough to sweep) and checks again; the `shell`
//! tool does not (issue 25: without a `pre_exec` hook std spawns the launcher with
//! `posix_spawn` instead of forking keel).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitOptions};

/// How often the watch checks that keel is still the parent.
pub const PARENT_POLL: Duration = Duration::from_millis(20);
/// How long a sweep may take before it gives up.
const SWEEP_LIMIT: Duration = Duration::from_secs(5);
/// Stack of the watch thread: it holds a process table and little else (the
/// default 2 MiB mapping is time on every command's path).
const THREAD_STACK: usize = 256 * 1024;
/// Time between passing a signal on and killing the descendants that left the group.
const ESCAPED_GRACE: Duration = Duration::from_millis(200);

/// `pid → (ppid, process group)` of every live (non-zombie) process, from `/proc`.
fn process_table() -> HashMap<i32, (i32, i32)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return HashMap::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // "pid (comm) S ppid pgrp …"; comm may hold spaces and parentheses.
            let after = &stat[stat.rfind(')')? + 1..];
            let mut fields = after.split_whitespace();
            let state = fields.next()?;
            let ppid = fields.next()?.parse().ok()?;
            let pgrp = fields.next()?.parse().ok()?;
            (!matches!(state, "Z" | "X" | "x")).then_some((pid, (ppid, pgrp)))
        })
        .collect()
}

/// Every live descendant of `root` with its process group.
pub fn descendants(root: i32) -> Vec<(i32, i32)> {
    let table = process_table();
    let mut out = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for (pid, (ppid, pgrp)) in &table {
            if *ppid == parent && *pid != root {
                out.push((*pid, *pgrp));
                frontier.push(*pid);
            }
        }
    }
    out
}

fn signal(pid: i32, sig: Signal) {
    if let Some(p) = Pid::from_raw(pid) {
        // A process that is already gone is what we want.
        let _ = rustix::process::kill_process(p, sig);
    }
}

/// True when this process has no child at all, running or exited. Every descendant of a
/// subreaper sits under a living child of its own (an orphan is re-parented here, and a
/// command's children are re-parented before the command can be reaped), so no child means no
/// descendant and the `/proc` walk — about 1 ms per command on a quiet machine, more on a busy
/// one — is skipped (issue 25: per step with the sandbox off).
fn has_no_children() -> bool {
    use rustix::process::{WaitId, WaitIdOptions};
    let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
    matches!(
        rustix::process::waitid(WaitId::All, options),
        Err(rustix::io::Errno::CHILD)
    )
}

/// Reaps every child that has exited, without waiting.
fn reap() {
    while rustix::process::waitpid(None, WaitOptions::NOHANG).is_ok_and(|r| r.is_some()) {}
}

/// SIGKILLs every descendant of this process, again and again (a killed process's children
/// are re-parented here, a subreaper), until none is left or the limit passes; reaps them.
/// True when none is left.
pub fn sweep() -> bool {
    let me = rustix::process::getpid().as_raw_nonzero().get();
    let end = Instant::now() + SWEEP_LIMIT;
    loop {
        if has_no_children() {
            return true;
        }
        let left = descendants(me);
        if left.is_empty() {
            reap();
            return true;
        }
        for (pid, _) in &left {
            signal(*pid, Signal::KILL);
        }
        reap();
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Makes this process the subreaper of its descendants.
///
/// # Errors
/// The kernel refused (`prctl`).
pub fn become_subreaper() -> Result<(), String> {
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))
        .map_err(|e| format!("cannot become the subreaper of the command: {e}"))
}

/// Clears the parent-death signal keel armed, after checking `parent` is still the parent
/// (while the signal was armed, a dead keel would already have killed this process).
///
/// # Errors
/// keel is gone already, or the signal cannot be cleared.
pub fn take_over_from(parent: Pid) -> Result<(), String> {
    let gone = || "keel exited before the command started".to_owned();
    if rustix::process::getppid() != Some(parent) {
        return Err(gone());
    }
    rustix::process::set_parent_process_death_signal(None)
        .map_err(|e| format!("cannot clear the parent-death signal: {e}"))?;
    if rustix::process::getppid() != Some(parent) {
        return Err(gone());
    }
    Ok(())
}

/// The termination signals the launcher passes on, caught from now (before the command
/// starts, so none is lost); [`watch`] handles them.
///
/// # Errors
/// The handlers cannot be installed.
pub fn catch_signals() -> Result<signal_hook::iterator::Signals, String> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP])
        .map_err(|e| format!("cannot catch termination signals: {e}"))
}

/// On one thread, every [`PARENT_POLL`]: when `parent` is no longer this process's parent
/// (keel died, even by SIGKILL), sweeps every descendant and exits with `code`; SIGTERM,
/// SIGINT and SIGHUP caught by `signals` are passed on to every descendant, and
/// [`ESCAPED_GRACE`] later the descendants outside this process's group (which the sender's
/// group kill cannot reach) are killed. The launcher itself keeps running and sweeps when its
/// command ends. One thread, not one per duty: creating it is on every command's path.
pub fn watch(parent: Pid, code: i32, mut signals: signal_hook::iterator::Signals) {
    let spawned = std::thread::Builder::new()
        .name("keel-landlock-watch".into())
        .stack_size(THREAD_STACK)
        .spawn(move || {
            let me = rustix::process::getpid().as_raw_nonzero().get();
            let group = rustix::process::getpgrp().as_raw_nonzero().get();
            loop {
                std::thread::sleep(PARENT_POLL);
                if rustix::process::getppid() != Some(parent) {
                    sweep();
                    std::process::exit(code);
                }
                let caught: Vec<Signal> = signals
                    .pending()
                    .filter_map(Signal::from_named_raw)
                    .collect();
                for sig in caught {
                    for (pid, _) in descendants(me) {
                        signal(pid, sig);
                    }
                    std::thread::sleep(ESCAPED_GRACE);
                    for (pid, pgrp) in descendants(me) {
                        if pgrp != group {
                            signal(pid, Signal::KILL);
                        }
                    }
                }
            }
        });
    if let Err(e) = spawned {
        eprintln!("keel-landlock: no parent watch, orphans possible: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    // The walk finds a grandchild that left the group and session (setsid).
    #[test]
    fn descendants_include_a_setsid_grandchild() {
        let mut child = Command::new("sh")
            .args(["-c", "setsid sleep 30 & echo $!; wait"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
            &mut line,
        )
        .unwrap();
        let grandchild: i32 = line.trim().parse().unwrap();
        let me = rustix::process::getpid().as_raw_nonzero().get();
        let found: Vec<i32> = descendants(me).into_iter().map(|(p, _)| p).collect();
        assert!(found.contains(&grandchild), "{found:?} lacks {grandchild}");
        signal(grandchild, Signal::KILL);
        let _ = child.wait();
    }
}
