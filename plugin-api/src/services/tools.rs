//! The tool seam (ARCHITECTURE §8, requirements C9 and B9): the `keel.tools` registry and
//! pipeline, the protocol of tool-providing plugins, and the result shape.
//!
//! Tool plugins (`tool-fs`, `tool-shell`, …) provide a JSON service named
//! [`provider_service_name`] and register their [`ToolDefinition`]s with `keel.tools`. The agent
//! loop hands each assistant message's calls to `keel.tools` `"run_batch"`, which runs the whole
//! B9 pipeline and appends `tool/call` / `tool/result` to the session in model order.

use serde::{Deserialize, Serialize};

use crate::sdk::{CallHandle, Service};

/// The registry and pipeline (`tools` plugin). Methods, with JSON shapes:
///
/// - `"register"`: `{service, tools: [ToolDefinition]}` → `{registration}`. All or nothing: a
///   name already registered → `DUPLICATE_TOOL`. Emits `tools/change`.
/// - `"unregister"`: `{registration}` → `{}`. Emits `tools/change`.
/// - `"list"`: `{}` → `{tools: [ToolDefinition]}` in registration order.
/// - `"run_batch"`: [`BatchRequest`] → `{results: [ToolResult]}` (one per call, model order).
///   Appends, per call, `tool/call` (raw argument string) before anything runs and
///   `tool/result` in model order; never fails because a tool failed (that is an error
///   result the model reads). Errors are for a broken session only.
/// - `"cancel"`: `{session_id}` → `{}`: stops starting calls of the running batch; a running
///   body is stopped at once — its provider call is dropped, as at the deadline, so a provider
///   must end its work when its caller goes away — and ends `ABORTED`; the rest end
///   `ABORTED_BEFORE_DISPATCH` (TOOL-09). Every call still gets its `tool/result`.
#[derive(Debug, Clone, Copy)]
pub struct Tools;

impl Service for Tools {
    const NAME: &'static str = "keel.tools";
    type Handle = CallHandle;
}

/// The service name a tool-providing row provides (declare it with
/// `Manifest::provides_named(…, false)`), e.g. `keel.tool.tool-fs`.
pub fn provider_service_name(row: &str) -> String {
    format!("keel.tool.{row}")
}

/// A tool provider's one method, `"execute"`: [`ToolInvocation`] → [`ToolResult`].
pub const PROVIDER_METHOD: &str = "execute";

/// A tool as registered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// Public name (ARCHITECTURE §8): `read_file`, `shell`, ….
    pub name: String,
    /// What the model reads.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: serde_json::Value,
    /// May run concurrently with other parallel-safe calls (TOOL-10; default exclusive).
    #[serde(default)]
    pub parallel_safe: bool,
    /// Changes the world (files, processes): approval mode `ask` asks before it runs.
    #[serde(default)]
    pub mutating: bool,
}

/// One call as the model produced it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelCall {
    /// Call id.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Raw argument text, exactly as produced.
    pub arguments: String,
}

/// `"run_batch"` arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchRequest {
    /// Live session.
    pub session_id: String,
    /// Open turn.
    pub turn: u64,
    /// Open step.
    pub step: u64,
    /// The session's working root (relative paths resolve here).
    pub cwd: String,
    /// The assistant message's calls, in model order.
    pub calls: Vec<ModelCall>,
}

/// What a provider's `"execute"` receives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolInvocation {
    /// Tool name.
    pub name: String,
    /// Call id.
    pub call_id: String,
    /// Session id (observation state is keyed by it).
    pub session_id: String,
    /// Working root.
    pub cwd: String,
    /// Parsed arguments (`{}` for an empty string).
    pub args: serde_json::Value,
    /// Deadline the pipeline enforces around the body, ms (0 = none).
    #[serde(default)]
    pub timeout_ms: u64,
}

/// A tool's outcome: what the model reads and what `tool/result` records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ToolResult {
    /// Text the model reads.
    pub content: String,
    /// The call failed (the content explains why).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
    /// Machine-readable failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolError>,
    /// Structured extras (a write's version, an edit's before/after, exit code).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<serde_json::Value>,
    /// Ends the turn at this step (LOOP-12; honoured only on success).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub concludes_turn: bool,
}

/// The machine-readable part of a failed result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolError {
    /// A code: [`codes`] or a tool's own (`FS_*`, `SHELL_*`).
    pub code: String,
}

impl ToolResult {
    /// A successful result.
    pub fn ok(content: impl Into<String>) -> Self {
        ToolResult {
            content: content.into(),
            ..ToolResult::default()
        }
    }

    /// An error result the model can read: `content` is `"Error [CODE]: message"`.
    pub fn error(code: &str, message: impl AsRef<str>) -> Self {
        ToolResult {
            content: format!("Error [{code}]: {}", message.as_ref()),
            is_error: true,
            error: Some(ToolError {
                code: code.to_owned(),
            }),
            ..ToolResult::default()
        }
    }
}

/// Pipeline error codes (B9, TOOL-03, TOOL-09).
pub mod codes {
    /// No registered tool has this name.
    pub const UNKNOWN_TOOL: &str = "UNKNOWN_TOOL";
    /// The argument text is not a JSON object.
    pub const INVALID_ARGUMENTS: &str = "INVALID_ARGUMENTS";
    /// A pre-execute listener or a guard denied the call.
    pub const TOOL_DENIED: &str = "TOOL_DENIED";
    /// The approver said no.
    pub const APPROVAL_REJECTED: &str = "APPROVAL_REJECTED";
    /// Nobody could answer the approval request (headless, no approver): fail closed.
    pub const APPROVAL_UNAVAILABLE: &str = "APPROVAL_UNAVAILABLE";
    /// The approval request was cancelled.
    pub const APPROVAL_CANCELLED: &str = "APPROVAL_CANCELLED";
    /// The body ran past its deadline and was stopped.
    pub const TOOL_TIMEOUT: &str = "TOOL_TIMEOUT";
    /// Cancelled before the body started.
    pub const ABORTED_BEFORE_DISPATCH: &str = "ABORTED_BEFORE_DISPATCH";
    /// Cancelled after the body started (drained).
    pub const ABORTED: &str = "ABORTED";
    /// The body, a listener or the provider failed unexpectedly.
    pub const TOOL_FAILED: &str = "TOOL_FAILED";
    /// The provider's answer was not a `ToolResult`.
    pub const INVALID_TOOL_OUTPUT: &str = "INVALID_TOOL_OUTPUT";
    /// A post-execute listener blocked the result.
    pub const TOOL_BLOCKED: &str = "TOOL_BLOCKED";
}
