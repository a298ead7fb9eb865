//! Temp stores a crashed process left behind (issue 16 item 2, SUB-04 across a crash). A
//! process keeps its children's temp stores under `temp/<pid>/`, and its cleanup deletes each
//! one; a SIGKILL skips that, so at the row's activation every `temp/<pid>` directory whose
//! process is gone is removed. A process counts as alive while `/proc/<pid>` exists; this
//! process's own directory is never touched, nor a name that is not a pid. Where `/proc` is
//! not mounted nothing is removed: a live process cannot be told from a dead one there.

use std::path::{Path, PathBuf};

/// Whether `/proc` can tell live processes (Linux; `/proc/self` exists).
fn proc_available() -> bool {
    Path::new("/proc/self").exists()
}

/// Whether process `pid` is alive, by `/proc/<pid>`.
fn alive(pid: u32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists()
}

/// Removes the `temp/<pid>` directories under `temp` of processes no longer alive; answers
/// the directories removed. Nothing when `/proc` cannot tell.
pub fn sweep_dead(temp: &Path) -> Vec<PathBuf> {
    if !proc_available() {
        return Vec::new();
    }
    sweep_with(temp, std::process::id(), alive)
}

/// [`sweep_dead`] with `me` as the current pid and `is_alive` as the liveness test.
pub fn sweep_with(temp: &Path, me: u32, is_alive: impl Fn(u32) -> bool) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let Ok(entries) = std::fs::read_dir(temp) else {
        return removed;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me || !path.is_dir() || is_alive(pid) {
            continue;
        }
        match std::fs::remove_dir_all(&path) {
            Ok(()) => removed.push(path),
            Err(e) => tracing::warn!(
                dir = %path.display(),
                "the temp stores of dead process {pid} could not be removed: {e}"
            ),
        }
    }
    removed
}
