//! `context/*` events: the compaction plan's decision point and the notice of a compaction
//! (issue 14; CTX-01…06). Owned by the `context` plugin.

use abi_stable::StableAbi;
use abi_stable::std_types::RString;

use super::json::Json;
use crate::declare_event;

/// A session and a context document.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct ContextPoint {
    /// Session id.
    pub session_id: RString,
    /// Event-specific JSON (documented per event).
    pub data: Json,
}

declare_event! {
    /// A compaction is about to run. `data`: a `CompactPlan` (`services::context`). Output: the
    /// plan to apply: a listener may drop or reorder actions, or set `veto` to refuse the plan
    /// (nothing is appended; a request that still does not fit ends `CONTEXT_OVERFLOW`). The
    /// context manager checks the returned plan against the projection before it appends.
    pub struct Compact: waterfall("context/compact") -> ContextPoint;
}
declare_event! {
    /// A compaction was appended to the log. `data`: a `CompactionReport`.
    pub struct Compacted: emit("context/compacted") -> ContextPoint;
}
