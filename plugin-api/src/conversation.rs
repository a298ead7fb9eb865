//! The conversation model every agent plugin shares: a [`Message`] with its [`Content`], the
//! [`ToolCall`]s and signed [`ReasoningBlock`]s an assistant message carries, and token
//! [`Usage`].
//!
//! The session projects its log into these (SES-03); the agent loop hands them, frozen, to
//! `keel.llm`; an adapter parses each one once, when it first meets it, and maps it to its
//! provider's wire shape. The serde form *is* the projection's JSON (`{"role":"user",…}`), so
//! the session log, `keel sessions show` and a `Frozen` message all read the same.

use serde::{Deserialize, Serialize};

pub use crate::services::llm::Usage;

/// One message of the model history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum Message {
    /// A system message inside the history (the system prompt itself travels apart).
    System {
        /// Its text.
        #[serde(default)]
        content: Option<Content>,
    },
    /// What the user said.
    User {
        /// Its content.
        #[serde(default)]
        content: Option<Content>,
    },
    /// What the model answered.
    Assistant {
        /// Its text (`None` when it only called tools).
        #[serde(default)]
        content: Option<Content>,
        /// The calls it made, in model order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
        /// Signed reasoning blocks the provider wants back with this message, in model order
        /// (issue 15 item 2; absent in older logs and for providers that sign nothing).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        reasoning_blocks: Vec<ReasoningBlock>,
    },
    /// One tool call's result.
    Tool {
        /// The call it answers.
        tool_call_id: String,
        /// What the model reads.
        #[serde(default)]
        content: Option<Content>,
        /// The call failed (the content says why).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
}

/// A message's content: text, a list of parts, or any other JSON a plugin put there (kept
/// as it is, never dropped).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// Content parts (`{"type":"text","text":…}`, images, …), passed on as they are.
    Parts(Vec<serde_json::Value>),
    /// Anything else.
    Other(serde_json::Value),
}

impl Content {
    /// The content as one string: text as is, anything else as its JSON text.
    pub fn to_text(&self) -> String {
        match self {
            Content::Text(text) => text.clone(),
            Content::Parts(parts) => serde_json::Value::from(parts.clone()).to_string(),
            Content::Other(value) => value.to_string(),
        }
    }
}

/// One reasoning block as the provider signed it: Anthropic requires its thinking blocks back,
/// signature intact, before the tool calls of the assistant turn it replays. Opaque to keel:
/// adapters that sign nothing never produce one and ignore them in the history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReasoningBlock {
    /// The reasoning text (empty for a redacted block).
    #[serde(default)]
    pub text: String,
    /// The provider's token, verbatim (for a redacted block: its encrypted data).
    #[serde(default)]
    pub signature: String,
    /// The provider withheld the text (`redacted_thinking`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub redacted: bool,
}

/// One tool call as the model produced it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Call id.
    #[serde(default)]
    pub id: String,
    /// Tool name.
    #[serde(default)]
    pub name: String,
    /// Raw argument text, exactly as produced (never re-encoded).
    #[serde(default, deserialize_with = "raw_arguments")]
    pub arguments: String,
}

/// Arguments are text; an older log (or a plugin) may hold a JSON value: keep its text.
fn raw_arguments<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let value = serde_json::Value::deserialize(d)?;
    Ok(match value {
        serde_json::Value::Null => "{}".to_owned(),
        serde_json::Value::String(s) => s,
        other => other.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_projection_shapes_parse_and_print_back_unchanged() {
        for value in [
            json!({"role": "user", "content": "hi"}),
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "name": "shell", "arguments": "{\"command\":\"ls\"}"}]}),
            json!({"role": "assistant", "content": "done"}),
            json!({"role": "assistant", "content": "", "reasoning_blocks": [
                {"text": "hm", "signature": "sig"}, {"text": "", "signature": "d", "redacted": true}],
                "tool_calls": [{"id": "c", "name": "x", "arguments": "{}"}]}),
            json!({"role": "tool", "tool_call_id": "c1", "content": "out", "is_error": true}),
            json!({"role": "user", "content": [{"type": "text", "text": "a"}]}),
        ] {
            let m: Message = serde_json::from_value(value.clone()).unwrap();
            assert_eq!(serde_json::to_value(&m).unwrap(), value);
        }
    }

    #[test]
    fn structured_arguments_keep_their_text() {
        let m: Message = serde_json::from_value(json!({"role": "assistant", "content": "",
            "tool_calls": [{"id": "c", "name": "x", "arguments": {"a": 1}}]}))
        .unwrap();
        let Message::Assistant { tool_calls, .. } = m else {
            panic!("not an assistant message")
        };
        assert_eq!(tool_calls[0].arguments, r#"{"a":1}"#);
    }
}
