//! Target resolution: turning a model-supplied path into the canonical target every file tool
//! acts on and every observation is keyed by.
//!
//! [`resolve_target`] is deliberately the ONE place a path becomes a target. FS-06
//! (`workspace-write` containment with TOCTOU protection) plugs in here later: it re-runs this
//! resolution at mutation time and checks the fresh result against the writable roots. Today it
//! only resolves relative paths against the session's working root and canonicalises.

use std::ffi::OsString;
use std::io;
use std::path::{Component, Path, PathBuf};

use crate::error::{FsError, FsResult};

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
    let joined = if Path::new(path).is_absolute() {
        PathBuf::from(path)
    } else {
        cwd.join(path)
    };
    let components: Vec<Component<'_>> = joined.components().collect();
    // The longest prefix that canonicalises; everything after it does not exist (yet).
    for split in (1..=components.len()).rev() {
        let prefix: PathBuf = components[..split].iter().collect();
        match std::fs::canonicalize(&prefix) {
            Ok(base) => return Ok(append_missing(base, &components[split..])),
            Err(e) if is_missing(&e) => {}
            Err(e) => return Err(FsError::io(&prefix, &e)),
        }
    }
    Err(FsError::invalid_args(format!(
        "cannot resolve {path} against {}",
        cwd.display()
    )))
}

/// The observation key of a canonical target (FS-03 keys state by it).
pub fn target_key(target: &Path) -> String {
    target.to_string_lossy().into_owned()
}

fn is_missing(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

fn append_missing(mut base: PathBuf, rest: &[Component<'_>]) -> PathBuf {
    let mut tail: Vec<OsString> = Vec::new();
    for c in rest {
        match c {
            Component::Normal(name) => tail.push(name.to_os_string()),
            Component::ParentDir => {
                if tail.pop().is_none() {
                    // `base` is canonical, so its parent is the real parent.
                    base.pop();
                }
            }
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    base.extend(tail);
    base
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
