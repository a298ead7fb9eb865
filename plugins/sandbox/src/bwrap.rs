//! The Linux bubblewrap runner (B10, SBX-04, SBX-09): the argv that confines a command to a
//! policy, the activation probe that decides whether bwrap is usable here, and bwrap's
//! denial and runner-failure signatures.
//!
//! The whole file system is bound read-only, `/dev` and `/proc` are fresh, and each writable
//! root is bound read-write onto itself (so `/tmp` stays the host's `/tmp`, shared with the
//! file tools). Then keel's own files (ARCHITECTURE §9): `$KEEL_HOME` is masked by an empty
//! read-only tmpfs and the project's `.keel/` is bound read-only — last, so no writable bind
//! re-opens them. A missing one that a writable root could create gets the empty read-only
//! tmpfs too (bwrap leaves its mount point behind: an empty directory, which git ignores). The
//! child gets its own pid namespace and session and dies with its parent; the network
//! namespace is unshared unless the row allows the network.

use std::path::Path;
use std::process::{Command, Stdio};

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

/// Masks `$KEEL_HOME` and binds the project's `.keel/` read-only, after every writable bind.
fn shield_keel_files(policy: &Policy, out: &mut Vec<String>) {
    let mut remount = Vec::new();
    for p in &policy.protected {
        let path = p.path.to_string_lossy().into_owned();
        let creatable = policy.writable_roots.iter().any(|r| p.path.starts_with(r));
        match (p.shield, p.path.is_dir(), p.path.exists()) {
            (Shield::Hidden, true, _) => {
                out.extend(["--tmpfs".to_owned(), path.clone()]);
                remount.push(path);
            }
            (Shield::Hidden, false, true) => {
                out.extend(["--ro-bind".to_owned(), "/dev/null".to_owned(), path]);
            }
            (Shield::ReadOnly, _, true) => {
                out.extend(["--ro-bind".to_owned(), path.clone(), path]);
            }
            (_, _, false) if creatable => {
                out.extend(["--tmpfs".to_owned(), path.clone()]);
                remount.push(path);
            }
            (_, _, false) => {}
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
    };
    let full = argv(program, &policy, &["true".to_owned()]);
    let Some((bin, args)) = full.split_first() else {
        return Err("empty probe argv".to_owned());
    };
    let out = Command::new(bin)
        .args(args)
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

    // Issue 10 items 1-3: keel's home masked, the project's .keel read-only, after the binds;
    // a missing .keel under a writable root gets a read-only mount point.
    #[test]
    fn keel_files_are_masked_after_the_writable_binds() {
        use keel_plugin_api::services::protected::Protected;
        let root = tempfile::tempdir().unwrap();
        let home = root.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let ws = root.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let s = |p: &std::path::Path| p.to_string_lossy().into_owned();
        let mut p = Policy {
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
                s(&ws.join(".keel")),
                "--remount-ro".to_owned(),
                s(&home),
                "--remount-ro".to_owned(),
                s(&ws.join(".keel")),
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
        // Read-only mode: nothing can create a missing .keel, so nothing is mounted for it.
        std::fs::remove_dir(ws.join(".keel")).unwrap();
        p.writable_roots.clear();
        let got = argv("bwrap", &p, &["true".to_owned()]);
        assert!(!got.contains(&keel), "{got:?}");
    }

    // SBX-06: a missing binary is reported, never treated as usable.
    #[test]
    fn sbx06_probe_of_a_missing_binary_fails() {
        let e = probe("/nonexistent/bwrap", Path::new("/tmp"), false).unwrap_err();
        assert!(e.contains("could not be started"), "{e}");
    }
}
