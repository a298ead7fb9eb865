//! Target resolution: turning a model-supplied path into the canonical target every file tool
//! acts on and every observation is keyed by.
//!
//! [`resolve_target`] is deliberately the ONE place a path becomes a target, and
//! [`writable_target`] the ONE place a write target is fenced (FS-06): it resolves and asks the
//! sandbox (through [`FsHooks::check_write`]). The mutating tools call it before deciding and
//! again inside their critical section, so a symlinked ancestor swapped in between is seen by
//! a fresh canonicalisation, and only that fresh target is mutated.

use std::io;
use std::path::{Path, PathBuf};

use keel_plugin_api::services::protected::{refuse_read, refuse_write};
use keel_plugin_api::services::sandbox::resolve_fresh;

use crate::error::{FsError, FsErrorCode, FsResult};
use crate::hooks::FsHooks;
use crate::tools::Scope;

/// Resolves `path` (absolute, or relative to the session's `cwd`) to a canonical absolute path.
///
/// Symlinks are resolved in the deepest existing ancestor; components below it do not exist
/// yet (a file about to be created, or a missing path the caller reports as not found), so
/// they are appended lexically, with `.` dropped and `..` applied.
///
/// This is the containment seam of FS-06: the sandbox check belongs here, once, for every tool.
///
/// # Errors
/// `INVALID_ARGUMENTS` for an empty path; the B11 code of the OS error when an existing
/// ancestor cannot be resolved (permission denied, I/O).
pub fn resolve_target(cwd: &Path, path: &str) -> FsResult<PathBuf> {
    if path.is_empty() {
        return Err(FsError::invalid_args("path must not be empty"));
    }
    resolve_fresh(cwd, Path::new(path)).map_err(|e| {
        if e.error.kind() == io::ErrorKind::InvalidInput {
            FsError::invalid_args(e.error.to_string())
        } else {
            FsError::io(&e.path, &e.error)
        }
    })
}

/// [`resolve_target`] for reading: keel's home is out of reach (ARCHITECTURE §9).
///
/// # Errors
/// Those of [`resolve_target`]; `FS_SANDBOX_DENIED` for a target inside `$KEEL_HOME`.
pub fn readable_target(scope: Scope<'_>, path: &str) -> FsResult<PathBuf> {
    let target = resolve_target(scope.cwd, path)?;
    if let Some(p) = refuse_read(scope.protected, &target) {
        return Err(FsError::fs(
            FsErrorCode::SandboxDenied,
            p.refusal(&target, false),
        ));
    }
    Ok(target)
}

/// [`resolve_target`], then keel's own paths (never written, in any mode) and the sandbox's
/// write check on the result (FS-06).
///
/// # Errors
/// Those of [`resolve_target`]; `FS_SANDBOX_DENIED` from either check.
pub fn writable_target(hooks: &dyn FsHooks, scope: Scope<'_>, path: &str) -> FsResult<PathBuf> {
    let target = resolve_target(scope.cwd, path)?;
    if let Some(p) = refuse_write(scope.protected, &target) {
        return Err(FsError::fs(
            FsErrorCode::SandboxDenied,
            p.refusal(&target, true),
        ));
    }
    hooks.check_write(scope, &target)?;
    Ok(target)
}

/// FS-06 at mutation time, inside the target's critical section: resolves `path` afresh and
/// checks it again; the fresh target must still be `checked` (the one locked, decided and
/// observed), otherwise nothing is mutated.
///
/// # Errors
/// Those of [`writable_target`]; `FS_STALE_VERSION` when the path now resolves elsewhere.
pub fn recheck(
    hooks: &dyn FsHooks,
    scope: Scope<'_>,
    path: &str,
    checked: &Path,
) -> FsResult<PathBuf> {
    let fresh = writable_target(hooks, scope, path)?;
    if fresh != checked {
        return Err(FsError::fs(
            FsErrorCode::StaleVersion,
            format!(
                "{path} now resolves to {} instead of {} (a link changed); nothing was written, look again",
                fresh.display(),
                checked.display()
            ),
        ));
    }
    Ok(fresh)
}

/// The observation key of a canonical target (FS-03 keys state by it).
pub fn target_key(target: &Path) -> String {
    target.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(p: &Path) -> PathBuf {
        std::fs::canonicalize(p).unwrap()
    }

    #[test]
    fn relative_paths_resolve_against_cwd() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "x").unwrap();
        let got = resolve_target(dir.path(), "a.txt").unwrap();
        assert_eq!(got, canon(&dir.path().join("a.txt")));
        let abs = resolve_target(Path::new("/nonexistent-cwd"), &got.to_string_lossy()).unwrap();
        assert_eq!(abs, got);
    }

    #[test]
    fn missing_tail_is_appended_below_the_canonical_ancestor() {
        let dir = tempfile::tempdir().unwrap();
        let got = resolve_target(dir.path(), "new/sub/./x/../f.txt").unwrap();
        assert_eq!(got, canon(dir.path()).join("new/sub/f.txt"));
        let up = resolve_target(dir.path(), "gone/../../y").unwrap();
        assert_eq!(up, canon(dir.path()).parent().unwrap().join("y"));
    }

    #[test]
    fn symlinked_ancestors_are_resolved() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("real")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("real"), dir.path().join("link")).unwrap();
        let got = resolve_target(dir.path(), "link/new.txt").unwrap();
        assert_eq!(got, canon(&dir.path().join("real")).join("new.txt"));
    }

    #[test]
    fn empty_path_is_invalid() {
        assert_eq!(
            resolve_target(Path::new("/"), "").unwrap_err().code,
            "INVALID_ARGUMENTS"
        );
    }
}
