//! The B9 stages of one call (TOOL-01…04, TOOL-08): `tool/call`, argument parsing, the
//! argument rewrite (`tools/rewrite`, logged as `tool/rewrite`: issue 15 item 3), policy
//! (pre-execute, one-shot approval, monotonic guards), the execute stage, post-execute, the
//! frozen result and the durable `tool/result`. Everything the kernel does is behind [`Host`],
//! so the decisions are unit-tested with a scripted host; [`CallPipeline`] plugs these stages
//! into the scheduler ([`crate::schedule`]).
//!
//! Authority is one-way: a deny or a failed approval is final (no later stage is asked), guards
//! can only deny (TOOL-02), and a stage listener that fails turns its call into `TOOL_FAILED`
//! plus a [`BatchFailure`] that stops the batch — it never leaves a call without a result.

use std::future::Future;
use std::sync::{Mutex, PoisonError};

use keel_plugin_api::codes::ContractCode;
use keel_plugin_api::events::tools::{ToolExecution, ToolOutcome};
use keel_plugin_api::events::{Json, Typed};
use keel_plugin_api::sdk::{Error, Payload, Result};
use keel_plugin_api::services::approval::{ApprovalOutcome, ApprovalRequest};
use keel_plugin_api::services::tools::{
    BatchFailure, BatchRequest, FrozenResult, GuardDecision, ModelCall, PostDecision, PreDecision,
    RewriteDecision, ToolCode, ToolResult,
};
use serde_json::{Value, json};

use crate::log_events::{tool_call_event, tool_result_event, tool_rewrite_event};
use crate::registry::{Entry, Registry};
use crate::schedule::{Admission, Mode, Pipeline, Settled};

/// A result and its one encoding (TOOL-04). The pipeline carries the pair so a result that no
/// stage changed is never encoded again: the body's snapshot is what `tools/execute`,
/// `tools/post-execute`, `tools/result`, the log and the loop all get.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// The result.
    pub result: ToolResult,
    /// Its encoding.
    pub frozen: FrozenResult,
}

impl Snapshot {
    /// Freezes `result` (a snapshot failure becomes an error result).
    ///
    /// # Errors
    /// Only when even that error result cannot be encoded (it is plain strings: never).
    pub fn of(result: ToolResult) -> Result<Snapshot> {
        match FrozenResult::freeze(&result) {
            Ok(frozen) => Ok(Snapshot { result, frozen }),
            Err(e) => {
                let result = ToolResult::error(
                    ToolCode::ToolFailed,
                    format!("the tool's result could not be snapshotted: {e}"),
                );
                let frozen = FrozenResult::freeze(&result)?;
                Ok(Snapshot { result, frozen })
            }
        }
    }

    /// The snapshot as `tools/execute`'s typed output and `ToolOutcome`'s result (a copy of
    /// the text, not an encode).
    pub fn typed(&self) -> Typed<ToolResult> {
        Typed::from_payload(Payload {
            text: self.frozen.as_str().into(),
            frozen: Default::default(),
        })
    }
}

/// What the execute stage returns: the document the waterfall ended with and, when the body
/// produced it, the body's snapshot (used as is when no listener changed the document).
#[derive(Debug, Clone, PartialEq)]
pub struct Executed {
    /// The waterfall's output.
    pub json: Typed<ToolResult>,
    /// The body's result and its encoding.
    pub snapshot: Option<Snapshot>,
}

impl From<Typed<ToolResult>> for Executed {
    fn from(json: Typed<ToolResult>) -> Self {
        Executed {
            json,
            snapshot: None,
        }
    }
}

/// What `keel.approval` answered.
#[derive(Debug, Clone, PartialEq)]
pub enum AskAnswer {
    /// No approval service is loaded.
    NoService,
    /// The request failed (including an audit append that failed: no decision, TOOL-05).
    Failed(Error),
    /// A decision.
    Outcome(ApprovalOutcome),
}

/// The kernel as the stages see it (one batch, one session).
pub trait Host: Sync {
    /// Appends one event (`{type, data, ignorable?, surface_op?}`) to the batch's session.
    fn append(&self, event: Value) -> impl Future<Output = Result<()>> + Send;
    /// Runs `tools/rewrite` (terminal: `{}`, unchanged).
    fn rewrite(
        &self,
        exec: ToolExecution,
    ) -> impl Future<Output = Result<Typed<RewriteDecision>>> + Send;
    /// Runs `tools/pre-execute` (terminal: allow).
    fn pre_execute(
        &self,
        exec: ToolExecution,
    ) -> impl Future<Output = Result<Typed<PreDecision>>> + Send;
    /// Asks `keel.approval`.
    fn ask(&self, request: ApprovalRequest) -> impl Future<Output = AskAnswer> + Send;
    /// Runs `tools/guard`: the first `{reason}` denies.
    fn guard(
        &self,
        exec: ToolExecution,
    ) -> impl Future<Output = Result<Option<Typed<GuardDecision>>>> + Send;
    /// Runs `tools/execute` (terminal: the provider's body under its deadline). `args` is the
    /// pipeline's parsed value of `exec.args`: the body uses it as long as no listener changed
    /// the text (parse once, issue 24 item 1).
    fn execute(
        &self,
        exec: ToolExecution,
        args: Value,
    ) -> impl Future<Output = Result<Executed>> + Send;
    /// Runs `tools/post-execute` (terminal: accept).
    fn post_execute(
        &self,
        outcome: ToolOutcome,
    ) -> impl Future<Output = Result<Typed<PostDecision>>> + Send;
    /// Emits `tools/result` (failures contained).
    fn notify(&self, outcome: &ToolOutcome);
}

#[cfg(test)]
thread_local! {
    /// How many times [`parse_text`] ran on this thread (the parse-once test counts them).
    pub static PARSES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The one parse of argument text in the pipeline (the model's text once per call; a
/// listener's changed text once more, in the body).
///
/// # Errors
/// The text is not JSON.
pub fn parse_text(raw: &str) -> serde_json::Result<Value> {
    #[cfg(test)]
    PARSES.with(|n| n.set(n.get() + 1));
    serde_json::from_str(raw)
}

/// Parses the model's argument text: `""` is `{}`; anything but a JSON object is refused with a
/// message the model can act on.
pub fn parse_args(raw: &str) -> std::result::Result<Value, String> {
    if raw.trim().is_empty() {
        return Ok(json!({}));
    }
    match parse_text(raw) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(other) => Err(format!(
            "the arguments must be a JSON object, got {}",
            kind_of(&other)
        )),
        Err(e) => Err(format!("the arguments are not valid JSON: {e}")),
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Classification (TOOL-10): parallel iff the tool is known, `parallel_safe`, and its arguments
/// parsed; everything else is exclusive.
pub fn classify(entry: Option<&Entry>, parsed: bool) -> Mode {
    match entry {
        Some(e) if e.definition.parallel_safe && parsed => Mode::Parallel,
        _ => Mode::Exclusive,
    }
}

/// The error result for a call whose approval did not come back `allowed-once` (TOOL-03:
/// distinct codes for a human "no", a cancel and a missing channel); `None` proceeds.
pub fn approval_denial(tool: &str, reason: Option<&str>, answer: &AskAnswer) -> Option<ToolResult> {
    let why = reason.map(|r| format!(" ({r})")).unwrap_or_default();
    let (code, message) = match answer {
        AskAnswer::Outcome(ApprovalOutcome::AllowedOnce) => return None,
        AskAnswer::Outcome(ApprovalOutcome::Rejected) => (
            ToolCode::ApprovalRejected,
            format!("the user rejected this '{tool}' call{why}"),
        ),
        AskAnswer::Outcome(ApprovalOutcome::Cancelled) => (
            ToolCode::ApprovalCancelled,
            format!("the approval request for this '{tool}' call was cancelled{why}"),
        ),
        AskAnswer::Outcome(ApprovalOutcome::Unavailable) => (
            ToolCode::ApprovalUnavailable,
            format!(
                "this '{tool}' call needs approval{why}, but nobody can answer (no interactive \
                 approver); it was not run"
            ),
        ),
        AskAnswer::NoService => (
            ToolCode::ApprovalUnavailable,
            format!(
                "this '{tool}' call needs approval{why}, but no approval service is loaded; it \
                 was not run"
            ),
        ),
        AskAnswer::Failed(e) => (
            ToolCode::ApprovalUnavailable,
            format!(
                "this '{tool}' call needs approval{why}, but the approval request failed ({e}); \
                 it was not run"
            ),
        ),
    };
    Some(ToolResult::error(code, message))
}

/// A stage listener failed: the call's result and the failure that stops the batch.
pub fn stage_failed(stage: &str, call: &ToolExecution, e: &Error) -> Settled {
    Settled {
        result: ToolResult::error(
            ToolCode::ToolFailed,
            format!("the {stage} stage failed ({e}); the call did not complete"),
        ),
        failure: Some(BatchFailure {
            code: ToolCode::StageFailed.code().to_owned(),
            message: format!(
                "{stage} failed for call '{}' ({}): {e}",
                call.call_id, call.name
            ),
        }),
    }
}

/// Reads a tool result (a `tools/execute` listener's document) or says why it is not one.
pub fn read_result(json: &Typed<ToolResult>) -> ToolResult {
    json.get().unwrap_or_else(|e| {
        ToolResult::error(
            ToolCode::InvalidToolOutput,
            format!("the tool's answer is not a tool result: {}", e.message),
        )
    })
}

/// Reads a `tools/rewrite` answer: `Ok(None)` unchanged, `Ok(Some((args, by)))` a rewrite to
/// an object, `Err` an answer outside the vocabulary (`INVALID_DECISION`).
pub fn read_rewrite(json: &Typed<RewriteDecision>) -> Result<Option<(Value, String)>> {
    let invalid = |why: String| Error::coded(ToolCode::InvalidDecision, why);
    let decision = json
        .get()
        .map_err(|e| invalid(format!("{}: {}", e.message, json.text())))?;
    match decision.args {
        None => Ok(None),
        Some(args @ Value::Object(_)) => {
            let by = decision
                .by
                .unwrap_or_else(|| "a tools/rewrite listener".into());
            Ok(Some((args, by)))
        }
        Some(other) => Err(invalid(format!(
            "a rewrite must give the arguments as a JSON object, got {}",
            kind_of(&other)
        ))),
    }
}

/// What admission hands to the later stages.
#[derive(Debug)]
pub struct Ticket {
    /// The call as every stage sees it.
    pub exec: ToolExecution,
    /// `exec.args`, parsed (once, from the model's text, or the rewrite's value).
    pub args: Value,
    /// The latest result and its encoding, once there is one.
    snapshot: Mutex<Option<Snapshot>>,
}

impl Ticket {
    fn new(exec: ToolExecution, args: Value) -> Self {
        Ticket {
            exec,
            args,
            snapshot: Mutex::new(None),
        }
    }

    /// The snapshot of `result`: the kept one when it is of this very result, else a new one
    /// (which is kept).
    fn snapshot(&self, result: ToolResult) -> Result<Snapshot> {
        let mut kept = self.snapshot.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(s) = kept.as_ref().filter(|s| s.result == result) {
            return Ok(s.clone());
        }
        let fresh = Snapshot::of(result)?;
        *kept = Some(fresh.clone());
        Ok(fresh)
    }

    fn keep(&self, snapshot: Snapshot) {
        *self.snapshot.lock().unwrap_or_else(PoisonError::into_inner) = Some(snapshot);
    }
}

/// The stages of one batch over a [`Host`].
pub struct CallPipeline<'a, H> {
    /// The kernel.
    pub host: &'a H,
    /// Where tools are looked up (live: a tool registered mid-batch is found).
    pub registry: &'a Registry,
    /// The batch.
    pub request: &'a BatchRequest,
    /// `timeout_ms` handed to the execute stage.
    pub timeout_ms: u64,
    /// Each call's arguments, parsed once (classification and admission share it).
    pub parsed: ParsedArgs,
}

/// The parsed arguments of a batch's calls, by index (start with `ParsedArgs::default()`).
pub type ParsedArgs = Mutex<std::collections::HashMap<usize, std::result::Result<Value, String>>>;

impl<H: Host> CallPipeline<'_, H> {
    fn call(&self, index: usize) -> Result<&ModelCall> {
        self.request
            .calls
            .get(index)
            .ok_or_else(|| Error::msg(format!("the batch has no call {index}")))
    }

    fn exec(&self, call: &ModelCall, entry: Option<&Entry>, args: &Value) -> ToolExecution {
        ToolExecution {
            session_id: self.request.session_id.as_str().into(),
            turn: self.request.turn,
            step: self.request.step,
            call_id: call.id.as_str().into(),
            name: call.name.as_str().into(),
            arguments: call.arguments.as_str().into(),
            args: Json {
                text: args.to_string().into(),
            },
            cwd: self.request.cwd.as_str().into(),
            mutating: entry.is_some_and(|e| e.definition.mutating),
            timeout_ms: self.timeout_ms,
        }
    }

    /// Logs the call and builds its execution (invalid argument text is kept as a string).
    async fn open(&self, index: usize) -> Result<(Ticket, Option<Entry>, Result<(), String>)> {
        let call = self.call(index)?;
        self.host
            .append(tool_call_event(self.request, call))
            .await?;
        let entry = self.registry.lookup(&call.name);
        let (args, parsed) = match self.parsed(index, call) {
            Ok(v) => (v, Ok(())),
            Err(msg) => (Value::String(call.arguments.clone()), Err(msg)),
        };
        let exec = self.exec(call, entry.as_ref(), &args);
        Ok((Ticket::new(exec, args), entry, parsed))
    }

    /// Call `index`'s arguments, parsed once for classification and admission alike.
    fn parsed(&self, index: usize, call: &ModelCall) -> std::result::Result<Value, String> {
        let mut cache = self.parsed.lock().unwrap_or_else(PoisonError::into_inner);
        cache
            .entry(index)
            .or_insert_with(|| parse_args(&call.arguments))
            .clone()
    }

    /// `tools/rewrite`: a rewrite is logged (`tool/rewrite`) and replaces the arguments every
    /// later stage sees; `Ok(Some)` ends the call (a failed or invalid stage).
    async fn rewrite(&self, ticket: &mut Ticket) -> Result<Option<Settled>> {
        let exec = &mut ticket.exec;
        let answer = match self.host.rewrite(exec.clone()).await {
            Ok(a) => a,
            Err(e) => return Ok(Some(stage_failed("tools/rewrite", exec, &e))),
        };
        match read_rewrite(&answer) {
            Err(e) => Ok(Some(stage_failed("tools/rewrite", exec, &e))),
            Ok(None) => Ok(None),
            Ok(Some((args, by))) => {
                self.host
                    .append(tool_rewrite_event(exec, &args, &by))
                    .await?;
                exec.args = Json {
                    text: args.to_string().into(),
                };
                ticket.args = args;
                Ok(None)
            }
        }
    }

    /// Pre-execute, approval and guards; `Some` ends the call.
    async fn policy(&self, exec: &ToolExecution, args: &Value) -> Option<Settled> {
        let name = exec.name.as_str();
        let decision = match self.host.pre_execute(exec.clone()).await {
            Ok(d) => d,
            Err(e) => return Some(stage_failed("tools/pre-execute", exec, &e)),
        };
        match decision.get() {
            Err(e) => {
                let why = format!("{}: {}", e.message, decision.text());
                let e = Error::coded(ToolCode::InvalidDecision, why);
                return Some(stage_failed("tools/pre-execute", exec, &e));
            }
            Ok(PreDecision::Allow) => {}
            Ok(PreDecision::Deny { reason }) => {
                return Some(Settled::ok(ToolResult::error(
                    ToolCode::ToolDenied,
                    format!("this '{name}' call was denied by policy: {reason}"),
                )));
            }
            Ok(PreDecision::Ask { reason }) => {
                let request = ApprovalRequest {
                    session_id: exec.session_id.to_string(),
                    tool_name: name.to_owned(),
                    call_id: exec.call_id.to_string(),
                    reason: reason.clone(),
                    args: args.clone(),
                };
                let answer = self.host.ask(request).await;
                if let Some(denied) = approval_denial(name, reason.as_deref(), &answer) {
                    return Some(Settled::ok(denied));
                }
            }
        }
        match self.host.guard(exec.clone()).await {
            Err(e) => Some(stage_failed("tools/guard", exec, &e)),
            Ok(Some(reason)) => {
                let reason = reason
                    .get()
                    .map(|g| g.reason)
                    .unwrap_or_else(|_| reason.text().to_owned());
                Some(Settled::ok(ToolResult::error(
                    ToolCode::ToolDenied,
                    format!("this '{name}' call was denied by a guard: {reason}"),
                )))
            }
            Ok(None) => None,
        }
    }
}

impl<H: Host> Pipeline for CallPipeline<'_, H> {
    type Ticket = Ticket;
    type Committed = FrozenResult;

    fn classify(&self, index: usize) -> Mode {
        match self.request.calls.get(index) {
            Some(call) => classify(
                self.registry.lookup(&call.name).as_ref(),
                self.parsed(index, call).is_ok(),
            ),
            None => Mode::Exclusive,
        }
    }

    async fn admit(&self, index: usize) -> Result<Admission<Ticket>> {
        let (mut ticket, entry, parsed) = self.open(index).await?;
        let name = ticket.exec.name.as_str();
        // A child agent's tool set (issue 16): a tool outside it is as unknown as an
        // unregistered one, and the model is told what it may call.
        let allowed = self.request.allowed_tools.as_ref();
        if let Some(allowed) = allowed
            && !allowed.iter().any(|t| t == name)
        {
            let result = ToolResult::error(
                ToolCode::UnknownTool,
                format!(
                    "this agent's tool set has no tool named '{name}' (available: {})",
                    allowed.join(", ")
                ),
            );
            return Ok(Admission::Settled(ticket, Settled::ok(result)));
        }
        // A root agent is never offered a child-only tool, nor may it call one.
        if entry
            .as_ref()
            .is_some_and(|e| e.definition.child_only && !self.request.child)
        {
            let result = ToolResult::error(
                ToolCode::UnknownTool,
                format!("'{name}' is offered only to child agents; this agent has no such tool"),
            );
            return Ok(Admission::Settled(ticket, Settled::ok(result)));
        }
        if entry.is_none() {
            let known = self.registry.names().join(", ");
            let result = ToolResult::error(
                ToolCode::UnknownTool,
                format!("there is no tool named '{name}' (available: {known})"),
            );
            return Ok(Admission::Settled(ticket, Settled::ok(result)));
        }
        if let Err(msg) = parsed {
            let result = ToolResult::error(ContractCode::InvalidArguments, msg);
            return Ok(Admission::Settled(ticket, Settled::ok(result)));
        }
        if let Some(settled) = self.rewrite(&mut ticket).await? {
            return Ok(Admission::Settled(ticket, settled));
        }
        match self.policy(&ticket.exec, &ticket.args).await {
            Some(settled) => Ok(Admission::Settled(ticket, settled)),
            None => Ok(Admission::Run(ticket)),
        }
    }

    async fn execute(&self, ticket: &Ticket) -> Settled {
        match self
            .host
            .execute(ticket.exec.clone(), ticket.args.clone())
            .await
        {
            // No listener changed the body's document: its snapshot is the result, unparsed.
            Ok(Executed {
                json,
                snapshot: Some(snapshot),
            }) if json.text() == snapshot.frozen.as_str() => {
                let result = snapshot.result.clone();
                ticket.keep(snapshot);
                Settled::ok(result)
            }
            Ok(executed) => Settled::ok(read_result(&executed.json)),
            Err(e) => stage_failed("tools/execute", &ticket.exec, &e),
        }
    }

    async fn finish(&self, ticket: &Ticket, result: ToolResult) -> Settled {
        let snapshot = match ticket.snapshot(result) {
            Ok(s) => s,
            Err(e) => return stage_failed("tools/post-execute", &ticket.exec, &e),
        };
        let outcome = ToolOutcome {
            exec: ticket.exec.clone(),
            result: snapshot.typed(),
        };
        let decision = match self.host.post_execute(outcome).await {
            Ok(d) => d,
            Err(e) => return stage_failed("tools/post-execute", &ticket.exec, &e),
        };
        let result = snapshot.result;
        match decision.get() {
            Ok(PostDecision::Accept { content: None }) => Settled::ok(result),
            Ok(PostDecision::Accept {
                content: Some(content),
            }) => Settled::ok(ToolResult { content, ..result }),
            Ok(PostDecision::Block { feedback }) => {
                Settled::ok(ToolResult::error(ToolCode::ToolBlocked, feedback))
            }
            Err(e) => {
                let why = format!("{}: {}", e.message, decision.text());
                let e = Error::coded(ToolCode::InvalidDecision, why);
                stage_failed("tools/post-execute", &ticket.exec, &e)
            }
        }
    }

    async fn commit(&self, ticket: &Ticket, mut result: ToolResult) -> Result<FrozenResult> {
        // TOOL-04: `concludes_turn` only survives on success.
        if result.is_error {
            result.concludes_turn = false;
        }
        let snapshot = ticket.snapshot(result)?;
        let outcome = ToolOutcome {
            exec: ticket.exec.clone(),
            result: snapshot.typed(),
        };
        self.host.notify(&outcome);
        let event = tool_result_event(self.request, ticket.exec.call_id.as_str(), &snapshot.result);
        self.host.append(event).await?;
        Ok(snapshot.frozen)
    }

    async fn skip(&self, index: usize) -> Result<Ticket> {
        Ok(self.open(index).await?.0)
    }
}

#[cfg(test)]
#[path = "stages_tests.rs"]
mod tests;
