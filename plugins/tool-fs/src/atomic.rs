//! Atomic publication of file content: a temp file in the target's directory, written and
//! synced, then renamed over the target (replace) or hard-linked into place (create), so a
//! reader never sees a half-written file and a create never replaces a file that appeared in
//! the meantime (FS-04 create-if-absent).

use std::fs::{self, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Mode of a newly created file (the tools do not know the user's umask without `unsafe`).
const NEW_FILE_MODE: u32 = 0o644;

/// How the temp file is published.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Publish {
    /// Only if nothing exists at the target: `AlreadyExists` otherwise (link-based, O_EXCL
    /// semantics).
    Create,
    /// Atomically replaces whatever is there, keeping an existing file's permissions.
    Replace,
}

/// Writes `bytes` to `target` atomically, creating missing parent directories.
///
/// # Errors
/// The OS error; `AlreadyExists` for [`Publish::Create`] when the target exists.
pub fn publish(target: &Path, bytes: &[u8], how: Publish) -> io::Result<()> {
    let dir = target
        .parent()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "target has no parent"))?;
    fs::create_dir_all(dir)?;
    let permissions = match (how, fs::metadata(target)) {
        (Publish::Replace, Ok(meta)) if meta.is_file() => meta.permissions(),
        _ => Permissions::from_mode(NEW_FILE_MODE),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".keel-write-")
        .suffix(".tmp")
        .permissions(permissions)
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    match how {
        Publish::Create => tmp.persist_noclobber(target).map_err(|e| e.error)?,
        Publish::Replace => tmp.persist(target).map_err(|e| e.error)?,
    };
    // Make the rename itself durable; a failure here does not undo the write.
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_makes_parents_and_refuses_an_existing_target() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("a/b/c.txt");
        publish(&t, b"one", Publish::Create).unwrap();
        assert_eq!(fs::read(&t).unwrap(), b"one");
        let e = publish(&t, b"two", Publish::Create).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read(&t).unwrap(), b"one");
        // No temp files are left behind.
        let names: Vec<_> = fs::read_dir(dir.path().join("a/b")).unwrap().collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn replace_keeps_permissions() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("x.sh");
        fs::write(&t, "old").unwrap();
        fs::set_permissions(&t, Permissions::from_mode(0o755)).unwrap();
        publish(&t, b"new", Publish::Replace).unwrap();
        assert_eq!(fs::read(&t).unwrap(), b"new");
        assert_eq!(
            fs::metadata(&t).unwrap().permissions().mode() & 0o777,
            0o755
        );
    }
}
