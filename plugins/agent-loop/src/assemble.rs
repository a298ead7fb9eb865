//! Folds a model's chunk stream into one assistant reply: text and reasoning concatenated,
//! signed reasoning blocks kept per index with their provider token (issue 15 item 2: the
//! provider wants them back verbatim), tool calls assembled per index (id and name from the first delta, argument text appended
//! raw, B14), usage, and the finish reason. A stream that breaks the chunk protocol (no
//! `finish`, chunks after it, a call without id or name) is itself a failure, so the loop never
//! logs a half-understood reply.

use std::collections::BTreeMap;

use keel_plugin_api::conversation::ReasoningBlock;
use keel_plugin_api::services::llm::{FinishReason, LlmCode, LlmFailure, StreamChunk, Usage};
use keel_plugin_api::services::tools::ModelCall;

/// One assembled reply.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// Assistant text.
    pub text: String,
    /// Reasoning text (kept in the log, not sent back).
    pub reasoning: String,
    /// The reasoning blocks the provider signed, in index order (sent back with the message).
    pub reasoning_blocks: Vec<ReasoningBlock>,
    /// Tool calls in index order.
    pub calls: Vec<ModelCall>,
    /// Usage, when the provider reported it.
    pub usage: Option<Usage>,
    /// How the stream ended.
    pub finish: FinishReason,
}

#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Assembles `chunks`.
pub fn assemble(chunks: &[StreamChunk]) -> Reply {
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut blocks: BTreeMap<u32, ReasoningBlock> = BTreeMap::new();
    let mut calls: BTreeMap<u32, PartialCall> = BTreeMap::new();
    let mut usage = None;
    let mut finish = None;
    let mut protocol_error = None;
    for chunk in chunks {
        if finish.is_some() {
            protocol_error = Some("a chunk followed the finish chunk");
            break;
        }
        match chunk {
            StreamChunk::TextDelta { text: t, .. } => text.push_str(t),
            StreamChunk::ReasoningDelta { index, text: t } => {
                reasoning.push_str(t);
                block(&mut blocks, *index).text.push_str(t);
            }
            StreamChunk::ReasoningSignature {
                index,
                signature,
                redacted,
            } => {
                let b = block(&mut blocks, *index);
                b.signature.push_str(signature);
                b.redacted |= *redacted;
            }
            StreamChunk::ToolCallDelta {
                index,
                id,
                name,
                arguments_delta,
            } => {
                let c = calls.entry(*index).or_default();
                if c.id.is_empty() && !id.is_empty() {
                    c.id.clone_from(id);
                }
                if let Some(n) = name
                    && c.name.is_empty()
                {
                    c.name.clone_from(n);
                }
                c.arguments.push_str(arguments_delta);
            }
            StreamChunk::Usage { usage: u } => usage = Some(*u),
            StreamChunk::Finish { reason } => finish = Some(reason.clone()),
            StreamChunk::BlockStart { .. } | StreamChunk::BlockEnd { .. } => {}
        }
    }
    let calls: Vec<ModelCall> = calls
        .into_values()
        .map(|c| ModelCall {
            id: c.id,
            name: c.name,
            arguments: c.arguments,
        })
        .collect();
    if calls.iter().any(|c| c.id.is_empty() || c.name.is_empty()) {
        protocol_error = Some("a tool call arrived without an id or a name");
    }
    let finish = match (protocol_error, finish) {
        (Some(why), _) => protocol_failure(why),
        (None, None) => protocol_failure("the stream ended without a finish chunk"),
        (None, Some(f)) => f,
    };
    // Only signed blocks go back to the provider; unsigned reasoning stays log-only text.
    let reasoning_blocks = blocks
        .into_values()
        .filter(|b| !b.signature.is_empty())
        .collect();
    Reply {
        text,
        reasoning,
        reasoning_blocks,
        calls,
        usage,
        finish,
    }
}

fn block(blocks: &mut BTreeMap<u32, ReasoningBlock>, index: u32) -> &mut ReasoningBlock {
    blocks.entry(index).or_insert_with(|| ReasoningBlock {
        text: String::new(),
        signature: String::new(),
        redacted: false,
    })
}

fn protocol_failure(why: &str) -> FinishReason {
    FinishReason::Error {
        failure: LlmFailure::new(
            LlmCode::Transport,
            format!("the adapter broke the chunk protocol: {why}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(index: u32, id: &str, name: Option<&str>, args: &str) -> StreamChunk {
        StreamChunk::ToolCallDelta {
            index,
            id: id.into(),
            name: name.map(str::to_owned),
            arguments_delta: args.into(),
        }
    }

    #[test]
    fn b14_calls_assemble_per_index_with_raw_arguments() {
        let chunks = vec![
            StreamChunk::TextDelta {
                index: 0,
                text: "Reading ".into(),
            },
            delta(1, "b", Some("glob"), "{\"pat"),
            delta(0, "a", Some("read_file"), "{\"path\":"),
            delta(1, "", None, "tern\":\"*\"}"),
            delta(0, "", None, " \"x\"}"),
            StreamChunk::TextDelta {
                index: 0,
                text: "files".into(),
            },
            StreamChunk::Usage {
                usage: Usage {
                    input_tokens: 3,
                    output_tokens: 4,
                },
            },
            StreamChunk::Finish {
                reason: FinishReason::ToolCalls,
            },
        ];
        let r = assemble(&chunks);
        assert_eq!(r.text, "Reading files");
        assert_eq!(r.calls.len(), 2);
        assert_eq!(r.calls[0].id, "a");
        assert_eq!(r.calls[0].arguments, "{\"path\": \"x\"}");
        assert_eq!(r.calls[1].name, "glob");
        assert_eq!(r.calls[1].arguments, "{\"pattern\":\"*\"}");
        assert_eq!(r.finish, FinishReason::ToolCalls);
        assert_eq!(r.usage.map(|u| u.output_tokens), Some(4));
    }

    // Issue 15 item 2: signed reasoning blocks are kept per index with their token; unsigned
    // reasoning (an OpenAI-compatible server's) is text only.
    #[test]
    fn signed_reasoning_blocks_are_kept_in_order_with_their_signature() {
        let r = assemble(&[
            StreamChunk::ReasoningDelta {
                index: 0,
                text: "let me ".into(),
            },
            StreamChunk::ReasoningDelta {
                index: 0,
                text: "think".into(),
            },
            StreamChunk::ReasoningSignature {
                index: 0,
                signature: "sig-0".into(),
                redacted: false,
            },
            StreamChunk::ReasoningSignature {
                index: 1,
                signature: "opaque".into(),
                redacted: true,
            },
            StreamChunk::ReasoningDelta {
                index: 2,
                text: "unsigned".into(),
            },
            delta(3, "c", Some("glob"), "{}"),
            StreamChunk::Finish {
                reason: FinishReason::ToolCalls,
            },
        ]);
        assert_eq!(r.reasoning, "let me thinkunsigned");
        assert_eq!(
            r.reasoning_blocks,
            vec![
                ReasoningBlock {
                    text: "let me think".into(),
                    signature: "sig-0".into(),
                    redacted: false
                },
                ReasoningBlock {
                    text: String::new(),
                    signature: "opaque".into(),
                    redacted: true
                },
            ]
        );
    }

    #[test]
    fn b14_protocol_breaks_become_failures() {
        let no_finish = assemble(&[StreamChunk::TextDelta {
            index: 0,
            text: "x".into(),
        }]);
        assert!(matches!(no_finish.finish, FinishReason::Error { .. }));
        let after = assemble(&[
            StreamChunk::Finish {
                reason: FinishReason::Stop,
            },
            StreamChunk::TextDelta {
                index: 0,
                text: "late".into(),
            },
        ]);
        assert!(matches!(after.finish, FinishReason::Error { .. }));
        let nameless = assemble(&[
            delta(0, "a", None, "{}"),
            StreamChunk::Finish {
                reason: FinishReason::ToolCalls,
            },
        ]);
        assert!(matches!(nameless.finish, FinishReason::Error { .. }));
    }
}
