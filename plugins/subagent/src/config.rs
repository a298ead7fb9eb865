//! The `subagent` row config: the caps every child obeys and the named child profiles
//! (issue 16 item 1). A profile is a subset or variant of the parent's: its own model row,
//! its own tool set, its own approval mode and budgets. It can narrow what a child may do,
//! never widen it: a tool set names tools the parent has, and an approval mode can only be
//! stricter than the parent's.

use std::collections::BTreeMap;

use keel_plugin_api::services::agent::AgentOverrides;
use keel_plugin_api::services::approval::ApprovalMode;
use schemars::JsonSchema;
use serde::Deserialize;

/// The row config; its JSON Schema is derived from it (`Manifest::config_type`).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SubagentConfig {
    /// Children of one parent session running at once; one more is a tool error.
    #[serde(default = "default_max_concurrent")]
    #[schemars(range(min = 1))]
    pub max_concurrent: u32,
    /// Deepest child (the root agent is depth 0); a call that would go deeper is a tool error.
    #[serde(default = "default_max_depth")]
    #[schemars(range(min = 1))]
    pub max_depth: u32,
    /// Wall-clock limit of one child's task, ms; past it the child is aborted and the call
    /// answers `SUBAGENT_TIMEOUT`.
    #[serde(default = "default_timeout_ms")]
    #[schemars(range(min = 1))]
    pub timeout_ms: u64,
    /// Named child profiles (`agent` argument of the tool).
    #[serde(default)]
    pub agents: BTreeMap<String, ChildProfile>,
    /// Resident children (`resident_*` tools): caps and the residual state at close.
    #[serde(default)]
    pub resident: crate::resident::config::ResidentConfig,
}

impl Default for SubagentConfig {
    fn default() -> Self {
        SubagentConfig {
            max_concurrent: default_max_concurrent(),
            max_depth: default_max_depth(),
            timeout_ms: default_timeout_ms(),
            agents: BTreeMap::new(),
            resident: Default::default(),
        }
    }
}

/// One named child profile. Absent fields inherit the parent's.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChildProfile {
    /// What the parent's model reads about this agent (in the `agent` tool's description).
    #[serde(default)]
    pub description: String,
    /// Text put before the task in the child's first message.
    #[serde(default)]
    pub instructions: Option<String>,
    /// Provider of the child's model row.
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub provider: Option<String>,
    /// The child's model.
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub model: Option<String>,
    /// Output token cap of the child's requests.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub max_tokens: Option<u64>,
    /// Model requests one child turn may make.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub max_steps: Option<u64>,
    /// Model requests the child may make in all (its `--max-turns`).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub max_turns: Option<u64>,
    /// The tools the child is offered (public names); absent: the parent's.
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    /// The child's approval mode; only as strict as the parent's or stricter.
    #[serde(default)]
    pub approval: Option<ApprovalMode>,
    /// This child's own wall-clock limit, ms (default: the row's `timeout_ms`).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub timeout_ms: Option<u64>,
}

impl ChildProfile {
    /// The loop settings this profile changes.
    pub fn overrides(&self) -> AgentOverrides {
        AgentOverrides {
            provider: self.provider.clone(),
            model: self.model.clone(),
            max_tokens: self.max_tokens,
            max_steps: self.max_steps,
            tools: self.tools.clone(),
        }
    }
}

fn default_max_concurrent() -> u32 {
    4
}
fn default_max_depth() -> u32 {
    2
}
fn default_timeout_ms() -> u64 {
    600_000
}
