//! The session seam: the log every durable fact goes through (ARCHITECTURE §7).
//!
//! Two services. `keel.session` (provided by the `session` plugin) is what the rest of keel
//! uses: create, append (no I/O), flush, load with recovery, fork, list, project. Its storage is
//! `keel.session-store` (provided by exactly one backend plugin: `session-jsonl` or
//! `session-sqlite`), a narrower contract of durable batches and raw loads that both backends
//! pass through one shared contract suite (SES-08). Both are JSON request/response services
//! ([`CallHandle`]): their calls are per batch or per session, never per token.
//!
//! The envelope and header types below are the on-disk format (format version 0, SES-09); they
//! live here so that the core and every backend agree on one definition.

use serde::{Deserialize, Serialize};

use crate::sdk::{CallHandle, Service};

/// Format version written in every header. Any other version is refused as "unsupported
/// format", never as corruption (SES-09).
pub const FORMAT_VERSION: u32 = 0;

/// The `session` plugin's service: see the method list on [`SessionMethod`].
#[derive(Debug, Clone, Copy)]
pub struct Sessions;

impl Service for Sessions {
    const NAME: &'static str = "keel.session";
    type Handle = CallHandle;
}

/// The storage backend's service (exclusive: one backend per profile).
#[derive(Debug, Clone, Copy)]
pub struct SessionStore;

impl Service for SessionStore {
    const NAME: &'static str = "keel.session-store";
    type Handle = CallHandle;
}

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

/// Methods of `keel.session-store` (the backend contract), with their JSON shapes. Every
/// error is an SDK `Error` with one of the codes listed in [`StoreError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreMethod {
    /// `"append"`: `{session_id, header?: SessionHeader, events: [EventRecord], expected_next_seq}`
    /// → `{next_seq}`. Durable on return (one fsync / one transaction per call). The header is
    /// required on the first append (which materialises the session atomically) and refused
    /// later. `events[0].seq` must equal `expected_next_seq`, which must equal the stored next
    /// seq; seqs must be contiguous. On failure nothing of the batch is stored.
    Append,
    /// `"load"`: `{session_id, repair: bool, format?: "events"|"jsonl"|"jsonl-file"}` →
    /// `{header, events, truncated: {seq, reason}|null}`. With `format: "jsonl"` the answer
    /// carries `events_jsonl` instead of `events`: the same records as JSON lines text (one per
    /// line, each ending with `\n`, in seq order). With `format: "jsonl-file"` a backend that
    /// keeps its records as checked JSON lines in a local file may instead answer
    /// `events_file: {path, offset, len}`, the byte range of exactly those lines (only lines it
    /// checked in this load, never a torn tail); any other backend answers `events_jsonl`, so
    /// the caller accepts either. The caller trusts the backend's check for both forms. Reads
    /// every complete event. A torn tail after the last `turn/end` is cut (physically when
    /// `repair`, only in the answer otherwise) and reported in `truncated`: `{seq, reason,
    /// path}` plus `line` and `bytes` (JSONL) or `rows` (SQLite); any defect at or before it
    /// is `SESSION_CORRUPT`.
    Load,
    /// `"list"`: `{}` → `{sessions: [SessionHeader + {events: count, updated_at}], unreadable:
    /// [{session_id, path, code, message}]}` — what could not be read is named, never skipped.
    List,
    /// `"claim"`: `{session_id}` → `{}`. Takes the one-live-writer lock of the session for this
    /// process (held until `release` or process exit); another holder → `SESSION_LOCKED`.
    Claim,
    /// `"release"`: `{session_id}` → `{}`.
    Release,
}

/// Error codes of the session seam (core and backends).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreError {
    /// `SESSION_NOT_FOUND`: no such session.
    NotFound,
    /// `SESSION_EXISTS`: create/fork with an id that exists.
    Exists,
    /// `SESSION_UNSUPPORTED`: another format version, another schema version, another
    /// application's database, or an unknown required event type (SES-09/10). Not corruption.
    Unsupported,
    /// `SESSION_CORRUPT`: a defect at or before the last committed `turn/end`.
    Corrupt,
    /// `SESSION_LOCKED`: another live writer holds the session — a second `open`, or a `load`
    /// of a live session with a turn open (never repaired while live).
    Locked,
    /// `SESSION_SEQ`: a batch does not continue the stored log.
    Seq,
    /// `SESSION_IO`: the storage failed (disk full, permissions); nothing was stored.
    Io,
    /// `SESSION_INVALID`: an event failed validation or the runtime invariants (B15).
    Invalid,
    /// `SESSION_OPEN_TURN`: a fork boundary inside an open turn.
    OpenTurn,
}

impl StoreError {
    /// The wire code.
    pub const fn code(self) -> &'static str {
        match self {
            StoreError::NotFound => "SESSION_NOT_FOUND",
            StoreError::Exists => "SESSION_EXISTS",
            StoreError::Unsupported => "SESSION_UNSUPPORTED",
            StoreError::Corrupt => "SESSION_CORRUPT",
            StoreError::Locked => "SESSION_LOCKED",
            StoreError::Seq => "SESSION_SEQ",
            StoreError::Io => "SESSION_IO",
            StoreError::Invalid => "SESSION_INVALID",
            StoreError::OpenTurn => "SESSION_OPEN_TURN",
        }
    }
}

/// Methods of `keel.session` (what the loop, drivers and commands use).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionMethod {
    /// `"create"`: `{cwd, id?, origin?, delegation_depth?, ephemeral?, profile?}` →
    /// `{session_id}`. Writes nothing until the first flush (a created-but-empty session leaves
    /// no file); an `ephemeral` session is never stored at all (`keel run --ephemeral`).
    /// `profile` (`{name, digest}`) is logged at once as the first event, [`PROFILE_EVENT`].
    Create,
    /// `"open"`: `{session_id}` → `{session_id, next_seq, recovered: [EventRecord]}`. Claims the
    /// writer lock, loads and repairs a crashed tail (committing the closers), and makes the
    /// session live for appends.
    Open,
    /// `"append"`: `{session_id, events: [{type, data, ignorable?, surface_op?,
    /// source_event_seqs?}]}` → `{seqs: [u64]}`. Validates and assigns seqs; no I/O.
    Append,
    /// `"flush"`: `{session_id}` → `{durable_seq}`. The durability barrier (dispatches
    /// `session/flush`).
    Flush,
    /// `"close"`: `{session_id}` → `{}`. Drains, releases the writer lock.
    Close,
    /// `"load"`: `{session_id}` → `{header, events, recovered: [EventRecord], truncated}`.
    /// Loads a session that is not live, committing recovery closers (SES-06); `truncated` is
    /// the torn tail it cut (the store's report) or `null`. A live session with a turn open is
    /// `SESSION_LOCKED`.
    Load,
    /// `"inspect"`: like `load` but commits nothing (closers shown, marked).
    Inspect,
    /// `"fork"`: `{session_id, at?, child_id?}` → `{session_id}` (SES-07).
    Fork,
    /// `"list"`: `{}` → `{sessions: [...], unreadable: [{path, reason, code, session_id}]}`.
    List,
    /// `"messages"`: `{session_id}` → `{messages: [...]}`: the projected model history.
    Messages,
    /// `"profile"`: `{session_id}` → `{profile: {name, digest} | null}`: the profile the session
    /// was created under (its first [`PROFILE_EVENT`]), `null` when it records none. Reads a
    /// stored session without repairing it, like `inspect`.
    Profile,
}
