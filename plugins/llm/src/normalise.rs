//! Turning whatever an adapter answered into a well-formed chunk stream (LLM-04, B14).
//!
//! The agent loop relies on the protocol: exactly one `finish`, last, with `usage` before it.
//! An adapter that breaks it (an error, an unparseable answer, a stream without a terminal
//! chunk or with chunks after it) is reported as a terminal `finish{error}` here, so the loop
//! never sees a malformed stream and never needs a second failure path for adapters.

use keel_plugin_api::codes::ContractCode;
use keel_plugin_api::sdk::Error;
use keel_plugin_api::services::llm::{LlmCode, LlmFailure, LlmResponse, StreamChunk};

/// Code for an adapter answer that breaks the chunk protocol. Not retryable: it is a bug in the
/// adapter, not provider trouble.
pub const ADAPTER_PROTOCOL: LlmCode = LlmCode::AdapterProtocol;

/// A failure with `code`.
pub fn failure(code: LlmCode, message: impl Into<String>) -> LlmFailure {
    LlmFailure::new(code, message)
}

/// A response that is only a terminal error chunk.
pub fn failed(failure: LlmFailure) -> LlmResponse {
    LlmResponse {
        chunks: vec![StreamChunk::error(failure)],
    }
}

/// An adapter's `Err` as a terminal chunk. An LLM code is kept (it is the most precise thing
/// known, e.g. `CREDENTIAL_MISSING` or `PANIC`); an answer the contract could not decode is
/// `ADAPTER_PROTOCOL`; any other code becomes `ADAPTER_FAILED`, its spelling kept in the
/// message. The message names the service.
pub fn from_adapter_error(service: &str, e: Error) -> LlmResponse {
    let code = if e.is(ContractCode::InvalidAnswer) {
        ADAPTER_PROTOCOL
    } else if let Some(code) = e.code_as::<LlmCode>() {
        code
    } else {
        return failed(failure(
            LlmCode::AdapterFailed,
            format!("LLM adapter '{service}' failed: [{}] {}", e.code, e.message),
        ));
    };
    failed(failure(
        code,
        format!("LLM adapter '{service}' failed: {}", e.message),
    ))
}

/// Keeps the chunks before the first `finish`; when that `finish` is missing or is not last,
/// the stream ends with an `ADAPTER_PROTOCOL` error instead.
pub fn enforce(service: &str, response: LlmResponse) -> LlmResponse {
    let mut chunks = response.chunks;
    let first_finish = chunks
        .iter()
        .position(|c| matches!(c, StreamChunk::Finish { .. }));
    let problem = match first_finish {
        Some(i) if i + 1 == chunks.len() => return LlmResponse { chunks },
        Some(i) => {
            chunks.truncate(i);
            "chunks followed the finish chunk"
        }
        None => "the stream has no finish chunk",
    };
    chunks.push(StreamChunk::error(failure(
        ADAPTER_PROTOCOL,
        format!("LLM adapter '{service}' broke the chunk protocol: {problem}"),
    )));
    LlmResponse { chunks }
}

/// Whether a response obeys the protocol (exactly one `finish`, last).
pub fn is_well_formed(response: &LlmResponse) -> bool {
    let finishes = response
        .chunks
        .iter()
        .filter(|c| matches!(c, StreamChunk::Finish { .. }))
        .count();
    finishes == 1 && matches!(response.chunks.last(), Some(StreamChunk::Finish { .. }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_plugin_api::services::llm::FinishReason;

    fn text(t: &str) -> StreamChunk {
        StreamChunk::TextDelta {
            index: 0,
            text: t.into(),
        }
    }

    fn stop() -> StreamChunk {
        StreamChunk::Finish {
            reason: FinishReason::Stop,
        }
    }

    fn error_code(r: &LlmResponse) -> Option<LlmCode> {
        match r.chunks.last() {
            Some(StreamChunk::Finish {
                reason: FinishReason::Error { failure },
            }) => Some(failure.code),
            _ => None,
        }
    }

    #[test]
    fn llm_04_a_well_formed_stream_passes_unchanged() {
        let r = LlmResponse {
            chunks: vec![text("hi"), stop()],
        };
        assert_eq!(enforce("s", r.clone()), r);
        assert!(is_well_formed(&r));
    }

    #[test]
    fn llm_04_missing_finish_becomes_an_error_chunk() {
        let r = enforce(
            "s",
            LlmResponse {
                chunks: vec![text("hi")],
            },
        );
        assert_eq!(r.chunks.len(), 2);
        assert_eq!(r.chunks[0], text("hi"));
        assert_eq!(error_code(&r), Some(ADAPTER_PROTOCOL));
        assert!(is_well_formed(&r));
        let empty = enforce("s", LlmResponse { chunks: vec![] });
        assert_eq!(empty.chunks.len(), 1);
        assert_eq!(error_code(&empty), Some(ADAPTER_PROTOCOL));
    }

    #[test]
    fn llm_04_chunks_after_finish_are_cut_and_reported() {
        let r = enforce(
            "s",
            LlmResponse {
                chunks: vec![text("a"), stop(), text("b"), stop()],
            },
        );
        assert_eq!(r.chunks.len(), 2);
        assert_eq!(r.chunks[0], text("a"));
        assert_eq!(error_code(&r), Some(ADAPTER_PROTOCOL));
    }

    #[test]
    fn llm_04_unparseable_answer_and_adapter_error_become_chunks() {
        let garbled = Error::coded(ContractCode::InvalidAnswer, "not an LlmResponse");
        let r = from_adapter_error("svc", garbled);
        assert_eq!(error_code(&r), Some(ADAPTER_PROTOCOL));
        let r = from_adapter_error("svc", Error::coded(LlmCode::CredentialMissing, "set X"));
        assert_eq!(error_code(&r), Some(LlmCode::CredentialMissing));
        assert!(is_well_formed(&r));
        let r = from_adapter_error("svc", Error::received("SOMETHING_ELSE", "odd"));
        assert_eq!(error_code(&r), Some(LlmCode::AdapterFailed));
        let r = from_adapter_error("svc", Error::coded(ContractCode::Panic, "boom"));
        assert_eq!(error_code(&r), Some(LlmCode::Panic));
    }
}
