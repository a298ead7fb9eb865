//! The session seam: the log every durable fact goes through (ARCHITECTURE §7).
//!
//! Two contracts. [`Sessions`] (`keel.session`, provided by the `session` plugin) is what the
//! rest of keel uses: create, append (no I/O), flush, load with recovery, fork, list, project.
//! Its storage is [`SessionStore`] (`keel.session-store`, provided by exactly one backend plugin:
//! `session-jsonl` or `session-sqlite`), a narrower contract of durable batches and raw loads
//! that both backends pass through one shared contract suite (SES-08). Calls are per batch or
//! per session, never per token. Every error carries a [`SessionCode`].
//!
//! The projected history (`messages`) answers [`Frozen`] messages: each is encoded once, when
//! the session first projects it, and every later request shares it by reference.
//!
//! The on-disk format (header, envelope) is in [`format`], re-exported here.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::sdk::{Frozen, Result};
use crate::services::driver::ProfileIdentity;

mod format;

pub use format::*;

crate::contract! {
    /// The `session` plugin's service: live sessions, the log, the projected history.
    pub contract Sessions = "keel.session", version 2;
    provider SessionsProvider;
    client SessionsClient;
    /// Creates a session. Writes nothing until the first flush (a created-but-empty session
    /// leaves no file); an `ephemeral` session is never stored at all (`keel run --ephemeral`).
    /// `profile` is logged at once as the first event, [`PROFILE_EVENT`].
    fn create(CreateSession) -> CreatedSession;
    /// Claims the writer lock, loads and repairs a crashed tail (committing the closers), and
    /// makes the session live for appends.
    fn open(SessionRef) -> OpenedSession;
    /// Validates events and assigns their seqs; no I/O (the writer stores them behind).
    fn append(AppendEvents) -> AppendedEvents;
    /// The durability barrier (dispatches `session/flush`): `durable_seq` is `None` while
    /// nothing is stored yet.
    fn flush(SessionRef) -> Flushed;
    /// Drains the session and releases its writer lock.
    fn close(SessionRef) -> ();
    /// Loads a session that is not live, committing recovery closers (SES-06, included in
    /// `events`); `truncated` is the torn tail it cut. A live session with a turn open is
    /// `SESSION_LOCKED`.
    fn load(SessionRef) -> SessionLog;
    /// Like `load` but commits nothing: closers only in `recovered`, `committed: false`, and
    /// `truncated` is the torn tail a repair would cut.
    fn inspect(SessionRef) -> SessionLog;
    /// Forks a closed prefix into a new session (SES-07).
    fn fork(ForkSession) -> ForkedSession;
    /// Every stored (and live) session, and what could not be read.
    fn list() -> SessionListing;
    /// The projected model history, each message frozen once and shared.
    fn messages(SessionRef) -> SessionMessages;
    /// The profile the session was created under (its first [`PROFILE_EVENT`]); reads a stored
    /// session without repairing it, like `inspect`.
    fn profile(SessionRef) -> RecordedProfile;
    /// The projected history with what each visible message is (issue 14): its seq, role,
    /// call ids and size, for planning a compaction. Same cost as `messages`.
    fn surface(SessionRef) -> SurfaceView, since 2;
    /// Events of a live or stored session by seq, in the order asked (the cold tier reads
    /// shadowed originals back, MEM-08). A seq past the end is `SESSION_INVALID`.
    fn read(ReadEvents) -> ReadAnswer, since 2;
}

crate::contract! {
    /// The storage backend's service (exclusive: one backend per profile).
    pub contract SessionStore = "keel.session-store", version 1;
    provider SessionStoreProvider;
    client SessionStoreClient;
    /// Durable on return (one fsync / one transaction per call). The header is required on the
    /// first append (which materialises the session atomically) and refused later.
    /// `events[0].seq` must equal `expected_next_seq`, which must equal the stored next seq;
    /// seqs must be contiguous. On failure nothing of the batch is stored.
    fn append(AppendBatch) -> BatchStored;
    /// Reads every complete event. A torn tail after the last `turn/end` is cut (physically
    /// when `repair`, only in the answer otherwise) and reported in `truncated`; any defect at
    /// or before it is `SESSION_CORRUPT`. See [`LoadFormat`] for how the events travel.
    fn load(LoadStored) -> StoredLog;
    /// Every session; what could not be read is named, never skipped.
    fn list() -> StoredListing;
    /// Takes the one-live-writer lock of the session for this process (held until `release`
    /// or process exit); another holder → `SESSION_LOCKED`.
    fn claim(SessionRef) -> ();
    /// Releases the writer lock.
    fn release(SessionRef) -> ();
}

/// A request naming one session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionRef {
    /// Session id.
    pub session_id: String,
}

impl SessionRef {
    /// The request for session `id`.
    pub fn new(id: impl Into<String>) -> Self {
        SessionRef {
            session_id: id.into(),
        }
    }
}

/// `create`'s request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateSession {
    /// Absolute working directory.
    pub cwd: String,
    /// Session id; generated when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `"subagent"` for delegated sessions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// 0 at top level.
    #[serde(default)]
    pub delegation_depth: u32,
    /// The session that delegated to this one (a spawned subagent, issue 16), recorded in the
    /// header; a spawn copies nothing from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session: Option<String>,
    /// The parent's tool call that started this session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_call_id: Option<String>,
    /// Kept in memory only (`keel run --ephemeral`): the id is not claimed, no file is
    /// written, and the events vanish when the session closes. Checkpoints still succeed.
    #[serde(default)]
    pub ephemeral: bool,
    /// The profile the session is created under, logged at once as its first event
    /// (`session/profile`, issue 11 item 7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<ProfileIdentity>,
}

/// `create`'s answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreatedSession {
    /// The new session's id.
    pub session_id: String,
    /// Its header.
    pub header: SessionHeader,
}

/// `open`'s answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenedSession {
    /// Session id.
    pub session_id: String,
    /// The seq the next append gets.
    pub next_seq: u64,
    /// Recovery closers committed on open (empty for a balanced log).
    pub recovered: Vec<EventRecord>,
}

/// One event to append: the envelope without `seq` and `time`, which the session assigns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventInput {
    /// Event type, e.g. `turn/start`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The data, a JSON document checked losslessly (no duplicate keys, finite numbers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Frozen>,
    /// The data as raw JSON text (same checks); exactly one of `data` / `data_json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_json: Option<String>,
    /// Readers that do not know `kind` may skip the event.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ignorable: bool,
    /// Only on surface types.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub surface_op: Option<SurfaceOp>,
    /// Earlier events this one cites.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_event_seqs: Option<Vec<u64>>,
}

impl EventInput {
    /// An event of type `kind` with `data`, encoded once here.
    ///
    /// # Errors
    /// `INVALID_JSON` when `data` cannot be serialised.
    pub fn new<T: Serialize + ?Sized>(kind: &str, data: &T) -> Result<Self> {
        Ok(EventInput::frozen(kind, Frozen::freeze(data)?))
    }

    /// An event of type `kind` whose data is already frozen.
    pub fn frozen(kind: &str, data: Frozen) -> Self {
        EventInput {
            kind: kind.to_owned(),
            data: Some(data),
            data_json: None,
            ignorable: false,
            surface_op: None,
            source_event_seqs: None,
        }
    }

    /// An event given as its JSON form, `{type, data, ignorable?, surface_op?,
    /// source_event_seqs?}` (a caller that builds events as JSON); `data` is encoded once here.
    ///
    /// # Errors
    /// `INVALID_ARGUMENTS` when the other fields are not an event's.
    pub fn from_json(mut event: serde_json::Value) -> Result<Self> {
        let data = event.get_mut("data").map(serde_json::Value::take);
        if let Some(fields) = event.as_object_mut() {
            fields.remove("data");
        }
        let mut input: EventInput = serde_json::from_value(event).map_err(|e| {
            crate::sdk::Error::coded(
                crate::codes::ContractCode::InvalidArguments,
                format!("event: {e}"),
            )
        })?;
        if let Some(data) = data {
            input.data = Some(Frozen::freeze(&data)?);
        }
        Ok(input)
    }

    /// Marks the event skippable by readers that do not know its type.
    #[must_use]
    pub fn ignorable(mut self) -> Self {
        self.ignorable = true;
        self
    }

    /// A surface event appended to the projected history (`surface_op: "append"`).
    #[must_use]
    pub fn surface(mut self) -> Self {
        self.surface_op = Some(SurfaceOp::Append(AppendTag::Append));
        self
    }
}

/// `append`'s request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppendEvents {
    /// Session id.
    pub session_id: String,
    /// The batch (atomic: all or nothing).
    pub events: Vec<EventInput>,
}

/// `append`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppendedEvents {
    /// The seq of each event, in order.
    pub seqs: Vec<u64>,
}

/// `flush`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flushed {
    /// The last durable seq; `None` while nothing is stored.
    pub durable_seq: Option<u64>,
}

/// A backend's torn-tail report: what a repair cuts (or cut).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TornTail {
    /// The first cut seq.
    pub seq: u64,
    /// Why it is not a committed record.
    pub reason: String,
    /// The file (JSONL) or database (SQLite).
    pub path: String,
    /// JSONL: the 1-based line of the torn record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// JSONL: the bytes cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// SQLite: the rows cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u64>,
}

/// `load` / `inspect`'s answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionLog {
    /// The header.
    pub header: SessionHeader,
    /// Durable events (for `load`, including the committed closers).
    pub events: Vec<EventRecord>,
    /// Recovery closers: committed by `load`, only shown by `inspect`.
    pub recovered: Vec<EventRecord>,
    /// The torn tail cut (or, for `inspect`, that a repair would cut).
    pub truncated: Option<TornTail>,
    /// `Some(false)` from `inspect`: nothing was committed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub committed: Option<bool>,
}

/// A fork boundary: a seq, or the last `turn/end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ForkAt {
    /// Copy events `0..=seq`.
    Seq(u64),
    /// A named boundary.
    Mark(ForkMark),
}

/// The named fork boundaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ForkMark {
    /// `"last-turn-end"`: through the last committed `turn/end`.
    #[serde(rename = "last-turn-end")]
    LastTurnEnd,
}

/// `fork`'s request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForkSession {
    /// The parent.
    pub session_id: String,
    /// Where to cut; absent → after the last event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<ForkAt>,
    /// The child's id; generated when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child_id: Option<String>,
    /// Recorded in the child's header: `"subagent"` for an in-process fork (issue 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// The child's delegation depth (default: the parent's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegation_depth: Option<u32>,
    /// The parent's tool call that started the child.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_call_id: Option<String>,
}

/// `fork`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkedSession {
    /// The child's id.
    pub session_id: String,
    /// Number of events copied from the parent.
    pub seed_length: Option<u64>,
}

/// One listed session: its header fields plus counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListedSession {
    /// The header (its fields inline).
    #[serde(flatten)]
    pub header: SessionHeader,
    /// Number of stored events.
    pub events: u64,
    /// Epoch ms of the last event (the creation time when none).
    pub updated_at: u64,
    /// Live in this process (`keel.session` only).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub live: bool,
}

/// `keel.session` `list`: a session that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnreadableSession {
    /// The file or database.
    pub path: String,
    /// Why.
    pub reason: String,
    /// The code of the failure (`SESSION_UNSUPPORTED`, `SESSION_CORRUPT`, …).
    pub code: String,
    /// `None` when the file names none.
    pub session_id: Option<String>,
}

/// `keel.session` `list`'s answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionListing {
    /// Every readable session.
    pub sessions: Vec<ListedSession>,
    /// What could not be read.
    pub unreadable: Vec<UnreadableSession>,
}

/// `messages`' answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionMessages {
    /// The projected model history, in order; each message frozen once by the session.
    pub messages: Vec<Frozen>,
}

/// What one visible message of the projection is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum SurfaceRole {
    /// A user message.
    User,
    /// An assistant message and the ids of the tool calls it makes (in order).
    Assistant {
        /// Call ids.
        calls: Vec<String>,
    },
    /// A tool result.
    Tool {
        /// The call it answers.
        call_id: String,
    },
}

/// One visible message and where it comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SurfaceNode {
    /// The seq of the event it is projected from (an append, or a replacement).
    pub seq: u64,
    /// Whether that event is a replacement (its `surface_op` is `replace`).
    pub replacement: bool,
    /// Role and calls.
    #[serde(flatten)]
    pub role: SurfaceRole,
    /// The message, frozen once (the same one `messages` answers).
    pub message: Frozen,
}

/// `surface`'s answer: the visible history in display order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SurfaceView {
    /// Visible nodes, in order.
    pub nodes: Vec<SurfaceNode>,
    /// The seq the next append gets.
    pub next_seq: u64,
}

/// `read`'s request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadEvents {
    /// Session id.
    pub session_id: String,
    /// The seqs to read.
    pub seqs: Vec<u64>,
}

/// `read`'s answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadAnswer {
    /// The events, in the order asked.
    pub events: Vec<EventRecord>,
}

/// `profile`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedProfile {
    /// The recorded profile, `None` when the session records none.
    pub profile: Option<ProfileIdentity>,
}

/// `keel.session-store` `append`'s request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppendBatch {
    /// Session id.
    pub session_id: String,
    /// Required on the first append, refused later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<SessionHeader>,
    /// Contiguous events starting at `expected_next_seq` (shared with the core's log).
    pub events: Vec<Arc<EventRecord>>,
    /// Must equal the stored next seq.
    pub expected_next_seq: u64,
}

/// `keel.session-store` `append`'s answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchStored {
    /// The stored next seq.
    pub next_seq: u64,
}

/// How a `load` answer carries its events.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum LoadFormat {
    /// `events`: an array of records (the default).
    #[default]
    #[serde(rename = "events")]
    Events,
    /// `events_jsonl`: the same records as JSON lines text, one per line (each ending with
    /// `\n`), in seq order.
    #[serde(rename = "jsonl")]
    Jsonl,
    /// A backend that keeps its records as checked JSON lines in a local file may answer
    /// `events_file`, the byte range of exactly those lines (only lines it checked in this
    /// load, never a torn tail); any other backend answers as for [`LoadFormat::Jsonl`].
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

/// `keel.session-store` `load`'s request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadStored {
    /// Session id.
    pub session_id: String,
    /// Cut a torn tail physically.
    #[serde(default)]
    pub repair: bool,
    /// How the answer carries the events.
    #[serde(default)]
    pub format: LoadFormat,
}

/// The byte range of checked record lines in a backend's file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventsFile {
    /// The file.
    pub path: String,
    /// First byte.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
}

/// `keel.session-store` `load`'s answer: the events in exactly one of the three forms. The
/// caller trusts the backend's check for the line forms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredLog {
    /// The header.
    pub header: SessionHeader,
    /// [`LoadFormat::Events`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<EventRecord>>,
    /// [`LoadFormat::Jsonl`] (or `jsonl-file` without a file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events_jsonl: Option<String>,
    /// [`LoadFormat::JsonlFile`] from a file-backed store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events_file: Option<EventsFile>,
    /// The torn tail cut (with `repair`) or left out.
    pub truncated: Option<TornTail>,
}

/// `keel.session-store` `list`: a session that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredUnreadable {
    /// `None` when the file names none.
    pub session_id: Option<String>,
    /// The file or database.
    pub path: String,
    /// The failure's code.
    pub code: String,
    /// The failure's message.
    pub message: String,
}

/// `keel.session-store` `list`'s answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StoredListing {
    /// Every readable session.
    pub sessions: Vec<ListedSession>,
    /// What could not be read.
    pub unreadable: Vec<StoredUnreadable>,
}

crate::error_codes! {
    /// The session seam (`keel.session`, `keel.session-store` and their callers).
    pub enum SessionCode in "session" {
        /// No such session.
        NotFound = "SESSION_NOT_FOUND", by "`keel.session`, `keel.session-store`", retry Changed;
        /// `create`/`fork` with an id that exists, or a header on a later append.
        Exists = "SESSION_EXISTS", by "`keel.session`, `keel.session-store`", retry Changed;
        /// Another format version, another schema version, another application's database,
        /// or an unknown required event type (SES-09/10). Not corruption.
        Unsupported = "SESSION_UNSUPPORTED", by "`keel.session`, `keel.session-store`", retry Never;
        /// A defect at or before the last committed `turn/end`.
        Corrupt = "SESSION_CORRUPT", by "`keel.session`, `keel.session-store`", retry Never;
        /// Another live writer holds the session — a second `open`, or a `load` of a live
        /// session with a turn open (never repaired while live).
        Locked = "SESSION_LOCKED", by "`keel.session`, `keel.session-store`", retry Later;
        /// A batch does not continue the stored log.
        Seq = "SESSION_SEQ", by "`keel.session-store` `append`", retry Never;
        /// The storage failed (disk full, permissions); nothing was stored.
        Io = "SESSION_IO", by "`keel.session`, `keel.session-store`", retry Later;
        /// An event or request failed validation or the runtime invariants (B15).
        Invalid = "SESSION_INVALID", by "`keel.session`, `keel.session-store`", retry Changed;
        /// A fork boundary inside an open turn.
        OpenTurn = "SESSION_OPEN_TURN", by "`keel.session` `fork`", retry Changed;
        /// Recovery's closer for a call whose `tool/call` was never logged: it did not run.
        ToolNotStarted = "TOOL_NOT_STARTED", by "`keel.session` recovery (a tool result)", retry Changed;
        /// Recovery's closer for a call logged as started with no result: its side effect may
        /// have happened.
        ToolOutcomeUnknown = "TOOL_OUTCOME_UNKNOWN", by "`keel.session` recovery (a tool result)", retry Never;
        /// The agent loop could not append to its session; the turn ends (the message carries
        /// the session's own code).
        Append = "SESSION_APPEND", by "`agent-loop`", retry Never;
        /// The session could not be made durable, so the model request, tool body or step
        /// was not dispatched (B6); the message carries the session's own code.
        CheckpointFailed = "CHECKPOINT_FAILED", by "`checkpoint`", retry Later;
    }
}

/// The codes a backend or the core may answer (before SDK 2: `StoreError`).
pub type StoreError = SessionCode;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listed_session_is_its_header_fields_inline() {
        let row = serde_json::json!({"type": "session", "version": 0, "id": "s", "created_at": 1,
            "cwd": "/", "delegation_depth": 0, "events": 3, "updated_at": 9});
        let listed: ListedSession = serde_json::from_value(row.clone()).unwrap();
        assert_eq!((listed.header.id.as_str(), listed.events), ("s", 3));
        assert_eq!(serde_json::to_value(&listed).unwrap(), row);
    }

    #[test]
    fn an_event_from_json_keeps_every_field_and_freezes_its_data() {
        let event = serde_json::json!({"type": "tool/result", "data": {"call_id": "c", "content": "x"},
            "surface_op": "append", "ignorable": true});
        let input = EventInput::from_json(event.clone()).unwrap();
        assert_eq!(
            input.data.as_ref().map(Frozen::as_str),
            Some(r#"{"call_id":"c","content":"x"}"#)
        );
        assert_eq!(serde_json::to_value(&input).unwrap(), event);
        assert!(EventInput::from_json(serde_json::json!({"data": 1})).is_err());
    }

    #[test]
    fn fork_boundaries_keep_their_wire_form() {
        let at: ForkAt = serde_json::from_str("\"last-turn-end\"").unwrap();
        assert_eq!(at, ForkAt::Mark(ForkMark::LastTurnEnd));
        assert_eq!(serde_json::from_str::<ForkAt>("7").unwrap(), ForkAt::Seq(7));
        assert!(serde_json::from_str::<ForkAt>("\"first\"").is_err());
    }
}
