//! The LLM seam (ARCHITECTURE §8, requirements C8 and B14): the `keel.llm` registry, the adapter
//! protocol, and the provider-neutral chunk vocabulary every adapter speaks.
//!
//! Who calls what: the agent loop calls `keel.llm` method `"stream"`; the `llm` plugin runs the
//! `llm/stream` waterfall (checkpoint, scrub, metrics listeners) and its terminal dispatches
//! exactly one attempt to the adapter registered for `config.provider`. Adapters are plugins that
//! serve the [`LlmAdapter`] contract under [`adapter_service_name`] and register it with `keel.llm`.

use serde::{Deserialize, Serialize};

use crate::sdk::Frozen;

crate::contract! {
    /// The registry service (`llm` plugin): adapters register their providers; the agent loop
    /// streams model calls through it.
    pub contract Llm = "keel.llm", version 2;
    provider LlmProvider;
    client LlmClient;
    /// Registers an adapter's providers. `default_model` is the model the adapter's row is
    /// configured with; the loop writes it into the logged `LlmCallConfig` so every request
    /// names its model. All or nothing: a provider already registered → `DUPLICATE_ADAPTER`
    /// and nothing is registered; an empty list or an empty name → `INVALID_ADAPTER` (LLM-01).
    fn register(RegisterAdapter) -> AdapterRegistration;
    /// Swaps a registration's providers atomically.
    fn replace(ReplaceProviders) -> ();
    /// Removes a registration; a disposed one again → `REGISTRATION_DISPOSED`.
    fn unregister(AdapterRegistration) -> ();
    /// The registered providers.
    fn providers() -> ProviderList;
    /// Asks the adapter whether it could dispatch (credential configured, capability
    /// supported) without any I/O: `NO_ADAPTER`, `CREDENTIAL_MISSING` (naming the reference),
    /// `UNSUPPORTED_REASONING_EFFORT`.
    fn check(CheckRequest) -> ();
    /// One model call through the `llm/stream` waterfall. Never fails for provider trouble:
    /// every adapter failure is a terminal `finish{error}` chunk (LLM-04). Errors are only for
    /// middleware failures (a listener of `llm/stream` that failed or panicked).
    fn stream(LlmRequest) -> LlmResponse;
    /// The context window and output reserve of `config`'s model, from the adapter row that
    /// serves its provider (issue 14 item 1). An adapter that predates the method (contract
    /// version 1) answers an unknown window; `NO_ADAPTER` when nothing serves the provider.
    fn limits(LlmCallConfig) -> ModelLimits, since 2;
}

crate::contract! {
    /// An adapter: what an adapter row serves under [`adapter_service_name`] and registers with
    /// [`Llm`].
    pub contract LlmAdapter = "keel.llm.adapter.*", version 2;
    provider LlmAdapterProvider;
    client LlmAdapterClient;
    /// One provider attempt, library retries off, every failure a terminal chunk.
    fn generate(LlmRequest) -> LlmResponse;
    /// Whether the adapter could dispatch `config`, without I/O.
    fn check(CheckRequest) -> ();
    /// The window and output reserve of `config`'s model (row config, else the adapter's
    /// table of defaults), without I/O.
    fn limits(LlmCallConfig) -> ModelLimits, since 2;
}

impl LlmClient {
    /// Registers an adapter and removes the registration when `ctx`'s row unloads (an
    /// unregister that fails is ignored: a reload may have disposed the registry first).
    ///
    /// # Errors
    /// `register`'s refusals (`DUPLICATE_ADAPTER`, `INVALID_ADAPTER`), `INACTIVE_FIBER`.
    pub async fn register_until_unload(
        &self,
        ctx: &crate::sdk::Context,
        request: RegisterAdapter,
    ) -> crate::sdk::Result<AdapterRegistration> {
        let registration = self.register(request).await?;
        let llm = self.clone();
        ctx.effect("unregister the adapter from keel.llm", move || async move {
            if let Err(e) = llm.unregister(registration).await {
                tracing::debug!(error = %e, "unregister the adapter from keel.llm");
            }
            Ok(())
        })?;
        Ok(registration)
    }
}

/// What an adapter row does in `activate`: serves `provider` as [`LlmAdapter`] under
/// [`adapter_service_name`]`(row)` and registers it with [`Llm`] for `providers`, with the row's
/// configured `model` as their default, until the row unloads.
///
/// # Errors
/// The kernel's refusal to serve the name, `register`'s refusals, a missing `keel.llm`.
pub async fn serve_adapter<P: Send + Sync + 'static>(
    ctx: &crate::sdk::Context,
    row: &str,
    provider: P,
    providers: Vec<String>,
    model: String,
) -> crate::sdk::Result<AdapterRegistration>
where
    LlmAdapter: crate::sdk::Serves<P>,
{
    let service = adapter_service_name(row);
    ctx.serve_named::<LlmAdapter, _>(&service, provider)?;
    let request = RegisterAdapter {
        service,
        providers,
        default_model: Some(model),
    };
    ctx.client::<Llm>()?
        .register_until_unload(ctx, request)
        .await
}

/// The service name an adapter row serves [`LlmAdapter`] under (declare it with
/// `Manifest::provides_named(…, false)`), e.g. `keel.llm.adapter.llm-openai`.
pub fn adapter_service_name(row: &str) -> String {
    format!("keel.llm.adapter.{row}")
}

/// `register`'s request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegisterAdapter {
    /// The adapter's service name ([`adapter_service_name`]).
    pub service: String,
    /// Provider names it answers for.
    pub providers: Vec<String>,
    /// Its row's configured model.
    #[serde(default)]
    pub default_model: Option<String>,
}

/// A registration id (`register`'s answer, `unregister`'s request).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdapterRegistration {
    /// The id.
    pub registration: u64,
}

/// `replace`'s request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplaceProviders {
    /// The registration to change.
    pub registration: u64,
    /// Its new providers.
    pub providers: Vec<String>,
}

/// `providers`' answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProviderList {
    /// One per provider name.
    pub providers: Vec<ProviderRoute>,
}

/// One registered provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderRoute {
    /// Provider name.
    pub provider: String,
    /// The adapter service that answers it.
    pub service: String,
    /// The adapter row's model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_model: Option<String>,
}

/// `check`'s request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckRequest {
    /// The call configuration to check.
    pub config: LlmCallConfig,
    /// The caller's working directory, when it knows one (selects a cwd `.env` layer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

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
    /// The projected history (`keel.session` `messages`), each message frozen once by the
    /// session and shared by reference from there to the adapter: `{role:"user",content}`,
    /// `{role:"assistant",content,tool_calls?:[{id,name,arguments}]}`,
    /// `{role:"tool",tool_call_id,content,is_error?}` (see [`Message`]).
    pub messages: Vec<Frozen>,
    /// Tools offered to the model.
    #[serde(default)]
    pub tools: Vec<ModelTool>,
    /// Set by a caller that shows the answer as it is generated (the agent loop): the adapter
    /// then dispatches each text and reasoning piece as an `llm/delta` carrying this id, as it
    /// arrives (issue 26 item 1). `None`: no deltas; the response is the same either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_id: Option<u64>,
}

/// What a call returns: the chunks, in order, the last one a `finish`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmResponse {
    /// The chunk stream.
    pub chunks: Vec<StreamChunk>,
}

/// What a model can take: `limits`' answer (issue 14 item 1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelLimits {
    /// Prompt plus answer, in the model's tokens; `None` when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    /// Tokens kept free for the answer (the request's `max_tokens` when it sets one).
    #[serde(default)]
    pub output_reserve: u64,
    /// How many bytes of a request make one token for this model, when the row knows it
    /// better than the context manager's default; the estimate is corrected from reported
    /// usage either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_per_token: Option<f64>,
    /// Where the numbers came from: `config`, `table` (the adapter's defaults) or `unknown`.
    #[serde(default)]
    pub source: String,
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
    /// What went wrong; its [`Retry`](crate::codes::Retry) class is the retry policy's input.
    pub code: LlmCode,
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

crate::error_codes! {
    /// Model calls (ARCHITECTURE §8, B14): the codes of `LlmFailure` (terminal `finish{error}`
    /// chunks) and of the `keel.llm` registry's errors. A failure's retry class is the agent
    /// loop's retry decision: *later* codes go to the retry policy, *once* codes get at most
    /// one retry, the rest end the turn.
    pub enum LlmCode in "llm" {
        /// HTTP 429.
        RateLimit = "RATE_LIMIT", by "adapters", retry Later;
        /// HTTP 5xx.
        Server = "SERVER", by "adapters", retry Later;
        /// Connect, reset, mid-stream disconnect, garbled stream.
        Transport = "TRANSPORT", by "adapters", retry Later;
        /// An idle stream past the deadline (or no response head before the first-byte deadline).
        Timeout = "TIMEOUT", by "adapters", retry Later;
        /// The prompt does not fit the model's context window.
        ContextWindowExceeded = "CONTEXT_WINDOW_EXCEEDED", by "adapters", retry Never;
        /// A completion with no content and no calls.
        EmptyResponse = "EMPTY_RESPONSE", by "the agent loop (assembling a stream)", retry Later;
        /// HTTP 401/403: the credential was refused.
        Auth = "AUTH", by "adapters", retry Never;
        /// Any other HTTP 4xx, or a request the adapter refuses before I/O.
        BadRequest = "BAD_REQUEST", by "adapters", retry Never;
        /// A 5xx whose body says the request itself failed the server's validation (a FastAPI /
        /// pydantic `validation error`: llama-cpp-python answers a message shape it refuses
        /// with HTTP 500). The same request is refused the same way, but a server error is not
        /// proof of that (issue 11 item 3).
        InvalidRequest = "INVALID_REQUEST", by "llm-openai", retry Once;
        /// No adapter is registered, or running, for the provider.
        NoAdapter = "NO_ADAPTER", by "`keel.llm`", retry Never;
        /// The credential reference has no value.
        CredentialMissing = "CREDENTIAL_MISSING", by "adapters (via `keel.credentials`)", retry Never;
        /// The call was cancelled.
        Aborted = "ABORTED", by "adapters, the agent loop", retry Never;
        /// An explicit reasoning effort the adapter cannot express (LLM-03: no downgrade).
        UnsupportedReasoningEffort = "UNSUPPORTED_REASONING_EFFORT", by "adapters, before I/O", retry Never;
        /// The adapter broke the chunk protocol (no finish, chunks after it, not a response).
        AdapterProtocol = "ADAPTER_PROTOCOL", by "`keel.llm` (normalising an adapter's answer)", retry Never;
        /// The adapter failed with a code that is not an LLM code (the message keeps it).
        AdapterFailed = "ADAPTER_FAILED", by "`keel.llm` (normalising an adapter's error)", retry Never;
        /// The adapter could not build its HTTP client (the TLS stack).
        HttpClient = "HTTP_CLIENT", by "llm-openai at activation", retry Never;
        /// `llm-scripted`: a call past the script's last step.
        ScriptExhausted = "SCRIPT_EXHAUSTED", by "llm-scripted", retry Never;
        /// `llm-scripted`: the script (file or inline steps) is malformed; the message names it.
        ScriptInvalid = "SCRIPT_INVALID", by "llm-scripted at activation", retry Changed;
        /// The adapter panicked or its task died.
        Panic = "PANIC", by "adapters", retry Never;
        /// A call dispatched against a configuration it was not prepared for.
        InvalidPreparedCall = "INVALID_PREPARED_CALL", by "`keel.llm`", retry Never;
        /// `register`: a provider is already registered.
        DuplicateAdapter = "DUPLICATE_ADAPTER", by "`keel.llm` `register`", retry Never;
        /// `register`: an empty provider list or name.
        InvalidAdapter = "INVALID_ADAPTER", by "`keel.llm` `register`", retry Changed;
        /// A registration used after it was removed.
        RegistrationDisposed = "REGISTRATION_DISPOSED", by "`keel.llm`", retry Never;
        /// An `llm/stream` listener returned something that is not a well-formed response.
        LlmStreamOutput = "LLM_STREAM_OUTPUT", by "`keel.llm` (checking the waterfall's output)", retry Never;
    }
}

impl LlmFailure {
    /// A failure with `code` and `message`.
    pub fn new(code: LlmCode, message: impl Into<String>) -> Self {
        LlmFailure {
            message: message.into(),
            code,
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
    /// The provider's opaque token for reasoning block `index`, sent back verbatim with the
    /// block when the history is replayed (Anthropic's thinking `signature`; with `redacted`,
    /// the `data` of a `redacted_thinking` block, whose text the provider withholds). Issue 15
    /// item 2: the agent loop keeps signed blocks in the assistant message
    /// ([`ReasoningBlock`](crate::conversation::ReasoningBlock)).
    ReasoningSignature {
        /// Block index.
        index: u32,
        /// The token, verbatim.
        signature: String,
        /// The block is a redacted one: `signature` is all of it.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        redacted: bool,
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
    use crate::codes::{ErrorCode, Retry};

    // Issue 11 item 3, typed in issue 12: a request-validation 500 is retried at most once;
    // the transient codes are left to the policy; the rest are final.
    #[test]
    fn retry_classes_of_the_llm_codes() {
        assert_eq!(LlmCode::InvalidRequest.as_str(), "INVALID_REQUEST");
        assert_eq!(LlmCode::InvalidRequest.retry(), Retry::Once);
        for later in [
            LlmCode::Server,
            LlmCode::Transport,
            LlmCode::RateLimit,
            LlmCode::Timeout,
            LlmCode::EmptyResponse,
        ] {
            assert_eq!(later.retry(), Retry::Later, "{later}");
        }
        assert_eq!(LlmCode::BadRequest.retry(), Retry::Never);
        assert_eq!(LlmCode::parse("SERVER"), Some(LlmCode::Server));
    }

    #[test]
    fn a_failure_code_is_its_wire_string_and_an_unknown_one_is_refused() {
        let f = LlmFailure::new(LlmCode::RateLimit, "slow down");
        let text = serde_json::to_string(&f).unwrap();
        assert!(text.contains(r#""code":"RATE_LIMIT""#), "{text}");
        assert_eq!(serde_json::from_str::<LlmFailure>(&text).unwrap(), f);
        let err = serde_json::from_str::<LlmFailure>(r#"{"message":"m","code":"NOPE"}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown llm code `NOPE`"), "{err}");
    }
}
