//! `keel-process-kit`: what the plugins that spawn commands (`hooks`, `tool-shell`) share about
//! a child's life, kept once here because plugin crates may not depend on each other (issue 24
//! item 5). It owns [`die_with_keel`], the one `pre_exec` hook that ties a child to keel, so
//! the one `unsafe` block it needs is written and reviewed once. Not a plugin: a plain library.

use std::os::unix::process::CommandExt as _;
use std::process::Command;

/// B12: the child gets SIGKILL when the thread that spawned it goes away, so a keel killed
/// outright (SIGKILL, OOM) does not leave the command running; a keel that died before the
/// signal was armed starts no orphan (the spawn fails with `keel exited before the {what}
/// started`). The child's own children are covered by the caller's group kill and, when
/// confined, by the runner (bwrap's pid namespace, the Landlock launcher's parent-death signal).
#[allow(
    unsafe_code,
    reason = "pre_exec is the only way to run prctl in the child before exec"
)]
pub fn die_with_keel(cmd: &mut Command, what: &'static str) {
    let keel = rustix::process::getpid();
    // SAFETY: the closure runs between fork and exec and only makes raw prctl(2) and
    // getppid(2) syscalls through rustix (no allocation, no locks): async-signal-safe. Only
    // the failing path builds its error message, and the child then exits without exec.
    unsafe {
        cmd.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
                .map_err(std::io::Error::from)?;
            if rustix::process::getppid() != Some(keel) {
                return Err(std::io::Error::other(format!(
                    "keel exited before the {what} started"
                )));
            }
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The hook is armed and the child runs as usual while keel lives.
    #[test]
    fn a_tied_child_runs_while_keel_lives() {
        let mut cmd = Command::new("/bin/sh");
        cmd.args(["-c", "exit 3"]);
        die_with_keel(&mut cmd, "command");
        let status = cmd.status().unwrap();
        assert_eq!(status.code(), Some(3));
    }
}
