//! `llm/*` events (LLM-02).

use abi_stable::StableAbi;
use abi_stable::std_types::RString;

use super::json::Json;
use crate::declare_event;

/// One model call on its way to the adapter.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct LlmCall {
    /// The live session, or empty outside a session.
    pub session_id: RString,
    /// The `LlmRequest` as JSON (`keel_plugin_api::services::llm::LlmRequest`).
    pub request: Json,
}

declare_event! {
    /// Around every model call: checkpoint, scrub, metrics. Output: an `LlmResponse` (`{"chunks":
    /// [StreamChunk]}`). The terminal dispatches exactly one attempt to the adapter bound to
    /// `request.config.provider` when the call was prepared. Listener failures stay failures
    /// (they end the turn with an error); adapter failures are terminal chunks.
    pub struct Stream: async_waterfall("llm/stream") -> LlmCall => Json;
}
