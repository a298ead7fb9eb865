//! The LLM seam (ARCHITECTURE §8, requirements C8 and B14): the `keel.llm` registry, the adapter
//! protocol, and the provider-neutral chunk vocabulary every adapter speaks.
//!
//! Who calls what: the agent loop calls `keel.llm` method `"stream"`; the `llm` plugin runs the
//! `llm/stream` waterfall (checkpoint, scrub, metrics listeners) and its terminal dispatches
//! exactly one attempt to the adapter registered for `config.provider`. Adapters are plugins that
//! provide a JSON service named [`adapter_service_name`] and register it with `keel.llm`.

use serde::{Deserialize, Serialize};

use crate::sdk::{CallHandle, Service};

/// The registry service (`llm` plugin). Methods, with JSON shapes:
///
/// - `"register"`: `{service, providers: [String], default_model?: String}` →
///   `{registration: u64}`. `default_model` is the model the adapter's row is configured with;
///   the loop writes it into the logged `LlmCallConfig` so every request names its model. All or nothing: a
///   provider already registered → `DUPLICATE_ADAPTER` and nothing is registered; an empty list
///   or an empty name → `INVALID_ADAPTER` (LLM-01).
/// - `"replace"`: `{registration, providers}` → `{}`: swaps the providers atomically.
/// - `"unregister"`: `{registration}` → `{}`; using a disposed registration again →
///   `REGISTRATION_DISPOSED`.
/// - `"providers"`: `{}` → `{providers: [{provider, service, default_model?}]}`.
/// - `"check"`: `{config: LlmCallConfig}` → `{}`: asks the adapter whether it could dispatch
///   (credential configured, capability supported) without any I/O. `NO_ADAPTER`,
///   `CREDENTIAL_MISSING` (naming the reference), `UNSUPPORTED_REASONING_EFFORT`.
/// - `"stream"`: [`LlmRequest`] → [`LlmResponse`]. Never fails for provider trouble: every
///   adapter failure is a terminal `finish{error}` chunk (LLM-04). Errors are only for
///   middleware failures (a listener of `llm/stream` that failed or panicked).
#[derive(Debug, Clone, Copy)]
pub struct Llm;

impl Service for Llm {
    const NAME: &'static str = "keel.llm";
    type Handle = CallHandle;
}

/// The service name an adapter row provides (declare it with `Manifest::provides_named(…,
/// false)`), e.g. `keel.llm.adapter.llm-openai`.
pub fn adapter_service_name(row: &str) -> String {
    format!("keel.llm.adapter.{row}")
}

/// Adapter service methods: `"generate"` takes an [`LlmRequest`] and returns an [`LlmResponse`]
/// (one provider attempt, library retries off, failures as a terminal chunk); `"check"` takes
/// `{config}` and answers `{}` or an error, without I/O.
pub const ADAPTER_METHODS: &[&str] = &["generate", "check"];

/// The frozen call configuration (B14 `LlmCallConfig`). It has no credential field: adapters
/// resolve credentials themselves, per request, from a reference in their own row's config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct LlmCallConfig {
    /// Registered provider name, e.g. `openai`, `scripted`.
    pub provider: String,
    /// Model id.
    pub model: String,
    /// Explicit reasoning effort; an adapter that cannot honour it refuses before any I/O.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Output token cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Stop sequences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<Vec<String>>,
}

/// A tool as the model sees it (the `tools` registry's list).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelTool {
    /// Tool name (ARCHITECTURE §8).
    pub name: String,
    /// One-paragraph description.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: serde_json::Value,
}

/// One model call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmRequest {
    /// The live session this call belongs to (the checkpoint flushes it first); `None` for
    /// calls outside a session.
    #[serde(default)]
    pub session_id: Option<String>,
    /// Frozen configuration.
    pub config: LlmCallConfig,
    /// System prompt.
    #[serde(default)]
    pub system: Option<String>,
    /// The projected history (`keel.session` `"messages"`): `{role:"user",content}`,
    /// `{role:"assistant",content,tool_calls?:[{id,name,arguments}]}`,
    /// `{role:"tool",tool_call_id,content,is_error?}`.
    pub messages: Vec<serde_json::Value>,
    /// Tools offered to the model.
    #[serde(default)]
    pub tools: Vec<ModelTool>,
}

/// What a call returns: the chunks, in order, the last one a `finish`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmResponse {
    /// The chunk stream.
    pub chunks: Vec<StreamChunk>,
}

/// Token usage of one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
}

/// The provider-neutral failure (LLM-04).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LlmFailure {
    /// Human-readable; never contains a credential.
    pub message: String,
    /// One of [`FailureCode`]'s codes.
    pub code: String,
    /// HTTP status, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The provider's `retry-after`, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_retry_after_ms: Option<u64>,
    /// The provider's request id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// Canonical failure codes (ARCHITECTURE §8, B14).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureCode {
    /// 429.
    RateLimit,
    /// 5xx.
    Server,
    /// Connect, reset, mid-stream disconnect, garbled stream.
    Transport,
    /// Idle stream past the deadline.
    Timeout,
    /// The prompt does not fit.
    ContextWindowExceeded,
    /// A completion with no content and no calls.
    EmptyResponse,
    /// 401/403.
    Auth,
    /// Any other 4xx.
    BadRequest,
    /// A 5xx whose body says the request itself failed the server's validation (a FastAPI /
    /// pydantic `validation error`: llama-cpp-python answers a message shape it refuses with
    /// HTTP 500). Retried at most once ([`FailureCode::retry_cap`]): the same request is
    /// refused the same way, but a server error is not proof of that.
    InvalidRequest,
    /// No adapter for the provider.
    NoAdapter,
    /// The credential reference has no value.
    CredentialMissing,
    /// The call was cancelled.
    Aborted,
}

impl FailureCode {
    /// The wire code.
    pub const fn code(self) -> &'static str {
        match self {
            FailureCode::RateLimit => "RATE_LIMIT",
            FailureCode::Server => "SERVER",
            FailureCode::Transport => "TRANSPORT",
            FailureCode::Timeout => "TIMEOUT",
            FailureCode::ContextWindowExceeded => "CONTEXT_WINDOW_EXCEEDED",
            FailureCode::EmptyResponse => "EMPTY_RESPONSE",
            FailureCode::Auth => "AUTH",
            FailureCode::BadRequest => "BAD_REQUEST",
            FailureCode::InvalidRequest => "INVALID_REQUEST",
            FailureCode::NoAdapter => "NO_ADAPTER",
            FailureCode::CredentialMissing => "CREDENTIAL_MISSING",
            FailureCode::Aborted => "ABORTED",
        }
    }

    /// Retryable under the default policy (B14): `EMPTY_RESPONSE`, `RATE_LIMIT`, `SERVER`,
    /// `TIMEOUT`, `TRANSPORT`, and `INVALID_REQUEST` (capped, see [`FailureCode::retry_cap`]).
    pub fn is_retryable(code: &str) -> bool {
        matches!(
            code,
            "EMPTY_RESPONSE"
                | "RATE_LIMIT"
                | "SERVER"
                | "TIMEOUT"
                | "TRANSPORT"
                | "INVALID_REQUEST"
        )
    }

    /// The most retries a failure with `code` gets, whatever a retry policy allows: `Some(1)`
    /// for `INVALID_REQUEST` (issue 11 item 3: a request the server refused as malformed is
    /// not worth three attempts), `None` (the policy decides) for every other code.
    pub fn retry_cap(code: &str) -> Option<u32> {
        (code == "INVALID_REQUEST").then_some(1)
    }
}

impl LlmFailure {
    /// A failure with `code` and `message`.
    pub fn new(code: FailureCode, message: impl Into<String>) -> Self {
        LlmFailure {
            message: message.into(),
            code: code.code().to_owned(),
            status: None,
            provider_retry_after_ms: None,
            request_id: None,
        }
    }
}

/// Why a stream finished.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum FinishReason {
    /// Normal end.
    Stop,
    /// The model called tools.
    ToolCalls,
    /// The output cap was hit.
    MaxTokens,
    /// Cancelled.
    Aborted {
        /// Why.
        failure: LlmFailure,
    },
    /// Failed.
    Error {
        /// Why.
        failure: LlmFailure,
    },
}

/// One chunk of a model stream (B14). `usage` comes before `finish`; nothing follows `finish`;
/// tool arguments stay raw JSON text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum StreamChunk {
    /// A content block opens (`text`, `reasoning`, `tool-call`).
    BlockStart {
        /// Block index.
        index: u32,
        /// Block kind.
        block_type: String,
    },
    /// Assistant text.
    TextDelta {
        /// Block index.
        index: u32,
        /// The text.
        text: String,
    },
    /// Reasoning text.
    ReasoningDelta {
        /// Block index.
        index: u32,
        /// The text.
        text: String,
    },
    /// A piece of a tool call, assembled per index.
    ToolCallDelta {
        /// Call index.
        index: u32,
        /// Call id (sent with the first delta; repeated or empty afterwards).
        #[serde(default)]
        id: String,
        /// Tool name (first delta).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// Raw argument text to append.
        #[serde(default)]
        arguments_delta: String,
    },
    /// A content block closes.
    BlockEnd {
        /// Block index.
        index: u32,
    },
    /// Token usage.
    Usage {
        /// Counts.
        usage: Usage,
    },
    /// The terminal chunk.
    Finish {
        /// Why.
        reason: FinishReason,
    },
}

impl StreamChunk {
    /// A terminal error chunk.
    pub fn error(failure: LlmFailure) -> Self {
        StreamChunk::Finish {
            reason: FinishReason::Error { failure },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Issue 11 item 3: a request-validation 500 has its own code, retryable but capped at one
    // retry; the other retryable codes are left to the policy.
    #[test]
    fn invalid_request_is_retried_at_most_once() {
        let code = FailureCode::InvalidRequest.code();
        assert_eq!(code, "INVALID_REQUEST");
        assert!(FailureCode::is_retryable(code));
        assert_eq!(FailureCode::retry_cap(code), Some(1));
        for other in [
            FailureCode::Server,
            FailureCode::Transport,
            FailureCode::RateLimit,
        ] {
            assert!(FailureCode::is_retryable(other.code()));
            assert_eq!(FailureCode::retry_cap(other.code()), None);
        }
        assert!(!FailureCode::is_retryable(FailureCode::BadRequest.code()));
    }
}
