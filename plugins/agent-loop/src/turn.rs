//! One turn (LOOP-03, LOOP-08…12, B6, B9): `turn/start` before input is claimed; per step,
//! admission (`agent/pre-step`), the frozen call config (`agent/request`), the request header
//! when it changed, one model call through `keel.llm`, the reply, the tools batch; retries
//! decided after the failed step closed (`agent/request-error`); the serial
//! `agent/turn-stopping` checkpoint before a normal end. Every path closes the step and the
//! turn with a recorded reason. A failing seam (a listener error or panic) ends the turn with
//! an error and leaves the loop running; only a session that refuses writes stops it.
//!
//! A turn runs one scheduler task (issue 16, SCH-02/07). After each closed step — never while
//! its tool batch runs, the critical section — a waiting interrupt of a strictly higher level
//! suspends it: the turn ends `suspended {by}` and its [`TaskFrame`] goes on the stack. Its
//! resumption is a new turn, `turn/start {turn, resumes}`, that goes straight to the model
//! with the frame's step budget and counters.

use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::FutureExt as _;
use keel_plugin_api::events::Typed;
use keel_plugin_api::events::agent::{
    AgentErrorData, AgentPoint, DiscardedMessage, InboxDiscardedData, PreStepData, PreStepDecision,
    RequestErrorData, RetryDecision, Steer, StepMessage, StopReason, TurnStoppingData,
};
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::llm::{FinishReason, LlmCallConfig, LlmFailure, LlmRequest};
use keel_plugin_api::services::session::{EventInput, SessionCode};
use keel_plugin_api::services::tools::BatchRequest;
use serde_json::{Value, json};

use crate::agent::{Agent, InboxMessage, Job};
use crate::assemble::{Reply, assemble};
use crate::retry::{self, Decision};
use crate::scheduler::{Source, TaskFrame};
use crate::seams::{BatchOutcome, Seams};

#[path = "turn_context.rs"]
mod context;
#[path = "turn_request.rs"]
mod request;
#[path = "turn_task.rs"]
mod task;

/// How often a waiting step looks at the abort flag.
const ABORT_POLL: Duration = Duration::from_millis(25);

/// Why a turn ended, as logged in `turn/end`.
type Reason = Value;

fn error_reason(code: &str, message: &str) -> Reason {
    json!({ "kind": "error", "error": { "code": code, "message": message } })
}

/// Runs one turn: a task's first, or a suspended task's next (`job`).
///
/// # Errors
/// Only when the session refused an append (the log cannot record the turn's end).
pub async fn run(agent: &Agent, seams: &Seams, job: Job) -> Result<()> {
    let sid = agent.session_id.clone();
    let turn = agent.state().log.next_turn;
    let (task, first, start) = task::opening(job, turn);
    seams.append_one(&sid, "turn/start", start).await?;
    agent.state().log.next_turn = turn + 1;
    let mut t = Turn {
        agent,
        seams,
        sid,
        turn,
        step: 0,
        step_open: false,
        attempt: 0,
        context: None,
        overflow: None,
        overflow_retried: false,
        estimate: None,
        task,
    };
    let reason = t.steps(first).await;
    let reason = match reason {
        Ok(r) => r,
        Err(e) if e.is(SessionCode::Append) => return Err(e),
        Err(e) => {
            let msg = e.message.to_string();
            let data = AgentErrorData {
                code: e.code.as_str().to_owned(),
                message: msg.clone(),
            };
            if let Ok(p) = Seams::point(&t.sid, t.turn, t.step, &data) {
                let _ = seams.ctx.emit(crate::DISPATCH.agent_error, &p);
            }
            error_reason(&e.code, &msg)
        }
    };
    if t.step_open {
        t.close_step().await?;
    }
    seams
        .append_one(
            &t.sid,
            "turn/end",
            json!({ "turn": turn, "reason": reason }),
        )
        .await
        .map_err(session_error)?;
    let mut st = agent.state();
    st.report.num_turns += 1;
    st.report.turn_end_reason = reason;
    Ok(())
}

/// Marks a session write failure so it is not mistaken for a contained seam failure.
fn session_error(e: Error) -> Error {
    Error::coded(SessionCode::Append, format!("[{}] {}", e.code, e.message))
}

struct Turn<'a> {
    agent: &'a Agent,
    seams: &'a Seams,
    sid: String,
    turn: u64,
    step: u64,
    step_open: bool,
    attempt: u32,
    /// What the turn's requests start from, gathered at its first step: the default call
    /// config, the tool list and the system prompt. A tool or prompt change shows from the
    /// next turn on; `agent/request` still runs for every request.
    context: Option<TurnContext>,
    /// The server's words when it refused the last request as over its window: the next fit
    /// compacts for it (issue 14 item 5).
    /// With the `llm/retry` record logged once the retry goes out.
    overflow: Option<(String, serde_json::Value)>,
    /// This turn already retried once after a server-side overflow.
    overflow_retried: bool,
    /// The context manager's estimate of the request in flight.
    estimate: Option<keel_plugin_api::services::context::TokenEstimate>,
    /// The scheduler task this turn runs, as its frame stood when the turn started (`steps`
    /// counts the task's earlier turns; this turn's are added on suspension).
    task: TaskFrame,
}

struct TurnContext {
    /// The config the header was last checked against with this context (skips rebuilding
    /// and comparing the whole header, tool schemas included, on every step).
    checked: Option<LlmCallConfig>,
    base: LlmCallConfig,
    tools: Vec<keel_plugin_api::services::llm::ModelTool>,
    /// The tools the batches are held to when not every registered one (issue 16).
    allowed_tools: Option<Vec<String>>,
    system: Option<String>,
    /// The bytes system prompt and tools add to every request (for the context row).
    fixed_bytes: u64,
}

enum StepEnd {
    /// Run another step (tool results to send back, steering, a retry).
    Continue,
    /// The turn ends with this reason.
    End(Reason),
}

impl Turn<'_> {
    async fn append(&self, kind: &str, data: Value) -> Result<()> {
        self.seams
            .append_one(&self.sid, kind, data)
            .await
            .map_err(session_error)
    }

    async fn close_step(&mut self) -> Result<()> {
        self.step_open = false;
        let step = self.step;
        self.step += 1;
        self.append("step/end", json!({ "turn": self.turn, "step": step }))
            .await
    }

    fn aborted(&self) -> bool {
        self.agent.aborted.load(Ordering::Acquire)
    }

    async fn steps(&mut self, first: Vec<InboxMessage>) -> Result<Reason> {
        let first_is_followup = !first.is_empty();
        let mut claimed = first;
        claimed.extend(self.agent.claim_next_step());
        loop {
            if self.aborted() {
                self.unanswered(std::mem::take(&mut claimed)).await?;
                return Ok(json!({ "kind": "aborted", "reason": { "kind": "user" } }));
            }
            if let Some(max) = self.agent.max_turns
                && self.agent.state().requests >= max
            {
                return Ok(json!({ "kind": "max-turns", "max_turns": max }));
            }
            if self.task.steps + self.step >= self.max_steps() {
                return Ok(json!({ "kind": "max-steps" }));
            }
            self.agent.state().steps_left =
                Some(self.max_steps() - (self.task.steps + self.step) - 1);
            let batch = std::mem::take(&mut claimed);
            // Steering in a rejected batch stays parked for a later step (LOOP-02/09); a
            // followup that opened this turn is consumed by the rejection.
            let steering: Vec<InboxMessage> = batch
                .iter()
                .skip(usize::from(self.step == 0 && first_is_followup))
                .cloned()
                .collect();
            let Some(admitted) = self.admit(batch).await? else {
                self.agent.park(steering);
                return Ok(json!({ "kind": "blocked" }));
            };
            self.append(
                "step/start",
                json!({ "turn": self.turn, "step": self.step }),
            )
            .await?;
            self.step_open = true;
            for m in &admitted {
                self.append("user/message", m.to_json()).await?;
            }
            let end = self.one_step().await?;
            if self.step_open {
                self.close_step().await?;
            }
            match end {
                StepEnd::End(reason) => return Ok(reason),
                StepEnd::Continue => {
                    // A safe point: the step (and its tool batch) closed (SCH-07).
                    if let Some(by) = self.suspend_for_interrupt() {
                        return Ok(json!({ "kind": "suspended", "by": by }));
                    }
                    claimed = self.agent.claim_next_step();
                }
            }
        }
    }

    /// Messages claimed for a step the abort ended before it was sent: logged in a step of
    /// their own, answered by nothing, so what the user sent is never dropped (issue 23 item
    /// 7). The turn's end closes the step.
    async fn unanswered(&mut self, claimed: Vec<InboxMessage>) -> Result<()> {
        if claimed.is_empty() {
            return Ok(());
        }
        self.append(
            "step/start",
            json!({ "turn": self.turn, "step": self.step }),
        )
        .await?;
        self.step_open = true;
        for m in &claimed {
            self.append("user/message", m.to_json()).await?;
        }
        Ok(())
    }

    fn max_steps(&self) -> u64 {
        self.agent
            .overrides
            .max_steps
            .unwrap_or(self.seams.config.max_steps)
    }

    /// `agent/pre-step` (LOOP-10, B6 checkpoint): `None` when the step is rejected.
    async fn admit(&self, claimed: Vec<InboxMessage>) -> Result<Option<Vec<InboxMessage>>> {
        let batch: Vec<StepMessage> = claimed.iter().map(InboxMessage::to_step).collect();
        let p = Seams::point(
            &self.sid,
            self.turn,
            self.step,
            &PreStepData { messages: batch },
        )?;
        if !claimed.is_empty() {
            let _ = self.seams.ctx.emit(crate::DISPATCH.inbox_claimed, &p);
        }
        let out = self
            .seams
            .ctx
            .run_async_waterfall(
                crate::DISPATCH.pre_step,
                p.clone(),
                |p: AgentPoint<PreStepData>| async move {
                    let PreStepData { messages } = p.data.into_inner()?;
                    Typed::new(&PreStepDecision::Enter { messages })
                },
            )
            .await?;
        match out.into_inner()? {
            // Admitted messages keep their ids; ones the decision left out stay removed.
            PreStepDecision::Enter { messages } => Ok(Some(
                messages
                    .into_iter()
                    .map(|m| InboxMessage {
                        id: m.id,
                        content: m.content,
                    })
                    .collect(),
            )),
            PreStepDecision::Reject => {
                // The claimed batch, as it was offered (no reason: a rejected step).
                let PreStepData { messages } = p.data.into_inner()?;
                let data = InboxDiscardedData {
                    messages: messages.into_iter().map(DiscardedMessage::from).collect(),
                    reason: None,
                };
                if let Ok(d) = Seams::point(&self.sid, self.turn, self.step, &data) {
                    let _ = self.seams.ctx.emit(crate::DISPATCH.inbox_discarded, &d);
                }
                Ok(None)
            }
        }
    }

    /// One model request and what follows it.
    async fn one_step(&mut self) -> Result<StepEnd> {
        if self.context.is_none() {
            let base = crate::default_config(self.seams, &self.agent.overrides).await?;
            let (tools, allowed_tools) = self
                .seams
                .tool_list(&self.agent.overrides, self.agent.child)
                .await?;
            let system = self
                .seams
                .system_prompt(&self.sid, &self.agent.cwd, &tools)
                .await?;
            self.context = Some(TurnContext {
                checked: None,
                fixed_bytes: keel_plugin_api::services::context::fixed_bytes(
                    system.as_deref(),
                    &tools,
                ),
                base,
                tools,
                allowed_tools,
                system,
            });
        }
        let Some(context) = self.context.as_ref() else {
            return Err(Error::coded(
                keel_plugin_api::codes::SdkCode::Internal,
                "turn context missing",
            ));
        };
        let (base, tools, system, fixed_bytes) = (
            context.base.clone(),
            context.tools.clone(),
            context.system.clone(),
            context.fixed_bytes,
        );
        let config = self.call_config(base).await?;
        let checked = self
            .context
            .as_ref()
            .is_some_and(|c| c.checked.as_ref() == Some(&config));
        if !checked {
            self.log_header(&config, system.as_deref(), &tools).await?;
            if let Some(c) = self.context.as_mut() {
                c.checked = Some(config.clone());
            }
        }
        // The history as the session froze it (fitted to the window by a context row):
        // references, nothing encoded or parsed here.
        let messages = self.history(&config, fixed_bytes).await?;
        let request = LlmRequest {
            session_id: Some(self.sid.clone()),
            config,
            system,
            messages,
            tools,
            // Set by `stream_or_abort`, which routes the answer's pieces.
            stream_id: None,
        };
        self.agent.state().requests += 1;
        self.task.requests += 1;
        let asked = std::time::Instant::now();
        let response = self.stream_or_abort(request).await;
        {
            let mut st = self.agent.state();
            st.report.model_requests += 1;
            st.report.api_ms += u64::try_from(asked.elapsed().as_millis()).unwrap_or(u64::MAX);
        }
        let response = response?;
        let Some(response) = response else {
            return Ok(StepEnd::End(
                json!({ "kind": "aborted", "reason": { "kind": "user" } }),
            ));
        };
        let reply = assemble(&response.chunks);
        match &reply.finish {
            FinishReason::Error { failure } | FinishReason::Aborted { failure } => {
                let failure = failure.clone();
                self.close_step().await?;
                self.after_failure(failure).await
            }
            _ => {
                self.attempt = 0;
                self.overflow_retried = false;
                self.after_reply(reply).await
            }
        }
    }

    /// LOOP-11: the failed step is closed; decide retry before the turn closes.
    async fn after_failure(&mut self, failure: LlmFailure) -> Result<StepEnd> {
        if failure.code == keel_plugin_api::services::llm::LlmCode::Aborted || self.aborted() {
            return Ok(StepEnd::End(
                json!({ "kind": "aborted", "reason": { "kind": "user" } }),
            ));
        }
        if failure.code == keel_plugin_api::services::llm::LlmCode::ContextWindowExceeded
            && self.seams.has_context()?
        {
            return self.server_overflow(failure).await;
        }
        let policy = self.seams.config.retry.clone();
        let attempt = self.attempt;
        let data = RequestErrorData {
            failure: failure.clone(),
            attempt,
            policy: serde_json::to_value(&policy)?,
        };
        let p = Seams::point(&self.sid, self.turn, self.step, &data)?;
        let out = self
            .seams
            .ctx
            .run_async_waterfall(
                crate::DISPATCH.request_error,
                p,
                move |p: AgentPoint<RequestErrorData>| {
                    let policy = policy.clone();
                    async move {
                        let RequestErrorData { failure, .. } = p.data.into_inner()?;
                        Typed::new(&match retry::decide(
                            &policy,
                            &failure,
                            attempt,
                            retry::jitter_sample(),
                        ) {
                            Decision::Retry { delay_ms } => RetryDecision::Retry { delay_ms },
                            Decision::Fail => RetryDecision::Fail,
                        })
                    }
                },
            )
            .await?;
        if let RetryDecision::Retry { delay_ms: delay } = out.into_inner()? {
            tracing::warn!(session = %self.sid, code = %failure.code, attempt, delay_ms = delay, "model call failed; retrying");
            // B2 `llm/retry`: the retry is a fact of the log, not only of the tracing output.
            let retry = json!({
                "turn": self.turn,
                "failed_step": self.step - 1,
                "attempt": attempt + 1,
                "delay_ms": delay,
                "code": failure.code,
            });
            let event = EventInput::new("llm/retry", &retry)?.ignorable();
            self.seams
                .append(&self.sid, vec![event])
                .await
                .map_err(session_error)?;
            self.attempt += 1;
            let mut waited = 0;
            while waited < delay && !self.aborted() {
                let slice = (delay - waited).min(50);
                keel_plugin_api::sdk::sleep(Duration::from_millis(slice)).await;
                waited += slice;
            }
            return Ok(StepEnd::Continue);
        }
        Ok(StepEnd::End(json!({ "kind": "error", "error": failure })))
    }

    async fn after_reply(&mut self, reply: Reply) -> Result<StepEnd> {
        let calls: Vec<Value> = reply
            .calls
            .iter()
            .map(|c| json!({ "id": c.id, "name": c.name, "arguments": c.arguments }))
            .collect();
        let mut message = json!({ "content": reply.text });
        if !calls.is_empty() {
            message["tool_calls"] = Value::Array(calls);
        }
        if !reply.reasoning.is_empty() {
            message["reasoning"] = Value::String(reply.reasoning.clone());
        }
        // Issue 15 item 2: signed blocks travel back to the provider with this message.
        if !reply.reasoning_blocks.is_empty() {
            message["reasoning_blocks"] = serde_json::to_value(&reply.reasoning_blocks)?;
        }
        let mut data = json!({ "turn": self.turn, "step": self.step, "message": message });
        if let Some(estimate) = self.estimate.take() {
            data["context"] = json!({
                "estimated_tokens": estimate.tokens,
                "window": estimate.window,
            });
        }
        if let Some(u) = reply.usage {
            data["usage"] = serde_json::to_value(u)?;
            self.seams.calibrate(&self.sid, u.input_tokens).await;
            let mut st = self.agent.state();
            st.report.usage.input_tokens += u.input_tokens;
            st.report.usage.output_tokens += u.output_tokens;
        } else {
            // Issue 11 item 5: no usage is unknown, not zero (the logged message has none).
            self.agent.state().report.usage_unknown_calls += 1;
        }
        // Issue 14 item 1: the run's cumulative usage beside each answer's own (stream-json
        // shows both as the answer's event), unknown answers counted, never taken as zero.
        {
            let st = self.agent.state();
            data["cumulative_usage"] = json!({
                "input_tokens": st.report.usage.input_tokens,
                "output_tokens": st.report.usage.output_tokens,
                "unknown_calls": st.report.usage_unknown_calls,
            });
        }
        self.append("assistant/message", data).await?;
        if !reply.text.is_empty() {
            self.agent.state().report.result.clone_from(&reply.text);
        }
        if !reply.calls.is_empty() {
            return self.run_tools(reply).await;
        }
        self.close_step().await?;
        if reply.finish == FinishReason::MaxTokens {
            return Ok(StepEnd::End(json!({ "kind": "max-tokens" })));
        }
        if self.agent.has_steering() {
            return Ok(StepEnd::Continue);
        }
        self.turn_stopping().await
    }

    async fn run_tools(&mut self, reply: Reply) -> Result<StepEnd> {
        let batch = BatchRequest {
            session_id: self.sid.clone(),
            turn: self.turn,
            step: self.step,
            cwd: self.agent.cwd.clone(),
            calls: reply.calls,
            allowed_tools: self.context.as_ref().and_then(|c| c.allowed_tools.clone()),
            child: self.agent.child,
        };
        let outcome = self.batch_or_cancel(&batch).await?;
        self.close_step().await?;
        if let Some(f) = outcome.failure {
            return Ok(StepEnd::End(error_reason(&f.code, &f.message)));
        }
        if self.aborted() {
            return Ok(StepEnd::End(
                json!({ "kind": "aborted", "reason": { "kind": "user" } }),
            ));
        }
        // LOOP-12: a successful result may conclude the turn at this step.
        if outcome
            .results
            .iter()
            .any(|r| r.concludes_turn && !r.is_error)
            && !self.agent.has_steering()
        {
            return Ok(StepEnd::End(json!({ "kind": "completed" })));
        }
        Ok(StepEnd::Continue)
    }

    /// Runs the batch; an abort while it runs cancels it (TOOL-09: nothing more starts, a
    /// running body is stopped, every call still gets its result). `abort` cancels the running
    /// batch itself; this covers an abort that came before the batch was registered, which a
    /// cancel alone would miss.
    async fn batch_or_cancel(&self, batch: &BatchRequest) -> Result<BatchOutcome> {
        let run = self.seams.run_batch(batch).fuse();
        futures::pin_mut!(run);
        // Biased: the batch is polled (and so registered with `keel.tools`) before the cancel.
        futures::select_biased! {
            outcome = run => outcome,
            () = self.until_aborted().fuse() => {
                if let Err(e) = self.seams.cancel_tools(&self.sid).await {
                    tracing::warn!(session = %self.sid, "cancelling the tool batch failed: {e}");
                }
                run.await
            }
        }
    }

    /// LOOP-12/09: objectors steer, and the turn continues with their steering.
    async fn turn_stopping(&self) -> Result<StepEnd> {
        let data = TurnStoppingData {
            reason: StopReason::Completed,
        };
        let p = Seams::point(&self.sid, self.turn, self.step, &data)?;
        let objection = self
            .seams
            .ctx
            .serial(crate::DISPATCH.turn_stopping, p)
            .await?;
        if let Some(o) = objection {
            let Steer { steer } = o.into_inner()?;
            self.agent.send(
                steer,
                keel_plugin_api::services::agent::InboxTarget::Steer,
                None,
                Source::Loop,
            );
            return Ok(StepEnd::Continue);
        }
        Ok(StepEnd::End(json!({ "kind": "completed" })))
    }
}
