//! The on-disk session format (format version 0, SES-09): the header and the event envelope
//! of ARCHITECTURE §7, exactly as stored. They live in plugin-api so that the core and every
//! backend agree on one definition.

use serde::{Deserialize, Serialize};

/// Format version written in every header. Any other version is refused as "unsupported
/// format", never as corruption (SES-09).
pub const FORMAT_VERSION: u32 = 0;

/// The immutable first record of a session (ARCHITECTURE §7).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionHeader {
    /// Always `"session"` on disk (distinguishes the header line in JSONL).
    #[serde(rename = "type")]
    pub kind: HeaderKind,
    /// Format version; must equal [`FORMAT_VERSION`].
    pub version: u32,
    /// Session id: `[A-Za-z0-9_-]{1,128}`.
    pub id: String,
    /// Epoch ms.
    pub created_at: u64,
    /// Absolute working directory.
    pub cwd: String,
    /// The session this one was forked from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session: Option<String>,
    /// Number of events copied from the parent (the seed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_length: Option<u64>,
    /// The parent's tool call that started this session (a subagent's lineage, issue 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_call_id: Option<String>,
    /// `"subagent"` for delegated sessions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// 0 at top level.
    #[serde(default)]
    pub delegation_depth: u32,
}

/// The literal `"session"` tag of a header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HeaderKind {
    /// The only value.
    Session,
}

/// One durable event: the envelope of ARCHITECTURE §7, exactly as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventRecord {
    /// Contiguous from 0.
    pub seq: u64,
    /// Epoch ms.
    pub time: u64,
    /// Event type, e.g. `turn/start`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Validated JSON (finite numbers, no duplicate keys), immutable once appended.
    pub data: serde_json::Value,
    /// Readers that do not know `kind` may skip the event only when this is true.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ignorable: bool,
    /// Only on surface types (`user/message`, `assistant/message`, `tool/result`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub surface_op: Option<SurfaceOp>,
    /// Earlier events this one cites (replacements list every shadowed seq).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_event_seqs: Option<Vec<u64>>,
}

/// How a surface event changes the projected history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SurfaceOp {
    /// `"append"`.
    Append(AppendTag),
    /// `{"op":"replace","start":S,"end":E}`: shadows surface events with seq in `S..=E`.
    Replace {
        /// Always `"replace"`.
        op: ReplaceTag,
        /// First shadowed seq.
        start: u64,
        /// Last shadowed seq (inclusive).
        end: u64,
    },
}

/// The literal `"append"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AppendTag {
    /// The only value.
    Append,
}

/// The literal `"replace"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReplaceTag {
    /// The only value.
    Replace,
}

/// Surface event types: the only ones that carry `surface_op` / `source_event_seqs`.
pub const SURFACE_TYPES: &[&str] = &["user/message", "assistant/message", "tool/result"];

/// Core durable types every reader understands (plugins add their own, marked `ignorable`
/// unless every reader must understand them).
pub const CORE_TYPES: &[&str] = &[
    "turn/start",
    "turn/end",
    "step/start",
    "step/end",
    "user/message",
    "assistant/chunk",
    "assistant/message",
    "tool/call",
    "tool/result",
    "request/header",
    "request/context",
    "todo/write",
    "session/end-seed",
    PROFILE_EVENT,
];

/// `session/profile {name, digest}`: the profile a session was created under (a driver's
/// [`ProfileIdentity`](crate::services::driver::ProfileIdentity)), logged by `create` as the
/// session's first event and always `ignorable`, so a reader that predates it skips it. The
/// first one in the log is the session's recorded profile (a fork's seed carries its parent's).
pub const PROFILE_EVENT: &str = "session/profile";
