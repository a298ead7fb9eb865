//! `tools/*` events: the stages of the tool pipeline (B9, TOOL-01…04).
//!
//! The stages' decisions are typed ([`RewriteDecision`], [`PreDecision`], [`GuardDecision`],
//! [`ToolResult`], [`PostDecision`]) and cross the ABI as [`Typed`] values (issue 24 item 2),
//! as do the outcome's result and the `tools/change` notice ([`ToolSetChange`]); the wire JSON
//! is what it was. One field stays [`Json`]: a call's `args`, whose shape is the tool's own
//! schema (see [`ToolExecution::args`]).

use abi_stable::StableAbi;
use abi_stable::std_types::RString;
use serde::{Deserialize, Serialize};

use super::json::Json;
use super::typed::Typed;
use crate::declare_event;
use crate::services::tools::{
    GuardDecision, PostDecision, PreDecision, RewriteDecision, ToolResult,
};

/// One call going through the pipeline.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct ToolExecution {
    /// Session id.
    pub session_id: RString,
    /// Open turn.
    pub turn: u64,
    /// Open step.
    pub step: u64,
    /// Call id.
    pub call_id: RString,
    /// Tool name.
    pub name: RString,
    /// The raw argument text, exactly as logged in `tool/call`.
    pub arguments: RString,
    /// The parsed arguments (JSON object). Only two stages change them: `tools/rewrite`
    /// (logged as `tool/rewrite`, before any policy) and `tools/execute` listeners on the way
    /// to the body (secret fill); pre-execute and the guards cannot (TOOL-01).
    ///
    /// This stays [`Json`] on purpose: the document's shape is the called tool's schema (any
    /// tool, an MCP server's included), which the pipeline and its listeners (firewall, hooks,
    /// sandbox, approval) do not know. The tool's typed `Args` are decoded once, from the
    /// document the last stage left, on the way to its body.
    pub args: Json,
    /// The session's working root.
    pub cwd: RString,
    /// The tool changes the world (its definition's `mutating`).
    pub mutating: bool,
    /// Deadline around the body, ms (0 = none).
    pub timeout_ms: u64,
}

/// A call and its (frozen) result.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct ToolOutcome {
    /// The call.
    pub exec: ToolExecution,
    /// The result (the pipeline's frozen snapshot; a listener that rewrites it sets a new one).
    pub result: Typed<ToolResult>,
}

/// The `tools/change` notice. Wire form: `{"tools":[name]}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolSetChange {
    /// Every registered tool's name after the change.
    pub tools: Vec<String>,
}

declare_event! {
    /// Argument rewriting, after `tool/call` is logged and the arguments parse, before
    /// `tools/pre-execute`. Output: a `RewriteDecision`, `{}` (unchanged) or
    /// `{"args":{…},"by":"<who>"}`; `args` must be a JSON object. The pipeline logs a
    /// rewrite as `tool/rewrite {turn, step, call_id, args, by}` and every later stage (policy,
    /// approval, guards, execute, the body) sees the new arguments; `tool/call` keeps the
    /// model's text. A listener that rewrites passes the new arguments down the chain. The
    /// terminal answers `{}`.
    pub struct Rewrite: async_waterfall("tools/rewrite") -> ToolExecution => Typed<RewriteDecision>;
}
declare_event! {
    /// Policy before anything runs. Output: a `PreDecision` (`{"kind":"allow"}`,
    /// `{"kind":"deny","reason"}` or `{"kind":"ask","reason"?}`). Arguments cannot be
    /// rewritten here. The terminal allows.
    pub struct PreExecute: async_waterfall("tools/pre-execute") -> ToolExecution => Typed<PreDecision>;
}
declare_event! {
    /// Monotonic guards (TOOL-02), after pre-execute and approval: listeners are awaited in
    /// order; the first to return a `GuardDecision` (`{"reason"}`) denies. No guard can allow.
    pub struct Guard: serial("tools/guard") -> ToolExecution => Typed<GuardDecision>;
}
declare_event! {
    /// Around the tool body: checkpoint, timeout, secret fill. Output: the `ToolResult`.
    pub struct Execute: async_waterfall("tools/execute") -> ToolExecution => Typed<ToolResult>;
}
declare_event! {
    /// After the body. Output: a `PostDecision` (`{"kind":"accept","content"?}` or
    /// `{"kind":"block","feedback"}`: the result becomes an error the model reads). The
    /// terminal accepts.
    pub struct PostExecute: async_waterfall("tools/post-execute") -> ToolOutcome => Typed<PostDecision>;
}
declare_event! {
    /// The frozen final result, for observers; failures are contained (TOOL-04).
    pub struct ToolsResult: emit("tools/result") -> ToolOutcome;
}
declare_event! {
    /// The tool set changed. Payload: a `ToolSetChange` (`{"tools":[name]}`, every name).
    pub struct Change: emit("tools/change") -> Typed<ToolSetChange>;
}
