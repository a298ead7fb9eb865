//! The open files the loader names to `dlopen` as `/proc/self/fd/N`, kept open for the life of
//! the process.
//!
//! Why a name under `/proc`: `dlopen` takes a name, not a descriptor. `/proc/self/fd/N` opens the
//! inode descriptor `N` holds, whatever now sits at the library's path, so the file that was
//! digested is the file that loads.
//!
//! Why kept open: glibc remembers a library by the name it was opened under and answers a later
//! `dlopen` of the same string with that library. A closed descriptor's number goes to the next
//! open, so `/proc/self/fd/7` closed and reused for another library would be answered with the
//! first. Libraries are never unloaded (ARCHITECTURE §3); keeping one descriptor per distinct
//! inode loaded (not per assembly: `keel doctor` assembles every profile, a relaunch assembles
//! twice) costs a few dozen descriptors at most.

use std::fs::File;
use std::os::unix::fs::MetadataExt as _;
use std::os::unix::io::AsRawFd as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use crate::StatKey;

/// `(dev, ino)` → the open file named to `dlopen`.
static PINNED: Mutex<Vec<(u64, u64, Arc<File>)>> = Mutex::new(Vec::new());

fn proc_name(file: &File) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()))
}

/// See [`crate::Opened::load_path`].
pub(crate) fn load_path(file: &Arc<File>, key: Option<&StatKey>, path: &Path) -> PathBuf {
    let Some(key) = key else {
        return path.to_owned();
    };
    let mut pinned = PINNED.lock().unwrap_or_else(PoisonError::into_inner);
    // The same inode loaded before: its name (glibc answers it with the loaded library, as it
    // would any name of that inode).
    if let Some((_, _, kept)) = pinned
        .iter()
        .find(|(dev, ino, _)| (*dev, *ino) == (key.dev, key.ino))
    {
        return proc_name(kept);
    }
    let name = proc_name(file);
    // The name must lead to this very file: `/proc` mounted and this process's.
    match std::fs::metadata(&name) {
        Ok(meta) if (meta.dev(), meta.ino()) == (key.dev, key.ino) => {
            pinned.push((key.dev, key.ino, Arc::clone(file)));
            name
        }
        other => {
            tracing::debug!(
                target: "keel::digest",
                path = %path.display(),
                "{} does not name the digested file ({}); loading by path",
                name.display(),
                other.map_or_else(|e| e.to_string(), |_| "another inode".to_owned())
            );
            path.to_owned()
        }
    }
}
