//! The system-prompt seam (LOOP-14).

use serde::{Deserialize, Serialize};

use crate::sdk::{CallHandle, Service};

/// The `system-prompt` plugin's service. Method `"assemble"`: `{session_id, cwd, tools:
/// [String]}` → `{text}`. Runs the `system-prompt/assemble` waterfall, orders sections by
/// number, interpolates `{{variables}}`, and fails with `PROMPT_CONFLICT` when more than one
/// effective section is `complete`.
#[derive(Debug, Clone, Copy)]
pub struct SystemPrompt;

impl Service for SystemPrompt {
    const NAME: &'static str = "keel.system-prompt";
    type Handle = CallHandle;
}

/// One section of the system prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptSection {
    /// Stable id; a later section with the same id replaces the earlier one.
    pub id: String,
    /// Sort key.
    pub order: i64,
    /// Text, with `{{variable}}` placeholders.
    pub text: String,
    /// This section is the whole prompt (at most one effective `complete` section).
    #[serde(default)]
    pub complete: bool,
}
