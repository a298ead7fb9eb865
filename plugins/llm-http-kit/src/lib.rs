//! `keel-llm-http-kit`: what the HTTP model adapters (`llm-openai`, `llm-anthropic`) share, kept
//! once here because plugin crates may not depend on each other (issue 24 item 5). It owns the
//! one attempt on the plugin runtime ([`attempt`]), the transport failure's text
//! ([`transport_text`]), reading an error response ([`read_error_body`], [`header_text`]) and
//! the timeout defaults of a row config ([`defaults`]), and the start-up clock's line at the first
//! request ([`first_request_sent`]), and the pieces of an answer on their way out as
//! `llm/delta` ([`deltas`], issue 26 item 1). Each adapter keeps its own wire format,
//! its own failure classification and its own redaction. Not a plugin: a plain library that
//! only the model adapters use.

pub mod deltas;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use keel_plugin_api::prelude::*;
use keel_plugin_api::sdk::plugin_runtime;
use keel_plugin_api::services::llm::{LlmCode, LlmFailure, LlmResponse, StreamChunk};
use reqwest::header::HeaderMap;

pub use deltas::{DeltaEmitter, Deltas};

/// The row's [`DeltaEmitter`]: `llm/delta` dispatched on `ctx` with the row's handle (the
/// adapter's `#[declared_by("llm")]` field). A refused dispatch (the `llm` row is gone) is
/// logged at debug and costs the answer nothing.
pub fn emitter(
    ctx: Context,
    handle: keel_plugin_api::sdk::Dispatch<keel_plugin_api::events::llm::Delta>,
) -> DeltaEmitter {
    DeltaEmitter(Arc::new(move |delta| {
        if let Err(e) = ctx.emit(handle, delta) {
            tracing::debug!(error = %e, "llm/delta not dispatched");
        }
    }))
}

/// Logs `ADAPTER: first model request built, sending` under `keel::boot` (issue 25 item 1: the last
/// phase of start-up, `KEEL_LOG=keel::boot=debug`) the first time it is called in this adapter's
/// library; later calls cost one atomic load.
pub fn first_request_sent(adapter: &str) {
    static SENT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !SENT.load(std::sync::atomic::Ordering::Relaxed)
        && !SENT.swap(true, std::sync::atomic::Ordering::Relaxed)
    {
        tracing::debug!(target: "keel::boot", "{adapter}: first model request built, sending");
    }
}

/// The most of an error response's body an adapter reads (what a message quotes is shorter).
pub const MAX_ERROR_BODY: usize = 64 * 1024;

/// The timeout defaults of an adapter's row config, one set for every HTTP adapter; each is
/// also a function for `#[serde(default = "…")]`.
pub mod defaults {
    /// Idle-stream watchdog (B14: five minutes): the longest silence inside a response stream
    /// once its head has arrived (a reasoning model may think that long between events).
    pub const TIMEOUT_MS: u64 = 300_000;
    /// TCP/TLS connect timeout.
    pub const CONNECT_TIMEOUT_MS: u64 = 10_000;
    /// First-byte deadline: the longest wait, per attempt, from sending the request to the
    /// response head (status line and headers). Ninety seconds leaves room for a local server
    /// loading its model, and fails an endpoint that accepts connections but never answers
    /// within minutes: with the agent loop's default 2 retries, 3 × 90 s instead of 3 × 300 s
    /// (issue 10 item 15).
    pub const FIRST_BYTE_TIMEOUT_MS: u64 = 90_000;

    /// [`TIMEOUT_MS`], for serde.
    pub fn timeout_ms() -> u64 {
        TIMEOUT_MS
    }

    /// [`CONNECT_TIMEOUT_MS`], for serde.
    pub fn connect_timeout_ms() -> u64 {
        CONNECT_TIMEOUT_MS
    }

    /// [`FIRST_BYTE_TIMEOUT_MS`], for serde.
    pub fn first_byte_timeout_ms() -> u64 {
        FIRST_BYTE_TIMEOUT_MS
    }
}

/// Aborts the plugin-runtime task when dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs one model attempt on the plugin runtime, aborted if the caller drops this future, so a
/// cancelled model call closes its connection at once (LLM-06). A task that panicked or was
/// aborted answers one failure chunk (`PANIC` / `ABORTED`) naming `adapter` ("the OpenAI
/// adapter").
///
/// # Errors
/// No plugin runtime.
pub async fn attempt<F>(adapter: &str, call: F) -> Result<LlmResponse>
where
    F: Future<Output = LlmResponse> + Send + 'static,
{
    let mut task = AbortOnDrop(plugin_runtime()?.spawn(call));
    Ok(match (&mut task.0).await {
        Ok(r) => r,
        Err(e) => LlmResponse {
            chunks: vec![StreamChunk::error(LlmFailure::new(
                if e.is_panic() {
                    LlmCode::Panic
                } else {
                    LlmCode::Aborted
                },
                format!("{adapter}'s task failed: {e}"),
            ))],
        },
    })
}

/// The text of a transport failure (no HTTP status): `cannot connect to URL: …` or `request
/// failed for URL: …`, with every source of the error. Not redacted: the caller redacts the
/// key it sent.
pub fn transport_text(e: &reqwest::Error, url: &str) -> String {
    let what = if e.is_connect() {
        "cannot connect to"
    } else {
        "request failed for"
    };
    let mut detail = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        detail.push_str(": ");
        detail.push_str(&s.to_string());
        source = s.source();
    }
    format!("{what} {url}: {detail}")
}

/// A response header as text, when present and visible ASCII.
pub fn header_text(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// Up to [`MAX_ERROR_BODY`] bytes of an error response, lossily decoded; empty on trouble (a
/// chunk that takes longer than `idle` ends the read).
pub async fn read_error_body(response: reqwest::Response, idle: Duration) -> String {
    let mut bytes = Vec::new();
    let mut stream = response.bytes_stream();
    while bytes.len() < MAX_ERROR_BODY {
        match tokio::time::timeout(idle, stream.next()).await {
            Ok(Some(Ok(chunk))) => bytes.extend_from_slice(&chunk),
            _ => break,
        }
    }
    bytes.truncate(MAX_ERROR_BODY);
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_text_reads_visible_values_only() {
        let mut headers = HeaderMap::new();
        headers.insert("request-id", "req_1".parse().unwrap());
        headers.insert(
            "bad",
            reqwest::header::HeaderValue::from_bytes(b"\xff").unwrap(),
        );
        assert_eq!(
            header_text(&headers, "request-id").as_deref(),
            Some("req_1")
        );
        assert_eq!(header_text(&headers, "bad"), None);
        assert_eq!(header_text(&headers, "absent"), None);
    }

    #[test]
    fn the_defaults_are_the_functions_serde_reads() {
        assert_eq!(defaults::timeout_ms(), defaults::TIMEOUT_MS);
        assert_eq!(defaults::connect_timeout_ms(), defaults::CONNECT_TIMEOUT_MS);
        assert_eq!(
            defaults::first_byte_timeout_ms(),
            defaults::FIRST_BYTE_TIMEOUT_MS
        );
    }
}
