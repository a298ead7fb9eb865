//! One Messages API attempt over HTTP: `POST {base_url}/v1/messages` with `stream: true` under
//! the first-byte deadline, then the SSE stream under the idle watchdog, every failure a
//! terminal chunk (B14: one attempt, no library retries — the agent loop's policy retries).
//! Three deadlines, as `llm-openai`'s: `connect_timeout_ms`, `first_byte_timeout_ms` (request
//! sent → response head) and `timeout_ms` (silence between events once the head arrived).
//!
//! [`Adapter::generate`] needs a tokio reactor (reqwest): the plugin runs it on its own
//! runtime; tests run it on `#[tokio::test]`. Each answer's text and reasoning pieces go to
//! the row's `llm/delta` emitter as they are decoded, for a request with a `stream_id`.

use std::time::{Duration, SystemTime};

use eventsource_stream::Eventsource as _;
use futures::{FutureExt as _, StreamExt as _};
use keel_llm_http_kit::{DeltaEmitter, Deltas};
use keel_plugin_api::codes::ContractCode;
use keel_plugin_api::sdk::Error;
use keel_plugin_api::services::llm::{
    LlmCallConfig, LlmCode, LlmFailure, LlmRequest, LlmResponse, StreamChunk,
};
use reqwest::header::{self, HeaderValue};

use crate::config::{self, Config};
use crate::credential::{self, Resolver};
use crate::decode::Decoder;
use crate::failure::{self, ResponseInfo};
use crate::request;
use keel_llm_http_kit::{SharedClient, header_text, read_error_body};

/// One adapter row: its config, its HTTP client and where its key comes from.
#[derive(Debug)]
pub struct Adapter {
    config: Config,
    /// Built off the start path ([`Adapter::prepare_client`]) or at the first request.
    http: SharedClient,
    url: String,
    credentials: Resolver,
    /// Where the pieces of an answer go as they arrive (`llm/delta`; none in unit tests).
    deltas: Option<DeltaEmitter>,
}

impl Adapter {
    /// Checks the config; the HTTP client is built later ([`Adapter::prepare_client`], or the
    /// first request). No request is made.
    ///
    /// # Errors
    /// `CONFIG` for keys that do not fit together.
    pub fn new(config: Config, credentials: Resolver) -> Result<Self, Error> {
        config::check(&config).map_err(|m| Error::coded(ContractCode::Config, m))?;
        let connect_timeout = Duration::from_millis(config.connect_timeout_ms);
        let http = SharedClient::new(move || {
            reqwest::Client::builder()
                .connect_timeout(connect_timeout)
                .retry(reqwest::retry::never())
                .user_agent(concat!("keel/", env!("CARGO_PKG_VERSION")))
                .build()
        });
        // `base_url` is the API root without `/v1`, as Anthropic's SDKs take it.
        let url = format!("{}/v1/messages", config.base_url.trim_end_matches('/'));
        Ok(Adapter {
            config,
            http,
            url,
            credentials,
            deltas: None,
        })
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

    /// Starts building the HTTP client on a thread of its own (issue 25 item 2: off the row's
    /// activation); the first request waits for it, or builds it when this never ran.
    pub fn prepare_client(&self) {
        self.http.prepare();
    }

    /// Whether the HTTP client has been built yet.
    pub fn client_built(&self) -> bool {
        self.http.is_built()
    }

    /// The endpoint requests go to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Could a call with `config` be dispatched? Capabilities, then the key resolved in every
    /// layer (`cwd` choosing the working-directory `.env`). No network I/O; never a value.
    ///
    /// # Errors
    /// `UNSUPPORTED_REASONING_EFFORT`; `CREDENTIAL_MISSING` naming the row and the reference;
    /// the credentials service's own error.
    pub async fn check(&self, config: &LlmCallConfig, cwd: Option<&str>) -> Result<(), Error> {
        request::check_capabilities(config).map_err(|f| Error::coded(f.code, f.message))?;
        let reference = &self.config.api_key_ref;
        if self.credentials.resolve(reference, cwd).await?.is_none() {
            return Err(Error::coded(
                LlmCode::CredentialMissing,
                self.credentials.missing_message(reference),
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

    async fn key(&self) -> Result<String, LlmFailure> {
        let reference = &self.config.api_key_ref;
        match self.credentials.resolve(reference, None).await {
            Ok(Some(key)) => Ok(key),
            Ok(None) => Err(LlmFailure::new(
                LlmCode::CredentialMissing,
                self.credentials.missing_message(reference),
            )),
            Err(e) => Err(LlmFailure::new(
                LlmCode::CredentialMissing,
                format!(
                    "credential {reference} could not be resolved: {}: {}",
                    e.code, e.message
                ),
            )),
        }
    }

    async fn attempt(
        &self,
        request: &LlmRequest,
        deltas: &mut Deltas,
    ) -> Result<Vec<StreamChunk>, LlmFailure> {
        request::check_capabilities(&request.config)?;
        // Resolved now, for this request only (LLM-05).
        let key = self.key().await?;
        let mut key_header = HeaderValue::from_str(&key).map_err(|_| {
            LlmFailure::new(
                LlmCode::Auth,
                format!(
                    "credential {} holds characters an HTTP header cannot carry",
                    self.config.api_key_ref
                ),
            )
        })?;
        key_header.set_sensitive(true);
        let body = request::body(request, &self.config).to_string();
        tracing::debug!(provider = %self.config.provider, url = %self.url, "messages request");
        let send = self
            .http
            .get()?
            .post(&self.url)
            .header("x-api-key", key_header)
            .header("anthropic-version", config::API_VERSION)
            .header(header::ACCEPT, "text/event-stream")
            .header(header::CONTENT_TYPE, "application/json")
            .body(body)
            .send();
        keel_llm_http_kit::first_request_sent("llm-anthropic");
        let first_byte = Duration::from_millis(self.config.first_byte_timeout_ms);
        let response = match tokio::time::timeout(first_byte, send).await {
            Err(_) => {
                return Err(failure::failure(
                    LlmCode::Timeout,
                    format!(
                        "anthropic did not answer {} within {} ms (first_byte_timeout_ms)",
                        self.url, self.config.first_byte_timeout_ms
                    ),
                    None,
                ));
            }
            Ok(Err(e)) => return Err(self.transport(&e, &key)),
            Ok(Ok(r)) => r,
        };
        let request_id = header_text(response.headers(), "request-id");
        let status = response.status();
        if !status.is_success() {
            let info = ResponseInfo {
                status: status.as_u16(),
                retry_after: header_text(response.headers(), "retry-after"),
                request_id,
            };
            let body = read_error_body(response, self.idle()).await;
            return Err(failure::from_status(&info, &body, &key, SystemTime::now()));
        }
        Ok(self.stream(response, request_id, &key, deltas).await)
    }

    fn idle(&self) -> Duration {
        Duration::from_millis(self.config.timeout_ms)
    }

    /// Reads the SSE stream into chunks, until `message_stop`, an `error` event, a break, the
    /// end of the body or the idle watchdog. Events already read are taken at once; before it
    /// waits for the network, the text and reasoning pieces so far go out (issue 26 item 1).
    async fn stream(
        &self,
        response: reqwest::Response,
        request_id: Option<String>,
        key: &str,
        deltas: &mut Deltas,
    ) -> Vec<StreamChunk> {
        let mut decoder = Decoder::new(request_id.clone());
        let mut events = response.bytes_stream().eventsource();
        loop {
            let next = match events.next().now_or_never() {
                Some(next) => Ok(next),
                None => {
                    deltas.flush();
                    tokio::time::timeout(self.idle(), events.next()).await
                }
            };
            match next {
                Err(_) => {
                    let f = failure::failure(
                        LlmCode::Timeout,
                        format!(
                            "anthropic sent nothing for {} ms mid-stream (timeout_ms)",
                            self.config.timeout_ms
                        ),
                        request_id,
                    );
                    return decoder.fail(f);
                }
                // The body ended: complete() tells a finished answer from a cut one.
                Ok(None) => break,
                Ok(Some(Err(e))) if decoder.is_done() => {
                    tracing::debug!(error = %e, "stream ended untidily after message_stop");
                    break;
                }
                Ok(Some(Err(e))) => {
                    let f = failure::failure(
                        LlmCode::Transport,
                        credential::redact(
                            &format!("the response stream from {} broke: {e}", self.url),
                            key,
                        ),
                        request_id,
                    );
                    return decoder.fail(f);
                }
                Ok(Some(Ok(event))) => {
                    let fed = decoder.feed(&event.data);
                    deltas.take(decoder.chunks());
                    if let Err(f) = fed {
                        return decoder.fail(f);
                    }
                    if decoder.is_done() {
                        break;
                    }
                }
            }
        }
        decoder.complete()
    }

    fn transport(&self, e: &reqwest::Error, key: &str) -> LlmFailure {
        let text = keel_llm_http_kit::transport_text(e, &self.url);
        failure::failure(LlmCode::Transport, credential::redact(&text, key), None)
    }
}

#[cfg(test)]
#[path = "client_tests.rs"]
mod tests;
