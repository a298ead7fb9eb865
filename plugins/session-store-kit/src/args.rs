//! The requests of the `keel.session-store` contract (`SessionStore`), checked before anything
//! touches the disk: session ids, header shape and version, batch contiguity.
//! Shared by every session-store backend; `path` in [`append`] is the backend's file for a
//! session, named in version errors.

use std::path::Path;
use std::sync::Arc;

pub use keel_plugin_api::services::session::LoadFormat;
use keel_plugin_api::services::session::{
    AppendBatch, EventRecord, FORMAT_VERSION, LoadStored, SessionHeader, SessionRef,
};

use crate::error::KitError;

/// `append`, checked.
#[derive(Debug)]
pub struct AppendArgs {
    /// Checked id.
    pub session_id: String,
    /// Present on the first append only.
    pub header: Option<SessionHeader>,
    /// The batch, contiguous from `expected_next_seq`.
    pub events: Vec<Arc<EventRecord>>,
    /// The caller's idea of the stored next seq.
    pub expected_next_seq: u64,
}

/// Parsed `load` arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadArgs {
    /// Session id (checked).
    pub session_id: String,
    /// Cut a torn tail physically.
    pub repair: bool,
    /// How the answer carries the events.
    pub format: LoadFormat,
}

/// Checks a session id: `[A-Za-z0-9_-]{1,128}` (it becomes a file name).
pub fn check_id(id: &str) -> Result<(), KitError> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(KitError::Invalid(format!(
            "session id {id:?} is not [A-Za-z0-9_-]{{1,128}}"
        )))
    }
}

/// Checks an `append` request; `path` is the session file (named in errors).
pub fn append(
    raw: AppendBatch,
    path: impl Fn(&str) -> std::path::PathBuf,
) -> Result<AppendArgs, KitError> {
    check_id(&raw.session_id)?;
    let header = match raw.header {
        None => None,
        Some(h) => Some(header(h, &raw.session_id, &path(&raw.session_id))?),
    };
    if let Some(first) = raw.events.first()
        && first.seq != raw.expected_next_seq
    {
        return Err(KitError::Seq(format!(
            "session '{}': batch starts at seq {} but expected_next_seq is {}",
            raw.session_id, first.seq, raw.expected_next_seq
        )));
    }
    for (i, pair) in raw.events.windows(2).enumerate() {
        if pair[1].seq != pair[0].seq + 1 {
            return Err(KitError::Seq(format!(
                "session '{}': batch is not contiguous at index {}: seq {} follows {}",
                raw.session_id,
                i + 1,
                pair[1].seq,
                pair[0].seq
            )));
        }
    }
    Ok(AppendArgs {
        session_id: raw.session_id,
        header,
        events: raw.events,
        expected_next_seq: raw.expected_next_seq,
    })
}

fn header(header: SessionHeader, id: &str, path: &Path) -> Result<SessionHeader, KitError> {
    if header.version != FORMAT_VERSION {
        return Err(KitError::Unsupported {
            path: path.to_owned(),
            found: header.version.to_string(),
            expected: FORMAT_VERSION,
        });
    }
    if header.id != id {
        return Err(KitError::Invalid(format!(
            "header id '{}' differs from session_id '{id}'",
            header.id
        )));
    }
    if !header.cwd.starts_with('/') {
        return Err(KitError::Invalid(format!(
            "header cwd '{}' is not absolute",
            header.cwd
        )));
    }
    Ok(header)
}

/// Checks a `load` request.
pub fn load(raw: LoadStored) -> Result<LoadArgs, KitError> {
    check_id(&raw.session_id)?;
    Ok(LoadArgs {
        session_id: raw.session_id,
        repair: raw.repair,
        format: raw.format,
    })
}

/// Checks a `claim` / `release` request.
pub fn session_id(raw: SessionRef) -> Result<String, KitError> {
    check_id(&raw.session_id)?;
    Ok(raw.session_id)
}
