//! Process-group control (SBX-01, SBX-02): every command runs as the leader of its own process
//! group, so the whole tree — background jobs, pipelines, grandchildren — is signalled at once
//! with a negative pid, and "is anything left?" is a question about the group, not one pid.
//!
//! [`LiveGroups`] tracks the groups of running calls so plugin disposal can stop and join them.

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::PoisonError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process_group, test_kill_process_group};

/// Polling interval while waiting for a group to vanish.
const POLL: Duration = Duration::from_millis(10);

/// Sends `signal` to every process in group `pgid`. Idempotent: a vanished group is a no-op.
pub fn signal_group(pgid: i32, signal: Signal) {
    if let Some(pid) = Pid::from_raw(pgid) {
        // ESRCH (nobody left) is exactly the state we want; other errors cannot be acted on.
        let _ = kill_process_group(pid, signal);
    }
}

/// Whether any live (non-zombie) process remains in group `pgid`.
///
/// `kill(-pgid, 0)` alone also counts zombies, which a reaper that is slow — or absent, as
/// in some containers — leaves behind forever; on Linux `/proc` tells live from dead.
pub fn group_alive(pgid: i32) -> bool {
    let Some(pid) = Pid::from_raw(pgid) else {
        return false;
    };
    if test_kill_process_group(pid).is_err() {
        return false;
    }
    match std::fs::read_dir("/proc") {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .any(|p| live_member(p, pgid)),
        // No /proc: trust kill(2).
        Err(_) => true,
    }
}

/// Whether `pid` is alive (not a zombie) per `/proc/<pid>/stat`, and in group `pgid` when given.
fn stat_says_live(pid: i32, pgid: Option<i32>) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // "pid (comm) S ppid pgrp …"; comm may hold spaces and parentheses.
    let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
        return false;
    };
    let mut fields = after.split_whitespace();
    let state = fields.next().unwrap_or("Z");
    let group = fields.nth(1).and_then(|g| g.parse::<i32>().ok());
    let dead = matches!(state, "Z" | "X" | "x");
    !dead && pgid.is_none_or(|want| group == Some(want))
}

fn live_member(pid: i32, pgid: i32) -> bool {
    stat_says_live(pid, Some(pgid))
}

/// Whether process `pid` is alive and not a zombie (tests check that no child survived).
pub fn process_alive(pid: i32) -> bool {
    match Pid::from_raw(pid) {
        Some(p) => rustix::process::test_kill_process(p).is_ok() && stat_says_live(pid, None),
        None => false,
    }
}

/// Waits until group `pgid` has no live member or `within` passes; true when it is gone.
pub fn wait_gone(pgid: i32, within: Duration) -> bool {
    let end = Instant::now() + within;
    loop {
        if !group_alive(pgid) {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(POLL);
    }
}

/// The SBX-01 escalation: SIGTERM to the group, up to `grace` for it to go, then SIGKILL and
/// wait (bounded by `settle`) until it is gone. Idempotent; a no-op once the tree is gone.
pub fn terminate(pgid: i32, grace: Duration, settle: Duration) -> bool {
    if !group_alive(pgid) {
        return true;
    }
    signal_group(pgid, Signal::TERM);
    if wait_gone(pgid, grace) {
        return true;
    }
    kill(pgid, settle)
}

/// SIGKILL to the group, then wait (bounded by `settle`) until it is gone.
pub fn kill(pgid: i32, settle: Duration) -> bool {
    if !group_alive(pgid) {
        return true;
    }
    signal_group(pgid, Signal::KILL);
    wait_gone(pgid, settle)
}

/// The process groups of running calls, and the "stop everything" flag disposal raises.
#[derive(Debug, Default)]
pub struct LiveGroups {
    pgids: Mutex<HashSet<i32>>,
    stopping: AtomicBool,
}

impl LiveGroups {
    /// Tracks a new group.
    pub fn add(&self, pgid: i32) {
        self.pgids
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(pgid);
    }

    /// Stops tracking a group that is gone.
    pub fn remove(&self, pgid: i32) {
        self.pgids
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&pgid);
    }

    /// How many groups are running.
    pub fn len(&self) -> usize {
        self.pgids
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Whether no group is running.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Asks every running call to terminate its tree (they see [`LiveGroups::stopping`]).
    pub fn stop_all(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }

    /// Whether disposal asked everything to stop.
    pub fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// SIGKILLs whatever groups remain (the last resort of disposal).
    pub fn kill_all(&self) {
        let pgids: Vec<i32> = self
            .pgids
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .copied()
            .collect();
        for pgid in pgids {
            signal_group(pgid, Signal::KILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};

    // SBX-01: terminate reaches every member of the group and is idempotent.
    #[test]
    fn sbx01_terminate_kills_the_whole_group_and_is_idempotent() {
        let mut child = Command::new("sh")
            .args(["-c", "sleep 100 & sleep 100 & wait"])
            .process_group(0)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let pgid = i32::try_from(child.id()).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        assert!(group_alive(pgid));
        assert!(process_alive(pgid));
        let reaper = std::thread::spawn(move || child.wait());
        assert!(terminate(
            pgid,
            Duration::from_millis(500),
            Duration::from_secs(5)
        ));
        assert!(!group_alive(pgid));
        assert!(!process_alive(pgid));
        assert!(terminate(pgid, Duration::ZERO, Duration::ZERO));
        reaper.join().unwrap().unwrap();
    }

    #[test]
    fn registry_tracks_groups_and_the_stop_flag() {
        let g = LiveGroups::default();
        g.add(1_000_000);
        assert_eq!(g.len(), 1);
        assert!(!g.stopping());
        g.stop_all();
        assert!(g.stopping());
        g.remove(1_000_000);
        assert!(g.is_empty());
    }
}
