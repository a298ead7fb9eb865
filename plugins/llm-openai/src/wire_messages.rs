//! keel's frozen history → OpenAI chat-completions messages, each message translated once.
//!
//! Why a cache: the history grows by one or two messages per step, and every request sends all
//! of it. Each message arrives as a `Frozen` document shared from the session's projection, so
//! its identity is stable from request to request; the cache keeps the OpenAI text of every
//! message it has seen, keyed by that identity (holding a reference, so the identity cannot be
//! reused while cached). A request then parses and translates only its new messages; the body
//! is a list of shared byte chunks — the frozen text itself where OpenAI's shape is keel's
//! (tool results, plain messages: the bulk of a history), the cached translation otherwise —
//! so no pass copies the history at all before the socket write. Entries unused for
//! [`KEEP_FOR`] requests go (a replaced range of the history, a finished session).

use std::collections::HashMap;

use bytes::Bytes;
use keel_plugin_api::conversation::{Content, Message, ToolCall};
use keel_plugin_api::sdk::Frozen;
use serde_json::{Value, json};

/// Requests an entry survives without being used (several sessions may share one adapter).
pub const KEEP_FOR: u64 = 8;

struct Entry {
    /// The OpenAI text: the frozen document's own buffer when the shapes agree byte for byte
    /// (a tool result, a plain user or assistant message), else the translation.
    bytes: Bytes,
    /// Whether `bytes` is a translation (a copy) rather than the frozen text.
    copied: bool,
    last_used: u64,
}

/// A frozen document's text as `Bytes`, sharing its buffer (the `Frozen` keeps it alive).
struct FrozenText(Frozen);

impl AsRef<[u8]> for FrozenText {
    fn as_ref(&self) -> &[u8] {
        self.0.as_str().as_bytes()
    }
}

/// The translated messages of recent requests.
#[derive(Default)]
pub struct MessageCache {
    generation: u64,
    entries: HashMap<usize, Entry>,
    translated: u64,
}

impl std::fmt::Debug for MessageCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "MessageCache({} held, {} translated)",
            self.entries.len(),
            self.translated
        )
    }
}

impl MessageCache {
    /// The JSON array of `system` (when not empty) then `messages`, as chunks appended to
    /// `parts`; returns their total length in bytes.
    pub fn message_parts(
        &mut self,
        system: Option<&str>,
        messages: &[Frozen],
        parts: &mut Vec<Bytes>,
    ) -> usize {
        self.generation += 1;
        let generation = self.generation;
        let start = parts.len();
        parts.reserve(2 * messages.len() + 3);
        parts.push(Bytes::from_static(b"["));
        let mut first = true;
        if let Some(system) = system.filter(|s| !s.is_empty()) {
            parts.push(Bytes::from(
                json!({ "role": "system", "content": system }).to_string(),
            ));
            first = false;
        }
        for frozen in messages {
            if !first {
                parts.push(Bytes::from_static(b","));
            }
            first = false;
            let entry = self.entries.entry(frozen.identity()).or_insert_with(|| {
                self.translated += 1;
                let text = translate(frozen).to_string();
                let copied = text != frozen.as_str();
                Entry {
                    bytes: if copied {
                        Bytes::from(text)
                    } else {
                        Bytes::from_owner(FrozenText(frozen.clone()))
                    },
                    copied,
                    last_used: generation,
                }
            });
            entry.last_used = generation;
            parts.push(entry.bytes.clone());
        }
        parts.push(Bytes::from_static(b"]"));
        self.entries
            .retain(|_, e| e.last_used + KEEP_FOR > generation);
        parts[start..].iter().map(Bytes::len).sum()
    }

    /// The same array as one string (tests, logs).
    pub fn write_messages(&mut self, system: Option<&str>, messages: &[Frozen], out: &mut String) {
        let mut parts = Vec::new();
        self.message_parts(system, messages, &mut parts);
        for part in parts {
            out.push_str(&String::from_utf8_lossy(&part));
        }
    }

    /// How many held translations are copies (not the frozen text itself).
    pub fn copies(&self) -> usize {
        self.entries.values().filter(|e| e.copied).count()
    }

    /// How many messages were translated so far (each exactly once while cached).
    pub fn translated(&self) -> u64 {
        self.translated
    }

    /// How many translations are held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// One frozen message in OpenAI's shape: through the typed model, or, for a document that is
/// not a keel message (a plugin's own shape), leniently from its JSON.
pub fn translate(frozen: &Frozen) -> Value {
    match frozen.parse::<Message>() {
        Ok(m) => openai(&m),
        Err(_) => frozen
            .parse::<Value>()
            .map_or_else(|_| json!({"role": "user", "content": ""}), |v| message(&v)),
    }
}

/// Text content: a string as is, anything else as its JSON text, nothing as "".
fn text(content: Option<&Content>) -> Value {
    match content {
        None => json!(""),
        Some(Content::Text(s)) => json!(s),
        Some(Content::Parts(parts)) => json!(Value::from(parts.clone()).to_string()),
        Some(Content::Other(v)) => json!(v.to_string()),
    }
}

fn call(c: &ToolCall) -> Value {
    json!({
        "id": c.id,
        "type": "function",
        "function": { "name": c.name, "arguments": c.arguments }
    })
}

/// A typed message in OpenAI's shape.
pub fn openai(m: &Message) -> Value {
    match m {
        // With tool calls and no text the content is "", never null: OpenAI takes either,
        // llama-cpp-python refuses null (HTTP 500), every server takes "" (issue 11 item 3).
        // Signed reasoning blocks (`reasoning_blocks`) are another provider's; not sent here.
        Message::Assistant {
            content,
            tool_calls,
            ..
        } if !tool_calls.is_empty() => json!({
            "role": "assistant",
            "content": text(content.as_ref()),
            "tool_calls": tool_calls.iter().map(call).collect::<Vec<_>>(),
        }),
        Message::Assistant { content, .. } => {
            json!({ "role": "assistant", "content": text(content.as_ref()) })
        }
        Message::Tool {
            tool_call_id,
            content,
            ..
        } => json!({
            "role": "tool",
            "tool_call_id": tool_call_id,
            "content": text(content.as_ref()),
        }),
        Message::User { content } | Message::System { content } => {
            let role = if matches!(m, Message::User { .. }) {
                "user"
            } else {
                "system"
            };
            let content = match content {
                Some(Content::Parts(parts)) => Value::from(parts.clone()),
                other => text(other.as_ref()),
            };
            json!({ "role": role, "content": content })
        }
    }
}

/// Raw argument text: a string as is, anything else serialised.
fn arguments(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "{}".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

fn loose_text(v: Option<&Value>) -> Value {
    match v {
        None | Some(Value::Null) => json!(""),
        Some(Value::String(s)) => json!(s),
        Some(other) => json!(other.to_string()),
    }
}

/// The lenient path, for a document that is not a keel [`Message`] (an unknown role).
pub fn message(m: &Value) -> Value {
    let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
    match role {
        "assistant" => {
            let calls: Vec<Value> = m
                .get("tool_calls")
                .and_then(Value::as_array)
                .map(|calls| {
                    calls
                        .iter()
                        .map(|c| {
                            json!({
                                "id": c.get("id").and_then(Value::as_str).unwrap_or_default(),
                                "type": "function",
                                "function": {
                                    "name": c.get("name").and_then(Value::as_str).unwrap_or_default(),
                                    "arguments": arguments(c.get("arguments")),
                                }
                            })
                        })
                        .collect()
                })
                .unwrap_or_default();
            let content = loose_text(m.get("content"));
            if calls.is_empty() {
                json!({ "role": "assistant", "content": content })
            } else {
                json!({ "role": "assistant", "content": content, "tool_calls": calls })
            }
        }
        "tool" => json!({
            "role": "tool",
            "tool_call_id": m.get("tool_call_id").and_then(Value::as_str).unwrap_or_default(),
            "content": loose_text(m.get("content")),
        }),
        other => {
            let content = match m.get("content") {
                Some(c @ Value::Array(_)) => c.clone(),
                c => loose_text(c),
            };
            json!({ "role": other, "content": content })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frozen(v: Value) -> Frozen {
        Frozen::freeze(&v).unwrap()
    }

    // Issue 12 item 2: a message is translated once, however many requests resend it.
    #[test]
    fn each_message_is_translated_once_across_requests() {
        let mut cache = MessageCache::default();
        let mut history = vec![frozen(json!({"role": "user", "content": "hi"}))];
        for step in 0..50 {
            let mut out = String::new();
            cache.write_messages(Some("sys"), &history, &mut out);
            let parsed: Vec<Value> = serde_json::from_str(&out).unwrap();
            assert_eq!(parsed.len(), history.len() + 1);
            history.push(frozen(
                json!({"role": "assistant", "content": format!("s{step}")}),
            ));
        }
        assert_eq!(cache.translated(), 50);
        assert_eq!(cache.len(), 50);
        // Plain user and assistant messages are the same text in both shapes: no copy kept.
        assert_eq!(cache.copies(), 0);
    }

    #[test]
    fn only_messages_whose_shape_changes_are_copied_the_rest_share_the_frozen_buffer() {
        let mut cache = MessageCache::default();
        let history = vec![
            frozen(json!({"role": "user", "content": "hi"})),
            frozen(json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "name": "shell", "arguments": "{}"}]})),
            frozen(json!({"role": "tool", "tool_call_id": "c1", "content": "x".repeat(8000)})),
        ];
        let mut parts = Vec::new();
        let len = cache.message_parts(Some("sys"), &history, &mut parts);
        assert_eq!(
            cache.copies(),
            1,
            "only the assistant call message changes shape"
        );
        let tool = parts.iter().find(|p| p.len() > 8000).unwrap();
        assert_eq!(
            tool.as_ptr(),
            history[2].as_str().as_ptr(),
            "the tool result goes out from the frozen buffer itself"
        );
        let out: Vec<u8> = parts.concat();
        assert_eq!(out.len(), len);
        let parsed: Vec<Value> = serde_json::from_slice(&out).unwrap();
        assert_eq!(parsed[3]["content"].as_str().map(str::len), Some(8000));
    }

    #[test]
    fn entries_of_messages_no_longer_sent_are_dropped() {
        let mut cache = MessageCache::default();
        let old = vec![frozen(json!({"role": "user", "content": "old"}))];
        let mut out = String::new();
        cache.write_messages(None, &old, &mut out);
        let new = vec![frozen(json!({"role": "user", "content": "new"}))];
        for _ in 0..KEEP_FOR {
            out.clear();
            cache.write_messages(None, &new, &mut out);
        }
        assert_eq!(cache.len(), 1);
        assert_eq!(out, r#"[{"role":"user","content":"new"}]"#);
    }

    #[test]
    fn the_typed_and_the_lenient_translation_agree() {
        for v in [
            json!({"role": "user", "content": "hi"}),
            json!({"role": "user", "content": [{"type": "text", "text": "a"}]}),
            json!({"role": "user", "content": {"k": 1}}),
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "name": "shell", "arguments": "{}"}]}),
            json!({"role": "assistant", "content": "ok"}),
            json!({"role": "tool", "tool_call_id": "c1", "content": "out", "is_error": true}),
            json!({"role": "tool", "tool_call_id": "c1", "content": null}),
        ] {
            let typed: Message = serde_json::from_value(v.clone()).unwrap();
            assert_eq!(openai(&typed), message(&v), "{v}");
        }
        assert_eq!(
            translate(&frozen(json!({"role": "critic", "content": "x"}))),
            json!({"role": "critic", "content": "x"})
        );
    }
}
