//! The turn's side of context management (issue 14 items 2 and 5): the history each request
//! sends, fitted by the `keel.context` row when the profile has one, and the one retry after a
//! server refused a request as over its window.
//!
//! Kept out of `turn.rs` because it is a policy of its own: without a context row a server's
//! `CONTEXT_WINDOW_EXCEEDED` ends the turn as before; with one, the next fit compacts for it
//! and the request goes again, once. A second refusal, or nothing left to compact, ends the
//! turn `CONTEXT_OVERFLOW` with the server's words — never a silent cut.

use keel_plugin_api::prelude::*;
use keel_plugin_api::services::context::{ContextCode, FitTrigger};
use keel_plugin_api::services::llm::{LlmCallConfig, LlmFailure};
use keel_plugin_api::services::session::EventInput;
use serde_json::json;

use super::{StepEnd, Turn, error_reason, session_error};

impl Turn<'_> {
    /// The messages of the next request: fitted when a context row is loaded (a server
    /// refusal pending makes it compact whatever the estimate), else the projection.
    pub(super) async fn history(
        &mut self,
        config: &LlmCallConfig,
        fixed_bytes: u64,
    ) -> Result<Vec<Frozen>> {
        let retry = self.overflow.take();
        let trigger = match &retry {
            Some((message, _)) => FitTrigger::ServerOverflow {
                message: message.clone(),
            },
            None => FitTrigger::Request,
        };
        match self
            .seams
            .fit(&self.sid, config, fixed_bytes, trigger)
            .await?
        {
            Some(fitted) => {
                // The retry is a fact of the log once it goes out: after the compaction it
                // waited for (a fit that found nothing to compact ended the turn instead).
                if let Some((_, note)) = retry {
                    let event = EventInput::new("llm/retry", &note)?.ignorable();
                    self.seams
                        .append(&self.sid, vec![event])
                        .await
                        .map_err(session_error)?;
                }
                self.estimate = Some(fitted.estimate);
                Ok(fitted.messages)
            }
            None => self.seams.messages(&self.sid).await,
        }
    }

    /// The server refused the request as over its window (the failed step is closed).
    pub(super) async fn server_overflow(&mut self, failure: LlmFailure) -> Result<StepEnd> {
        if self.overflow_retried {
            return Ok(StepEnd::End(error_reason(
                ContextCode::Overflow.as_str(),
                &format!(
                    "the model's server refused the request as over its context window again after compaction; the server said: {}",
                    failure.message
                ),
            )));
        }
        self.overflow_retried = true;
        let retry = json!({
            "turn": self.turn,
            "failed_step": self.step - 1,
            "attempt": self.attempt + 1,
            "delay_ms": 0,
            "code": failure.code,
            "compact": true,
        });
        tracing::warn!(session = %self.sid, "the server refused the request as too long; compacting and retrying once");
        self.overflow = Some((failure.message, retry));
        Ok(StepEnd::Continue)
    }
}
