//! The one-live-writer rule: `claim` takes an exclusive, non-blocking `flock` on
//! `<root>/<id>.lock` and keeps the open file until `release` (or until the store is dropped or
//! the process exits, when the kernel drops the lock). A second claim, from this store or any
//! other open file description, is refused. Shared by every session-store backend.
//!
//! `release` removes the lock file, so a run leaves none behind (issue 23 item 8). It unlinks
//! the path while still holding the lock, then closes the file. That opens one race, closed in
//! `claim`: another process may have opened the old file before the unlink and gets its lock
//! once this one closes it, holding a lock on a file no path names any more while a third
//! process creates a fresh `<id>.lock` and locks that. So after its `flock` succeeds, `claim`
//! checks that the path still names the very file it locked (same device and inode) and, if
//! not, lets go and starts over with whatever the path names now.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rustix::fs::{FlockOperation, flock};

use crate::error::KitError;

/// How often `claim` starts over when the lock file it locked was removed under it; each
/// round means another writer released in between, so this is never reached in practice.
const CLAIM_ROUNDS: usize = 64;

/// The locks this store holds: the open lock file and its path, by session id.
#[derive(Debug, Default)]
pub struct Locks {
    held: Mutex<HashMap<String, (File, PathBuf)>>,
}

impl Locks {
    /// Takes the writer lock of `id`; `root` must exist.
    pub fn claim(&self, root: &Path, id: &str) -> Result<(), KitError> {
        let path = lock_path(root, id);
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let locked = || KitError::Locked {
            id: id.to_owned(),
            path: path.clone(),
        };
        if held.contains_key(id) {
            return Err(locked());
        }
        for _ in 0..CLAIM_ROUNDS {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(&path)
                .map_err(|e| KitError::io("create lock file", &path, e))?;
            match flock(&file, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => {}
                Err(rustix::io::Errno::WOULDBLOCK) => return Err(locked()),
                Err(e) => return Err(KitError::io("flock", &path, std::io::Error::from(e))),
            }
            if names_file(&path, &file) {
                held.insert(id.to_owned(), (file, path));
                return Ok(());
            }
            // Released and removed by its previous holder after we opened it: try again.
        }
        Err(locked())
    }

    /// Drops the writer lock of `id` and removes its lock file (a no-op when not held).
    pub fn release(&self, id: &str) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((file, path)) = held.remove(id) {
            // Unlinked while still locked, then closed: see the module doc for the race.
            // A file that cannot be removed is left as before; the lock still goes with it.
            let _ = std::fs::remove_file(&path);
            drop(file);
        }
    }
}

/// Whether `path` names the open `file` (same device and inode).
fn names_file(path: &Path, file: &File) -> bool {
    match (std::fs::metadata(path), file.metadata()) {
        (Ok(p), Ok(f)) => p.dev() == f.dev() && p.ino() == f.ino(),
        _ => false,
    }
}

/// `<root>/<id>.lock`.
pub fn lock_path(root: &Path, id: &str) -> PathBuf {
    root.join(format!("{id}.lock"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_removes_the_lock_file_and_a_claim_after_it_works() {
        let dir = tempfile::tempdir().unwrap();
        let locks = Locks::default();
        locks.claim(dir.path(), "s1").unwrap();
        assert!(lock_path(dir.path(), "s1").exists());
        assert!(matches!(
            locks.claim(dir.path(), "s1"),
            Err(KitError::Locked { .. })
        ));
        locks.release("s1");
        assert!(!lock_path(dir.path(), "s1").exists());
        locks.claim(dir.path(), "s1").unwrap();
        locks.release("s1");
    }

    #[test]
    fn a_lock_on_a_removed_file_is_not_a_claim() {
        let dir = tempfile::tempdir().unwrap();
        let path = lock_path(dir.path(), "s1");
        // Another process's old lock file: opened, then unlinked and replaced by a new one
        // that someone else holds.
        let old = File::create(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(!names_file(&path, &old));
        let other = Locks::default();
        other.claim(dir.path(), "s1").unwrap();
        assert!(names_file(&path, &other.held.lock().unwrap()["s1"].0));
        let mine = Locks::default();
        assert!(matches!(
            mine.claim(dir.path(), "s1"),
            Err(KitError::Locked { .. })
        ));
    }
}
