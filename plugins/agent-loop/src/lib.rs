//! `agent-loop`: the one concrete agent loop, offered as the `keel.agent` service (LOOP-01).
//! Drivers and surfaces talk to the service; nothing depends on this crate.
//!
//! Turns and steps are durable session events; every model call goes through `keel.llm` (and so
//! through the `llm/stream` waterfall) and every tool call through `keel.tools` (the B9
//! pipeline). The loop owns ordering and boundaries, never policy: admission, call config,
//! retry and stop decisions are waterfalls other plugins can join. See `turn.rs` for one turn
//! and `agent.rs` for the inbox and the driver task.

mod agent;
mod assemble;
mod config;
mod retry;
mod seams;
mod turn;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use keel_plugin_api::codes::ContractCode;
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::agent::{Agent as AgentService, InboxTarget};
use keel_plugin_api::services::llm::{Llm, LlmCallConfig};
use keel_plugin_api::services::prompt::SystemPrompt;
use keel_plugin_api::services::session::{CreateSession, SessionRef, Sessions};
use keel_plugin_api::services::tools::Tools;
use serde::Deserialize;
use serde_json::{Value, json};

use agent::{Agent, LogState};
use config::LoopConfig;
use seams::Seams;

/// The default call config: the row's provider and model (or the adapter's default model).
pub(crate) async fn default_config(seams: &Seams) -> Result<LlmCallConfig> {
    let c = &seams.config;
    let model = match &c.model {
        Some(m) => m.clone(),
        None => seams.default_model(&c.provider).await?.unwrap_or_default(),
    };
    Ok(LlmCallConfig {
        provider: c.provider.clone(),
        model,
        max_tokens: c.max_tokens,
        temperature: c.temperature,
        ..LlmCallConfig::default()
    })
}

/// Live agents by session id.
struct Hub {
    seams: Arc<Seams>,
    agents: Mutex<HashMap<String, Arc<Agent>>>,
}

#[derive(Deserialize)]
struct CreateArgs {
    cwd: String,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    max_turns: Option<u64>,
    #[serde(default)]
    ephemeral: bool,
    /// The driver's profile (`{name, digest}`), recorded with the session (issue 11 item 7);
    /// the loop only passes it on.
    #[serde(default)]
    profile: Option<Value>,
}

#[derive(Deserialize)]
struct ResumeArgs {
    session_id: String,
    #[serde(default)]
    max_turns: Option<u64>,
}

#[derive(Deserialize)]
struct SendArgs {
    session_id: String,
    content: String,
    #[serde(default = "followup")]
    target: InboxTarget,
}

fn followup() -> InboxTarget {
    InboxTarget::Followup
}

#[derive(Deserialize)]
struct IdArgs {
    session_id: String,
}

fn args<T: serde::de::DeserializeOwned>(method: &str, v: Value) -> Result<T> {
    serde_json::from_value(v)
        .map_err(|e| Error::new("INVALID_ARGUMENTS", format!("keel.agent {method}: {e}")))
}

impl Hub {
    fn agent(&self, id: &str) -> Result<Arc<Agent>> {
        self.agents
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(id)
            .cloned()
            .ok_or_else(|| Error::new("NO_AGENT", format!("no live agent for session '{id}'")))
    }

    async fn call(&self, method: &str, a: Value) -> Result<Value> {
        match method {
            "create" => self.create(args(method, a)?).await,
            "resume" => self.resume(args(method, a)?).await,
            "send" => {
                let SendArgs {
                    session_id,
                    content,
                    target,
                } = args(method, a)?;
                let id = self.agent(&session_id)?.send(content.clone(), target);
                let data = json!({ "target": target, "message": { "id": id, "content": content } });
                if let Ok(p) = Seams::point(&session_id, 0, 0, &data) {
                    let _ = self
                        .seams
                        .ctx
                        .emit::<keel_plugin_api::events::agent::InboxInserted>(&p);
                }
                Ok(json!({ "id": id }))
            }
            "wait_idle" => {
                let IdArgs { session_id } = args(method, a)?;
                let agent = self.agent(&session_id)?;
                let mut report = agent
                    .wait_idle()
                    .await
                    .map_err(|_| Error::new("AGENT_STOPPED", "the agent stopped"))?;
                report.session_id = session_id;
                Ok(serde_json::to_value(report)?)
            }
            "abort" => {
                let IdArgs { session_id } = args(method, a)?;
                let agent = self.agent(&session_id)?;
                agent.aborted.store(true, Ordering::Release);
                self.seams.cancel_tools(&session_id).await?;
                Ok(json!({}))
            }
            "close" => {
                let IdArgs { session_id } = args(method, a)?;
                let agent = self.agent(&session_id)?;
                agent.stop().await;
                self.agents
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .remove(&session_id);
                self.seams.flush(&session_id).await?;
                self.seams
                    .sessions()
                    .close(SessionRef::new(session_id))
                    .await?;
                Ok(json!({}))
            }
            other => Err(Error::new(
                "UNKNOWN_METHOD",
                format!("keel.agent has no method '{other}'"),
            )),
        }
    }

    async fn create(&self, a: CreateArgs) -> Result<Value> {
        // The route is checked before anything exists: a missing credential fails here, before
        // any request and before a session is created.
        let config = default_config(&self.seams).await?;
        self.seams.check(&config).await?;
        let profile = match a.profile {
            Some(p) => Some(serde_json::from_value(p).map_err(|e| {
                Error::coded(ContractCode::InvalidArguments, format!("profile: {e}"))
            })?),
            None => None,
        };
        let create = CreateSession {
            cwd: a.cwd.clone(),
            id: a.session_id.clone(),
            ephemeral: a.ephemeral,
            profile,
            ..CreateSession::default()
        };
        let sid = self.seams.sessions().create(create).await?.session_id;
        let log = LogState {
            header_reason: "initial",
            ..LogState::default()
        };
        self.start(Agent::new(sid.clone(), a.cwd, a.max_turns, log))?;
        Ok(json!({ "session_id": sid }))
    }

    async fn resume(&self, a: ResumeArgs) -> Result<Value> {
        let config = default_config(&self.seams).await?;
        self.seams.check(&config).await?;
        let sessions = self.seams.sessions();
        let loaded = sessions.load(SessionRef::new(&a.session_id)).await?;
        let cwd = loaded.header.cwd;
        let events = loaded.events;
        let next_turn = events.iter().filter(|e| e.kind == "turn/start").count() as u64;
        let recovered = loaded.recovered.len();
        sessions.open(SessionRef::new(&a.session_id)).await?;
        // The first request after a resume logs a full header with reason `resume` (LOOP-05).
        let log = LogState {
            next_turn,
            header_reason: "resume",
            last_message: agent::last_message_number(&a.session_id, &events),
            ..LogState::default()
        };
        self.start(Agent::new(a.session_id.clone(), cwd, a.max_turns, log))?;
        Ok(json!({ "session_id": a.session_id, "recovered": recovered }))
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

/// The plugin value.
#[derive(Default)]
struct AgentLoop;

impl Plugin for AgentLoop {
    fn manifest(&self) -> Manifest {
        Manifest::new("agent-loop", env!("CARGO_PKG_VERSION"))
            .description("the agent loop: turns, steps, inbox, retries (keel.agent)")
            .provides::<AgentService>()
            .requires::<Sessions>()
            .requires::<Llm>()
            .requires::<Tools>()
            .optional::<SystemPrompt>()
            .config_schema(config::schema())
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let config: LoopConfig = ctx.config()?;
        let hub = Arc::new(Hub {
            seams: Arc::new(Seams::new(ctx, config)?),
            agents: Mutex::new(HashMap::new()),
        });
        let h = Arc::clone(&hub);
        ctx.provide::<AgentService>(CallHandle::new(move |method, a| {
            let hub = Arc::clone(&h);
            async move { hub.call(&method, a).await }
        }))?;
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
