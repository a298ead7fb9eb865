//! `approval/*` events: the seam between the approval row, which audits and decides policy, and
//! whoever can answer a person's question (an interactive front end, a CI approver plugin).
//!
//! The approval row owns the audit pair and the outcome vocabulary; answering is a separate
//! job so a terminal UI, a chat bridge or a test approver can be a plugin of its own without
//! the approval row knowing which one is loaded.

use serde::{Deserialize, Serialize};

use super::typed::Typed;
use crate::declare_event;
use crate::services::approval::{ApprovalRequest, AskAnswer};

/// One question on `approval/answer`: the request and its audit id. Wire form: the
/// `ApprovalRequest`'s JSON object with an `"id"` member.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApprovalQuestion {
    /// Audit id of the pair the approval row logs.
    pub id: String,
    /// What is asked.
    #[serde(flatten)]
    pub request: ApprovalRequest,
}

declare_event! {
    /// One question for an approver. Payload: an `ApprovalQuestion` (the `ApprovalRequest`
    /// plus its audit `id`). Listeners are awaited in order; the first to return an
    /// `AskAnswer` (`{"outcome":"allowed-once"|"rejected"|"cancelled"}`) answers. Nobody
    /// answering, or an answer that is not an `AskAnswer`, means `unavailable`, which denies.
    pub struct Answer: serial("approval/answer") -> Typed<ApprovalQuestion> => Typed<AskAnswer>;
}
