//! The Linux Landlock runner (B10, SBX-04, SBX-07, SBX-09): the second link of the runner
//! chain, for hosts where bubblewrap cannot run (no user namespaces, no setuid helper).
//!
//! Landlock confines the process that asks and everything it executes, so the command runs
//! under `keel-landlock` (this crate's launcher binary): it restricts itself to the policy and
//! runs the command as its supervised child (with `--unrestricted` it supervises unconfined
//! commands too: B12, no orphans). Unlike bwrap there is no mount or pid namespace: `/tmp` is
//! the host's, and the network fence covers what the kernel's ABI can (TCP from ABI 4, UDP
//! from 10), which is why the launcher's probe reports `partial` on older kernels (SBX-07).
//!
//! keel's own files (ARCHITECTURE §9): Landlock only ever allows, so a hidden path
//! (`$KEEL_HOME`, and each of the user's private paths that exists: issue 23 item 4) is passed
//! as `--hide` and the launcher grants reading everything *beside* the path to it instead of
//! `/`. For the same reason it cannot keep a hidden path that lies
//! inside a writable root out of reach: such a policy is refused here (`SANDBOX_UNAVAILABLE`),
//! never run half-fenced. The project's read-only `.keel/` inside the writable workspace cannot
//! be carved out either: under Landlock the trust check on the project layer is its defence.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use keel_plugin_api::services::protected::Shield;
use keel_plugin_api::services::sandbox::{Confined, Enforcement, Policy, RunnerFailureRule};
use serde::Deserialize;

/// The runner's name in `confine` answers.
pub const RUNNER: &str = "landlock";
/// The launcher's file name (beside the `keel` binary).
pub const LAUNCHER: &str = "keel-landlock";

/// The launcher prefixes its own failures with this.
const FATAL_SIGNATURE: &str = "keel-landlock: ";
/// And exits with this.
const FATAL_EXIT: i32 = 125;

/// SBX-09 for the launcher: its own failures exit 125 with a `keel-landlock: ` line.
fn launcher_failure() -> RunnerFailureRule {
    RunnerFailureRule {
        allowed_exit_codes: Some(vec![FATAL_EXIT]),
        fatal_signatures: vec![FATAL_SIGNATURE.to_owned()],
        informational_lines: Vec::new(),
    }
}

/// Where the launcher is: `configured` when set, else beside the running executable (`bin/`
/// of a dist, `target/<profile>/` in a build).
pub fn launcher_path(configured: &str) -> PathBuf {
    if !configured.is_empty() {
        return PathBuf::from(configured);
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join(LAUNCHER)))
        .unwrap_or_else(|| PathBuf::from(LAUNCHER))
}

/// Every path Landlock must leave out of its grants: the hidden protected ones and the
/// private ones.
fn hidden(policy: &Policy) -> impl Iterator<Item = &Path> {
    policy
        .protected
        .iter()
        .filter(|p| p.shield == Shield::Hidden)
        .map(|p| p.path.as_path())
        .chain(policy.private.iter().map(PathBuf::as_path))
}

/// `--parent PID` (this process: keel), which the launcher watches (B12).
fn parent_args() -> [String; 2] {
    ["--parent".to_owned(), std::process::id().to_string()]
}

/// The argv running `argv` under the launcher with `policy`.
pub fn argv(launcher: &str, policy: &Policy, argv: &[String]) -> Vec<String> {
    let mut out = vec![launcher.to_owned()];
    out.extend(parent_args());
    for root in &policy.writable_roots {
        out.push("--rw".to_owned());
        out.push(root.to_string_lossy().into_owned());
    }
    for hidden in hidden(policy) {
        out.push("--hide".to_owned());
        out.push(hidden.to_string_lossy().into_owned());
    }
    if policy.network {
        out.push("--net".to_owned());
    }
    out.push("--".to_owned());
    out.extend(argv.iter().cloned());
    out
}

/// Why Landlock cannot enforce `policy`, if it cannot: a hidden path inside a writable root
/// (a grant on the root would open it, and Landlock has no way to take part of a grant back).
pub fn unenforceable(policy: &Policy) -> Option<String> {
    hidden(policy).find_map(|p| {
        let root = policy.writable_roots.iter().find(|r| p.starts_with(r))?;
        Some(format!(
            "landlock cannot keep {} out of reach: it lies inside the writable root {} \
             (move it, or the workspace, out of there, or install bubblewrap)",
            p.display(),
            root.display()
        ))
    })
}

/// The `confine` answer for a Landlock-wrapped command.
pub fn confined(
    launcher: &str,
    enforcement: Enforcement,
    policy: &Policy,
    command: &[String],
) -> Confined {
    Confined {
        argv: argv(launcher, policy, command),
        enforcement,
        runner: RUNNER.to_owned(),
        mode: policy.mode,
        // Landlock refuses with EACCES; shells and coreutils print it like this.
        denial_signatures: vec!["Permission denied".to_owned()],
        runner_failure: launcher_failure(),
        shielded: crate::runner::shielded(policy),
    }
}

/// The `confine` answer in `danger-full-access` when the launcher is installed: no fence, but
/// the launcher supervises the command (`--unrestricted`), so a keel killed outright leaves no
/// orphans (B12).
pub fn supervised(launcher: &str, command: &[String]) -> Confined {
    let mut argv = supervisor_prefix(launcher);
    argv.extend(command.iter().cloned());
    Confined {
        argv,
        enforcement: Enforcement::None,
        runner: "none".to_owned(),
        mode: keel_plugin_api::services::sandbox::SandboxMode::DangerFullAccess,
        denial_signatures: Vec::new(),
        runner_failure: launcher_failure(),
        shielded: Vec::new(),
    }
}

/// The launcher as a supervisor only (no fence), up to and including `--`: what runs in front
/// of `danger-full-access` commands and of bubblewrap, so a keel killed outright takes every
/// descendant with it (issue 23 item 7).
pub fn supervisor_prefix(launcher: &str) -> Vec<String> {
    let mut argv = vec![launcher.to_owned()];
    argv.extend(parent_args());
    argv.extend(["--unrestricted".to_owned(), "--".to_owned()]);
    argv
}

/// [`launcher_failure`] added to `rule` (bubblewrap under the supervisor).
pub fn with_launcher_failure(mut rule: RunnerFailureRule) -> RunnerFailureRule {
    let ours = launcher_failure();
    if let Some(codes) = rule.allowed_exit_codes.as_mut() {
        codes.extend(ours.allowed_exit_codes.unwrap_or_default());
    }
    rule.fatal_signatures.extend(ours.fatal_signatures);
    rule
}

#[derive(Deserialize)]
struct ProbeAnswer {
    abi: u32,
    enforcement: Enforcement,
}

/// Whether the launcher can restrict itself here, and how completely: `Ok((enforcement,
/// abi))`, or why not.
///
/// # Errors
/// A description of why Landlock is unusable (no launcher, kernel without Landlock, …).
pub fn probe(launcher: &Path, network: bool) -> Result<(Enforcement, u32), String> {
    let mut cmd = Command::new(launcher);
    cmd.arg("--probe")
        .env_clear()
        .envs(keel_plugin_api::services::child_env::ChildEnv::from_process(&[], &[]).into_vec());
    if network {
        cmd.arg("--net");
    }
    let out = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .output()
        .map_err(|e| format!("{} could not be started: {e}", launcher.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} cannot confine processes here ({}): {}",
            launcher.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let answer: ProbeAnswer = serde_json::from_slice(&out.stdout).map_err(|e| {
        format!(
            "{} answered its probe with something unexpected: {e}",
            launcher.display()
        )
    })?;
    Ok((answer.enforcement, answer.abi))
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_plugin_api::services::sandbox::SandboxMode;

    #[test]
    fn argv_lists_the_writable_roots_and_the_network_switch() {
        let policy = Policy {
            mode: SandboxMode::WorkspaceWrite,
            workspace_root: PathBuf::from("/w"),
            writable_roots: vec![PathBuf::from("/w"), PathBuf::from("/tmp")],
            network: false,
            protected: vec![keel_plugin_api::services::protected::Protected {
                path: PathBuf::from("/home/u/.keel"),
                shield: Shield::Hidden,
            }],
            private: vec![PathBuf::from("/home/u/.ssh")],
        };
        let pid = std::process::id().to_string();
        let got = argv(
            "/bin/keel-landlock",
            &policy,
            &["sh".into(), "-c".into(), "x".into()],
        );
        assert_eq!(
            got,
            [
                "/bin/keel-landlock",
                "--parent",
                &pid,
                "--rw",
                "/w",
                "--rw",
                "/tmp",
                "--hide",
                "/home/u/.keel",
                "--hide",
                "/home/u/.ssh",
                "--",
                "sh",
                "-c",
                "x"
            ]
        );
        assert_eq!(unenforceable(&policy), None);
        let inside = Policy {
            writable_roots: vec![PathBuf::from("/home/u")],
            ..policy.clone()
        };
        let why = unenforceable(&inside).unwrap();
        assert!(why.contains("/home/u/.keel"), "{why}");
        // Issue 23 item 4: a private path inside a writable root cannot be kept out either.
        let private_inside = Policy {
            writable_roots: vec![PathBuf::from("/home/u/.ssh")],
            protected: Vec::new(),
            ..policy.clone()
        };
        assert!(
            unenforceable(&private_inside)
                .unwrap()
                .contains("/home/u/.ssh")
        );
        let open = Policy {
            network: true,
            writable_roots: Vec::new(),
            protected: Vec::new(),
            private: Vec::new(),
            ..policy
        };
        assert_eq!(
            argv("l", &open, &["true".into()]),
            ["l", "--parent", &pid, "--net", "--", "true"]
        );
    }

    // SBX-09: the launcher's failure needs exit 125 and its own line; a child exiting 1 with a
    // "Permission denied" is the child's failure, not the runner's.
    #[test]
    fn sbx09_launcher_failures_are_told_from_the_childs() {
        let policy = Policy {
            mode: SandboxMode::ReadOnly,
            workspace_root: PathBuf::from("/w"),
            writable_roots: Vec::new(),
            network: false,
            protected: Vec::new(),
            private: Vec::new(),
        };
        let c = confined("l", Enforcement::Partial, &policy, &["true".into()]);
        let rule = &c.runner_failure;
        assert!(rule.is_runner_failure(Some(125), "keel-landlock: cannot run x: not found\n"));
        assert!(!rule.is_runner_failure(Some(1), "keel-landlock: cannot run x\n"));
        assert!(!rule.is_runner_failure(Some(1), "grep: no match\n"));
        assert!(!rule.is_runner_failure(Some(125), "sh: /x: Permission denied\n"));
    }
}
