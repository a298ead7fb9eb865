//! Test support: workspaces that lie outside every writable root, so that "outside the
//! workspace" in a test is outside `/tmp` and `$TMPDIR` too, wherever the checkout lives (a CI
//! clone under `/tmp` made the crate directory itself writable).

use std::path::{Path, PathBuf};

fn under(path: &Path, root: &Path) -> bool {
    let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    path.starts_with(root)
}

/// A fresh directory outside `/tmp` and `$TMPDIR`: under `$HOME`, `/var/tmp` or this crate.
pub fn workspace() -> tempfile::TempDir {
    let tmpdir = std::env::var_os("TMPDIR").map(PathBuf::from);
    let candidates = [
        std::env::var_os("HOME").map(PathBuf::from),
        Some(PathBuf::from("/var/tmp")),
        Some(PathBuf::from(env!("CARGO_MANIFEST_DIR"))),
    ];
    for dir in candidates.into_iter().flatten() {
        let Ok(real) = std::fs::canonicalize(&dir) else {
            continue;
        };
        if under(&real, Path::new("/tmp")) || tmpdir.as_deref().is_some_and(|t| under(&real, t)) {
            continue;
        }
        if let Ok(ws) = tempfile::Builder::new()
            .prefix("keel-sbx-test-")
            .tempdir_in(&real)
        {
            return ws;
        }
    }
    panic!("no writable directory outside /tmp and $TMPDIR for a sandbox test workspace");
}
