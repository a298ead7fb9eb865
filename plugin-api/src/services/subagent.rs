//! The `agent` tool's vocabulary (issue 16 item 1; SUB-05, SUB-07): its typed arguments, and
//! the codes of the error results a parent's model reads when a child could not run or did
//! not finish. The `subagent` row serves the tool; the codes live here so a driver, a test or
//! another row can name them without depending on the row.

use serde::{Deserialize, Serialize};

use crate::services::agent::ChildMode;

/// The `agent` tool's public name.
pub const AGENT_TOOL: &str = "agent";

/// The `agent` tool's arguments. Their derived schema is the tool's `parameters`, so the
/// field docs are what the parent's model reads (the `subagent` row adds the `enum` of its
/// named agents to `agent`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentArgs {
    /// The child's task, complete in itself.
    pub task: String,
    /// spawn (default): a fresh session; fork: seeded with this conversation's completed turns.
    #[serde(default = "spawn")]
    #[schemars(schema_with = "mode_schema")]
    pub mode: ChildMode,
    /// A named agent (see the list); absent: a child like you.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// A short label (3-5 words) for logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

fn spawn() -> ChildMode {
    ChildMode::Spawn
}

/// `mode` as the model reads it: the two spellings, inline (SES-13 is the fork's seeding).
fn mode_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "string", "enum": ["spawn", "fork"] })
}

/// How a child ended, as `subagent/ended` and the parent's log record it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChildOutcome {
    /// Its last turn ended `completed`: its final text is the tool's result.
    Completed,
    /// Its turn ended otherwise (an error, a budget, an abort).
    Failed,
    /// It ran past its wall-clock limit and was aborted.
    Timeout,
    /// The parent's call was cancelled (Ctrl-C, SIGTERM, the parent's abort).
    Cancelled,
    /// The process died with the child running; recorded when the parent is resumed.
    Interrupted,
    /// A resident child was stopped by its parent (`subagent/ended` only).
    Stopped,
}

impl ChildOutcome {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ChildOutcome::Completed => "completed",
            ChildOutcome::Failed => "failed",
            ChildOutcome::Timeout => "timeout",
            ChildOutcome::Cancelled => "cancelled",
            ChildOutcome::Interrupted => "interrupted",
            ChildOutcome::Stopped => "stopped",
        }
    }
}

crate::error_codes! {
    /// Child agents (`subagent` row, the `agent` tool), as error results the parent's model
    /// reads (`Error [CODE]: …`).
    pub enum SubagentCode in "subagent" {
        /// The parent session already runs `max_concurrent` children; refused at once.
        Limit = "SUBAGENT_LIMIT", by "the `agent` tool (`subagent` row)", retry Later;
        /// The child would be deeper than `max_depth`.
        Depth = "SUBAGENT_DEPTH", by "the `agent` tool (`subagent` row)", retry Never;
        /// No named agent of that name in the row's `agents`.
        Unknown = "SUBAGENT_UNKNOWN", by "the `agent` tool (`subagent` row)", retry Changed;
        /// The child ran past its `timeout_ms` and was aborted.
        Timeout = "SUBAGENT_TIMEOUT", by "the `agent` tool (`subagent` row)", retry Changed;
        /// The child's turn ended other than `completed`; the result names its reason, code
        /// and session.
        Failed = "SUBAGENT_FAILED", by "the `agent` tool (`subagent` row)", retry Changed;
        /// The parent's call was cancelled and the child aborted with it.
        Cancelled = "SUBAGENT_CANCELLED", by "the `agent` tool (`subagent` row)", retry Later;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_default_to_a_spawn_and_refuse_unknown_keys() {
        let a: AgentArgs = serde_json::from_str(r#"{"task":"look"}"#).unwrap();
        assert_eq!(a.mode, ChildMode::Spawn);
        assert_eq!(a.agent, None);
        let f: AgentArgs =
            serde_json::from_str(r#"{"task":"t","mode":"fork","agent":"reader"}"#).unwrap();
        assert_eq!(f.mode, ChildMode::Fork);
        assert_eq!(f.agent.as_deref(), Some("reader"));
        assert!(serde_json::from_str::<AgentArgs>(r#"{"task":"t","mood":"x"}"#).is_err());
        assert!(serde_json::from_str::<AgentArgs>(r#"{"task":"t","mode":"clone"}"#).is_err());
    }

    #[test]
    fn the_derived_schema_keeps_the_argument_names_and_refuses_others() {
        let s = crate::services::tools::schema_of::<AgentArgs>();
        assert_eq!(s["type"], "object");
        assert_eq!(s["required"], serde_json::json!(["task"]));
        assert_eq!(s["additionalProperties"], false);
        let props = s["properties"].as_object().unwrap();
        let names: Vec<&str> = props.keys().map(String::as_str).collect();
        assert_eq!(names, ["task", "mode", "agent", "description"]);
        assert_eq!(props["mode"]["enum"], serde_json::json!(["spawn", "fork"]));
        assert!(
            props["mode"]["description"]
                .as_str()
                .unwrap()
                .starts_with("spawn (default)")
        );
    }
}
