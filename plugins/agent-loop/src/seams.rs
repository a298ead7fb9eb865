//! The loop's view of the services it drives (`keel.session`, `keel.llm`, `keel.tools`,
//! `keel.system-prompt`) as typed calls, so the turn logic reads as the algorithm and not as
//! JSON plumbing.

use keel_plugin_api::events::Typed;
use keel_plugin_api::events::agent::AgentPoint;
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::context::{
    Calibration, ContextManager, FitRequest, FitTrigger, Fitted,
};
use keel_plugin_api::services::llm::{
    CheckRequest, Llm, LlmCallConfig, LlmClient, LlmRequest, LlmResponse, ModelTool, ProviderRoute,
};
use keel_plugin_api::services::prompt::{AssembleRequest, SystemPrompt};
use keel_plugin_api::services::session::{
    AppendEvents, EventInput, SessionRef, Sessions, SessionsClient,
};
use keel_plugin_api::services::tools::{
    BatchRequest, CancelRequest, ListRequest, ResultFlags, Tools, ToolsClient,
};
use serde_json::Value;

/// The services, resolved once at activation (required ones live as long as this fiber).
pub struct Seams {
    /// This fiber's context.
    pub ctx: Context,
    session: SessionsClient,
    llm: LlmClient,
    tools: ToolsClient,
    /// The row config.
    pub config: crate::config::LoopConfig,
    /// The model requests in flight whose pieces become `agent/delta` (issue 26 item 1).
    pub streams: std::sync::Arc<crate::deltas::Streams>,
}

/// What `run_batch` answers, as the loop needs it: the results themselves are in the log (the
/// history is projected from it), so only their flags are read here.
#[derive(Debug)]
pub struct BatchOutcome {
    /// One per call, model order.
    pub results: Vec<ResultFlags>,
    /// A pipeline stage failed (a listener error): the turn ends with this error.
    pub failure: Option<StageFailure>,
}

/// A failed stage.
#[derive(Debug, Clone)]
pub struct StageFailure {
    /// Code.
    pub code: String,
    /// Message.
    pub message: String,
}

impl Seams {
    /// Resolves the required services.
    pub fn new(ctx: Context, config: crate::config::LoopConfig) -> Result<Self> {
        Ok(Seams {
            config,
            session: ctx.client::<Sessions>()?,
            llm: ctx.client::<Llm>()?,
            tools: ctx.client::<Tools>()?,
            streams: std::sync::Arc::default(),
            ctx,
        })
    }

    /// A point for `agent/*` payloads, with the event's typed `data`.
    pub fn point<D: serde::Serialize>(
        session_id: &str,
        turn: u64,
        step: u64,
        data: &D,
    ) -> Result<AgentPoint<D>> {
        Ok(AgentPoint {
            session_id: session_id.into(),
            turn,
            step,
            data: Typed::new(data)?,
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

    // ---- context ---------------------------------------------------------------------------

    /// Whether a `keel.context` row is loaded.
    pub fn has_context(&self) -> Result<bool> {
        Ok(self.ctx.get_client::<ContextManager>()?.is_some())
    }

    /// The history to send, fitted to the model's window by the `keel.context` row (issue 14),
    /// or `None` when the profile has none (the projection goes unchanged).
    pub async fn fit(
        &self,
        session_id: &str,
        config: &LlmCallConfig,
        fixed_bytes: u64,
        trigger: FitTrigger,
    ) -> Result<Option<Fitted>> {
        let Some(context) = self.ctx.get_client::<ContextManager>()? else {
            return Ok(None);
        };
        let request = FitRequest {
            session_id: session_id.to_owned(),
            config: config.clone(),
            fixed_bytes,
            trigger,
        };
        context.fit(request).await.map(Some)
    }

    /// Tells the `keel.context` row what the provider counted for the last request.
    pub async fn calibrate(&self, session_id: &str, input_tokens: u64) {
        let Ok(Some(context)) = self.ctx.get_client::<ContextManager>() else {
            return;
        };
        let request = Calibration {
            session_id: session_id.to_owned(),
            input_tokens,
        };
        if let Err(e) = context.calibrate(request).await {
            tracing::debug!(session = %session_id, error = %e, "context calibration failed");
        }
    }

    // ---- llm -------------------------------------------------------------------------------

    /// The registered providers, with their adapters' default models.
    pub async fn routes(&self) -> Result<Vec<ProviderRoute>> {
        Ok(self.llm.providers().await?.providers)
    }

    /// Asks the adapter whether it could dispatch `config` (credential present, …).
    pub async fn check(&self, config: &LlmCallConfig) -> Result<()> {
        let request = CheckRequest {
            config: config.clone(),
            cwd: None,
        };
        self.llm.check(request).await
    }

    /// One model call through `llm/stream`: the history goes by reference.
    pub async fn stream(&self, request: LlmRequest) -> Result<LlmResponse> {
        self.llm.stream(request).await
    }

    // ---- tools -----------------------------------------------------------------------------

    /// The registered tools.
    pub async fn tool_list(
        &self,
        overrides: &keel_plugin_api::services::agent::AgentOverrides,
        child: bool,
    ) -> Result<(Vec<ModelTool>, Option<Vec<String>>)> {
        let list = self.tools.list(ListRequest {}).await?;
        Ok(crate::child::offered(list.tools, overrides, child))
    }

    /// Runs one assistant message's calls (the B9 pipeline; it logs calls and results).
    pub async fn run_batch(&self, batch: &BatchRequest) -> Result<BatchOutcome> {
        let outcome = self.tools.run_batch(batch.clone()).await?;
        Ok(BatchOutcome {
            results: outcome
                .results
                .iter()
                .map(|r| r.flags())
                .collect::<Result<_>>()?,
            failure: outcome.failure.map(|f| StageFailure {
                code: f.code,
                message: f.message,
            }),
        })
    }

    /// Stops the running batch of `session_id` (started bodies drain).
    pub async fn cancel_tools(&self, session_id: &str) -> Result<()> {
        self.tools
            .cancel(CancelRequest {
                session_id: session_id.to_owned(),
            })
            .await
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
