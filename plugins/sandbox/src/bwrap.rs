//! The Linux bubblewrap runner (B10, SBX-04, SBX-09): the argv that confines a command to a
//! policy, the activation probe that decides whether bwrap is usable here, and bwrap's
//! denial and runner-failure signatures.
//!
//! The whole file system is bound read-only, `/dev` and `/proc` are fresh, and each writable
//! root is bound read-write onto itself (so `/tmp` stays the host's `/tmp`, shared with the
//! file tools). Then keel's own files (ARCHITECTURE §9) and the user's private ones (issue 23
//! item 4: `~/.ssh`, `~/.gnupg`, `~/.aws/credentials`, `~/.netrc`): `$KEEL_HOME` and each
//! private directory are masked by an empty read-only tmpfs, a private file by `/dev/null`,
//! and the project's `.keel/` and `.claude/` are bound read-only — last, so no writable bind
//! re-opens them. Only paths that exist are mounted over (issue 23 item 18): a mount point
//! bwrap had to create would be an empty directory left in the user's workspace. A `.keel/`
//! the command creates during the run is the project-trust check's to catch: a file changed
//! during a run is not trusted later. The child gets its own pid namespace and session and
//! dies with its parent; the network namespace is unshared unless the row allows the network.

use std::path::Path;
use std::process::{Command, Stdio};

use keel_plugin_api::services::child_env::ChildEnv;
use keel_plugin_api::services::protected::Shield;
use keel_plugin_api::services::sandbox::{
    Confined, Enforcement, Policy, RunnerFailureRule, SandboxMode,
};

/// The runner's name in `confine` answers.
pub const RUNNER: &str = "bwrap";

/// bwrap prefixes its own fatal errors with this (`bwrap: Can't mount proc …`).
const FATAL_SIGNATURE: &str = "bwrap: ";
/// bwrap's own failures exit with this code.
const FATAL_EXIT: i32 = 1;

/// The argv running `argv` under `program` (the bwrap binary) with `policy`.
pub fn argv(program: &str, policy: &Policy, argv: &[String]) -> Vec<String> {
    let mut out: Vec<String> = [
        program,
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    // Parents before children, so a nested root is bound on top of its parent's bind.
    let mut roots = policy.writable_roots.clone();
    roots.sort_by_key(|r| r.components().count());
    for root in roots {
        let root = root.to_string_lossy().into_owned();
        out.extend(["--bind".to_owned(), root.clone(), root]);
    }
    shield_keel_files(policy, &mut out);
    out.extend(
        ["--die-with-parent", "--unshare-pid", "--new-session"]
            .iter()
            .map(|s| (*s).to_owned()),
    );
    if !policy.network {
        out.push("--unshare-net".to_owned());
    }
    out.push("--".to_owned());
    out.extend(argv.iter().cloned());
    out
}

/// Masks `$KEEL_HOME` and the private paths and binds the project's `.keel/` and `.claude/`
/// read-only, after every writable bind; a path that does not exist is left alone (nothing is
/// created in the workspace).
fn shield_keel_files(policy: &Policy, out: &mut Vec<String>) {
    let mut remount = Vec::new();
    let hidden = policy
        .protected
        .iter()
        .map(|p| (p.path.as_path(), p.shield))
        .chain(policy.private.iter().map(|p| (p.as_path(), Shield::Hidden)));
    for (path, shield) in hidden {
        let text = path.to_string_lossy().into_owned();
        match (shield, path.is_dir(), path.exists()) {
            (_, _, false) => {}
            (Shield::Hidden, true, _) => {
                out.extend(["--tmpfs".to_owned(), text.clone()]);
                remount.push(text);
            }
            (Shield::Hidden, false, true) => {
                out.extend(["--ro-bind".to_owned(), "/dev/null".to_owned(), text]);
            }
            (Shield::ReadOnly, _, true) => {
                out.extend(["--ro-bind".to_owned(), text.clone(), text]);
            }
        }
    }
    for path in remount {
        out.extend(["--remount-ro".to_owned(), path]);
    }
}

/// The `confine` answer for a bwrap-wrapped command.
pub fn confined(program: &str, policy: &Policy, command: &[String]) -> Confined {
    Confined {
        argv: argv(program, policy, command),
        enforcement: Enforcement::Full,
        runner: RUNNER.to_owned(),
        mode: policy.mode,
        denial_signatures: vec!["Read-only file system".to_owned()],
        runner_failure: RunnerFailureRule {
            allowed_exit_codes: Some(vec![FATAL_EXIT]),
            fatal_signatures: vec![FATAL_SIGNATURE.to_owned()],
            informational_lines: Vec::new(),
        },
        shielded: crate::runner::shielded(policy),
    }
}

/// Whether `program` can confine a trivial command the way a workspace-write policy rooted at
/// `root` would: `Ok(())`, or why not (missing binary, no user namespaces, …).
///
/// # Errors
/// A description of why bwrap is unusable.
pub fn probe(program: &str, root: &Path, network: bool) -> Result<(), String> {
    let policy = Policy {
        mode: SandboxMode::WorkspaceWrite,
        workspace_root: root.to_path_buf(),
        writable_roots: vec![root.to_path_buf()],
        network,
        protected: Vec::new(),
        private: Vec::new(),
    };
    let full = argv(program, &policy, &["true".to_owned()]);
    let Some((bin, args)) = full.split_first() else {
        return Err("empty probe argv".to_owned());
    };
    let out = Command::new(bin)
        .args(args)
        .env_clear()
        .envs(ChildEnv::from_process(&[], &[]).into_vec())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("{program} could not be started: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{program} cannot confine processes here ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn policy(network: bool) -> Policy {
        Policy {
            mode: SandboxMode::WorkspaceWrite,
            workspace_root: PathBuf::from("/tmp/ws"),
            writable_roots: vec![PathBuf::from("/tmp/ws"), PathBuf::from("/tmp")],
            network,
            protected: Vec::new(),
            private: Vec::new(),
        }
    }

    // B10 / SBX-04: the exact bwrap argv shape.
    #[test]
    fn b10_bwrap_argv_shape() {
        let cmd = vec!["bash".to_owned(), "-c".to_owned(), "echo hi".to_owned()];
        let got = argv("/usr/bin/bwrap", &policy(false), &cmd);
        let want: Vec<&str> = vec![
            "/usr/bin/bwrap",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--bind",
            "/tmp",
            "/tmp",
            "--bind",
            "/tmp/ws",
            "/tmp/ws",
            "--die-with-parent",
            "--unshare-pid",
            "--new-session",
            "--unshare-net",
            "--",
            "bash",
            "-c",
            "echo hi",
        ];
        assert_eq!(got, want);
        let open = argv("bwrap", &policy(true), &cmd);
        assert!(!open.iter().any(|a| a == "--unshare-net"));
        let ro = Policy {
            mode: SandboxMode::ReadOnly,
            writable_roots: Vec::new(),
            ..policy(false)
        };
        assert!(!argv("bwrap", &ro, &cmd).iter().any(|a| a == "--bind"));
    }

    // Issue 10 items 1-3, issue 23 items 4 and 18: keel's home and the private paths masked,
    // the project's .keel read-only, after the binds; a missing path gets no mount point.
    #[test]
    fn keel_files_are_masked_after_the_writable_binds() {
        use keel_plugin_api::services::protected::Protected;
        let root = tempfile::tempdir().unwrap();
        let home = root.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let ws = root.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let ssh = root.path().join("user/.ssh");
        std::fs::create_dir_all(&ssh).unwrap();
        let netrc = root.path().join("user/.netrc");
        std::fs::write(&netrc, "machine x").unwrap();
        let s = |p: &std::path::Path| p.to_string_lossy().into_owned();
        let p = Policy {
            mode: SandboxMode::WorkspaceWrite,
            workspace_root: ws.clone(),
            writable_roots: vec![ws.clone()],
            network: false,
            protected: vec![
                Protected {
                    path: home.clone(),
                    shield: Shield::Hidden,
                },
                Protected {
                    path: ws.join(".keel"),
                    shield: Shield::ReadOnly,
                },
            ],
            private: vec![ssh.clone(), netrc.clone()],
        };
        let got = argv("bwrap", &p, &["true".to_owned()]);
        let tail: Vec<String> = got
            .iter()
            .skip_while(|a| *a != "--bind")
            .take_while(|a| *a != "--die-with-parent")
            .cloned()
            .collect();
        assert_eq!(
            tail,
            [
                "--bind".to_owned(),
                s(&ws),
                s(&ws),
                "--tmpfs".to_owned(),
                s(&home),
                "--tmpfs".to_owned(),
                s(&ssh),
                "--ro-bind".to_owned(),
                "/dev/null".to_owned(),
                s(&netrc),
                "--remount-ro".to_owned(),
                s(&home),
                "--remount-ro".to_owned(),
                s(&ssh),
            ]
        );
        std::fs::create_dir_all(ws.join(".keel")).unwrap();
        let got = argv("bwrap", &p, &["true".to_owned()]);
        let keel = s(&ws.join(".keel"));
        assert!(
            got.windows(3)
                .any(|w| w[0] == "--ro-bind" && w[1] == keel && w[2] == keel),
            "{got:?}"
        );
    }

    // SBX-06: a missing binary is reported, never treated as usable.
    #[test]
    fn sbx06_probe_of_a_missing_binary_fails() {
        let e = probe("/nonexistent/bwrap", Path::new("/tmp"), false).unwrap_err();
        assert!(e.contains("could not be started"), "{e}");
    }
}
