//! The adapters' side of `llm/delta` (issue 26 item 1): [`Deltas`] takes the text and
//! reasoning pieces a decoder has produced since it last looked, joins the pieces of one block
//! that arrive together, and hands each to the row's [`DeltaEmitter`] when the adapter is about
//! to wait for the network again ([`Deltas::flush`]). So a piece is never held past the read
//! that brought it, and a burst of SSE events that came in one read costs one dispatch.
//!
//! Nothing happens for a request without a `stream_id` or a row without an emitter: the
//! decoder's chunks are the answer either way.

use keel_plugin_api::events::llm::{DeltaKind, DeltaSink, LlmDelta};
use keel_plugin_api::services::llm::{LlmRequest, StreamChunk};

/// Dispatches one `llm/delta`: the plugin API's [`DeltaSink`], in a type an adapter's `Debug`
/// struct can hold.
#[derive(Clone)]
pub struct DeltaEmitter(pub DeltaSink);

impl std::fmt::Debug for DeltaEmitter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DeltaEmitter")
    }
}

/// One answer's pieces on their way out.
pub struct Deltas {
    /// The emitter and the request's id, when both are there.
    target: Option<(DeltaEmitter, u64)>,
    /// How many of the decoder's chunks were looked at.
    seen: usize,
    /// The piece not yet dispatched: block index, kind, text.
    pending: Option<(u32, DeltaKind, String)>,
}

impl std::fmt::Debug for Deltas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deltas")
            .field("stream_id", &self.target.as_ref().map(|(_, id)| *id))
            .field("seen", &self.seen)
            .finish_non_exhaustive()
    }
}

impl Deltas {
    /// Pieces of `request`'s answer go to `emitter` when the request has a `stream_id`.
    pub fn new(emitter: Option<&DeltaEmitter>, request: &LlmRequest) -> Deltas {
        Deltas {
            target: emitter.cloned().zip(request.stream_id),
            seen: 0,
            pending: None,
        }
    }

    /// Dispatches nothing.
    pub fn off() -> Deltas {
        Deltas {
            target: None,
            seen: 0,
            pending: None,
        }
    }

    /// Whether pieces are dispatched at all.
    pub fn is_on(&self) -> bool {
        self.target.is_some()
    }

    /// A new decoder begins (the same attempt asks again): its chunks are taken from the
    /// first; the pending piece goes out first.
    pub fn begin(&mut self) {
        self.flush();
        self.seen = 0;
    }

    /// Takes the pieces among `chunks` (all of the decoder's chunks so far) that it has not
    /// seen. A piece of another block or kind than the pending one dispatches the pending one
    /// first.
    pub fn take(&mut self, chunks: &[StreamChunk]) {
        if self.target.is_none() {
            return;
        }
        for chunk in chunks.get(self.seen..).unwrap_or_default() {
            let (index, kind, text) = match chunk {
                StreamChunk::TextDelta { index, text } => (*index, DeltaKind::Text, text),
                StreamChunk::ReasoningDelta { index, text } => (*index, DeltaKind::Reasoning, text),
                _ => continue,
            };
            match &mut self.pending {
                Some((i, k, pending)) if *i == index && *k == kind => pending.push_str(text),
                _ => {
                    self.flush();
                    self.pending = Some((index, kind, text.clone()));
                }
            }
        }
        self.seen = chunks.len();
    }

    /// Dispatches the pending piece, if any: call it before waiting for the next read.
    pub fn flush(&mut self) {
        let (Some((emit, stream_id)), Some((index, kind, text))) =
            (&self.target, self.pending.take())
        else {
            return;
        };
        (emit.0)(&LlmDelta {
            stream_id: *stream_id,
            index,
            kind,
            text: text.into(),
        });
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use keel_plugin_api::services::llm::LlmCallConfig;

    use super::*;

    fn request(stream_id: Option<u64>) -> LlmRequest {
        LlmRequest {
            session_id: None,
            stream_id,
            config: LlmCallConfig::default(),
            system: None,
            messages: vec![],
            tools: vec![],
        }
    }

    /// What the recorder saw: stream id, block index, kind, text.
    type Seen = Arc<Mutex<Vec<(u64, u32, DeltaKind, String)>>>;

    fn recorder() -> (DeltaEmitter, Seen) {
        let got = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&got);
        let emit = DeltaEmitter(Arc::new(move |d: &LlmDelta| {
            seen.lock()
                .unwrap()
                .push((d.stream_id, d.index, d.kind, d.text.to_string()));
        }));
        (emit, got)
    }

    fn text(index: u32, t: &str) -> StreamChunk {
        StreamChunk::TextDelta {
            index,
            text: t.into(),
        }
    }

    #[test]
    fn pieces_of_one_read_are_joined_and_go_out_at_the_flush() {
        let (emit, got) = recorder();
        let mut d = Deltas::new(Some(&emit), &request(Some(7)));
        let mut chunks = vec![
            StreamChunk::ReasoningDelta {
                index: 0,
                text: "think".into(),
            },
            text(1, "Hel"),
            text(1, "lo"),
        ];
        d.take(&chunks);
        // The reasoning piece went out when the text block began; the text waits for the flush.
        assert_eq!(
            *got.lock().unwrap(),
            [(7, 0, DeltaKind::Reasoning, "think".to_owned())]
        );
        d.flush();
        chunks.push(StreamChunk::ToolCallDelta {
            index: 0,
            id: "c".into(),
            name: None,
            arguments_delta: "{}".into(),
        });
        chunks.push(text(1, "!"));
        d.take(&chunks);
        d.flush();
        d.flush();
        assert_eq!(
            got.lock().unwrap()[1..],
            [
                (7, 1, DeltaKind::Text, "Hello".to_owned()),
                (7, 1, DeltaKind::Text, "!".to_owned())
            ]
        );
    }

    #[test]
    fn no_stream_id_or_no_emitter_dispatches_nothing() {
        let (emit, got) = recorder();
        for mut d in [
            Deltas::new(Some(&emit), &request(None)),
            Deltas::new(None, &request(Some(1))),
            Deltas::off(),
        ] {
            assert!(!d.is_on());
            d.take(&[text(0, "x")]);
            d.flush();
        }
        assert!(got.lock().unwrap().is_empty());
    }
}
