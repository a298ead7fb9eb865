//! A resident child's teardown (SUB-02, SUB-04, ARCHITECTURE §13 T-4). Every stop path — the
//! singular `resident_stop`, the parent session closing, the row unloading — runs
//! [`Host::stop`], which ends in the registry's one `cleanup`.
//!
//! The order is what keeps every input accounted for:
//! 1. `take_pending`: the inputs the child had not started leave its queue (nothing can start
//!    them any more);
//! 2. `keep`/`park`: they are saved at once, before the next await, so even a stop cut short
//!    (the row's tasks cancelled at unload) has them on disk;
//! 3. the task in hand, if any, is aborted; its own `turn/end {aborted}` in the child's log is
//!    its terminal answer;
//! 4. `drop`: each input is logged in the child's log as a durable `resident/dropped` event
//!    (its terminal answer, `skipped`) and listed in the stop's answer; `return`: they are the
//!    answer;
//! 5. the child's session is closed and `cleanup` unregisters it and deletes its temp memory;
//! 6. the parent's log records `subagent/ended {outcome:"stopped"}` ([`super::lineage`]) —
//!    the plural paths write one batch per parent, opening it again when it already closed.
//!
//! A step that fails does not lose inputs: a save or a drop log that fails falls back to
//! returning them to the caller, and the failure is reported with them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::FutureExt;
use keel_plugin_api::events::Typed;
use keel_plugin_api::events::subagent::{ChildEndedData, ChildPoint};
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::agent::{AgentSession, PendingInput};
use keel_plugin_api::services::session::{AppendEvents, EventInput, SessionRef};
use keel_plugin_api::services::subagent::ChildOutcome;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Host;
use super::config::CloseResidual;
use super::lineage;
use super::registry::Resident;
use crate::memory::residual::Saved;

/// The four residual states (SUB-02).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Residual {
    /// Saved; queued again at the next activation of the name.
    Keep,
    /// Logged in the child's log and answered `skipped`.
    Drop,
    /// Saved; queued again only on explicit request.
    Park,
    /// Handed back to the parent in the stop's answer.
    Return,
}

impl Residual {
    /// The wire spelling (as serde writes it).
    pub fn as_str(self) -> &'static str {
        match self {
            Residual::Keep => "keep",
            Residual::Drop => "drop",
            Residual::Park => "park",
            Residual::Return => "return",
        }
    }
}

impl From<CloseResidual> for Residual {
    fn from(c: CloseResidual) -> Self {
        match c {
            CloseResidual::Keep => Residual::Keep,
            CloseResidual::Drop => Residual::Drop,
            CloseResidual::Park => Residual::Park,
        }
    }
}

/// One plural stop under way in a spawned task (counted in [`Host`]'s `in_flight` until
/// dropped, also when the task is cut).
pub struct InFlight(Arc<Host>);

impl InFlight {
    /// Counts a stop of `host` from now.
    pub fn enter(host: &Arc<Host>) -> Self {
        host.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(Arc::clone(host))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One input as the stop reports it.
#[derive(Debug, Clone, Serialize)]
pub struct Item {
    /// The message id it was queued under.
    pub id: String,
    /// Its text (only when it is handed back).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Its level (absent: queued work).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub level: Option<u8>,
    /// Where it went: `kept`, `parked`, `dropped`, `returned`.
    pub state: &'static str,
}

/// What a stop did.
#[derive(Debug, Clone, Serialize)]
pub struct Stopped {
    /// The child's name.
    pub name: String,
    /// Its session.
    pub child_session: String,
    /// The residual state asked.
    pub residual: Residual,
    /// Its unrun inputs and where each went, in the order they would have run.
    pub inputs: Vec<Item>,
    /// A task was running and was aborted.
    pub aborted: bool,
    /// Steps that failed (an input is never lost to one: see the module doc).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

fn item(i: &PendingInput, state: &'static str) -> Item {
    Item {
        id: i.id.clone(),
        content: (state == "returned").then(|| i.content.clone()),
        level: i.level.map(u8::from),
        state,
    }
}

impl Host {
    /// Stops `r` with `residual` (see the module doc) and records its end in the parent's
    /// log. Never fails: what went wrong is in [`Stopped::problems`]; a second stop of the
    /// same child only reports that.
    pub async fn stop(&self, r: &Arc<Resident>, residual: Residual) -> Stopped {
        let (out, ended) = self.halt(r, residual).await;
        if let Some(ended) = ended {
            self.log_ended(&r.parent, &[ended]).await;
        }
        out
    }

    /// Steps 1–5 of a stop; answers the stop and its `subagent/ended` record (none when
    /// another stop had claimed the child).
    async fn halt(&self, r: &Arc<Resident>, residual: Residual) -> (Stopped, Option<Value>) {
        let mut out = Stopped {
            name: r.name.clone(),
            child_session: r.child.clone(),
            residual,
            inputs: Vec::new(),
            aborted: false,
            problems: Vec::new(),
        };
        if !r.claim_stop() {
            out.problems
                .push("another stop of this child is under way".to_owned());
            return (out, None);
        }
        let session = AgentSession::new(&r.child);
        let taken = match self.agents.take_pending(session.clone()).await {
            Ok(p) => p.inputs,
            Err(e) => {
                out.problems.push(format!("take_pending: {e}"));
                Vec::new()
            }
        };
        // 2. Saved before anything else awaits.
        let mut fallback = false;
        if let Some(saved) = match residual {
            Residual::Keep => Some(Saved::Keep),
            Residual::Park => Some(Saved::Park),
            Residual::Drop | Residual::Return => None,
        } {
            match self
                .memory
                .residuals(&r.parent)
                .save(&r.name, saved, &taken)
            {
                Ok(()) => {
                    let state = if saved == Saved::Keep {
                        "kept"
                    } else {
                        "parked"
                    };
                    out.inputs = taken.iter().map(|i| item(i, state)).collect();
                }
                Err(e) => {
                    out.problems.push(e.to_string());
                    fallback = true;
                }
            }
        }
        // 3. The task in hand.
        if self
            .agents
            .status(session.clone())
            .await
            .is_ok_and(|s| s.running)
        {
            out.aborted = true;
            if let Err(e) = self.agents.abort(session.clone()).await {
                out.problems.push(format!("abort: {e}"));
            }
            let grace = Duration::from_millis(self.config.resident.grace_ms);
            let idle = self.agents.wait_idle(session.clone()).fuse();
            let late = keel_plugin_api::sdk::sleep(grace).fuse();
            futures::pin_mut!(idle, late);
            futures::select! {
                _ = idle => {}
                () = late => out.problems.push(format!(
                    "the aborted turn did not end within {} ms; closing it", grace.as_millis()
                )),
            }
        }
        // 4. Drop's log, return's answer.
        match residual {
            Residual::Drop => match self.log_dropped(r, &taken).await {
                Ok(()) => out.inputs = taken.iter().map(|i| item(i, "dropped")).collect(),
                Err(e) => {
                    out.problems.push(e.to_string());
                    fallback = true;
                }
            },
            Residual::Return => fallback = true,
            Residual::Keep | Residual::Park => {}
        }
        if fallback {
            out.inputs = taken.iter().map(|i| item(i, "returned")).collect();
            if residual != Residual::Return {
                tracing::warn!(
                    child = %r.child,
                    inputs = ?taken,
                    "resident child {:?}: its unrun inputs could not be {:?}; handed back",
                    r.name,
                    residual
                );
            }
        }
        // 5. Close, then the one cleanup.
        if let Err(e) = self.agents.close(session).await {
            out.problems.push(format!("close: {e}"));
        }
        self.registry.cleanup(&r.child);
        let data = ChildEndedData {
            outcome: ChildOutcome::Stopped,
            code: None,
            resident: Some(r.name.clone()),
            residual: Some(residual.as_str().to_owned()),
            inputs: Some(u64::try_from(out.inputs.len()).unwrap_or(u64::MAX)),
        };
        if let Ok(data) = Typed::new(&data) {
            let _ = self.ctx.emit(
                crate::DISPATCH.child_ended,
                &ChildPoint {
                    parent_session: r.parent.as_str().into(),
                    parent_call_id: r.call_id.as_str().into(),
                    child_session: r.child.as_str().into(),
                    data,
                },
            );
        }
        let extra = serde_json::json!({ "residual": residual, "inputs": out.inputs.len() });
        (out, Some(lineage::ended(r, "stopped", &extra)))
    }

    /// Appends `resident/dropped` for each input to the child's log, durably.
    async fn log_dropped(&self, r: &Resident, taken: &[PendingInput]) -> Result<()> {
        if taken.is_empty() {
            return Ok(());
        }
        let events = taken
            .iter()
            .map(|i| {
                EventInput::new(
                    "resident/dropped",
                    &serde_json::json!({
                        "message_id": i.id,
                        "content": i.content,
                        "level": i.level,
                        "answer": "skipped",
                        "reason": "dropped at teardown",
                    }),
                )
                .map(EventInput::ignorable)
            })
            .collect::<Result<Vec<_>>>()?;
        self.sessions
            .append(AppendEvents {
                session_id: r.child.clone(),
                events,
            })
            .await?;
        self.sessions.flush(SessionRef::new(&r.child)).await?;
        Ok(())
    }

    /// The plural path: stops every child of `parent` with the row's `on_close` state; their
    /// ends go to the parent's log in one batch.
    pub async fn stop_children_of(&self, parent: &str) -> Vec<Stopped> {
        let residual = Residual::from(self.config.resident.on_close);
        let (mut out, mut ended) = (Vec::new(), Vec::new());
        for r in self.registry.of_parent(parent) {
            let (stopped, record) = self.halt(&r, residual).await;
            out.push(stopped);
            ended.extend(record);
        }
        self.log_ended(parent, &ended).await;
        out
    }

    /// The plural path at unload: every child of every parent, parent by parent. It first
    /// waits (at most twice `resident.grace_ms`) for the parent-closing stops still running
    /// in spawned tasks — the kernel runs this before it aborts them, and two stops of one
    /// parent would both write its log. A child another stop had claimed and not finished
    /// still gets its session closed, its `cleanup` and its end in the parent's log.
    pub async fn stop_all(&self) {
        let limit = Duration::from_millis(self.config.resident.grace_ms.saturating_mul(2));
        let since = std::time::Instant::now();
        while self.in_flight.load(Ordering::SeqCst) > 0 && since.elapsed() < limit {
            keel_plugin_api::sdk::sleep(Duration::from_millis(10)).await;
        }
        let residual = Residual::from(self.config.resident.on_close);
        let mut by_parent: BTreeMap<String, Vec<Arc<Resident>>> = BTreeMap::new();
        for r in self.registry.all() {
            by_parent.entry(r.parent.clone()).or_default().push(r);
        }
        for (parent, children) in by_parent {
            let mut ended = Vec::new();
            for r in children {
                let (stopped, record) = self.halt(&r, residual).await;
                if let Some(record) = record {
                    ended.push(record);
                } else {
                    let _ = self.agents.close(AgentSession::new(&r.child)).await;
                    self.registry.cleanup(&r.child);
                    let note = serde_json::json!({ "note": stopped.problems.join("; ") });
                    ended.push(lineage::ended(&r, "stopped", &note));
                }
            }
            self.log_ended(&parent, &ended).await;
        }
    }
}
