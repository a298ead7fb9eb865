//! The JSON requests of the `keel.session-store` contract (`StoreMethod`), parsed and checked
//! before anything touches the disk: session ids, header shape and version, batch contiguity.
//! Shared by every session-store backend; `path` in [`append`] is the backend's file for a
//! session, named in version errors.

use std::path::Path;

use keel_plugin_api::services::session::{EventRecord, FORMAT_VERSION, SessionHeader};
use serde::Deserialize;
use serde_json::Value;

use crate::error::KitError;

/// `append`: `{session_id, header?, events, expected_next_seq}`.
#[derive(Debug)]
pub struct AppendArgs {
    /// Checked id.
    pub session_id: String,
    /// Present on the first append only.
    pub header: Option<SessionHeader>,
    /// The batch, contiguous from `expected_next_seq`.
    pub events: Vec<EventRecord>,
    /// The caller's idea of the stored next seq.
    pub expected_next_seq: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAppend {
    session_id: String,
    #[serde(default)]
    header: Option<Value>,
    events: Vec<EventRecord>,
    expected_next_seq: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLoad {
    session_id: String,
    #[serde(default)]
    repair: bool,
    #[serde(default)]
    format: LoadFormat,
}

/// How a `load` answer carries its events (`format` of the request).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoadFormat {
    /// `events`: an array of records (the default).
    #[default]
    Events,
    /// `events_jsonl`: the same records as JSON lines text, one per line, in seq order.
    Jsonl,
    /// `"jsonl-file"`: a backend that keeps the records as checked JSON lines in a file may
    /// answer `events_file: {path, offset, len}`, the byte range of those lines; any other
    /// backend answers as for [`LoadFormat::Jsonl`].
    #[serde(rename = "jsonl-file")]
    JsonlFile,
}

impl LoadFormat {
    /// Whether the records are wanted as JSON lines (`jsonl`, or `jsonl-file` from a backend
    /// without a file to point at).
    pub fn lines(self) -> bool {
        matches!(self, LoadFormat::Jsonl | LoadFormat::JsonlFile)
    }
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawId {
    session_id: String,
}

fn parse<T: serde::de::DeserializeOwned>(method: &str, args: Value) -> Result<T, KitError> {
    serde_json::from_value(args).map_err(|e| KitError::Invalid(format!("{method} arguments: {e}")))
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

/// Parses `append` arguments; `path` is the session file (named in errors).
pub fn append(
    args: Value,
    path: impl Fn(&str) -> std::path::PathBuf,
) -> Result<AppendArgs, KitError> {
    let raw: RawAppend = parse("append", args)?;
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

fn header(value: Value, id: &str, path: &Path) -> Result<SessionHeader, KitError> {
    match value.get("version") {
        Some(v) if v.as_u64() == Some(u64::from(FORMAT_VERSION)) => {}
        Some(v) => {
            return Err(KitError::Unsupported {
                path: path.to_owned(),
                found: v.to_string(),
                expected: FORMAT_VERSION,
            });
        }
        None => return Err(KitError::Invalid("header has no version".into())),
    }
    let header: SessionHeader =
        serde_json::from_value(value).map_err(|e| KitError::Invalid(format!("header: {e}")))?;
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

/// Parses `load` arguments: `{session_id, repair?, format?: "events"|"jsonl"|"jsonl-file"}`.
pub fn load(args: Value) -> Result<LoadArgs, KitError> {
    let raw: RawLoad = parse("load", args)?;
    check_id(&raw.session_id)?;
    Ok(LoadArgs {
        session_id: raw.session_id,
        repair: raw.repair,
        format: raw.format,
    })
}

/// Parses `claim` / `release` arguments.
pub fn session_id(method: &str, args: Value) -> Result<String, KitError> {
    let raw: RawId = parse(method, args)?;
    check_id(&raw.session_id)?;
    Ok(raw.session_id)
}
