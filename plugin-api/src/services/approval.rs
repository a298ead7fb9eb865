//! The approval seam (TOOL-03, TOOL-05): one-shot decisions on calls a policy marked `ask`.

use serde::{Deserialize, Serialize};

crate::contract! {
    /// The `approval` plugin's service.
    pub contract Approval = "keel.approval", version 1;
    provider ApprovalProvider;
    client ApprovalClient;
    /// Appends the audit pair `approval/asked {id, tool_name, call_id, reason?}` then
    /// `approval/decided {id, outcome}` (both `ignorable`) to the session; a decision whose
    /// audit append failed is not returned (the call fails, and the pipeline denies). The
    /// answer comes from the first `approval/answer` listener
    /// ([`crate::events::approval::Answer`]); with none loaded (headless without an approver
    /// plugin) the outcome is `unavailable`. An ask for a session without an open turn fails
    /// with `NO_OPEN_TURN` before anything is appended (TOOL-05).
    fn ask(ApprovalRequest) -> AskAnswer;
    /// The session's override when set, else the row's mode.
    fn mode(ModeRequest) -> ModeAnswer;
    /// A per-session override (the headless driver's `--approval never|ask`); another mode →
    /// `INVALID_MODE`.
    fn set_mode(SetModeRequest) -> ();
}

/// What `ask` takes.
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

/// What `ask` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AskAnswer {
    /// The decision.
    pub outcome: ApprovalOutcome,
}

/// `mode` of the approval row (and of a per-session override).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalMode {
    /// Calls run without asking.
    Never,
    /// Mutating calls ask first.
    Ask,
}

impl ApprovalMode {
    /// Every mode.
    pub const ALL: [ApprovalMode; 2] = [ApprovalMode::Never, ApprovalMode::Ask];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalMode::Never => "never",
            ApprovalMode::Ask => "ask",
        }
    }
}

impl std::fmt::Display for ApprovalMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ApprovalMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "never" => Ok(ApprovalMode::Never),
            "ask" => Ok(ApprovalMode::Ask),
            other => Err(format!(
                "approval mode must be \"never\" or \"ask\", got {other:?}"
            )),
        }
    }
}

/// What `mode` takes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModeRequest {
    /// The session whose override to read; none: the row's mode.
    #[serde(default)]
    pub session_id: Option<String>,
}

/// What `mode` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModeAnswer {
    /// The effective mode.
    pub mode: ApprovalMode,
}

/// What `set_mode` takes. `mode` is the user's text (`--approval`), checked by the provider:
/// anything but `never` or `ask` is `INVALID_MODE`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetModeRequest {
    /// The session.
    pub session_id: String,
    /// `never` or `ask`.
    pub mode: String,
}

crate::error_codes! {
    /// Approvals (`keel.approval`, TOOL-03, TOOL-05).
    pub enum ApprovalCode in "approval" {
        /// `set_mode` with a mode that is not `never` or `ask`.
        InvalidMode = "INVALID_MODE", by "`keel.approval` `set_mode`", retry Changed;
        /// An ask for a session without an open turn (nothing was appended).
        NoOpenTurn = "NO_OPEN_TURN", by "`keel.approval` `ask`", retry Never;
        /// A rule of the row's `rules` table does not parse.
        InvalidRule = "APPROVAL_RULE", by "the `approval` row at activation", retry Never;
    }
}
