//! The frozen call config of a request (`agent/request`, LOOP-05) and the `request/header` /
//! `request/context` events that log it when it changed.

use keel_plugin_api::events::Typed;
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::llm::LlmCallConfig;
use serde_json::json;

use super::{Seams, Turn};

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
}
