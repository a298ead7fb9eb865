//! The `resident` sub-table of the `subagent` row (issue 16 item 2): the cap on live resident
//! children per parent, what happens to a child's unrun inputs when its parent closes, and how
//! long `resident_view{wait: true}` and a stop wait for a child.

use schemars::JsonSchema;
use serde::Deserialize;

/// `[subagent] resident = { … }`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResidentConfig {
    /// Offer the resident tools (`resident_*` to agents, `memory_*` and `notify_parent` to
    /// resident children). Off by default: five tool schemas ride along with every request of
    /// every agent, so a profile that wants long-lived children turns them on.
    #[serde(default)]
    pub enabled: bool,
    /// Resident children one parent session may have live at once; one more is
    /// `RESIDENT_LIMIT`.
    #[serde(default = "default_max_children")]
    #[schemars(range(min = 1))]
    pub max_children: u32,
    /// The residual state of a child's unrun inputs when it is stopped by its parent session
    /// closing or the row unloading (SUB-02; `return` has no caller there, so it is not
    /// offered). `keep` (the default) re-queues them at the next `resident_start` of the name.
    #[serde(default)]
    pub on_close: CloseResidual,
    /// Longest `resident_view{wait: true}` waits for the child to become idle, ms.
    #[serde(default = "default_wait_ms")]
    #[schemars(range(min = 1))]
    pub wait_ms: u64,
    /// Longest a stop waits for an aborted child's turn to end before closing it, ms.
    #[serde(default = "default_grace_ms")]
    #[schemars(range(min = 1))]
    pub grace_ms: u64,
}

impl Default for ResidentConfig {
    fn default() -> Self {
        ResidentConfig {
            enabled: false,
            max_children: default_max_children(),
            on_close: CloseResidual::default(),
            wait_ms: default_wait_ms(),
            grace_ms: default_grace_ms(),
        }
    }
}

/// The residual states a plural stop may use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CloseResidual {
    /// Saved; re-queued by the next `resident_start` of the name.
    #[default]
    Keep,
    /// Logged in the child's log and answered `dropped`.
    Drop,
    /// Saved; re-queued only by `resident_start{resume_parked: true}`.
    Park,
}

fn default_max_children() -> u32 {
    8
}
fn default_wait_ms() -> u64 {
    600_000
}
fn default_grace_ms() -> u64 {
    10_000
}
