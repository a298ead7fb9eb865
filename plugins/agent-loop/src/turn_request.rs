//! The frozen call config of a request (`agent/request`, LOOP-05), the `request/header` /
//! `request/context` events that log it when it changed, and the call itself: through
//! `keel.llm`, its pieces routed to `agent/delta` while it runs (issue 26 item 1), dropped
//! when the agent is aborted.

use keel_plugin_api::events::Typed;
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::llm::{LlmCallConfig, LlmRequest, LlmResponse};
use serde_json::json;

use super::{ABORT_POLL, Seams, Turn};

impl Turn<'_> {
    pub(super) async fn call_config(&self, base: LlmCallConfig) -> Result<LlmCallConfig> {
        let p = Seams::point(&self.sid, self.turn, self.step, &base)?;
        let out = self
            .seams
            .ctx
            .run_async_waterfall(
                crate::DISPATCH.request,
                p,
                |p: keel_plugin_api::events::agent::AgentPoint<LlmCallConfig>| async move {
                    // The terminal answers the default as the chain left it (a copy of the text, no
                    // decode; a foreign non-config is refused where the output is read).
                    Ok(Typed::from_payload(p.data.payload().clone()))
                },
            )
            .await?;
        out.into_inner()
    }

    /// Logs `request/header` when config, system prompt or tools changed, and
    /// `request/context` when the route changed (LOOP-05).
    pub(super) async fn log_header(
        &self,
        config: &LlmCallConfig,
        system: Option<&str>,
        tools: &[keel_plugin_api::services::llm::ModelTool],
    ) -> Result<()> {
        let header = json!({ "config": config, "system": system, "tools": tools });
        let (reason, route_changed) = {
            let st = self.agent.state();
            let reason = match &st.log.last_header {
                Some(h) if *h == header => None,
                Some(_) => Some("change"),
                None => Some(st.log.header_reason),
            };
            let route = (config.provider.clone(), config.model.clone());
            (reason, st.log.last_route.as_ref() != Some(&route))
        };
        if let Some(reason) = reason {
            self.append(
                "request/header",
                json!({ "header": header, "reason": reason }),
            )
            .await?;
            self.agent.state().log.last_header = Some(header);
        }
        if route_changed {
            self.append(
                "request/context",
                json!({ "provider": config.provider, "model": config.model }),
            )
            .await?;
            self.agent.state().log.last_route =
                Some((config.provider.clone(), config.model.clone()));
        }
        Ok(())
    }

    /// The model call; `None` when the agent was aborted first. While it runs, the answer's
    /// pieces go to drivers as `agent/delta` with this step's position and attempt.
    pub(super) async fn stream_or_abort(
        &self,
        mut request: LlmRequest,
    ) -> Result<Option<LlmResponse>> {
        let stream = self.seams.streams.open(crate::deltas::Route {
            session_id: self.sid.clone(),
            turn: self.turn,
            step: self.step,
            attempt: self.attempt,
        });
        request.stream_id = Some(stream.id);
        let call = std::pin::pin!(self.seams.stream(request));
        let watch = std::pin::pin!(self.until_aborted());
        let answer = match futures::future::select(call, watch).await {
            futures::future::Either::Left((r, _)) => r.map(Some),
            futures::future::Either::Right(((), _)) => Ok(None),
        };
        drop(stream);
        answer
    }

    /// Resolves once `abort` was called for this agent.
    pub(super) async fn until_aborted(&self) {
        while !self.aborted() {
            keel_plugin_api::sdk::sleep(ABORT_POLL).await;
        }
    }
}
