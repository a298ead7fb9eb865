//! `limits` (issue 14 item 1): a model's context window and output reserve, answered by the
//! adapter row that serves the provider. Kept apart from the glue so the version rule is
//! unit-tested against real contract handles: an adapter whose contract version predates the
//! method (v1) is not an error, it answers an unknown window, so a profile with an older
//! adapter still runs (the context manager compacts nothing without a window).

use keel_plugin_api::codes::ContractCode;
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::llm::{LlmAdapterClient, LlmCallConfig, ModelLimits};

/// The method's name on the adapter contract.
const METHOD: &str = "limits";

/// What an adapter that cannot tell answers: no window, nothing reserved.
pub fn unknown() -> ModelLimits {
    ModelLimits {
        context_window: None,
        output_reserve: 0,
        bytes_per_token: None,
        source: "unknown".to_owned(),
    }
}

/// Asks `adapter` for `config`'s limits; [`unknown`] when its contract version lacks the
/// method (refused before the call, or by the provider itself).
///
/// # Errors
/// The adapter's own refusal of the call.
pub async fn from_adapter(
    adapter: &LlmAdapterClient,
    config: LlmCallConfig,
) -> Result<ModelLimits> {
    if !adapter.contract().has(METHOD) {
        return Ok(unknown());
    }
    match adapter.limits(config).await {
        Err(e) if e.is(ContractCode::UnknownMethod) => Ok(unknown()),
        other => other,
    }
}

#[cfg(test)]
#[path = "limits_tests.rs"]
mod tests;
