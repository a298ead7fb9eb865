//! One chat-completions attempt over HTTP: the request under its first-byte deadline, the SSE
//! stream (or, with `stream = false`, the whole answer) under its idle watchdog, and every
//! failure turned into a terminal chunk (B14: one attempt, no library retries). A stream that
//! closes empty is asked once more without streaming within the same attempt (issue 11 items
//! 2 and 4), and under `stream = "auto"` may turn the row's streaming off for the run. A 400
//! naming `stream_options` (a server that does not know the usage request) is sent again
//! without it, and the row asks no more for the run (issue 23 item 19). Three deadlines, each with its own key: `connect_timeout_ms`
//! (TCP/TLS), `first_byte_timeout_ms` (request sent → response head, connecting included: an
//! endpoint that accepts and never answers fails here, issue 10 item 15) and `timeout_ms`
//! (silence between stream events once the head has arrived).
//!
//! [`Adapter::generate`] needs a tokio reactor (reqwest): the plugin runs it on its own runtime
//! through `spawn_bridged`; tests run it on `#[tokio::test]`.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use keel_llm_http_kit::{DeltaEmitter, Deltas};
use keel_plugin_api::codes::ContractCode;
use keel_plugin_api::sdk::Error;
use keel_plugin_api::services::llm::{
    FinishReason, LlmCallConfig, LlmCode, LlmFailure, LlmRequest, LlmResponse, StreamChunk,
};
use reqwest::header::{self, HeaderMap, HeaderName, HeaderValue};

use crate::config::{Config, StreamMode};
use crate::credential;
use crate::failure::{self, ResponseInfo, header_text, read_error_body};
use crate::request;
use crate::wire_messages::MessageCache;
use keel_llm_http_kit::SharedClient;

#[path = "client_read.rs"]
mod read;

/// What every HTTP request of one attempt carries: the key (for redaction) and its header
/// (none for a row whose `api_key_ref` is empty: a server that wants no key).
struct Call<'a> {
    key: &'a str,
    auth: Option<HeaderValue>,
}

/// Which connections a request may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Channel {
    /// The row's pool (keep-alive): every ordinary request.
    Pooled,
    /// A connection of its own: the request after an empty stream. A server that broke off
    /// the stream (llama-cpp-python raises after sending the head) may leave the pooled
    /// connection half-closed, and a request reusing it fails before the server sees it.
    Fresh,
}

/// An HTTP client with the row's connect timeout, no retries and `idle` pooled connections
/// per host.
fn build_client(connect_timeout_ms: u64, idle: usize) -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_millis(connect_timeout_ms))
        .retry(reqwest::retry::never())
        .pool_max_idle_per_host(idle)
        .build()
}

/// One adapter row: its config and its HTTP clients (the pool, and one that keeps nothing).
#[derive(Debug)]
pub struct Adapter {
    config: Config,
    /// The pooled client, built off the start path ([`Adapter::prepare_client`]).
    http: SharedClient,
    /// Built on first use ([`Adapter::fresh_client`]).
    fresh: std::sync::OnceLock<reqwest::Client>,
    url: String,
    headers: HeaderMap,
    /// Whether the row's `headers` set `Accept` (kept for non-streamed requests too).
    accept_configured: bool,
    credentials: credential::Resolver,
    /// Set once a stream came back empty for a request with tools and the same request was
    /// answered without streaming (`stream = "auto"`): the row streams no more this run.
    stream_off: AtomicBool,
    /// Set once the server refused `stream_options` with a 400 naming it (issue 23 item 19):
    /// streamed requests ask for no usage from then on, for the rest of the run.
    stream_options_off: AtomicBool,
    /// Each history message's OpenAI text, translated once ([`MessageCache`]).
    messages: Mutex<MessageCache>,
    /// Where the pieces of an answer go as they arrive (`llm/delta`; none in unit tests).
    deltas: Option<DeltaEmitter>,
}

fn header_pair(name: &str, value: &str) -> Result<(HeaderName, HeaderValue), Error> {
    let n = HeaderName::from_bytes(name.as_bytes()).map_err(|e| {
        Error::coded(
            ContractCode::Config,
            format!("headers: invalid header name '{name}': {e}"),
        )
    })?;
    let v = HeaderValue::from_str(value).map_err(|e| {
        Error::coded(
            ContractCode::Config,
            format!("headers: invalid value for '{name}': {e}"),
        )
    })?;
    Ok((n, v))
}

impl Adapter {
    /// Checks the config; the HTTP client is built later ([`Adapter::prepare_client`], or the
    /// first request). No request is made.
    ///
    /// # Errors
    /// `CONFIG` for an unusable header or limit.
    pub fn new(config: Config) -> Result<Self, Error> {
        crate::limits::check(&config)?;
        let mut headers = HeaderMap::new();
        headers.insert(
            header::USER_AGENT,
            HeaderValue::from_static(concat!("keel/", env!("CARGO_PKG_VERSION"))),
        );
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        for (name, value) in &config.headers {
            let (n, v) = header_pair(name, value)?;
            if n == header::AUTHORIZATION {
                return Err(Error::coded(
                    ContractCode::Config,
                    "headers: Authorization is set from api_key_ref, not from headers",
                ));
            }
            headers.insert(n, v);
        }
        let connect_timeout_ms = config.connect_timeout_ms;
        let http = SharedClient::new(move || build_client(connect_timeout_ms, usize::MAX));
        let url = format!("{}/chat/completions", config.base_url.trim_end_matches('/'));
        let accept_configured = config
            .headers
            .keys()
            .any(|k| k.eq_ignore_ascii_case("accept"));
        Ok(Adapter {
            config,
            http,
            fresh: std::sync::OnceLock::new(),
            url,
            headers,
            accept_configured,
            credentials: credential::Resolver::env_only(),
            stream_off: AtomicBool::new(false),
            stream_options_off: AtomicBool::new(false),
            messages: Mutex::new(MessageCache::default()),
            deltas: None,
        })
    }

    /// Resolves the key through `credentials` (the `keel.credentials` service when loaded)
    /// instead of the process environment alone.
    #[must_use]
    pub fn with_credentials(mut self, credentials: credential::Resolver) -> Self {
        self.credentials = credentials;
        self
    }

    /// Dispatches the pieces of each answer whose request has a `stream_id` through `emitter`
    /// as they arrive (issue 26 item 1).
    #[must_use]
    pub fn with_deltas(mut self, emitter: DeltaEmitter) -> Self {
        self.deltas = Some(emitter);
        self
    }

    /// The row config.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Starts building the pooled client on a thread of its own (issue 25 item 2).
    pub fn prepare_client(&self) {
        self.http.prepare();
    }

    /// Whether the pooled client has been built yet.
    pub fn client_built(&self) -> bool {
        self.http.is_built()
    }

    /// `check` against the process environment only (no credentials service): could a call
    /// with `config` be dispatched? No I/O (LLM-03, LLM-05).
    ///
    /// # Errors
    /// `UNSUPPORTED_REASONING_EFFORT`; `CREDENTIAL_MISSING` naming the reference.
    pub fn check(&self, config: &LlmCallConfig) -> Result<(), Error> {
        request::check_capabilities(config).map_err(|f| Error::coded(f.code, f.message))?;
        if !self.config.api_key_ref.is_empty()
            && credential::resolve(&self.config.api_key_ref).is_none()
        {
            return Err(Error::coded(
                LlmCode::CredentialMissing,
                credential::missing_message(&self.config.api_key_ref),
            ));
        }
        Ok(())
    }

    /// `check` through this adapter's [`credential::Resolver`] (the service's `check` method):
    /// capabilities, then the reference resolved in every layer, `cwd` choosing the
    /// working-directory `.env`. No network I/O; never reports a value (SEC-11).
    ///
    /// # Errors
    /// `UNSUPPORTED_REASONING_EFFORT`; `CREDENTIAL_MISSING` naming the reference and where it may
    /// be set; the credentials service's own error (e.g. `CREDENTIALS_FILE`) when it fails.
    pub async fn check_resolved(
        &self,
        config: &LlmCallConfig,
        cwd: Option<&str>,
    ) -> Result<(), Error> {
        request::check_capabilities(config).map_err(|f| Error::coded(f.code, f.message))?;
        if self.config.api_key_ref.is_empty() {
            return Ok(());
        }
        if self
            .credentials
            .resolve(&self.config.api_key_ref, cwd)
            .await?
            .is_none()
        {
            return Err(Error::coded(
                LlmCode::CredentialMissing,
                self.credentials.missing_message(&self.config.api_key_ref),
            ));
        }
        Ok(())
    }

    /// One attempt. Never fails: every problem is the terminal chunk. The answer's pieces
    /// went out as `llm/delta` before it returns (when the row and the request ask for them).
    pub async fn generate(&self, request: LlmRequest) -> LlmResponse {
        let mut deltas = Deltas::new(self.deltas.as_ref(), &request);
        let chunks = match self.attempt(&request, &mut deltas).await {
            Ok(chunks) => chunks,
            Err(failure) => vec![StreamChunk::error(failure)],
        };
        deltas.flush();
        LlmResponse { chunks }
    }

    async fn attempt(
        &self,
        request: &LlmRequest,
        deltas: &mut Deltas,
    ) -> Result<Vec<StreamChunk>, LlmFailure> {
        request::check_capabilities(&request.config)?;
        request::check_tool_choice(request, &self.config)?;
        // Resolved now, for this request only (LLM-05). The request carries no working
        // directory, so the credentials service uses its default for the cwd `.env` layer.
        let reference = &self.config.api_key_ref;
        if reference.is_empty() {
            return self
                .dispatch(
                    request,
                    &Call {
                        key: "",
                        auth: None,
                    },
                    deltas,
                )
                .await;
        }
        let key = match self.credentials.resolve(reference, None).await {
            Ok(Some(key)) => key,
            Ok(None) => {
                return Err(LlmFailure::new(
                    LlmCode::CredentialMissing,
                    self.credentials.missing_message(reference),
                ));
            }
            Err(e) => {
                return Err(LlmFailure::new(
                    LlmCode::CredentialMissing,
                    format!(
                        "credential {reference} could not be resolved: {}: {}",
                        e.code, e.message
                    ),
                ));
            }
        };
        let mut auth = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
            LlmFailure::new(
                LlmCode::Auth,
                format!(
                    "credential {} holds characters an HTTP header cannot carry",
                    self.config.api_key_ref
                ),
            )
        })?;
        auth.set_sensitive(true);
        let call = Call {
            key: &key,
            auth: Some(auth),
        };
        self.dispatch(request, &call, deltas).await
    }

    /// The attempt's requests, once its credential is known.
    async fn dispatch(
        &self,
        request: &LlmRequest,
        call: &Call<'_>,
        deltas: &mut Deltas,
    ) -> Result<Vec<StreamChunk>, LlmFailure> {
        if !self.streams() {
            return self.whole(request, call, Channel::Pooled, deltas).await;
        }
        match self.streamed(request, call, deltas).await? {
            Some(chunks) => Ok(chunks),
            None => self.after_empty_stream(request, call, deltas).await,
        }
    }

    /// Whether this row's next request streams (`stream`, and the `"auto"` fallback once it
    /// was taken).
    pub fn streams(&self) -> bool {
        match self.config.stream {
            StreamMode::Always => true,
            StreamMode::Never => false,
            StreamMode::Auto => !self.stream_off.load(Ordering::Relaxed),
        }
    }

    /// A stream that closed with nothing in it is no answer and no error: llama-cpp-python
    /// sends one when it cannot stream with `tool_choice: "auto"` (issue 11 item 2) and when
    /// the prompt overflows the context (item 4). The same request is sent once more without
    /// streaming, as part of this attempt, to get the answer or the real error. Under
    /// `stream = "auto"`, an answer to a request that offered tools turns streaming off for
    /// the rest of the run, so later requests do not pay for the empty stream again.
    async fn after_empty_stream(
        &self,
        request: &LlmRequest,
        call: &Call<'_>,
        deltas: &mut Deltas,
    ) -> Result<Vec<StreamChunk>, LlmFailure> {
        tracing::debug!(provider = %self.config.provider, "empty stream; asking again without streaming");
        let chunks = self
            .whole(request, call, Channel::Fresh, deltas)
            .await
            .map_err(|mut f| {
                f.message
                    .push_str(" (asked again without streaming after an empty stream)");
                f
            })?;
        let answered = !matches!(
            chunks.last(),
            Some(StreamChunk::Finish {
                reason: FinishReason::Error { .. }
            })
        );
        if answered
            && self.config.stream == StreamMode::Auto
            && !request.tools.is_empty()
            && !self.stream_off.swap(true, Ordering::Relaxed)
        {
            tracing::info!(
                provider = %self.config.provider,
                "{} sent an empty stream for a request with tools and answered it without \
                 streaming; this row no longer streams for the rest of the run (stream = false \
                 skips the empty stream)",
                self.url
            );
        }
        Ok(chunks)
    }

    /// Sends `body` and waits for the response head under the first-byte deadline. A
    /// non-success status is the failure it maps to, except a 400 naming `stream_options` on
    /// a streamed request that asked for usage: the server does not know the field, so the
    /// request is sent once more without it and the row stops asking for the run (silently:
    /// its answers then count as unknown usage).
    async fn send(
        &self,
        request: &LlmRequest,
        stream: bool,
        call: &Call<'_>,
        channel: Channel,
    ) -> Result<(reqwest::Response, Option<String>), LlmFailure> {
        loop {
            let usage = stream && !self.stream_options_off.load(Ordering::Relaxed);
            let response = self
                .send_once(request, stream, usage, call, channel)
                .await?;
            let request_id = header_text(response.headers(), "x-request-id");
            let status = response.status();
            if status.is_success() {
                return Ok((response, request_id));
            }
            let info = ResponseInfo {
                status: status.as_u16(),
                retry_after: header_text(response.headers(), "retry-after"),
                retry_after_ms: header_text(response.headers(), "retry-after-ms"),
                request_id,
            };
            let body = read_error_body(response, self.idle()).await;
            if usage && info.status == 400 && body.contains("stream_options") {
                self.stream_options_off.store(true, Ordering::Relaxed);
                tracing::debug!(provider = %self.config.provider, "stream_options refused; asking again without it");
                continue;
            }
            return Err(failure::from_status(
                &self.config.provider,
                &info,
                &body,
                call.key,
                SystemTime::now(),
            ));
        }
    }

    /// One HTTP request of the attempt, `usage` choosing whether a stream asks for usage.
    async fn send_once(
        &self,
        request: &LlmRequest,
        stream: bool,
        usage: bool,
        call: &Call<'_>,
        channel: Channel,
    ) -> Result<reqwest::Response, LlmFailure> {
        let body = {
            let mut cache = self
                .messages
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            request::body_with(request, &self.config, stream, usage, &mut cache)
        };
        let mut headers = self.headers.clone();
        if !stream && !self.accept_configured {
            headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        }
        if let Some(auth) = &call.auth {
            headers.insert(header::AUTHORIZATION, auth.clone());
        }
        tracing::debug!(provider = %self.config.provider, url = %self.url, stream, "chat completions request");
        let client = match channel {
            Channel::Pooled => self.http.get()?,
            Channel::Fresh => self.fresh_client()?,
        };
        let send = client
            .post(&self.url)
            .headers(headers)
            .header(header::CONTENT_TYPE, "application/json")
            // The length is known, so hyper sends `Content-Length`, never chunked encoding.
            .header(header::CONTENT_LENGTH, body.len)
            .body(reqwest::Body::wrap_stream(futures::stream::iter(
                body.parts.into_iter().map(Ok::<_, std::io::Error>),
            )))
            .send();
        keel_llm_http_kit::first_request_sent("llm-openai");
        let first_byte = Duration::from_millis(self.config.first_byte_timeout_ms);
        match tokio::time::timeout(first_byte, send).await {
            Err(_) => Err(self.no_response_head()),
            Ok(Err(e)) => Err(self.transport(&e, None, call.key)),
            Ok(Ok(r)) => Ok(r),
        }
    }

    /// The client that keeps no connection, built on first use (most runs never need it) with
    /// the pooled client's settings, so a failure is not expected; it falls back to the pool.
    fn fresh_client(&self) -> Result<&reqwest::Client, LlmFailure> {
        if let Some(client) = self.fresh.get() {
            return Ok(client);
        }
        match build_client(self.config.connect_timeout_ms, 0) {
            Ok(client) => Ok(self.fresh.get_or_init(|| client)),
            Err(e) => {
                tracing::warn!(error = %e, "no separate client for the retry; using the pool");
                self.http.get()
            }
        }
    }

    fn idle(&self) -> Duration {
        Duration::from_millis(self.config.timeout_ms)
    }

    fn no_response_head(&self) -> LlmFailure {
        failure::failure(
            LlmCode::Timeout,
            format!(
                "{} did not answer {} within {} ms (first_byte_timeout_ms)",
                self.config.provider, self.url, self.config.first_byte_timeout_ms
            ),
            None,
        )
    }

    fn timeout(&self, request_id: Option<String>) -> LlmFailure {
        failure::failure(
            LlmCode::Timeout,
            format!(
                "{} sent nothing for {} ms mid-stream (timeout_ms)",
                self.config.provider, self.config.timeout_ms
            ),
            request_id,
        )
    }

    fn transport(&self, e: &reqwest::Error, request_id: Option<String>, key: &str) -> LlmFailure {
        let text = keel_llm_http_kit::transport_text(e, &self.url);
        failure::failure(
            LlmCode::Transport,
            credential::redact(&text, key),
            request_id,
        )
    }
}
