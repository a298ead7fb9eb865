//! `agent-loop`: the one concrete agent loop, offered as the `keel.agent` service (LOOP-01,
//! the [`AgentService`] contract).
//! Drivers and surfaces talk to the service; nothing depends on this crate.
//!
//! Turns and steps are durable session events; every model call goes through `keel.llm` (and so
//! through the `llm/stream` waterfall) and every tool call through `keel.tools` (the B9
//! pipeline). The loop owns ordering and boundaries, never policy: admission, call config,
//! retry and stop decisions are waterfalls other plugins can join. See `turn.rs` for one turn,
//! `agent.rs` for the inbox and the driver task, and `deltas.rs` for the model's pieces
//! forwarded to drivers as `agent/delta` while a step streams (issue 26 item 1).

mod agent;
mod assemble;
mod child;
mod config;
mod deltas;
mod retry;
mod scheduler;
mod seams;
mod turn;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use keel_plugin_api::events::agent::{
    self as ev, DiscardReason, DiscardedMessage, InboxInsertedData, ResumedData, StepMessage,
};
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::agent::{
    AgentCode, AgentCreated, AgentProvider, AgentResumed, AgentService, AgentSession, AgentStatus,
    CreateAgent, MessageSent, PendingInputs, ResumeAgent, RunReport, SendMessage,
};
use keel_plugin_api::services::llm::{Llm, LlmCallConfig};
use keel_plugin_api::services::prompt::SystemPrompt;
use keel_plugin_api::services::session::{SessionRef, Sessions};
use keel_plugin_api::services::tools::Tools;

use agent::{Agent, LogState};
use config::LoopConfig;
use seams::Seams;

/// The default call config: the agent's provider (or the row's, or the only registered one)
/// and model (or the row's, or the adapter's default model).
pub(crate) async fn default_config(
    seams: &Seams,
    overrides: &keel_plugin_api::services::agent::AgentOverrides,
) -> Result<LlmCallConfig> {
    let c = &seams.config;
    let routes = seams.routes().await?;
    let provider = overrides
        .provider
        .clone()
        .or_else(|| c.provider.clone())
        .unwrap_or_else(|| match routes.as_slice() {
            [only] => only.provider.clone(),
            _ => config::DEFAULT_PROVIDER.to_owned(),
        });
    let model = match overrides.model.as_ref().or(c.model.as_ref()) {
        Some(m) => m.clone(),
        None => routes
            .into_iter()
            .find(|p| p.provider == provider)
            .and_then(|p| p.default_model)
            .unwrap_or_default(),
    };
    Ok(LlmCallConfig {
        provider,
        model,
        max_tokens: overrides.max_tokens.or(c.max_tokens),
        temperature: c.temperature,
        ..LlmCallConfig::default()
    })
}

/// Live agents by session id.
struct Hub {
    seams: Arc<Seams>,
    agents: Mutex<HashMap<String, Arc<Agent>>>,
}

impl Hub {
    fn agent(&self, id: &str) -> Result<Arc<Agent>> {
        self.agents
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(id)
            .cloned()
            .ok_or_else(|| {
                Error::coded(
                    AgentCode::NoAgent,
                    format!("no live agent for session '{id}'"),
                )
            })
    }

    async fn create(&self, a: CreateAgent) -> Result<AgentCreated> {
        // The route is checked before anything exists: a missing credential fails here, before
        // any request and before a session is created.
        let overrides = a.overrides.clone().unwrap_or_default();
        let config = default_config(&self.seams, &overrides).await?;
        self.seams.check(&config).await?;
        let (sid, log) = child::create_session(&self.seams, &a).await?;
        child::record_overrides(&self.seams, &sid, &overrides).await?;
        let depth = a.lineage.as_ref().map_or(0, |l| l.depth);
        let agent = Agent::new(sid.clone(), a.cwd, a.max_turns, log)
            .with_overrides(overrides, a.lineage.is_some())
            .in_tree(depth, a.ephemeral);
        self.start(agent)?;
        Ok(AgentCreated { session_id: sid })
    }

    async fn resume(&self, a: ResumeAgent) -> Result<AgentResumed> {
        let config = default_config(&self.seams, &Default::default()).await?;
        self.seams.check(&config).await?;
        let sessions = self.seams.sessions();
        let loaded = sessions.load(SessionRef::new(&a.session_id)).await?;
        // A child keeps its own settings (issue 16); a route they change is checked too.
        let (overrides, is_child) = child::recorded(&loaded.header, &loaded.events);
        if overrides.provider.is_some() || overrides.model.is_some() {
            let config = default_config(&self.seams, &overrides).await?;
            self.seams.check(&config).await?;
        }
        let depth = loaded.header.delegation_depth;
        let cwd = loaded.header.cwd;
        let events = loaded.events;
        let next_turn = events.iter().filter(|e| e.kind == "turn/start").count() as u64;
        let recovered = loaded.recovered.len() as u64;
        sessions.open(SessionRef::new(&a.session_id)).await?;
        // Listeners (the subagent row recovering the children this log names) finish before
        // the loop starts.
        let p = Seams::point(&a.session_id, next_turn, 0, &ResumedData { recovered })?;
        self.seams.ctx.parallel(crate::DISPATCH.resumed, p).await?;
        // The first request after a resume logs a full header with reason `resume` (LOOP-05).
        let log = LogState {
            next_turn,
            header_reason: "resume",
            last_message: agent::last_message_number(&a.session_id, &events),
            ..LogState::default()
        };
        self.start(
            Agent::new(a.session_id.clone(), cwd, a.max_turns, log)
                .with_overrides(overrides, is_child)
                .in_tree(depth, false),
        )?;
        Ok(AgentResumed {
            session_id: a.session_id,
            recovered,
        })
    }

    fn start(&self, agent: Agent) -> Result<()> {
        let agent = Arc::new(agent);
        agent.start(Arc::clone(&self.seams))?;
        self.agents
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(agent.session_id.clone(), agent);
        Ok(())
    }
}

/// The `keel.agent` provider: the hub of live agents.
struct Served(Arc<Hub>);

impl AgentProvider for Served {
    async fn create(&self, request: CreateAgent) -> Result<AgentCreated> {
        self.0.create(request).await
    }

    async fn resume(&self, request: ResumeAgent) -> Result<AgentResumed> {
        self.0.resume(request).await
    }

    async fn send(&self, request: SendMessage) -> Result<MessageSent> {
        let SendMessage {
            session_id,
            content,
            target,
            level,
        } = request;
        let hub = &self.0;
        // Every caller of the service is a plugin: an L4 is clamped to L3 (SCH-10).
        let sent =
            hub.agent(&session_id)?
                .send(content.clone(), target, level, scheduler::Source::Plugin);
        let data = InboxInsertedData {
            target,
            message: StepMessage {
                id: sent.id.clone(),
                content,
                source: None,
            },
            level: sent.level,
        };
        if let Ok(p) = Seams::point(&session_id, 0, 0, &data) {
            let _ = hub.seams.ctx.emit(crate::DISPATCH.inbox_inserted, &p);
        }
        if let Some(d) = sent.dropped {
            tracing::warn!(session = %session_id, dropped = %d.id, "interrupt queues full: the oldest of the lowest level was dropped");
            let message = DiscardedMessage {
                id: d.id,
                content: d.content,
                level: d.level,
                suspended: None,
                source: None,
            };
            agent::discarded(
                &hub.seams,
                &session_id,
                vec![message],
                DiscardReason::Overflow,
            );
        }
        Ok(MessageSent {
            id: sent.id,
            level: sent.level,
        })
    }

    async fn wait_idle(&self, request: AgentSession) -> Result<RunReport> {
        let agent = self.0.agent(&request.session_id)?;
        let mut report = agent
            .wait_idle()
            .await
            .map_err(|_| Error::coded(AgentCode::Stopped, "the agent stopped"))?;
        report.session_id = request.session_id;
        Ok(report)
    }

    async fn abort(&self, request: AgentSession) -> Result<()> {
        let agent = self.0.agent(&request.session_id)?;
        agent.request_abort();
        self.0.seams.cancel_tools(&request.session_id).await
    }

    async fn take_pending(&self, request: AgentSession) -> Result<PendingInputs> {
        Ok(self.0.agent(&request.session_id)?.take_pending())
    }

    async fn status(&self, request: AgentSession) -> Result<AgentStatus> {
        Ok(self.0.agent(&request.session_id)?.status())
    }

    async fn close(&self, request: AgentSession) -> Result<()> {
        let hub = &self.0;
        let session_id = request.session_id;
        let agent = hub.agent(&session_id)?;
        agent.stop().await;
        hub.agents
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&session_id);
        hub.seams.flush(&session_id).await?;
        hub.seams
            .sessions()
            .close(SessionRef::new(session_id))
            .await?;
        Ok(())
    }
}

/// The plugin value.
#[derive(Default)]
struct AgentLoop;

keel_plugin_api::dispatches! {
    /// The `agent/*` events: the loop's seams. It dispatches them, so it declares them (issue 13
    /// item 2: the kernel declares only `kernel/*`).
    pub struct Dispatches {
        pub pre_step: ev::PreStep,
        pub request: ev::Request,
        pub request_error: ev::RequestError,
        pub turn_stopping: ev::TurnStopping,
        pub status: ev::Status,
        pub agent_error: ev::AgentError,
        pub inbox_inserted: ev::InboxInserted,
        pub inbox_claimed: ev::InboxClaimed,
        pub inbox_discarded: ev::InboxDiscarded,
        pub resumed: ev::Resumed,
        pub delta: ev::Delta,
    }
}

impl Plugin for AgentLoop {
    type Dispatches = Dispatches;

    fn manifest(&self) -> Manifest {
        Manifest::new("agent-loop", env!("CARGO_PKG_VERSION"))
            .description("the agent loop: turns, steps, inbox, retries (keel.agent)")
            .provides::<AgentService>()
            .requires::<Sessions>()
            .requires::<Llm>()
            .requires::<Tools>()
            .optional::<SystemPrompt>()
            .optional::<keel_plugin_api::services::context::ContextManager>()
            .config_type::<config::LoopConfig>()
            // The loop's limits: an untrusted project layer must not raise them (issue 23
            // item 6).
            .guard_keys(&["max_steps", "max_tokens"])
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let config: LoopConfig = ctx.config()?;
        let seams = Arc::new(Seams::new(ctx, config)?);
        deltas::listen(ctx, Arc::clone(&seams.streams))?;
        let hub = Arc::new(Hub {
            seams,
            agents: Mutex::new(HashMap::new()),
        });
        ctx.serve::<AgentService, _>(Served(Arc::clone(&hub)))?;
        ctx.effect("stop every agent", move || async move {
            let agents: Vec<Arc<Agent>> = hub
                .agents
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .drain()
                .map(|(_, a)| a)
                .collect();
            for a in agents {
                a.stop().await;
            }
            Ok(())
        })?;
        Ok(())
    }
}

keel_plugin_api::export_plugin!(AgentLoop);
