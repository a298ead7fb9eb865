//! The parent's side of resident children: `resident_start`, `resident_send`,
//! `resident_view`, `resident_promote` and `resident_stop` (issue 16 item 2). The calling
//! session is the parent; a child is found by (parent session, name), so one parent never
//! reaches another's children.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use keel_plugin_api::events::Typed;
use keel_plugin_api::events::subagent::{ChildPoint, ChildStartedData, StartMode};
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::agent::{
    AgentSession, ChildMode, CreateAgent, InboxTarget, InterruptLevel, Lineage, SendMessage,
};
use keel_plugin_api::services::approval::{ApprovalMode, ModeRequest, SetModeRequest};
use keel_plugin_api::services::resident::ResidentCode;
use keel_plugin_api::services::tools::{ToolCall, ToolResult};
use serde_json::json;

use super::Host;
use super::registry::Resident;
use super::stop::Residual;
use super::tools::{PromoteArgs, SendArgs, StartArgs, StopArgs, ViewArgs, json_result};
use crate::config::ChildProfile;
use crate::memory::residual::Saved;

/// The `origin` recorded in a resident child's session header.
pub const ORIGIN: &str = "resident";

/// A child's name: 1–64 of `[A-Za-z0-9_-]`.
fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(Error::coded(
            keel_plugin_api::codes::ContractCode::InvalidArguments,
            format!("resident_start: a name is 1 to 64 letters, digits, _ or -, got {name:?}"),
        ))
    }
}

/// `never` < `ask`: the stricter of the two.
fn stricter(a: ApprovalMode, b: Option<ApprovalMode>) -> ApprovalMode {
    match (a, b) {
        (ApprovalMode::Ask, _) | (_, Some(ApprovalMode::Ask)) => ApprovalMode::Ask,
        _ => ApprovalMode::Never,
    }
}

/// Where a re-queued input goes: back at its own level, or as queued work.
fn resend(child: &str, content: String, level: Option<InterruptLevel>) -> SendMessage {
    SendMessage {
        session_id: child.to_owned(),
        content,
        target: if level.is_some() {
            InboxTarget::Interrupt
        } else {
            InboxTarget::Followup
        },
        level,
    }
}

impl Host {
    /// The live child `name` of `parent`.
    fn lookup(&self, tool: &str, parent: &str, name: &str) -> Result<Arc<Resident>> {
        self.registry.get(parent, name).ok_or_else(|| {
            let live: Vec<String> = self
                .registry
                .of_parent(parent)
                .iter()
                .map(|r| r.name.clone())
                .collect();
            Error::coded(
                ResidentCode::Unknown,
                format!("{tool}: this session has no resident child {name:?} (live: {live:?})"),
            )
        })
    }

    fn profile(&self, agent: Option<&String>) -> Result<Option<&ChildProfile>> {
        let Some(agent) = agent else {
            return Ok(None);
        };
        self.config.agents.get(agent).map(Some).ok_or_else(|| {
            let known: Vec<&String> = self.config.agents.keys().collect();
            Error::coded(
                ResidentCode::Profile,
                format!(
                    "resident_start: the subagent row has no agent profile {agent:?} (known: {known:?})"
                ),
            )
        })
    }

    /// `resident_start`.
    pub(super) async fn start(&self, call: &ToolCall, a: StartArgs) -> Result<ToolResult> {
        check_name(&a.name)?;
        let parent = call.session_id.as_str();
        if self.registry.contains(parent, &a.name) {
            return Err(Error::coded(
                ResidentCode::Exists,
                format!(
                    "resident_start: this session already has a resident child {:?}",
                    a.name
                ),
            ));
        }
        let cap = self.config.resident.max_children as usize;
        if self.registry.of_parent(parent).len() >= cap {
            return Err(Error::coded(
                ResidentCode::Limit,
                format!(
                    "resident_start: this session has {cap} resident children, the subagent row's resident.max_children; stop one first"
                ),
            ));
        }
        let profile = self.profile(a.agent.as_ref())?;
        // The parent as its loop knows it: its depth (a one-shot child's too) and whether its
        // session is kept in memory only.
        let status = self.agents.status(AgentSession::new(parent)).await.ok();
        let parent_depth = self.registry.by_child(parent).map_or(0, |p| p.depth);
        let depth = status
            .as_ref()
            .map_or(parent_depth, |s| s.depth.max(parent_depth))
            + 1;
        let ephemeral = status.is_some_and(|s| s.ephemeral);
        if depth > self.config.max_depth {
            return Err(Error::coded(
                ResidentCode::Limit,
                format!(
                    "resident_start: a child here would be at depth {depth}, past the subagent row's max_depth {}",
                    self.config.max_depth
                ),
            ));
        }
        let created = self
            .agents
            .create(CreateAgent {
                cwd: call.cwd.clone(),
                session_id: None,
                ephemeral,
                max_turns: profile.and_then(|p| p.max_turns),
                profile: None,
                lineage: Some(Lineage {
                    parent_session: parent.to_owned(),
                    parent_call_id: Some(call.call_id.clone()),
                    depth,
                    mode: ChildMode::Spawn,
                    origin: ORIGIN.to_owned(),
                }),
                overrides: Some(profile.map(ChildProfile::overrides).unwrap_or_default()),
            })
            .await?;
        let child = created.session_id;
        match self.settle(call, &a, profile, &child, depth).await {
            Ok(result) => Ok(result),
            Err(e) => {
                let _ = self.agents.close(AgentSession::new(&child)).await;
                self.registry.cleanup(&child);
                // Its `subagent/spawned` may be logged already: the parent's log says it ended
                // (an end without a start is ignored by the recovery).
                let failed = json!({
                    "call_id": call.call_id,
                    "child_session": child,
                    "outcome": "failed",
                    "resident": a.name,
                    "code": e.code.as_str(),
                });
                self.log_ended(parent, &[failed]).await;
                Err(e)
            }
        }
    }

    /// The rest of a start once the child's session exists: its approval mode, its memory,
    /// its registration and its re-queued inputs.
    async fn settle(
        &self,
        call: &ToolCall,
        a: &StartArgs,
        profile: Option<&ChildProfile>,
        child: &str,
        depth: u32,
    ) -> Result<ToolResult> {
        let parent = call.session_id.as_str();
        // Durable before the child takes any input: a crash from here on leaves a record
        // `keel resume` of the parent recovers the child from.
        self.log_spawned(call, child, a.agent.as_deref(), depth, &a.name)
            .await?;
        if let Some(approval) = &self.approval {
            let own = approval
                .mode(ModeRequest {
                    session_id: Some(parent.to_owned()),
                })
                .await?
                .mode;
            let mode = stricter(own, profile.and_then(|p| p.approval));
            approval
                .set_mode(SetModeRequest {
                    session_id: child.to_owned(),
                    mode: mode.as_str().to_owned(),
                })
                .await?;
        }
        let memory = self.memory.open_child(parent, child)?;
        let r = Resident::new(parent, &a.name, child, depth, a.agent.clone(), memory)
            .started_by(&call.call_id);
        let r = self.registry.insert(r)?;
        let data = ChildStartedData {
            agent: a.agent.clone(),
            mode: StartMode::Resident,
            depth,
            resident: Some(a.name.clone()),
        };
        if let Ok(data) = Typed::new(&data) {
            let _ = self.ctx.emit(
                crate::DISPATCH.child_started,
                &ChildPoint {
                    parent_session: parent.into(),
                    parent_call_id: call.call_id.as_str().into(),
                    child_session: child.into(),
                    data,
                },
            );
        }
        // Kept inputs go back on the queue by themselves, parked ones on request; each leaves
        // the store only once it is queued again.
        let residuals = self.memory.residuals(parent);
        let states: &[Saved] = if a.resume_parked {
            &[Saved::Keep, Saved::Park]
        } else {
            &[Saved::Keep]
        };
        let (mut kept, mut parked) = (0, 0);
        for (seq, state, input) in residuals.list(&a.name, states)? {
            self.agents
                .send(resend(r.child.as_str(), input.content, input.level))
                .await?;
            residuals.forget(seq)?;
            match state {
                Saved::Keep => kept += 1,
                Saved::Park => parked += 1,
            }
        }
        let still_parked = residuals.list(&a.name, &[Saved::Park])?.len();
        Ok(json_result(&json!({
            "name": a.name,
            "child_session": child,
            "depth": depth,
            "agent": a.agent,
            "requeued": { "kept": kept, "parked": parked },
            "parked_waiting": still_parked,
        })))
    }

    /// `resident_send`: an interrupt on the child's own queue (asked at L4, clamped to L3 by
    /// `send`: the answer says the level it was queued at).
    pub(super) async fn send(&self, call: &ToolCall, a: SendArgs) -> Result<ToolResult> {
        let r = self.lookup("resident_send", &call.session_id, &a.name)?;
        let sent = self
            .agents
            .send(SendMessage {
                session_id: r.child.clone(),
                content: a.message,
                target: InboxTarget::Interrupt,
                level: Some(InterruptLevel::L4),
            })
            .await?;
        Ok(json_result(&json!({
            "name": a.name,
            "message_id": sent.id,
            "level": sent.level,
        })))
    }

    /// `resident_view`: a pull that never interrupts the child.
    pub(super) async fn view(&self, call: &ToolCall, a: ViewArgs) -> Result<ToolResult> {
        let r = self.lookup("resident_view", &call.session_id, &a.name)?;
        let session = AgentSession::new(&r.child);
        let mut waited_out = false;
        if a.wait {
            let limit = Duration::from_millis(self.config.resident.wait_ms);
            let idle = self.agents.wait_idle(session.clone()).fuse();
            let late = keel_plugin_api::sdk::sleep(limit).fuse();
            futures::pin_mut!(idle, late);
            futures::select! {
                done = idle => { r.last_result(&done?.result); }
                () = late => waited_out = true,
            }
        }
        let status = self.agents.status(session).await?;
        let temp: Vec<serde_json::Value> = r
            .memory
            .temp_records(&[])?
            .into_iter()
            .map(|(key, text)| json!({ "key": key, "text": text }))
            .collect();
        let mut view = json!({
            "name": a.name,
            "child_session": r.child,
            "running": status.running,
            "pending": status.pending,
            "suspended": status.suspended,
            "resumed": status.resumed,
            "last_result": r.last_result(&status.last_result),
            "temp_memory": temp,
        });
        if waited_out {
            view["wait"] = json!(format!(
                "still running after {} ms (resident.wait_ms)",
                self.config.resident.wait_ms
            ));
        }
        Ok(json_result(&view))
    }

    /// `resident_promote`: chosen temp records into the parent's main store.
    pub(super) async fn promote(&self, call: &ToolCall, a: PromoteArgs) -> Result<ToolResult> {
        let r = self.lookup("resident_promote", &call.session_id, &a.name)?;
        let n = self.memory.promote(&r.parent, &r.memory, &a.keys)?;
        Ok(json_result(&json!({
            "name": a.name,
            "promoted": n,
            "keys": a.keys,
        })))
    }

    /// `resident_stop`: the singular stop path (default residual: `keep`).
    pub(super) async fn stop_tool(&self, call: &ToolCall, a: StopArgs) -> Result<ToolResult> {
        let r = self.lookup("resident_stop", &call.session_id, &a.name)?;
        let stopped = self.stop(&r, a.residual.unwrap_or(Residual::Keep)).await;
        Ok(json_result(&stopped))
    }
}
