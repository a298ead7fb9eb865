//! `llm/*` events (LLM-02).

use abi_stable::StableAbi;
use abi_stable::std_types::RString;

use super::typed::Typed;
use crate::declare_event;
use crate::sdk::{Payload, Result};
use crate::services::llm::{LlmRequest, LlmResponse};

/// One model call on its way to the adapter.
#[repr(C)]
#[derive(StableAbi, Clone, Debug)]
pub struct LlmCall {
    /// The live session, or empty outside a session.
    pub session_id: RString,
    /// The [`LlmRequest`], encoded once: its history messages are `Frozen` documents carried
    /// by reference, so a listener that reads or replaces the request never re-encodes the
    /// history. Read it with [`LlmCall::request`], replace it with [`LlmCall::set_request`].
    pub request: Payload,
}

impl LlmCall {
    /// A call carrying `request`.
    ///
    /// # Errors
    /// `INVALID_JSON` when the request cannot be encoded.
    pub fn new(request: &LlmRequest) -> Result<Self> {
        Ok(LlmCall {
            session_id: request.session_id.clone().unwrap_or_default().into(),
            request: Payload::encode(request)?,
        })
    }

    /// The request (the small fields are parsed; the messages are shared references).
    ///
    /// # Errors
    /// `INVALID_ARGUMENTS` when a listener left something that is not an `LlmRequest`.
    pub fn request(&self) -> Result<LlmRequest> {
        self.request.clone().decode("llm/stream request")
    }

    /// Replaces the request.
    ///
    /// # Errors
    /// `INVALID_JSON` when it cannot be encoded.
    pub fn set_request(&mut self, request: &LlmRequest) -> Result<()> {
        self.request = Payload::encode(request)?;
        Ok(())
    }
}

declare_event! {
    /// Around every model call: checkpoint, scrub, metrics. Output: a typed `LlmResponse`
    /// (wire JSON `{"chunks":[StreamChunk]}`). The terminal dispatches exactly one attempt to the adapter bound to
    /// `request.config.provider` when the call was prepared. Listener failures stay failures
    /// (they end the turn with an error); adapter failures are terminal chunks.
    pub struct Stream: async_waterfall("llm/stream") -> LlmCall => Typed<LlmResponse>;
}
