//! The loop's view of the services it drives (`keel.session`, `keel.llm`, `keel.tools`,
//! `keel.system-prompt`) as typed calls, so the turn logic reads as the algorithm and not as
//! JSON plumbing.

use keel_plugin_api::events::Json;
use keel_plugin_api::events::agent::AgentPoint;
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::llm::{Llm, LlmCallConfig, LlmRequest, LlmResponse, ModelTool};
use keel_plugin_api::services::prompt::{AssembleRequest, SystemPrompt};
use keel_plugin_api::services::session::{
    AppendEvents, EventInput, SessionRef, Sessions, SessionsClient,
};
use keel_plugin_api::services::tools::{BatchRequest, ToolDefinition, ToolResult, Tools};
use serde::Deserialize;
use serde_json::{Value, json};

/// The services, resolved once at activation (required ones live as long as this fiber).
pub struct Seams {
    /// This fiber's context.
    pub ctx: Context,
    session: SessionsClient,
    llm: ServiceRef<Llm>,
    tools: ServiceRef<Tools>,
    /// The row config.
    pub config: crate::config::LoopConfig,
}

/// What `run_batch` answers.
#[derive(Debug, Deserialize)]
pub struct BatchOutcome {
    /// One per call, model order.
    pub results: Vec<ToolResult>,
    /// A pipeline stage failed (a listener error): the turn ends with this error.
    #[serde(default)]
    pub failure: Option<StageFailure>,
}

/// A failed stage.
#[derive(Debug, Clone, Deserialize)]
pub struct StageFailure {
    /// Code.
    pub code: String,
    /// Message.
    pub message: String,
}

fn parse<T: serde::de::DeserializeOwned>(what: &str, v: Value) -> Result<T> {
    serde_json::from_value(v).map_err(|e| Error::new("INVALID_ANSWER", format!("{what}: {e}")))
}

impl Seams {
    /// Resolves the required services.
    pub fn new(ctx: Context, config: crate::config::LoopConfig) -> Result<Self> {
        Ok(Seams {
            config,
            session: ctx.client::<Sessions>()?,
            llm: ctx.service::<Llm>()?,
            tools: ctx.service::<Tools>()?,
            ctx,
        })
    }

    /// A point for `agent/*` payloads.
    pub fn point(session_id: &str, turn: u64, step: u64, data: &Value) -> Result<AgentPoint> {
        Ok(AgentPoint {
            session_id: session_id.into(),
            turn,
            step,
            data: Json::of(data)?,
        })
    }

    // ---- session ---------------------------------------------------------------------------

    /// The `keel.session` client (create, open, load, close: the agent service's calls).
    pub fn sessions(&self) -> &SessionsClient {
        &self.session
    }

    /// Appends events; returns their seqs.
    pub async fn append(&self, session_id: &str, events: Vec<EventInput>) -> Result<Vec<u64>> {
        let request = AppendEvents {
            session_id: session_id.to_owned(),
            events,
        };
        Ok(self.session.append(request).await?.seqs)
    }

    /// Appends one event (surface types with `surface_op: "append"`); its data is encoded once.
    pub async fn append_one(&self, session_id: &str, kind: &str, data: Value) -> Result<()> {
        let mut event = EventInput::new(kind, &data)?;
        if matches!(kind, "user/message" | "assistant/message" | "tool/result") {
            event = event.surface();
        }
        self.append(session_id, vec![event]).await.map(drop)
    }

    /// The durability barrier.
    pub async fn flush(&self, session_id: &str) -> Result<()> {
        self.session
            .flush(SessionRef::new(session_id))
            .await
            .map(drop)
    }

    /// The projected model history (LOOP-04): each message frozen once by the session and
    /// shared by reference; nothing of it is encoded or parsed here.
    pub async fn messages(&self, session_id: &str) -> Result<Vec<Frozen>> {
        Ok(self
            .session
            .messages(SessionRef::new(session_id))
            .await?
            .messages)
    }

    // ---- llm -------------------------------------------------------------------------------

    /// The default model of `provider`'s adapter.
    pub async fn default_model(&self, provider: &str) -> Result<Option<String>> {
        let v = self.llm.call("providers", json!({})).await?;
        let list = v
            .get("providers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        Ok(list
            .iter()
            .find(|p| p.get("provider").and_then(Value::as_str) == Some(provider))
            .and_then(|p| p.get("default_model"))
            .and_then(Value::as_str)
            .map(str::to_owned))
    }

    /// Asks the adapter whether it could dispatch `config` (credential present, …).
    pub async fn check(&self, config: &LlmCallConfig) -> Result<()> {
        self.llm
            .call("check", json!({ "config": config }))
            .await
            .map(|_| ())
    }

    /// One model call through `llm/stream`.
    pub async fn stream(&self, request: &LlmRequest) -> Result<LlmResponse> {
        let text = self
            .llm
            .call_text("stream", serde_json::to_string(request)?)
            .await?;
        serde_json::from_str(&text)
            .map_err(|e| Error::new("INVALID_ANSWER", format!("stream: {e}")))
    }

    // ---- tools -----------------------------------------------------------------------------

    /// The registered tools.
    pub async fn tool_list(&self) -> Result<Vec<ModelTool>> {
        let v = self.tools.call("list", json!({})).await?;
        let defs: Vec<ToolDefinition> =
            parse("tools", v.get("tools").cloned().unwrap_or(Value::Null))?;
        Ok(defs
            .into_iter()
            .map(|d| ModelTool {
                name: d.name,
                description: d.description,
                parameters: d.parameters,
            })
            .collect())
    }

    /// Runs one assistant message's calls (the B9 pipeline; it logs calls and results).
    pub async fn run_batch(&self, batch: &BatchRequest) -> Result<BatchOutcome> {
        let v = self
            .tools
            .call("run_batch", serde_json::to_value(batch)?)
            .await?;
        parse("run_batch", v)
    }

    /// Stops the running batch of `session_id` (started bodies drain).
    pub async fn cancel_tools(&self, session_id: &str) -> Result<()> {
        self.tools
            .call("cancel", json!({ "session_id": session_id }))
            .await
            .map(|_| ())
    }

    // ---- system prompt ---------------------------------------------------------------------

    /// The assembled system prompt, or `None` when no `system-prompt` row is loaded.
    pub async fn system_prompt(
        &self,
        session_id: &str,
        cwd: &str,
        tools: &[ModelTool],
    ) -> Result<Option<String>> {
        let Some(sp) = self.ctx.get_client::<SystemPrompt>()? else {
            return Ok(None);
        };
        let request = AssembleRequest {
            session_id: session_id.to_owned(),
            cwd: cwd.to_owned(),
            tools: tools.iter().map(|t| t.name.clone()).collect(),
        };
        Ok(Some(sp.assemble(request).await?.text))
    }
}
