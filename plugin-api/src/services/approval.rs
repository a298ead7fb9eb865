//! The approval seam (TOOL-03, TOOL-05): one-shot decisions on calls a policy marked `ask`.

use serde::{Deserialize, Serialize};

use crate::sdk::{CallHandle, Service};

/// The `approval` plugin's service. Methods:
///
/// - `"ask"`: [`ApprovalRequest`] → `{outcome}` with [`ApprovalOutcome`]. Appends the audit pair
///   `approval/asked {id, tool_name, call_id, reason?}` then `approval/decided {id, outcome}`
///   (both `ignorable`) to the session; a decision whose audit append failed is not returned
///   (the call fails, and the pipeline denies). The answer comes from the first
///   `approval/answer` listener ([`crate::events::approval::Answer`]); with none loaded
///   (headless without an approver plugin) the outcome is `unavailable`. An ask for a session
///   without an open turn fails with `NO_OPEN_TURN` before anything is appended (TOOL-05).
/// - `"mode"`: `{session_id?}` → `{mode: "never"|"ask"}`: the session's override when set,
///   else the row's mode.
/// - `"set_mode"`: `{session_id, mode}` → `{}`: a per-session override (the headless driver's
///   `--approval never|ask`); another mode → `INVALID_MODE`.
#[derive(Debug, Clone, Copy)]
pub struct Approval;

impl Service for Approval {
    const NAME: &'static str = "keel.approval";
    type Handle = CallHandle;
}

/// What `"ask"` takes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// Live session (the audit pair goes here).
    pub session_id: String,
    /// Tool name.
    pub tool_name: String,
    /// Call id.
    pub call_id: String,
    /// Why approval is needed.
    #[serde(default)]
    pub reason: Option<String>,
    /// Parsed arguments, for the approver's display.
    #[serde(default)]
    pub args: serde_json::Value,
}

/// The four answers (TOOL-03). Only `allowed-once` proceeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalOutcome {
    /// Run this one call.
    AllowedOnce,
    /// A human said no.
    Rejected,
    /// The request was cancelled.
    Cancelled,
    /// Nobody could answer.
    Unavailable,
}
