//! `context/*` events: the compaction plan's decision point and the notice of a compaction
//! (issue 14; CTX-01…06). Owned by the `context` plugin.
//!
//! Each event's `data` is typed ([`CompactPlan`], [`CompactionReport`]) and crosses the ABI
//! as a [`Typed`] value (issue 24 item 2); the wire JSON is what it was.

use abi_stable::StableAbi;
use abi_stable::std_types::RString;

use super::typed::Typed;
use crate::declare_event;
use crate::services::context::{CompactPlan, CompactionReport};

/// A session and a context document `D` (the event's own: see each event).
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
#[sabi(unsafe_unconstrained(D))]
pub struct ContextPoint<D> {
    /// Session id.
    pub session_id: RString,
    /// The event's document.
    pub data: Typed<D>,
}

declare_event! {
    /// A compaction is about to run. `data`: the `CompactPlan` (`services::context`). Output: the
    /// plan to apply: a listener may drop or reorder actions, or set `veto` to refuse the plan
    /// (nothing is appended; a request that still does not fit ends `CONTEXT_OVERFLOW`). The
    /// context manager checks the returned plan against the projection before it appends.
    pub struct Compact: waterfall("context/compact") -> ContextPoint<CompactPlan>;
}
declare_event! {
    /// A compaction was appended to the log. `data`: a `CompactionReport`.
    pub struct Compacted: emit("context/compacted") -> ContextPoint<CompactionReport>;
}
