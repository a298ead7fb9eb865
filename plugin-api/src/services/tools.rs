//! The tool seam (ARCHITECTURE §8, requirements C9 and B9): the `keel.tools` registry and
//! pipeline, the protocol of tool-providing plugins, and the result shape.
//!
//! A tool plugin implements [`Tool`] per tool and calls `ctx.serve_tools(…)`
//! ([`ToolSet`], `Manifest::serves_tools`), or `ctx.serve_dynamic_tools(…)` ([`DynamicTools`])
//! for tools known only after activation; underneath, the wire protocol stays
//! [`ToolProvider`] served under [`provider_service_name`], with the [`ToolDefinition`]s
//! registered with [`Tools`] ([`register_until_unload`]), which the SDK writes. The agent loop hands each assistant message's calls to
//! `run_batch`, which runs the whole B9 pipeline and appends `tool/call` / `tool/result` to the
//! session in model order; the results come back frozen ([`FrozenResult`]).

use serde::{Deserialize, Serialize};

use crate::codes::ErrorCode;
use crate::sdk::{Context, Error, Frozen, Result};

pub use super::tool_dynamic::DynamicTools;
pub use super::tool_trait::{
    ErasedTool, Tool, ToolCall, ToolFuture, ToolSet, ToolSetProvider, ToolSpec, decode_args,
    schema_of,
};

crate::contract! {
    /// The registry and pipeline (`tools` plugin).
    pub contract Tools = "keel.tools", version 1;
    provider ToolsProvider;
    client ToolsClient;
    /// Registers a provider's tools. All or nothing: a name already registered →
    /// `DUPLICATE_TOOL`; a definition without a name or with a non-object schema →
    /// `INVALID_TOOL_DEFINITION`. Emits `tools/change`.
    fn register(RegisterRequest) -> Registered;
    /// Undoes a registration (`UNKNOWN_REGISTRATION`). Emits `tools/change`.
    fn unregister(UnregisterRequest) -> ();
    /// The registered tools, in registration order.
    fn list(ListRequest) -> ToolList;
    /// Runs one assistant message's calls through the B9 pipeline: appends, per call,
    /// `tool/call` (raw argument string) before anything runs and `tool/result` in model
    /// order; never fails because a tool failed (that is an error result the model reads).
    /// `failure` (code `TOOL_STAGE_FAILED`) means a stage listener failed and the turn must
    /// end in error; an `Err` means the session refused an append.
    fn run_batch(BatchRequest) -> BatchOutcome;
    /// Stops starting calls of the running batch; a running body is stopped at once — its
    /// provider call is dropped, as at the deadline, so a provider must end its work when its
    /// caller goes away — and ends `ABORTED`; the rest end `ABORTED_BEFORE_DISPATCH`
    /// (TOOL-09). Every call still gets its `tool/result`.
    fn cancel(CancelRequest) -> ();
}

crate::contract! {
    /// A tool-providing row (`tool-fs`, `tool-shell`, …), served under the run-time name
    /// [`provider_service_name`] (`keel.tool.<plugin>`, declared by `Manifest::serves_tools`)
    /// and registered with [`Tools`]. The wire protocol under [`Tool`]: `ctx.serve_tools`
    /// writes the provider, so authors do not.
    pub contract ToolProvider = "keel.tool.<row>", version 1;
    provider ToolExecutor;
    client ToolProviderClient;
    /// Runs one call. A tool's failure is an error [`ToolResult`], not an `Err`: an `Err`
    /// becomes `TOOL_FAILED` in the pipeline.
    fn execute(ToolInvocation) -> ToolResult;
}

/// The service name a tool-providing plugin provides (`Manifest::serves_tools` declares it),
/// e.g. `keel.tool.tool-fs`.
pub fn provider_service_name(row: &str) -> String {
    format!("keel.tool.{row}")
}

/// `register`'s request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegisterRequest {
    /// The provider's service name ([`provider_service_name`]).
    pub service: String,
    /// Its tools.
    pub tools: Vec<ToolDefinition>,
}

/// `register`'s answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registered {
    /// What `unregister` takes.
    pub registration: u64,
}

/// `unregister`'s request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnregisterRequest {
    /// From [`Registered`].
    pub registration: u64,
}

/// `list`'s request (`{}`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListRequest {}

/// `list`'s answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolList {
    /// In registration order.
    pub tools: Vec<ToolDefinition>,
}

/// `cancel`'s request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CancelRequest {
    /// The session whose running batch stops.
    pub session_id: String,
}

/// `run_batch`'s answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchOutcome {
    /// One frozen result per call, in model order: what `tool/result` recorded, carried by
    /// reference (a result is encoded once, when the pipeline freezes it).
    pub results: Vec<FrozenResult>,
    /// Set when a listener failure stopped the batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<BatchFailure>,
}

/// Why a batch ended early: a listener of some stage failed. The loop ends the turn with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchFailure {
    /// `TOOL_STAGE_FAILED` ([`ToolCode::StageFailed`]).
    pub code: String,
    /// What failed, naming the stage and the call.
    pub message: String,
}

/// A [`ToolResult`] frozen once (TOOL-04): the snapshot observers, the log and the loop share.
/// On the wire it is the result's JSON, verbatim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct FrozenResult(Frozen);

/// The two flags of a result the loop decides on, read without copying the content.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub struct ResultFlags {
    /// The call failed.
    #[serde(default)]
    pub is_error: bool,
    /// The result ends the turn (LOOP-12).
    #[serde(default)]
    pub concludes_turn: bool,
}

impl FrozenResult {
    /// Freezes `result` (its one encode).
    ///
    /// # Errors
    /// `INVALID_JSON` when a `meta` value cannot be serialised.
    pub fn freeze(result: &ToolResult) -> Result<Self> {
        Frozen::freeze(result).map(FrozenResult)
    }

    /// The snapshot.
    pub fn frozen(&self) -> &Frozen {
        &self.0
    }

    /// Its JSON text.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// The result, parsed.
    ///
    /// # Errors
    /// `INVALID_JSON` when the snapshot is not a `ToolResult`.
    pub fn parse(&self) -> Result<ToolResult> {
        self.0.parse()
    }

    /// `is_error` and `concludes_turn` (the content is scanned, not copied).
    ///
    /// # Errors
    /// `INVALID_JSON` when the snapshot is not a `ToolResult`.
    pub fn flags(&self) -> Result<ResultFlags> {
        self.0.parse()
    }
}

/// Registers `tools` as provided by `service` with `keel.tools` and unregisters them when
/// this fiber unloads (an unregister that fails is logged: the registry may be gone first).
///
/// # Errors
/// The registry's refusal (`DUPLICATE_TOOL`, …), `SERVICE_UNAVAILABLE`, `INACTIVE_FIBER`.
pub async fn register_until_unload(
    ctx: &Context,
    service: &str,
    tools: Vec<ToolDefinition>,
    label: &str,
) -> Result<u64> {
    let registry = ctx.client::<Tools>()?;
    let Registered { registration } = registry
        .register(RegisterRequest {
            service: service.to_owned(),
            tools,
        })
        .await?;
    let what = label.to_owned();
    ctx.effect(label, move || async move {
        if let Err(e) = registry
            .unregister(UnregisterRequest { registration })
            .await
        {
            tracing::debug!(error = %e, "{what}");
        }
        Ok(())
    })?;
    Ok(registration)
}

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
    /// Offered only to child agents (a resident child's memory tools, issue 16); a root
    /// agent's list leaves it out.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub child_only: bool,
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
    /// The tools this agent may call (a child's tool set, issue 16); a call to another is
    /// answered `UNKNOWN_TOOL` without running. Absent: every registered tool (a tool
    /// registered while the turn runs included), but see [`BatchRequest::child`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_tools: Option<Vec<String>>,
    /// The batch is a child agent's: `child_only` tools may run. A root agent's call to one
    /// is answered `UNKNOWN_TOOL`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub child: bool,
}

/// What a provider's `execute` receives.
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
    /// A code: [`ToolCode`], [`FsCode`], [`ShellCode`] or a provider's own.
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
    pub fn error(code: impl ErrorCode, message: impl AsRef<str>) -> Self {
        ToolResult::with_code(code.as_str(), message)
    }

    /// An error result carrying a code received from elsewhere (an [`Error`] a service
    /// answered, a listener's decision). Keel's own codes go through [`ToolResult::error`].
    pub fn with_code(code: &str, message: impl AsRef<str>) -> Self {
        ToolResult {
            content: format!("Error [{code}]: {}", message.as_ref()),
            is_error: true,
            error: Some(ToolError {
                code: code.to_owned(),
            }),
            ..ToolResult::default()
        }
    }

    /// An error result for `e`, keeping its code: `Error [CODE]: message`.
    pub fn from_error(e: &Error) -> Self {
        ToolResult::with_code(&e.code, &e.message)
    }

    /// The error code, when the result failed with one.
    pub fn code(&self) -> Option<&str> {
        self.error.as_ref().map(|e| e.code.as_str())
    }
}

crate::error_codes! {
    /// The tool registry and pipeline (`keel.tools`, B9, TOOL-03, TOOL-09), as error results
    /// the model reads (`Error [CODE]: …`) or errors of the registry's methods.
    pub enum ToolCode in "tools" {
        /// No registered tool has this name.
        UnknownTool = "UNKNOWN_TOOL", by "the tool pipeline", retry Changed;
        /// A pre-execute listener or a guard denied the call.
        ToolDenied = "TOOL_DENIED", by "the tool pipeline", retry Changed;
        /// The approver said no.
        ApprovalRejected = "APPROVAL_REJECTED", by "the tool pipeline (from `keel.approval`)", retry Changed;
        /// Nobody could answer the approval request (headless, no approver): fail closed.
        ApprovalUnavailable = "APPROVAL_UNAVAILABLE", by "the tool pipeline", retry Never;
        /// The approval request was cancelled.
        ApprovalCancelled = "APPROVAL_CANCELLED", by "the tool pipeline", retry Changed;
        /// The body ran past its deadline and was stopped.
        ToolTimeout = "TOOL_TIMEOUT", by "the tool pipeline", retry Changed;
        /// Cancelled before the body started.
        AbortedBeforeDispatch = "ABORTED_BEFORE_DISPATCH", by "the tool pipeline (a cancel)", retry Later;
        /// Cancelled after the body started (it was stopped).
        Aborted = "ABORTED", by "the tool pipeline; `tool-shell`", retry Later;
        /// The body, a listener or the provider failed unexpectedly.
        ToolFailed = "TOOL_FAILED", by "the tool pipeline; tool providers", retry Once;
        /// The provider's answer was not a `ToolResult`.
        InvalidToolOutput = "INVALID_TOOL_OUTPUT", by "the tool pipeline", retry Never;
        /// A post-execute listener blocked the result.
        ToolBlocked = "TOOL_BLOCKED", by "the tool pipeline", retry Changed;
        /// A stage listener failed: the batch stopped and the turn ends in error.
        StageFailed = "TOOL_STAGE_FAILED", by "`keel.tools` `run_batch` (`failure`)", retry Never;
        /// A stage listener answered a decision outside the event's vocabulary.
        InvalidDecision = "INVALID_DECISION", by "the tool pipeline", retry Never;
        /// A tool name is already registered.
        DuplicateTool = "DUPLICATE_TOOL", by "`keel.tools` `register`", retry Never;
        /// A definition without a name, or whose parameters are not a JSON Schema object.
        InvalidToolDefinition = "INVALID_TOOL_DEFINITION", by "`keel.tools` `register`", retry Never;
        /// No such registration.
        UnknownRegistration = "UNKNOWN_REGISTRATION", by "`keel.tools` `unregister`", retry Never;
    }
}

crate::error_codes! {
    /// The file tools (`tool-fs`, B11 `FsErrorCode`), as error results the model reads.
    pub enum FsCode in "fs" {
        /// The target does not exist.
        NotFound = "FS_NOT_FOUND", by "`tool-fs`; `fs-policy` decisions", retry Changed;
        /// A directory was expected.
        NotDirectory = "FS_NOT_DIRECTORY", by "`tool-fs`", retry Changed;
        /// The file is not UTF-8 text (NUL bytes or invalid UTF-8).
        NotText = "FS_NOT_TEXT", by "`tool-fs`", retry Never;
        /// A regular file was expected (a directory, socket, device …).
        NotRegularFile = "FS_NOT_REGULAR_FILE", by "`tool-fs`", retry Changed;
        /// The file is above the read limit and no range was given.
        TooLarge = "FS_TOO_LARGE", by "`tool-fs`", retry Changed;
        /// The OS refused access.
        PermissionDenied = "FS_PERMISSION_DENIED", by "`tool-fs`", retry Never;
        /// The sandbox refused the target (FS-06).
        SandboxDenied = "FS_SANDBOX_DENIED", by "`tool-fs` (from `keel.sandbox`)", retry Changed;
        /// Any other I/O failure.
        IoError = "FS_IO_ERROR", by "`tool-fs`", retry Once;
        /// The target changed (or vanished) since the session read it.
        StaleVersion = "FS_STALE_VERSION", by "`tool-fs`; `fs-policy` decisions", retry Changed;
        /// The target exists but the session has not read it.
        NotObserved = "FS_NOT_OBSERVED", by "`tool-fs`; `fs-policy` decisions", retry Changed;
        /// `old_string` occurs more than once and `replace_all` was not set.
        AmbiguousEdit = "FS_AMBIGUOUS_EDIT", by "`tool-fs` `edit_file`", retry Changed;
        /// `old_string` does not occur.
        EditNotFound = "FS_EDIT_NOT_FOUND", by "`tool-fs` `edit_file`", retry Changed;
        /// The operation was cancelled.
        Aborted = "FS_ABORTED", by "`tool-fs`", retry Later;
    }
}

crate::error_codes! {
    /// The `shell` tool (`tool-shell`, B12), as error results the model reads.
    pub enum ShellCode in "shell" {
        /// The command exited non-zero (the output is in the result).
        Exit = "SHELL_EXIT", by "`tool-shell`", retry Changed;
        /// The command ran past its timeout; its process group was terminated.
        Timeout = "SHELL_TIMEOUT", by "`tool-shell`", retry Changed;
        /// Nothing could start (no shell, an unusable workdir).
        Spawn = "SHELL_SPAWN", by "`tool-shell`", retry Changed;
    }
}

/// A pre-execute decision: the output of `tools/pre-execute` (kept in its wire form,
/// `{"kind":"allow"}`, `{"kind":"deny","reason"}`, `{"kind":"ask","reason"?}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum PreDecision {
    /// Run it.
    Allow,
    /// Do not run it.
    Deny {
        /// Why (the model reads it).
        #[serde(default)]
        reason: String,
    },
    /// Ask the approver first.
    Ask {
        /// Why approval is needed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

/// A guard's denial: the output of a `tools/guard` listener that objects (`{"reason"}`; a
/// guard that lets the call through returns nothing). No guard can allow (TOOL-02).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuardDecision {
    /// Why the call is denied (the model reads it).
    #[serde(default)]
    pub reason: String,
}

/// A rewrite decision: the output of `tools/rewrite` (`{}` = unchanged, or
/// `{"args":{…},"by":"<who>"}`). `args` is checked to be a JSON object by the pipeline.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RewriteDecision {
    /// The new arguments (a JSON object), absent when unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<serde_json::Value>,
    /// Who rewrote them (a row or a hook), for the log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

/// A post-execute decision: the output of `tools/post-execute` (`{"kind":"accept",
/// "content"?}` or `{"kind":"block","feedback"}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum PostDecision {
    /// Keep the result (with `content` replaced when given).
    Accept {
        /// The replacement content.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<String>,
    },
    /// The result becomes a `TOOL_BLOCKED` error the model reads.
    Block {
        /// What the model reads instead.
        #[serde(default)]
        feedback: String,
    },
}
