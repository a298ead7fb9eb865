//! The context seam (CTX-01…06, MEM-08, issue 14): the history that fits the model's window.
//!
//! Why a service and not a listener of `agent/request`: fitting needs the projected history,
//! the system prompt and the tools together, may append replacement events to the log, and
//! answers the messages to send. The agent loop asks [`ContextManager`] `fit` before every
//! model request when a `keel.context` provider is in the profile, and sends what it answers;
//! without one it sends the session's projection unchanged.
//!
//! Compaction never deletes (CTX-01): the provider appends surface replacements that shadow
//! ranges of the history; the original events stay in the log, where the `coldcontext_*`
//! tools read them back byte for byte (CTX-04, MEM-08). A plan is a [`CompactPlan`] that the
//! `context/compact` waterfall may change or veto before anything is appended.

use serde::{Deserialize, Serialize};

use crate::sdk::Frozen;
use crate::services::llm::{LlmCallConfig, ModelTool};

/// [`FitRequest::fixed_bytes`] of a request with `system` and `tools`.
pub fn fixed_bytes(system: Option<&str>, tools: &[ModelTool]) -> u64 {
    let tools = if tools.is_empty() {
        0
    } else {
        serde_json::to_string(tools).map_or(0, |t| t.len())
    };
    (system.map_or(0, str::len) + tools) as u64
}

crate::contract! {
    /// The `context` plugin's service: token accounting, compaction, the cold tier.
    pub contract ContextManager = "keel.context", version 1;
    provider ContextProvider;
    client ContextClient;
    /// The history to send for one request, compacted first when the projected request passes
    /// the threshold (or, for [`FitTrigger::ServerOverflow`], whatever its size).
    /// `CONTEXT_OVERFLOW` when it cannot be made to fit.
    fn fit(FitRequest) -> Fitted;
    /// What the provider counted for the session's last fitted request (its `usage`): the
    /// estimate is corrected from it.
    fn calibrate(Calibration) -> ();
}

/// Why `fit` is called.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum FitTrigger {
    /// Before a model request: compact only past the threshold.
    Request,
    /// The provider refused the last request as over its window (`CONTEXT_WINDOW_EXCEEDED`):
    /// compact now, below the threshold, and count the refused size as a lower bound.
    ServerOverflow {
        /// The provider's own words.
        message: String,
    },
}

/// `fit`'s request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FitRequest {
    /// Session id.
    pub session_id: String,
    /// The frozen call config of the request (provider and model name the window).
    pub config: LlmCallConfig,
    /// Bytes the request carries besides its messages: the system prompt and the JSON of the
    /// tool schemas ([`fixed_bytes`]). Sizes only cross the seam, not the texts: the caller
    /// measures them once per turn.
    pub fixed_bytes: u64,
    /// Why.
    pub trigger: FitTrigger,
}

/// A request's size as the context manager sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenEstimate {
    /// Estimated prompt tokens (messages, system prompt, tools).
    pub tokens: u64,
    /// The bytes they were estimated from.
    pub bytes: u64,
    /// The model's context window; `None` when unknown (nothing is compacted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<u64>,
    /// Tokens kept free for the answer.
    pub output_reserve: u64,
    /// Past this many prompt tokens a request is compacted first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<u64>,
    /// How the tokens were counted, e.g. `bytes/4`, `calibrated`.
    pub method: String,
}

/// `fit`'s answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fitted {
    /// The history to send, frozen (the session's own messages, shared).
    pub messages: Vec<Frozen>,
    /// The size of the request with these messages.
    pub estimate: TokenEstimate,
    /// What was compacted for it, if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction: Option<CompactionReport>,
}

/// `calibrate`'s request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Calibration {
    /// Session id.
    pub session_id: String,
    /// The prompt tokens the provider reported for the last fitted request.
    pub input_tokens: u64,
}

/// One step of a compaction plan. `seqs` are the seqs of the *visible* surface nodes the step
/// shadows, in display order: a contiguous run of whole tool-call groups (a call and all its
/// results are hidden together, CTX-05), or one tool result for [`CompactAction::Cap`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum CompactAction {
    /// Sink the run to the cold tier: one stub message names its cold references and sizes.
    Sink {
        /// Shadowed node seqs.
        seqs: Vec<u64>,
    },
    /// Replace the run with a summary the model writes in a side request.
    Summarise {
        /// Shadowed node seqs.
        seqs: Vec<u64>,
    },
    /// Replace one oversized tool result with its head and tail and a cold reference.
    Cap {
        /// The result's seq.
        seq: u64,
    },
}

/// What `context/compact` carries: the plan, before anything is appended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactPlan {
    /// Session id.
    pub session_id: String,
    /// Why the compaction runs.
    pub trigger: FitTrigger,
    /// The request's size before the plan.
    pub estimate: TokenEstimate,
    /// The size the plan aims for.
    pub target_tokens: u64,
    /// The steps, applied in order.
    pub actions: Vec<CompactAction>,
    /// Set by a listener to refuse the plan (the reason is logged); a vetoed plan appends
    /// nothing, and a request that still does not fit ends `CONTEXT_OVERFLOW`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub veto: Option<String>,
}

/// What a compaction did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactionReport {
    /// Why it ran.
    pub trigger: FitTrigger,
    /// The applied steps.
    pub actions: Vec<CompactAction>,
    /// The seqs of the replacement events appended.
    pub appended: Vec<u64>,
    /// Estimated prompt tokens before.
    pub tokens_before: u64,
    /// Estimated prompt tokens after.
    pub tokens_after: u64,
}

crate::error_codes! {
    /// Context management (`context` plugin).
    pub enum ContextCode in "context" {
        /// The request does not fit the model's window, even after compaction (or the plan was
        /// vetoed). The turn ends with it; nothing was cut.
        Overflow = "CONTEXT_OVERFLOW", by "`keel.context` `fit`, the agent loop", retry Never;
        /// `coldcontext_read`: the reference names nothing in the session's cold tier.
        ColdRefUnknown = "COLD_REF_UNKNOWN", by "`coldcontext_read`", retry Changed;
        /// The cold tier's search index failed (SQLite's words in the message).
        Index = "CONTEXT_INDEX", by "`keel.context`, `coldcontext_search`", retry Never;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_round_trips_with_tagged_actions() {
        let plan = CompactPlan {
            session_id: "s".into(),
            trigger: FitTrigger::ServerOverflow {
                message: "too long".into(),
            },
            estimate: TokenEstimate::default(),
            target_tokens: 10,
            actions: vec![
                CompactAction::Sink { seqs: vec![4, 5] },
                CompactAction::Cap { seq: 9 },
            ],
            veto: None,
        };
        let text = serde_json::to_string(&plan).unwrap();
        assert!(text.contains(r#"{"kind":"sink","seqs":[4,5]}"#), "{text}");
        assert!(text.contains(r#""kind":"server-overflow""#), "{text}");
        assert_eq!(serde_json::from_str::<CompactPlan>(&text).unwrap(), plan);
        assert_eq!(ContextCode::Overflow.as_str(), "CONTEXT_OVERFLOW");
    }

    #[test]
    fn fixed_bytes_are_the_system_prompt_and_the_tool_schemas() {
        assert_eq!(fixed_bytes(None, &[]), 0);
        assert_eq!(fixed_bytes(Some("four"), &[]), 4);
        let tool = ModelTool {
            name: "t".into(),
            description: "d".into(),
            parameters: serde_json::json!({}),
        };
        let json = serde_json::to_string(std::slice::from_ref(&tool)).unwrap();
        assert_eq!(fixed_bytes(Some("ab"), &[tool]), 2 + json.len() as u64);
    }
}
