//! `session/*` events: the post-commit feed of the log, the durability barrier and the
//! durability feed.

use abi_stable::StableAbi;
use abi_stable::std_types::RString;

use super::json::Json;
use crate::declare_event;

/// One committed event, as the `session/event` feed delivers it.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct SessionEventNotice {
    /// Session id.
    pub session_id: RString,
    /// The event's seq.
    pub seq: u64,
    /// The event's type.
    pub kind: RString,
    /// The whole envelope as JSON (`EventRecord`).
    pub record: RString,
}

/// How far a session is durable: every event with `seq <= seq` is in storage.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct SessionDurability {
    /// Session id.
    pub session_id: RString,
    /// The last durable seq (the session's events `0..=seq` are stored).
    pub seq: u64,
}

/// A request to make a session durable up to everything appended so far.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct FlushRequest {
    /// Session id.
    pub session_id: RString,
}

/// A session was created, opened or disposed.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct SessionLifecycle {
    /// Session id.
    pub session_id: RString,
    /// The header as JSON.
    pub header: RString,
}

/// A batch on its way into a session log.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct PersistBatch {
    /// Session id.
    pub session_id: RString,
    /// The events' `data`, in batch order (a JSON array with one value per event).
    ///
    /// This stays [`Json`] on purpose: a batch mixes events of any type, and a session event's
    /// body is whatever its type says (a plugin's own types included), so the document is
    /// genuinely open. Its one rewriter (the firewall's scrub, SEC-03) works on every string
    /// whatever the type; the session's validation reads the types after the waterfall.
    pub data: Json,
}

declare_event! {
    /// Before an append is validated and committed: listeners may rewrite each event's `data`
    /// (the firewall's scrub, SEC-03), never the number of events. A failing listener fails
    /// the append: nothing of the batch is written (fail closed).
    pub struct Persist: waterfall("session/persist") -> PersistBatch;
}
declare_event! {
    /// Post-commit feed of every appended session event, in seq order, at append time (not yet
    /// durable: see `session/durable`). Observers cannot revert an append: a failing observer
    /// is contained (SES-01).
    pub struct SessionEvent: emit("session/event") -> SessionEventNotice;
}
declare_event! {
    /// Storage caught up: emitted after every successful durable write of a session (a
    /// write-behind batch, a flush, committed recovery closers), with the last durable seq.
    /// `session/event` comes at append time, before the event is durable; a consumer that
    /// must never report an event a crash could still lose (stream-json) holds each notice
    /// until this feed covers its seq (SES-04).
    pub struct SessionDurable: emit("session/durable") -> SessionDurability;
}
declare_event! {
    /// The durability barrier: every listener runs and is awaited; the session store drains its
    /// write-behind queue here (EVT-05, SES-04).
    pub struct SessionFlush: parallel("session/flush") -> FlushRequest;
}
declare_event! {
    /// A session became live (created or opened).
    pub struct SessionCreated: emit("session/created") -> SessionLifecycle;
}
declare_event! {
    /// A live session was closed and drained.
    pub struct SessionDisposed: emit("session/disposed") -> SessionLifecycle;
}
