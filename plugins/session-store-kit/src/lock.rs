//! The one-live-writer rule: `claim` takes an exclusive, non-blocking `flock` on
//! `<root>/<id>.lock` and keeps the open file until `release` (or until the store is dropped or
//! the process exits, when the kernel drops the lock). A second claim, from this store or any
//! other open file description, is refused. Shared by every session-store backend.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rustix::fs::{FlockOperation, flock};

use crate::error::KitError;

/// The locks this store holds.
#[derive(Debug, Default)]
pub struct Locks {
    held: Mutex<HashMap<String, File>>,
}

impl Locks {
    /// Takes the writer lock of `id`; `root` must exist.
    pub fn claim(&self, root: &Path, id: &str) -> Result<(), KitError> {
        let path = lock_path(root, id);
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if held.contains_key(id) {
            return Err(KitError::Locked {
                id: id.to_owned(),
                path,
            });
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(|e| KitError::io("create lock file", &path, e))?;
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {
                held.insert(id.to_owned(), file);
                Ok(())
            }
            Err(rustix::io::Errno::WOULDBLOCK) => Err(KitError::Locked {
                id: id.to_owned(),
                path,
            }),
            Err(e) => Err(KitError::io("flock", &path, e.into())),
        }
    }

    /// Drops the writer lock of `id` (a no-op when not held).
    pub fn release(&self, id: &str) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        held.remove(id);
    }
}

/// `<root>/<id>.lock`.
pub fn lock_path(root: &Path, id: &str) -> PathBuf {
    root.join(format!("{id}.lock"))
}
