//! A file a PostToolUse hook rewrote is one the model has seen (issue 23 item 12).
//!
//! In Claude Code a formatter hook (`prettier --write "$file_path"`) runs after `Write` and the
//! next `Edit` still succeeds. keel's file tools guard every change with the version the
//! session last observed (FS-04), so without this the edit after a formatter failed
//! `FS_STALE_VERSION`. A change made by keel's own hooks inside the same call counts as
//! observed: before the hooks run, the file must still hold exactly the version the tool wrote
//! (the result's `meta.target` / `meta.version`) — if anything else changed it already, nothing
//! is recorded and the guard stays stale; after they ran, a different file is reported on
//! `fs/observed` (the fs policy's feed) as the version the session now knows, and the tool
//! result gets a bounded unified diff, so the model knows what its file looks like now.
//!
//! Only regular, singly linked files up to [`MAX_BYTES`] at their canonical path are read back
//! (a hook that swapped the file or a parent for a link is not followed); a change by another
//! process while the hooks ran is not told apart from the hooks' own.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use keel_plugin_api::events::Typed;
use keel_plugin_api::events::fs::{FsObserved, Observation, content_version};
use keel_plugin_api::prelude::*;
use serde_json::Value;

use crate::response::unified;

/// Largest file read back after the hooks.
pub const MAX_BYTES: u64 = 8 << 20;

/// A file a tool just wrote, as it was when the hooks started.
#[derive(Debug, Clone)]
pub struct Written {
    /// The canonical target (the fs policy's key).
    pub target: String,
    /// Its bytes, which are the version the tool wrote.
    pub bytes: Vec<u8>,
}

/// The target's bytes, `None` when it is gone; `Err` when it is not something to read back.
fn bytes_of(target: &Path) -> Result<Option<Vec<u8>>, ()> {
    let meta = match fs::symlink_metadata(target) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(_) => return Err(()),
    };
    if !meta.file_type().is_file() || meta.nlink() != 1 || meta.len() > MAX_BYTES {
        return Err(());
    }
    // The target was canonical when the tool wrote it: a swapped-in symlinked parent is not
    // followed either.
    if fs::canonicalize(target).ok().as_deref() != Some(target) {
        return Err(());
    }
    fs::read(target).map(Some).map_err(|_| ())
}

/// Before the hooks: the file a successful `write_file` / `edit_file` result names, when it
/// still holds the version the tool wrote.
pub fn before(tool: &str, result: &Value) -> Option<Written> {
    if !matches!(tool, "write_file" | "edit_file") {
        return None;
    }
    let meta = result.get("meta")?;
    let target = meta.get("target")?.as_str()?;
    let version = meta.get("version")?.as_str()?;
    let bytes = bytes_of(Path::new(target)).ok()??;
    (content_version(&bytes) == version).then(|| Written {
        target: target.to_owned(),
        bytes,
    })
}

/// After the hooks ran: when the file differs from what the tool wrote, reports the new state
/// on `fs/observed` for `session_id` and answers the note for the model (with the diff).
pub fn settle(ctx: &Context, session_id: &str, written: &Written) -> Option<String> {
    let now = bytes_of(Path::new(&written.target)).ok()?;
    if now.as_deref() == Some(written.bytes.as_slice()) {
        return None;
    }
    let observation = match &now {
        Some(b) => Observation::Present {
            version: content_version(b),
        },
        None => Observation::Absent,
    };
    let payload = FsObserved {
        session_id: session_id.into(),
        target: written.target.as_str().into(),
        observation: Typed::new(&observation).ok()?,
    };
    if let Err(e) = ctx.emit(crate::DISPATCH.observed, &payload) {
        tracing::warn!(error = %e, "fs/observed could not be emitted after the hooks");
        return None;
    }
    let target = &written.target;
    Some(match now {
        None => format!("[PostToolUse hook] {target} was deleted by a hook after the write."),
        Some(after) => match (
            std::str::from_utf8(&written.bytes),
            std::str::from_utf8(&after),
        ) {
            (Ok(a), Ok(b)) => format!(
                "[PostToolUse hook] a hook changed {target} after the write; this is the file \
                 now (edit this version):\n{}",
                unified(target, a, b)
            ),
            _ => format!(
                "[PostToolUse hook] a hook changed {target} after the write ({} bytes now, not \
                 text); read it before editing.",
                after.len()
            ),
        },
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_a_file_still_at_the_written_version_is_taken() {
        let dir = tempfile::tempdir().unwrap();
        let f = fs::canonicalize(dir.path()).unwrap().join("a.txt");
        fs::write(&f, "x = 1\n").unwrap();
        let result = |v: &str| json!({"content": "ok", "meta": {"target": f.to_string_lossy(), "version": v}});
        let v = content_version(b"x = 1\n");
        let w = before("write_file", &result(&v)).unwrap();
        assert_eq!(w.bytes, b"x = 1\n");
        assert!(
            before("write_file", &result("other")).is_none(),
            "changed already"
        );
        assert!(before("shell", &result(&v)).is_none());
        let via = dir.path().join("via");
        std::os::unix::fs::symlink(dir.path(), &via).unwrap();
        let linked = json!({"meta": {"target": via.join("a.txt").to_string_lossy(), "version": v}});
        assert!(
            before("write_file", &linked).is_none(),
            "a symlinked parent"
        );
        let link = dir.path().join("b.txt");
        fs::hard_link(&f, &link).unwrap();
        assert!(
            before("edit_file", &result(&v)).is_none(),
            "a hard-linked file is not read back"
        );
    }
}
