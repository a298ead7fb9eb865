//! Reading one answer of [`Adapter`]: the SSE stream event by event under the idle watchdog
//! (or, with `stream = false`, the whole `chat.completion`), decoded by one [`Decoder`], and
//! its text and reasoning pieces handed to [`Deltas`] as they are decoded (issue 26 item 1):
//! events already read are taken at once, and the pieces so far go out as `llm/delta` before
//! the adapter waits for the network again. Split from `client.rs`, which sends the requests.

use eventsource_stream::Eventsource as _;
use futures::{FutureExt as _, StreamExt as _};
use keel_llm_http_kit::Deltas;
use keel_plugin_api::services::llm::{LlmCode, LlmFailure, LlmRequest, StreamChunk};

use super::{Adapter, Call, Channel};
use crate::credential;
use crate::decode::Decoder;
use crate::failure;

/// The most of a non-streamed answer that is read.
const MAX_COMPLETION_BODY: usize = 32 * 1024 * 1024;

impl Adapter {
    /// One streamed request: its chunks, or `None` when the stream closed (or broke) before
    /// any event arrived.
    pub(super) async fn streamed(
        &self,
        request: &LlmRequest,
        call: &Call<'_>,
        deltas: &mut Deltas,
    ) -> Result<Option<Vec<StreamChunk>>, LlmFailure> {
        let (response, request_id) = self.send(request, true, call, Channel::Pooled).await?;
        let idle = self.idle();
        let mut decoder = Decoder::new(request_id.clone());
        deltas.begin();
        let mut events = response.bytes_stream().eventsource();
        loop {
            // An event already read is taken at once; before waiting for the network, the
            // pieces so far go out.
            let next = match events.next().now_or_never() {
                Some(next) => Ok(next),
                None => {
                    deltas.flush();
                    tokio::time::timeout(idle, events.next()).await
                }
            };
            match next {
                Err(_) if decoder.has_finish_reason() => break,
                Err(_) => return Ok(Some(decoder.fail(self.timeout(request_id)))),
                Ok(None) if decoder.is_empty() => return Ok(None),
                Ok(None) => break,
                Ok(Some(Err(e))) if decoder.has_finish_reason() => {
                    tracing::debug!(error = %e, "stream ended untidily after the finish reason");
                    break;
                }
                Ok(Some(Err(e))) if decoder.is_empty() => {
                    tracing::debug!(error = %e, "stream broke before its first event");
                    return Ok(None);
                }
                Ok(Some(Err(e))) => {
                    let f = failure::failure(
                        LlmCode::Transport,
                        credential::redact(
                            &format!("the response stream from {} broke: {e}", self.url),
                            call.key,
                        ),
                        request_id,
                    );
                    return Ok(Some(decoder.fail(f)));
                }
                Ok(Some(Ok(event))) => {
                    let fed = decoder.feed(&event.data);
                    deltas.take(decoder.chunks());
                    if let Err(f) = fed {
                        return Ok(Some(decoder.fail(f)));
                    }
                    if decoder.is_done() {
                        break;
                    }
                }
            }
        }
        Ok(Some(decoder.complete()))
    }

    /// One non-streamed request: the whole `chat.completion`, read under the idle watchdog
    /// and decoded by the same [`Decoder`] as a stream.
    pub(super) async fn whole(
        &self,
        request: &LlmRequest,
        call: &Call<'_>,
        channel: Channel,
        deltas: &mut Deltas,
    ) -> Result<Vec<StreamChunk>, LlmFailure> {
        let (response, request_id) = self.send(request, false, call, channel).await?;
        let mut decoder = Decoder::new(request_id.clone());
        deltas.begin();
        let mut bytes = Vec::new();
        let mut body = response.bytes_stream();
        loop {
            match tokio::time::timeout(self.idle(), body.next()).await {
                Err(_) => return Ok(decoder.fail(self.timeout(request_id))),
                Ok(None) => break,
                Ok(Some(Ok(chunk))) => {
                    if bytes.len() + chunk.len() > MAX_COMPLETION_BODY {
                        let f = failure::failure(
                            LlmCode::Transport,
                            format!(
                                "the answer from {} exceeds {MAX_COMPLETION_BODY} bytes",
                                self.url
                            ),
                            request_id,
                        );
                        return Ok(decoder.fail(f));
                    }
                    bytes.extend_from_slice(&chunk);
                }
                Ok(Some(Err(e))) => {
                    let f = failure::failure(
                        LlmCode::Transport,
                        credential::redact(
                            &format!("the answer from {} broke off: {e}", self.url),
                            call.key,
                        ),
                        request_id,
                    );
                    return Ok(decoder.fail(f));
                }
            }
        }
        if bytes.iter().all(u8::is_ascii_whitespace) {
            let f = failure::failure(
                LlmCode::Transport,
                format!("{} answered with an empty body", self.url),
                request_id,
            );
            return Ok(decoder.fail(f));
        }
        let fed = decoder.feed_completion(&bytes);
        deltas.take(decoder.chunks());
        match fed {
            Ok(()) => Ok(decoder.complete()),
            Err(f) => Ok(decoder.fail(f)),
        }
    }
}
