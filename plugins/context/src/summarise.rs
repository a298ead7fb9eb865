//! The summarise strategy (issue 14 item 2, optional and off by default): a side request to
//! the model replaces a run with its summary.
//!
//! CTX-02 says overflow must not *depend* on a model summary, so any failure here — the side
//! request errs, is refused, or answers no text — falls back to sinking the same run; the
//! caller sees a sink, never a failed turn. The prompt is the profile's file (the row's
//! `summarise.prompt`), read at activation. What the model summarises is the run as a plain
//! transcript, each message clipped so the side request stays well inside the window; the
//! originals stay reachable through the cold tier either way.

use keel_plugin_api::sdk::Frozen;
use keel_plugin_api::services::llm::{FinishReason, LlmCallConfig, LlmRequest, StreamChunk};
use keel_plugin_api::services::session::SurfaceNode;
use serde_json::{Value, json};

use crate::manager::Manager;
use crate::stub::{Sunk, text_of};

/// The most of one message the transcript carries.
const PER_MESSAGE: usize = 2048;

/// The run as a transcript of at most `budget` bytes (each message clipped, oldest dropped
/// first when the whole does not fit).
pub fn transcript(nodes: &[&SurfaceNode], budget: usize) -> String {
    let mut parts: Vec<String> = Vec::new();
    for n in nodes {
        let m: Value = n.message.parse().unwrap_or(Value::Null);
        let role = m.get("role").and_then(Value::as_str).unwrap_or("?");
        let mut body = text_of(m.get("content"));
        if let Some(calls) = m.get("tool_calls").and_then(Value::as_array) {
            for c in calls {
                body.push_str(&format!(
                    "\n(calls {} {})",
                    text_of(c.get("name")),
                    text_of(c.get("arguments"))
                ));
            }
        }
        if body.len() > PER_MESSAGE {
            let mut end = PER_MESSAGE;
            while !body.is_char_boundary(end) {
                end -= 1;
            }
            body = format!("{} …[{} more bytes]", &body[..end], body.len() - end);
        }
        parts.push(format!("[{role} cold:{}]\n{body}", n.seq));
    }
    let mut total: usize = parts.iter().map(|p| p.len() + 2).sum();
    let mut first = 0;
    while total > budget && first + 1 < parts.len() {
        total -= parts[first].len() + 2;
        first += 1;
    }
    parts[first..].join("\n\n")
}

impl Manager {
    /// The model's summary of the run `seqs`, or `None` (the caller sinks instead).
    pub(crate) async fn summarise(
        &self,
        base: &LlmCallConfig,
        sid: &str,
        seqs: &[u64],
        view: &[SurfaceNode],
        sunk: &Sunk,
        budget: usize,
    ) -> Option<String> {
        let (Some(prompt), Some(cfg)) = (&self.summary_prompt, &self.config.summarise) else {
            return None;
        };
        let nodes: Vec<&SurfaceNode> = view.iter().filter(|n| seqs.contains(&n.seq)).collect();
        let text = format!(
            "Summarise these {} earlier messages of the conversation ({} of history):\n\n{}",
            sunk.count(),
            crate::stub::size(sunk.bytes()),
            transcript(&nodes, budget)
        );
        let message = Frozen::freeze(&json!({ "role": "user", "content": text })).ok()?;
        let config = LlmCallConfig {
            provider: cfg
                .provider
                .clone()
                .unwrap_or_else(|| base.provider.clone()),
            model: cfg.model.clone().unwrap_or_else(|| base.model.clone()),
            max_tokens: Some(cfg.max_tokens),
            ..LlmCallConfig::default()
        };
        let request = LlmRequest {
            session_id: Some(sid.to_owned()),
            config,
            system: Some(prompt.clone()),
            messages: vec![message],
            tools: Vec::new(),
            stream_id: None,
        };
        let response = match self.llm.stream(request).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(session = %sid, error = %e, "summary request failed; sinking instead");
                return None;
            }
        };
        let mut summary = String::new();
        for chunk in &response.chunks {
            match chunk {
                StreamChunk::TextDelta { text, .. } => summary.push_str(text),
                StreamChunk::Finish {
                    reason: FinishReason::Error { failure } | FinishReason::Aborted { failure },
                } => {
                    tracing::warn!(session = %sid, code = %failure.code, "summary request failed; sinking instead");
                    return None;
                }
                _ => {}
            }
        }
        if summary.trim().is_empty() {
            tracing::warn!(session = %sid, "the summary was empty; sinking instead");
            return None;
        }
        Some(summary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_plugin_api::services::session::SurfaceRole;

    fn node(seq: u64, v: Value) -> SurfaceNode {
        SurfaceNode {
            seq,
            replacement: false,
            role: SurfaceRole::User,
            message: Frozen::freeze(&v).unwrap(),
        }
    }

    #[test]
    fn a_transcript_names_roles_and_refs_clips_and_drops_the_oldest_first() {
        let a = node(
            3,
            json!({"role": "assistant", "content": "", "tool_calls": [{"id": "c", "name": "read_file", "arguments": "{}"}]}),
        );
        let b = node(
            5,
            json!({"role": "tool", "tool_call_id": "c", "content": "x".repeat(5000)}),
        );
        let t = transcript(&[&a, &b], 100_000);
        assert!(
            t.starts_with("[assistant cold:3]\n\n(calls read_file {})"),
            "{t}"
        );
        assert!(
            t.contains("[tool cold:5]") && t.contains("…[2952 more bytes]"),
            "{t}"
        );
        let t = transcript(&[&a, &b], 2100);
        assert!(!t.contains("cold:3") && t.contains("cold:5"), "{t}");
    }
}
