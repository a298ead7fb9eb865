//! Running one command (B12, SBX-01/02): `bash -c` (or `/bin/sh -c` where bash is missing) as
//! the leader of a new process group, stdin null, stdout and stderr captured by reader threads,
//! the exit waited for on a waiter thread. On timeout, cancellation or disposal the whole
//! group is terminated (SIGTERM → grace → SIGKILL); when the command exits on its own,
//! whatever it left in its group (background jobs) is killed, and the call returns only once
//! the group is gone.
//!
//! Everything here blocks; the plugin runs it on a std thread of its own.

use std::ffi::OsString;
use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::capture::{self, Shared};
use crate::group::{self, LiveGroups};

/// How often the wait loop checks for cancellation.
const TICK: Duration = Duration::from_millis(25);
/// Upper bound for a killed group to disappear, and for readers to drain afterwards.
const SETTLE: Duration = Duration::from_secs(5);
/// Shells tried in order.
const SHELLS: [&str; 2] = ["bash", "/bin/sh"];

/// What to run.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// The command line, given to the shell's `-c`.
    pub command: String,
    /// Working directory (must exist).
    pub cwd: PathBuf,
    /// The complete child environment.
    pub env: Vec<(OsString, OsString)>,
    /// Deadline for the command.
    pub timeout: Duration,
    /// Time between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// Cap per stream.
    pub max_output_bytes: usize,
    /// When set, spawn exactly this argv (a sandbox runner wrapping `[shell, -c, command]`)
    /// instead of trying the shells; the name is the shell inside it.
    pub program: Option<(Vec<String>, &'static str)>,
}

/// Why the command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// It exited by itself.
    Exited,
    /// It ran past its deadline and its group was terminated.
    TimedOut,
    /// The caller went away or the plugin is being disposed; its group was terminated.
    Cancelled,
}

/// Exit facts and output of one run.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Exit code, when it exited normally.
    pub exit_code: Option<i32>,
    /// Terminating signal, when a signal ended it.
    pub signal: Option<i32>,
    /// Why it ended.
    pub ending: Ending,
    /// Captured stdout (capped).
    pub stdout: String,
    /// Captured stderr (capped).
    pub stderr: String,
    /// Bytes cut from stdout.
    pub stdout_cut: u64,
    /// Bytes cut from stderr.
    pub stderr_cut: u64,
    /// Spawn to exit.
    pub duration: Duration,
    /// The shell used.
    pub shell: &'static str,
}

/// The command for `program argv…` with the shared settings: cwd, exactly `spec.env`, stdin
/// null, both outputs piped, its own process group.
fn command(spec: &RunSpec, program: &str, args: &[String]) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // B12: the command dies with keel (SIGKILL, OOM leave nothing running) — by its
    // parent-death signal, or by the sandbox's launcher, which watches keel itself.
    if !watches_keel(args) {
        keel_process_kit::die_with_keel(&mut cmd, "command");
    }
    cmd
}

/// Whether `args` tell the program to watch this process as its `--parent` (the sandbox's
/// launcher, `keel-landlock --parent <keel's pid> …`, which runs every command under the
/// sandbox, `danger-full-access` included). The launcher refuses to start anything unless keel
/// is still its parent and sweeps every descendant once keel is gone (B12,
/// `keel_plugin_sandbox::supervise`), so the parent-death signal adds nothing to it — and
/// without a `pre_exec` hook std spawns it with `posix_spawn` (a `vfork`: keel's page tables
/// are not copied) instead of `fork` (issue 25: per step with the sandbox off).
fn watches_keel(args: &[String]) -> bool {
    matches!(args, [flag, pid, ..] if flag == "--parent" && *pid == std::process::id().to_string())
}

fn spawn(spec: &RunSpec) -> io::Result<(Child, &'static str)> {
    if let Some((argv, shell)) = &spec.program {
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty argv"))?;
        return command(spec, program, args).spawn().map(|c| (c, *shell));
    }
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no shell found");
    for shell in SHELLS {
        let args = ["-c".to_owned(), spec.command.clone()];
        let spawned = command(spec, shell, &args).spawn();
        match spawned {
            Ok(child) => return Ok((child, shell)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => last = e,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

/// Runs `spec` to the end. `cancelled` is polled while the command runs.
///
/// # Errors
/// Only when the process (or a thread watching it) could not be started; everything after
/// that is an [`Outcome`].
pub fn run(
    spec: &RunSpec,
    groups: &LiveGroups,
    cancelled: &dyn Fn() -> bool,
) -> io::Result<Outcome> {
    let (mut child, shell) = spawn(spec)?;
    let started = Instant::now();
    let pgid = i32::try_from(child.id())
        .map_err(|_| io::Error::other("child pid does not fit a pid_t"))?;
    groups.add(pgid);
    let watched = watch(&mut child, spec.max_output_bytes);
    let (out, err, readers_done) = match watched {
        Ok(w) => w,
        Err(e) => {
            group::kill(pgid, SETTLE);
            let _ = child.wait();
            groups.remove(pgid);
            return Err(e);
        }
    };
    let (status_tx, status_rx) = mpsc::channel::<io::Result<ExitStatus>>();
    let waiter = std::thread::Builder::new()
        .name("keel-shell-wait".into())
        .spawn(move || {
            let _ = status_tx.send(child.wait());
        });
    if let Err(e) = waiter {
        group::kill(pgid, SETTLE);
        groups.remove(pgid);
        return Err(e);
    }

    let deadline = started + spec.timeout;
    let mut ending = Ending::Exited;
    let mut status = None;
    while status.is_none() {
        if cancelled() || groups.stopping() {
            ending = Ending::Cancelled;
            break;
        }
        let now = Instant::now();
        if now >= deadline {
            ending = Ending::TimedOut;
            break;
        }
        match status_rx.recv_timeout((deadline - now).min(TICK)) {
            Ok(s) => status = Some(s),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                status = Some(Err(io::Error::other("the waiter thread died")));
            }
        }
    }
    let status = match status {
        Some(s) => {
            // SBX-02: background jobs die with the call.
            group::kill(pgid, SETTLE);
            s
        }
        None => {
            group::terminate(pgid, spec.grace, SETTLE);
            status_rx
                .recv_timeout(SETTLE)
                .unwrap_or_else(|_| Err(io::Error::other("the command did not exit")))
        }
    };
    let duration = started.elapsed();
    groups.remove(pgid);

    // Readers end when the last writer (anything in the group) is gone; bounded in case a
    // process escaped the group (setsid) while holding the pipe.
    let until = Instant::now() + SETTLE;
    for _ in 0..2 {
        let left = until.saturating_duration_since(Instant::now());
        if readers_done.recv_timeout(left).is_err() {
            break;
        }
    }
    let (stdout, stdout_cut) = capture::snapshot(&out);
    let (stderr, stderr_cut) = capture::snapshot(&err);
    let (exit_code, signal) = match &status {
        Ok(s) => (s.code(), s.signal()),
        Err(_) => (None, None),
    };
    Ok(Outcome {
        exit_code,
        signal,
        ending,
        stdout,
        stderr,
        stdout_cut,
        stderr_cut,
        duration,
        shell,
    })
}

/// Starts the two reader threads; the receiver gets one `()` per finished stream.
fn watch(child: &mut Child, cap: usize) -> io::Result<(Shared, Shared, mpsc::Receiver<()>)> {
    let (done_tx, done_rx) = mpsc::channel();
    let (out, err) = (capture::shared(cap), capture::shared(cap));
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| io::Error::other("stdout was not piped"))?;
    let stderr = child
        .stderr
        .take()
        .ok_or_else(|| io::Error::other("stderr was not piped"))?;
    capture::spawn_reader("stdout", stdout, out.clone(), done_tx.clone())?;
    capture::spawn_reader("stderr", stderr, err.clone(), done_tx)?;
    Ok((out, err, done_rx))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    // Only the launcher told to watch this very process skips the parent-death signal.
    #[test]
    fn b12_only_a_launcher_watching_this_process_goes_without_the_parent_death_signal() {
        let me = std::process::id().to_string();
        assert!(watches_keel(&argv(&[
            "--parent",
            &me,
            "--unrestricted",
            "--",
            "bash"
        ])));
        assert!(!watches_keel(&argv(&["--parent", "1", "--", "bash"])));
        assert!(!watches_keel(&argv(&[
            "--parent",
            &format!("0{me}"),
            "--",
            "bash"
        ])));
        assert!(!watches_keel(&argv(&["--die-with-parent", "--", "bash"])));
        assert!(!watches_keel(&argv(&["-c", "true"])));
        assert!(!watches_keel(&argv(&["--parent"])));
    }
}
