//! One child's life (issue 16 item 1; SUB-05, SUB-07), run as a task of the row so that it
//! always reaches an end: create the child session (`keel.agent` `create` with lineage and
//! the profile's overrides), give it the parent's approval mode or the profile's when that is
//! stricter, log `subagent/spawned` durably in the parent, send the task, wait for idle under
//! the timeout, close, log `subagent/ended`. The call that started it may be dropped at any
//! point (the parent's batch cancelled); the task then aborts and closes the child, so every
//! child log ends with a terminal `turn/end`.

use std::time::Duration;

use futures::FutureExt as _;
use futures::channel::oneshot;
use keel_plugin_api::events::Typed;
use keel_plugin_api::events::subagent::{ChildEndedData, ChildPoint, ChildStartedData, StartMode};
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::agent::{
    AgentOverrides, AgentSession, ChildMode, CreateAgent, InboxTarget, Lineage, RunReport,
    SendMessage,
};
use keel_plugin_api::services::approval::{Approval, ApprovalMode, ModeRequest, SetModeRequest};
use keel_plugin_api::services::session::{AppendEvents, EventInput, SessionRef};
use keel_plugin_api::services::subagent::{AgentArgs, ChildOutcome, SubagentCode};
use keel_plugin_api::services::tools::ToolResult;
use serde_json::{Value, json};

use crate::config::ChildProfile;
use crate::delegate::Shared;
use crate::registry::Slot;

/// How long an aborted child gets to close its turn before it is closed regardless.
const ABORT_GRACE: Duration = Duration::from_secs(10);
/// Kept under the tool pipeline's own deadline, so the child's timeout answers first.
const PIPELINE_MARGIN_MS: u64 = 500;

/// The origin recorded in a delegated child's header.
pub const ORIGIN: &str = "subagent";

/// One accepted `agent` call.
pub struct ChildCall {
    /// The parent session.
    pub parent: String,
    /// The parent's call id.
    pub call_id: String,
    /// The parent's working root (the child's too).
    pub cwd: String,
    /// The pipeline's deadline on the call, ms (0 = none).
    pub deadline_ms: u64,
    /// The arguments.
    pub args: AgentArgs,
    /// The named agent and its profile.
    pub profile: Option<(String, ChildProfile)>,
    /// The child's depth.
    pub depth: u32,
    /// The parent's session is kept in memory only: so is the child's.
    pub ephemeral: bool,
    /// The child's step budget, drawn from the parent's ([`crate::budget`]; `None`: the
    /// profile's or the loop's own).
    pub max_steps: Option<u64>,
}

impl ChildCall {
    fn agent_name(&self) -> Option<&str> {
        self.profile.as_ref().map(|(n, _)| n.as_str())
    }

    fn child_profile(&self) -> ChildProfile {
        self.profile
            .as_ref()
            .map(|(_, p)| p.clone())
            .unwrap_or_default()
    }

    fn mode_str(&self) -> &'static str {
        match self.args.mode {
            ChildMode::Spawn => "spawn",
            ChildMode::Fork => "fork",
        }
    }

    fn start_mode(&self) -> StartMode {
        match self.args.mode {
            ChildMode::Spawn => StartMode::Spawn,
            ChildMode::Fork => StartMode::Fork,
        }
    }
}

/// The `subagent/*` payload of `call`'s child `child`.
fn child_point<D>(call: &ChildCall, child: &str, data: Typed<D>) -> ChildPoint<D> {
    ChildPoint {
        parent_session: call.parent.as_str().into(),
        parent_call_id: call.call_id.as_str().into(),
        child_session: child.into(),
        data,
    }
}

/// How the wait ended.
enum Waited {
    Idle(Result<RunReport>),
    TimedOut,
    Cancelled,
}

/// Runs the child to its end and answers the tool result. `cancelled` resolves when the call
/// that started it is dropped.
pub async fn run(
    shared: &Shared,
    call: ChildCall,
    slot: Slot,
    mut cancelled: oneshot::Receiver<()>,
) -> ToolResult {
    let profile = call.child_profile();
    let recorded = shared
        .sessions
        .profile(SessionRef::new(&call.parent))
        .await
        .ok()
        .and_then(|p| p.profile);
    let create = CreateAgent {
        cwd: call.cwd.clone(),
        session_id: None,
        ephemeral: call.ephemeral,
        max_turns: profile.max_turns,
        profile: recorded,
        lineage: Some(Lineage {
            parent_session: call.parent.clone(),
            parent_call_id: Some(call.call_id.clone()),
            depth: call.depth,
            mode: call.args.mode,
            origin: ORIGIN.to_owned(),
        }),
        overrides: Some(AgentOverrides {
            max_steps: call.max_steps.or(profile.max_steps),
            ..profile.overrides()
        }),
    };
    let child = match shared.agent.create(create).await {
        Ok(c) => c.session_id,
        Err(e) => {
            return ToolResult::error(
                SubagentCode::Failed,
                format!(
                    "the child agent could not start: [{}] {}",
                    e.code, e.message
                ),
            );
        }
    };
    shared.registry.set_depth(&child, call.depth);
    shared.registry.opened(&child, &call.parent, &call.call_id);

    let started = prepare(shared, &call, &child, &profile).await;
    let waited = match started {
        Err(e) => Waited::Idle(Err(e)),
        Ok(()) => {
            let data = Typed::new(&ChildStartedData {
                agent: call.agent_name().map(str::to_owned),
                mode: call.start_mode(),
                depth: call.depth,
                resident: None,
            });
            if let Ok(data) = data {
                let p = child_point(&call, &child, data);
                let _ = shared.ctx.emit(crate::DISPATCH.child_started, &p);
            }
            wait(shared, &call, &child, &profile, &mut cancelled).await
        }
    };
    let (outcome, result) = match waited {
        Waited::Idle(Ok(report)) if report.reason_kind() == "completed" => (
            ChildOutcome::Completed,
            ToolResult {
                meta: Some(json!({ "child_session": child, "turns": report.num_turns })),
                ..ToolResult::ok(report.result)
            },
        ),
        Waited::Idle(Ok(report)) => (ChildOutcome::Failed, failed(&child, &report)),
        Waited::Idle(Err(e)) => (
            ChildOutcome::Failed,
            ToolResult::error(
                SubagentCode::Failed,
                format!(
                    "the child agent (session {child}) did not run: [{}] {}; see `keel sessions show {child}`",
                    e.code, e.message
                ),
            ),
        ),
        Waited::TimedOut => {
            converge(shared, &child).await;
            (
                ChildOutcome::Timeout,
                ToolResult::error(
                    SubagentCode::Timeout,
                    format!(
                        "the child agent (session {child}) ran past its {} ms limit and was \
                         aborted; see `keel sessions show {child}`",
                        timeout_ms(shared, &call, &profile)
                    ),
                ),
            )
        }
        Waited::Cancelled => {
            converge(shared, &child).await;
            (
                ChildOutcome::Cancelled,
                ToolResult::error(
                    SubagentCode::Cancelled,
                    format!(
                        "the call was cancelled; the child agent (session {child}) was aborted"
                    ),
                ),
            )
        }
    };
    if !matches!(outcome, ChildOutcome::Timeout | ChildOutcome::Cancelled)
        && let Err(e) = shared.agent.close(AgentSession::new(&child)).await
    {
        tracing::warn!(child = %child, "closing the child agent: {e}");
    }
    shared.registry.closed(&child);
    drop(slot);
    let code = result.code().map(str::to_owned);
    let mut ended = json!({
        "call_id": call.call_id,
        "child_session": child,
        "outcome": outcome.as_str(),
    });
    if let Some(code) = &code {
        ended["code"] = json!(code);
    }
    audit(shared, &call.parent, "subagent/ended", &ended).await;
    let data = Typed::new(&ChildEndedData {
        outcome,
        code,
        resident: None,
        residual: None,
        inputs: None,
    });
    if let Ok(data) = data {
        let p = child_point(&call, &child, data);
        let _ = shared.ctx.emit(crate::DISPATCH.child_ended, &p);
    }
    result
}

/// Before the task goes in: the child's approval mode, and `subagent/spawned` durable in the
/// parent (a crash after this point leaves a record `keel resume` recovers the child from).
async fn prepare(
    shared: &Shared,
    call: &ChildCall,
    child: &str,
    profile: &ChildProfile,
) -> Result<()> {
    if let Some(approval) = shared.ctx.get_client::<Approval>()? {
        let parent_mode = approval
            .mode(ModeRequest {
                session_id: Some(call.parent.clone()),
            })
            .await?
            .mode;
        let mode = stricter(parent_mode, profile.approval);
        approval
            .set_mode(SetModeRequest {
                session_id: child.to_owned(),
                mode: mode.as_str().to_owned(),
            })
            .await?;
    }
    let mut spawned = json!({
        "call_id": call.call_id,
        "child_session": child,
        "agent": call.agent_name(),
        "mode": call.mode_str(),
        "depth": call.depth,
    });
    if let Some(d) = &call.args.description {
        spawned["description"] = json!(d);
    }
    let event = EventInput::new("subagent/spawned", &spawned)?.ignorable();
    shared
        .sessions
        .append(AppendEvents {
            session_id: call.parent.clone(),
            events: vec![event],
        })
        .await?;
    shared.sessions.flush(SessionRef::new(&call.parent)).await?;
    Ok(())
}

/// The stricter of the parent's mode and the profile's (`never` < `ask`).
pub fn stricter(parent: ApprovalMode, profile: Option<ApprovalMode>) -> ApprovalMode {
    match (parent, profile) {
        (ApprovalMode::Ask, _) | (_, Some(ApprovalMode::Ask)) => ApprovalMode::Ask,
        _ => ApprovalMode::Never,
    }
}

/// The child's wall-clock limit: its profile's, else the row's, kept under the pipeline's
/// deadline on the call.
fn timeout_ms(shared: &Shared, call: &ChildCall, profile: &ChildProfile) -> u64 {
    let own = profile.timeout_ms.unwrap_or(shared.config.timeout_ms);
    if call.deadline_ms > 0 {
        own.min(call.deadline_ms.saturating_sub(PIPELINE_MARGIN_MS).max(1))
    } else {
        own
    }
}

/// Sends the task and waits for the child to become idle, its timeout, or the call's cancel.
async fn wait(
    shared: &Shared,
    call: &ChildCall,
    child: &str,
    profile: &ChildProfile,
    cancelled: &mut oneshot::Receiver<()>,
) -> Waited {
    let content = match &profile.instructions {
        Some(i) if !i.trim().is_empty() => format!("{i}\n\n{}", call.args.task),
        _ => call.args.task.clone(),
    };
    if matches!(cancelled.try_recv(), Err(oneshot::Canceled)) {
        return Waited::Cancelled;
    }
    if let Err(e) = shared
        .agent
        .send(SendMessage {
            session_id: child.to_owned(),
            content,
            target: InboxTarget::Followup,
            level: None,
        })
        .await
    {
        return Waited::Idle(Err(e));
    }
    let limit = Duration::from_millis(timeout_ms(shared, call, profile));
    let idle = shared.agent.wait_idle(AgentSession::new(child)).fuse();
    let timer = keel_plugin_api::sdk::sleep(limit).fuse();
    futures::pin_mut!(idle, timer);
    futures::select! {
        report = idle => Waited::Idle(report),
        () = timer => Waited::TimedOut,
        _ = &mut *cancelled => Waited::Cancelled,
    }
}

/// Aborts the child, gives its turn [`ABORT_GRACE`] to close, and closes it (SUB-07).
async fn converge(shared: &Shared, child: &str) {
    if let Err(e) = shared.agent.abort(AgentSession::new(child)).await {
        tracing::warn!(child = %child, "aborting the child agent: {e}");
    }
    let idle = shared.agent.wait_idle(AgentSession::new(child)).fuse();
    let grace = keel_plugin_api::sdk::sleep(ABORT_GRACE).fuse();
    futures::pin_mut!(idle, grace);
    futures::select! {
        _ = idle => {},
        () = grace => tracing::warn!(child = %child, "the aborted child did not stop within {ABORT_GRACE:?}; closing it"),
    }
    if let Err(e) = shared.agent.close(AgentSession::new(child)).await {
        tracing::warn!(child = %child, "closing the child agent: {e}");
    }
}

/// The error result of a child whose turn did not complete: its reason and code, and where
/// its log is.
fn failed(child: &str, report: &RunReport) -> ToolResult {
    let reason = &report.turn_end_reason;
    let kind = report.reason_kind();
    let detail = match (
        reason["error"]["code"].as_str(),
        reason["error"]["message"].as_str(),
    ) {
        (Some(code), Some(message)) => format!(": [{code}] {message}"),
        (Some(code), None) => format!(": [{code}]"),
        _ => match reason.get("reason") {
            Some(r) => format!(" ({r})"),
            None => String::new(),
        },
    };
    let mut result = ToolResult::error(
        SubagentCode::Failed,
        format!(
            "the child agent (session {child}) ended its turn {kind}{detail}; see `keel sessions show {child}`"
        ),
    );
    result.meta = Some(json!({ "child_session": child, "reason": reason }));
    result
}

/// Appends one ignorable audit event to `session`; a refusal (the parent already closed) is
/// logged, never fatal.
pub async fn audit(shared: &Shared, session: &str, kind: &str, data: &Value) {
    let appended = match EventInput::new(kind, data) {
        Ok(e) => {
            shared
                .sessions
                .append(AppendEvents {
                    session_id: session.to_owned(),
                    events: vec![e.ignorable()],
                })
                .await
        }
        Err(e) => Err(e),
    };
    if let Err(e) = appended {
        tracing::warn!(session = %session, "{kind} could not be logged: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_is_never_less_strict_than_its_parent() {
        use ApprovalMode::{Ask, Never};
        assert_eq!(stricter(Never, None), Never);
        assert_eq!(stricter(Never, Some(Never)), Never);
        assert_eq!(stricter(Never, Some(Ask)), Ask);
        assert_eq!(stricter(Ask, Some(Never)), Ask);
        assert_eq!(stricter(Ask, None), Ask);
    }

    #[test]
    fn a_failed_turn_names_its_kind_code_and_session() {
        let report = RunReport {
            turn_end_reason: json!({"kind": "error", "error": {"code": "LLM_SERVER", "message": "500"}}),
            ..RunReport::default()
        };
        let r = failed("c1", &report);
        assert_eq!(r.code(), Some("SUBAGENT_FAILED"));
        assert!(
            r.content.contains("ended its turn error: [LLM_SERVER] 500"),
            "{}",
            r.content
        );
        assert!(r.content.contains("keel sessions show c1"));
    }
}
