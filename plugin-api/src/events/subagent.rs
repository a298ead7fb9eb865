//! `subagent/*` events: a child agent's life as its parent sees it (issue 16). Declared by the
//! `subagent` row, which starts children; the headless driver follows them so that a
//! `stream-json` consumer sees the whole tree.

use abi_stable::StableAbi;
use abi_stable::std_types::RString;

use super::json::Json;
use crate::declare_event;

/// A child session and where it hangs in the tree.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct ChildPoint {
    /// The delegating session.
    pub parent_session: RString,
    /// The parent's tool call that started the child (empty for a resident child started
    /// outside a call).
    pub parent_call_id: RString,
    /// The child's session id.
    pub child_session: RString,
    /// Event-specific JSON (documented per event).
    pub data: Json,
}

declare_event! {
    /// A child's session exists and its loop is about to get its task. `data`:
    /// `{"agent":name,"mode":"spawn"|"fork"|"resident","depth":n}` (a resident child adds
    /// `"resident":NAME`).
    pub struct ChildStarted: emit("subagent/started") -> ChildPoint;
}
declare_event! {
    /// A child reached a terminal state and its session is closed. `data`:
    /// `{"outcome":"completed"|"failed"|"timeout"|"cancelled","code"?:…}`.
    pub struct ChildEnded: emit("subagent/ended") -> ChildPoint;
}
