//! The policy root (B10, SBX-05, FS-06): the row's mode and network switch, the workspace root
//! derived from a session's cwd, and path containment for the file tools.
//!
//! Both `confine` and `check_path` derive their writable roots from [`Rules::policy`], which
//! calls the one shared [`writable_roots`] function, so shell and file enforcement can never
//! disagree about where writing is allowed.

use std::io;
use std::path::{Path, PathBuf};

use keel_plugin_api::services::protected::{
    private_paths, protected_paths, refuse_read, refuse_write,
};
use keel_plugin_api::services::sandbox::{
    Access, PathVerdict, Policy, SandboxMode, denial_marker, escalation_marker, resolve_fresh,
    writable_roots,
};

/// The row's settings every call starts from.
#[derive(Debug, Clone)]
pub struct Rules {
    /// The row's mode (a call may override it).
    pub mode: SandboxMode,
    /// Whether confined processes may use the network.
    pub network: bool,
    /// The per-user temp dir (`$TMPDIR`), read once at activation.
    pub tmpdir: Option<PathBuf>,
    /// `$KEEL_HOME`, which no tool reaches in a confined mode (ARCHITECTURE §9).
    pub keel_home: Option<PathBuf>,
    /// The user's `$HOME`, whose private files ([`PRIVATE_PATHS`]) every confined process is
    /// kept from (issue 23 item 4). Read once at activation.
    ///
    /// [`PRIVATE_PATHS`]: keel_plugin_api::services::protected::PRIVATE_PATHS
    pub home: Option<PathBuf>,
}

impl Rules {
    /// The effective policy for a session whose working directory is `cwd`.
    pub fn policy(&self, cwd: &Path, mode: Option<SandboxMode>) -> Policy {
        let mode = mode.unwrap_or(self.mode);
        let workspace_root = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
        let writable_roots = writable_roots(mode, &workspace_root, self.tmpdir.as_deref());
        let (protected, private) = if mode.is_confined() {
            (
                protected_paths(self.keel_home.as_deref(), &workspace_root),
                private_paths(self.home.as_deref()),
            )
        } else {
            (Vec::new(), Vec::new())
        };
        Policy {
            mode,
            workspace_root,
            writable_roots,
            network: self.network || !mode.is_confined(),
            protected,
            private,
        }
    }

    /// FS-06: may `path` (absolute, or relative to `cwd`) be accessed? The target is
    /// canonicalised freshly here, on every call, so a symlink swapped in since an earlier
    /// check is seen.
    ///
    /// # Errors
    /// An existing ancestor that cannot be resolved (permission, I/O).
    pub fn check_path(
        &self,
        path: &Path,
        cwd: &Path,
        access: Access,
        mode: Option<SandboxMode>,
    ) -> io::Result<PathVerdict> {
        let policy = self.policy(cwd, mode);
        let resolved = resolve(cwd, path)?;
        let shielded = match access {
            Access::Read => refuse_read(&policy.protected, &resolved),
            Access::Write => refuse_write(&policy.protected, &resolved),
        };
        if let Some(p) = shielded {
            return Ok(PathVerdict {
                allowed: false,
                reason: Some(p.refusal(&resolved, access == Access::Write)),
                resolved: Some(resolved),
            });
        }
        let allowed = match (access, policy.mode) {
            (Access::Read, _) | (Access::Write, SandboxMode::DangerFullAccess) => true,
            (Access::Write, SandboxMode::ReadOnly) => false,
            (Access::Write, SandboxMode::WorkspaceWrite) => policy
                .writable_roots
                .iter()
                .any(|root| resolved.starts_with(root)),
        };
        let reason = (!allowed).then(|| denial(&policy, &resolved));
        Ok(PathVerdict {
            allowed,
            reason,
            resolved: Some(resolved),
        })
    }
}

fn denial(policy: &Policy, resolved: &Path) -> String {
    let marker = denial_marker(policy.mode);
    let hint = escalation_marker(policy.mode, "operation")
        .map(|h| format!("\n{h}"))
        .unwrap_or_default();
    if policy.writable_roots.is_empty() {
        return format!(
            "{marker} writing {} is not allowed: nothing is writable in {} mode{hint}",
            resolved.display(),
            policy.mode.as_str()
        );
    }
    let roots: Vec<String> = policy
        .writable_roots
        .iter()
        .map(|r| r.display().to_string())
        .collect();
    format!(
        "{marker} writing {} is not allowed: it resolves outside the writable roots ({}){hint}",
        resolved.display(),
        roots.join(", ")
    )
}

/// `path` against `cwd`, resolved afresh ([`resolve_fresh`], shared with the file tools).
///
/// # Errors
/// An existing ancestor that cannot be resolved for a reason other than absence.
pub fn resolve(cwd: &Path, path: &Path) -> io::Result<PathBuf> {
    resolve_fresh(cwd, path).map_err(|e| e.error)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(mode: SandboxMode) -> Rules {
        Rules {
            mode,
            network: false,
            tmpdir: None,
            keel_home: None,
            home: None,
        }
    }

    fn write(r: &Rules, ws: &Path, p: &str) -> PathVerdict {
        r.check_path(Path::new(p), ws, Access::Write, None).unwrap()
    }

    // Workspaces live outside /tmp here, so "outside" really is outside every writable root.
    use crate::test_dirs::workspace;

    // FS-06: inside is allowed, an absolute path outside is denied with the marker.
    #[test]
    fn fs06_absolute_outside_is_denied() {
        let ws = workspace();
        let r = rules(SandboxMode::WorkspaceWrite);
        assert!(write(&r, ws.path(), "new/file.txt").allowed);
        assert!(write(&r, ws.path(), "/tmp/x").allowed);
        let v = write(&r, ws.path(), "/etc/passwd");
        assert!(!v.allowed);
        let reason = v.reason.unwrap();
        assert!(
            reason.starts_with("[sandbox: file access denied under workspace-write mode]"),
            "{reason}"
        );
        assert!(
            r.check_path(Path::new("/etc/passwd"), ws.path(), Access::Read, None)
                .unwrap()
                .allowed
        );
    }

    // FS-06: `../` traversal out of the workspace is resolved and denied.
    #[test]
    fn fs06_dotdot_traversal_is_denied() {
        let ws = workspace();
        let r = rules(SandboxMode::WorkspaceWrite);
        assert!(!write(&r, ws.path(), "../escape.txt").allowed);
        assert!(!write(&r, ws.path(), "missing/../../escape.txt").allowed);
        assert!(write(&r, ws.path(), "a/../b.txt").allowed);
    }

    // FS-06: a symlink inside the workspace that points out is followed, and denied.
    #[test]
    fn fs06_symlink_pointing_out_is_denied() {
        let ws = workspace();
        let outside = workspace();
        std::os::unix::fs::symlink(outside.path(), ws.path().join("out")).unwrap();
        let r = rules(SandboxMode::WorkspaceWrite);
        let v = write(&r, ws.path(), "out/new.txt");
        assert!(!v.allowed);
        assert_eq!(
            v.resolved.unwrap(),
            std::fs::canonicalize(outside.path())
                .unwrap()
                .join("new.txt")
        );
        std::os::unix::fs::symlink("/etc/hostname", ws.path().join("f")).unwrap();
        assert!(!write(&r, ws.path(), "f").allowed);
    }

    #[test]
    fn modes_decide_writes() {
        let ws = workspace();
        let ro = rules(SandboxMode::ReadOnly);
        let v = write(&ro, ws.path(), "inside.txt");
        assert!(!v.allowed);
        assert!(
            v.reason
                .unwrap()
                .starts_with("[sandbox: file access denied under read-only mode]")
        );
        assert!(write(&rules(SandboxMode::DangerFullAccess), ws.path(), "/etc/x").allowed);
        // A call's mode overrides the row's.
        let over = ro
            .check_path(
                Path::new("inside.txt"),
                ws.path(),
                Access::Write,
                Some(SandboxMode::WorkspaceWrite),
            )
            .unwrap();
        assert!(over.allowed);
    }

    // Issue 10 items 1-3: keel's home is neither read nor written, the project's .keel is
    // read but not written, in every confined mode; danger-full-access is unfenced.
    #[test]
    fn keel_files_are_out_of_reach_in_confined_modes() {
        let ws = workspace();
        let home = workspace();
        std::fs::create_dir_all(ws.path().join(".keel")).unwrap();
        let mut r = rules(SandboxMode::WorkspaceWrite);
        r.keel_home = Some(home.path().to_path_buf());
        let check =
            |r: &Rules, p: &Path, access| r.check_path(p, ws.path(), access, None).unwrap().allowed;
        let creds = home.path().join("credentials.toml");
        let layer = ws.path().join(".keel/config.toml");
        assert!(!check(&r, &creds, Access::Read));
        assert!(!check(&r, &creds, Access::Write));
        assert!(check(&r, &layer, Access::Read));
        assert!(!check(&r, &layer, Access::Write));
        assert!(!check(&r, Path::new(".keel/new.toml"), Access::Write));
        assert!(check(&r, Path::new("src/lib.rs"), Access::Write));
        let v = r.check_path(&creds, ws.path(), Access::Read, None).unwrap();
        let reason = v.reason.unwrap();
        assert!(reason.contains("keel's own files"), "{reason}");
        assert!(!reason.contains("escalation"), "{reason}");
        r.mode = SandboxMode::ReadOnly;
        assert!(!check(&r, &creds, Access::Read));
        r.mode = SandboxMode::DangerFullAccess;
        assert!(check(&r, &creds, Access::Read));
    }

    #[test]
    fn policy_reports_roots_and_network() {
        let ws = workspace();
        let mut r = rules(SandboxMode::WorkspaceWrite);
        r.tmpdir = Some(PathBuf::from("/tmp"));
        let p = r.policy(ws.path(), None);
        assert_eq!(p.workspace_root, std::fs::canonicalize(ws.path()).unwrap());
        assert_eq!(p.writable_roots.len(), 2);
        assert!(!p.network);
        assert!(
            r.policy(ws.path(), Some(SandboxMode::DangerFullAccess))
                .network
        );
    }
}
