//! The system-prompt seam (LOOP-14).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

crate::contract! {
    /// The `system-prompt` plugin's service.
    pub contract SystemPrompt = "keel.system-prompt", version 1;
    provider SystemPromptProvider;
    client SystemPromptClient;
    /// Runs the `system-prompt/assemble` waterfall, orders sections by number, interpolates
    /// `{{variables}}`; `PROMPT_CONFLICT` when more than one effective section is `complete`.
    fn assemble(AssembleRequest) -> AssembledPrompt;
}

/// `assemble`'s request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssembleRequest {
    /// Session id (passed to the waterfall's listeners).
    #[serde(default)]
    pub session_id: String,
    /// The session's working directory.
    pub cwd: String,
    /// Tool names offered to the model.
    #[serde(default)]
    pub tools: Vec<String>,
}

/// `assemble`'s answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssembledPrompt {
    /// The system prompt.
    pub text: String,
}

/// One section of the system prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PromptSection {
    /// Stable id; a later section with the same id replaces the earlier one.
    #[schemars(length(min = 1))]
    pub id: String,
    /// Sort key.
    pub order: i64,
    /// Text, with `{{variable}}` placeholders.
    pub text: String,
    /// This section is the whole prompt (at most one effective `complete` section).
    #[serde(default)]
    pub complete: bool,
}

crate::error_codes! {
    /// The system prompt (`system-prompt` plugin).
    pub enum PromptCode in "prompt" {
        /// More than one effective section is `complete`.
        Conflict = "PROMPT_CONFLICT", by "`keel.system-prompt` `assemble`", retry Never;
    }
}
