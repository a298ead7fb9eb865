//! `llm/*` events (LLM-02): the waterfall around every model call, and the pieces of a
//! streamed answer as they arrive (issue 26 item 1).

use abi_stable::StableAbi;
use abi_stable::std_types::RString;
use serde::{Deserialize, Serialize};

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

/// What a streamed piece is: assistant text or reasoning text. Also `agent/delta`'s `kind`
/// (wire form `"text"` / `"reasoning"`).
#[repr(u8)]
#[derive(StableAbi, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeltaKind {
    /// Assistant text.
    Text,
    /// Reasoning text.
    Reasoning,
}

/// One text or reasoning piece of a model answer, as the adapter decoded it: plain `repr(C)`
/// fields (no JSON to encode or parse), since there is one per stream read.
#[repr(C)]
#[derive(StableAbi, Clone, Debug)]
pub struct LlmDelta {
    /// The request's [`stream_id`](crate::services::llm::LlmRequest::stream_id): whoever set
    /// it knows which call this is.
    pub stream_id: u64,
    /// The content block's index (the `index` of the answer's `text-delta` /
    /// `reasoning-delta` chunks).
    pub index: u32,
    /// Text or reasoning.
    pub kind: DeltaKind,
    /// The piece: the provider's deltas of one block that arrived in one read, joined.
    pub text: RString,
}

/// Where an adapter's pieces go: the row's dispatch of `llm/delta` (its `ctx.emit` with its
/// `#[declared_by("llm")]` handle), or a test's recorder. A failed dispatch is the sink's to
/// log, never the answer's.
pub type DeltaSink = std::sync::Arc<dyn Fn(&LlmDelta) + Send + Sync>;

declare_event! {
    /// A piece of a model answer, dispatched by the adapter as it arrives for a request whose
    /// `stream_id` is set (issue 26 item 1). The `llm` row declares it; adapters dispatch it
    /// (and only they do). Pieces of one block that arrive in one read of the response are
    /// joined, none waits for a later read; the answer's chunks carry the same text. Never
    /// written to the log: `LlmResponse` stays the call's one result. The agent loop forwards
    /// its own calls' pieces as `agent/delta`.
    pub struct Delta: emit("llm/delta") -> LlmDelta;
}
