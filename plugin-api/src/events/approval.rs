//! `approval/*` events: the seam between the approval row, which audits and decides policy, and
//! whoever can answer a person's question (an interactive front end, a CI approver plugin).
//!
//! The approval row owns the audit pair and the outcome vocabulary; answering is a separate
//! job so a terminal UI, a chat bridge or a test approver can be a plugin of its own without
//! the approval row knowing which one is loaded.

use super::json::Json;
use crate::declare_event;

declare_event! {
    /// One question for an approver. Payload: the `ApprovalRequest` as JSON plus its audit
    /// `id`. Listeners are awaited in order; the first to return
    /// `{"outcome":"allowed-once"|"rejected"|"cancelled"}` answers. Nobody answering means
    /// `unavailable`, which denies.
    pub struct Answer: serial("approval/answer") -> Json => Json;
}
