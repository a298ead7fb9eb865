//! What the firewall's listeners do to their payloads, as plain functions over a [`Vault`]
//! (the SDK wiring is in `lib.rs`):
//!
//! - inbound (SEC-02): [`fill_args`] fills aliases in `tools/execute`'s parsed `args` (the
//!   logged `arguments` text keeps the aliases);
//! - outbound (SEC-03): [`scrub_json_text`] scrubs the body's whole `ToolResult` (content *and*
//!   meta) on its way out of `tools/execute`; [`scrub_post_decision`] makes the
//!   `tools/post-execute` decision carry scrubbed content (the decision can replace only
//!   `content`, hence the scrub of `meta` one stage earlier); [`scrub_request`] scrubs an
//!   `LlmRequest`'s `system` and `messages` before the adapter sees them;
//! - the prompt: [`alias_section`] tells the model which aliases exist, never values.

use keel_plugin_api::events::Json;
use keel_plugin_api::services::prompt::PromptSection;
use serde_json::{Value, json};

use crate::vault::Vault;

/// Id of the prompt section listing the aliases.
pub const SECTION_ID: &str = "firewall.secrets";
/// Its sort key (late: after the persona and the tool guidance).
pub const SECTION_ORDER: i64 = 900;

fn parse(json: &Json) -> Option<Value> {
    serde_json::from_str(json.text.as_str()).ok()
}

fn text(value: &Value) -> Json {
    Json {
        text: value.to_string().into(),
    }
}

/// The parsed arguments with aliases filled, or `None` when nothing changed (or they are not
/// JSON, which the pipeline reports itself).
pub fn fill_args(vault: &Vault, args: &Json) -> Option<Json> {
    // Nothing stored, nothing to fill: no parse on the hot path.
    if vault.is_empty() {
        return None;
    }
    let mut v = parse(args)?;
    vault.fill_json(&mut v).then(|| text(&v))
}

/// A JSON document with every string scrubbed, or `None` when nothing changed. A document
/// that is not JSON is scrubbed as text.
pub fn scrub_json_text(vault: &Vault, doc: &Json) -> Option<Json> {
    if vault.is_empty() {
        return None;
    }
    match parse(doc) {
        Some(mut v) => vault.scrub_json(&mut v).then(|| text(&v)),
        None => vault
            .scrub(doc.text.as_str())
            .map(|t| Json { text: t.into() }),
    }
}

/// The content of a `ToolResult` document.
pub fn result_content(result: &Json) -> Option<String> {
    parse(result)?
        .get("content")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// The decision to return from `tools/post-execute`, given what the rest of the chain decided
/// (`decision`) and the result's content before (`original`) and after (`scrubbed`) the
/// scrub: an `accept` carries scrubbed content whenever anything changed, a `block`'s
/// feedback is scrubbed, anything else passes as it is.
pub fn scrub_post_decision(
    vault: &Vault,
    decision: &Json,
    original: Option<&str>,
    scrubbed: Option<&str>,
) -> Json {
    let Some(mut d) = parse(decision) else {
        return decision.clone();
    };
    match d.get("kind").and_then(Value::as_str) {
        Some("accept") => {
            let replaced = d.get("content").and_then(Value::as_str).map(str::to_owned);
            let content = match replaced {
                Some(c) => vault.scrub(&c),
                None => scrubbed.filter(|s| Some(*s) != original).map(str::to_owned),
            };
            if let (Some(c), Some(obj)) = (content, d.as_object_mut()) {
                obj.insert("content".into(), Value::String(c));
            }
        }
        Some("block") => {
            if let Some(f) = d.get_mut("feedback") {
                vault.scrub_json(f);
            }
        }
        _ => return decision.clone(),
    }
    text(&d)
}

/// The `LlmRequest` with `system` and `messages` scrubbed, or `None` when nothing changed.
pub fn scrub_request(vault: &Vault, request: &Json) -> Option<Json> {
    // The request holds the whole history: with nothing stored, it is not parsed at all.
    if vault.is_empty() {
        return None;
    }
    let mut v = parse(request)?;
    let mut changed = false;
    for key in ["system", "messages"] {
        if let Some(part) = v.get_mut(key) {
            changed |= vault.scrub_json(part);
        }
    }
    changed.then(|| text(&v))
}

/// The prompt section naming the aliases, or `None` without secrets.
pub fn alias_section(vault: &Vault) -> Option<PromptSection> {
    let aliases = vault.aliases();
    if aliases.is_empty() {
        return None;
    }
    let list: Vec<String> = aliases.iter().map(|a| format!("- {a}")).collect();
    Some(PromptSection {
        id: SECTION_ID.to_owned(),
        order: SECTION_ORDER,
        text: format!(
            "# Secrets\nThese secrets are available by alias:\n{}\nPass sec_NAME where the \
             secret is needed (in a tool argument, e.g. a shell command or a header); it is \
             filled in when the tool runs. You will never see the value: tool output shows the \
             alias in its place.",
            list.join("\n")
        ),
        complete: false,
    })
}

/// Adds (or replaces) [`alias_section`] in a `[PromptSection]` document.
pub fn add_section(vault: &Vault, sections: &Json) -> Option<Json> {
    let section = alias_section(vault)?;
    let mut list: Vec<Value> = parse(sections)
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default();
    list.retain(|s| s.get("id").and_then(Value::as_str) != Some(SECTION_ID));
    list.push(json!(section));
    Some(text(&Value::Array(list)))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::store::SecretValue;

    fn vault() -> Vault {
        let mut s = BTreeMap::new();
        s.insert("KEY".to_owned(), SecretValue::new("sk-live-123"));
        Vault::new(s).unwrap()
    }

    fn j(v: Value) -> Json {
        text(&v)
    }

    fn val(j: &Json) -> Value {
        parse(j).unwrap()
    }

    #[test]
    fn sec02_inbound_fill_reaches_the_parsed_args() {
        let v = vault();
        let filled = fill_args(&v, &j(json!({"command": "curl -H 'X: sec_KEY'"}))).unwrap();
        assert_eq!(val(&filled)["command"], "curl -H 'X: sk-live-123'");
        assert!(fill_args(&v, &j(json!({"command": "ls"}))).is_none());
        assert!(
            fill_args(
                &v,
                &Json {
                    text: "not json".into()
                }
            )
            .is_none()
        );
    }

    #[test]
    fn sec03_outbound_tool_result_content_and_meta_are_scrubbed() {
        let v = vault();
        let result =
            j(json!({"content": "key=sk-live-123", "meta": {"before": "c2stbGl2ZS0xMjM="}}));
        let out = val(&scrub_json_text(&v, &result).unwrap());
        assert_eq!(
            out,
            json!({"content": "key=sec_KEY", "meta": {"before": "sec_KEY"}})
        );
        assert!(scrub_json_text(&v, &j(json!({"content": "clean"}))).is_none());
    }

    #[test]
    fn sec03_outbound_post_execute_decisions_carry_scrubbed_content() {
        let v = vault();
        let accept = j(json!({"kind": "accept"}));
        let d = scrub_post_decision(&v, &accept, Some("k sk-live-123"), Some("k sec_KEY"));
        assert_eq!(val(&d), json!({"kind": "accept", "content": "k sec_KEY"}));
        let d = scrub_post_decision(&v, &accept, Some("clean"), Some("clean"));
        assert_eq!(val(&d), json!({"kind": "accept"}));
        // A later listener's replacement is scrubbed too.
        let replaced = j(json!({"kind": "accept", "content": "echo sk-live-123"}));
        let d = scrub_post_decision(&v, &replaced, None, None);
        assert_eq!(val(&d)["content"], "echo sec_KEY");
        let block = j(json!({"kind": "block", "feedback": "saw sk-live-123"}));
        assert_eq!(
            val(&scrub_post_decision(&v, &block, None, None))["feedback"],
            "saw sec_KEY"
        );
    }

    #[test]
    fn sec03_outbound_llm_request_messages_and_system_are_scrubbed() {
        let v = vault();
        let req = j(json!({
            "config": {"provider": "p", "model": "m"},
            "system": "use sk-live-123",
            "messages": [{"role": "tool", "content": [{"type": "text", "text": "sk-live-123"}]}],
            "tools": []
        }));
        let out = val(&scrub_request(&v, &req).unwrap());
        assert_eq!(out["system"], "use sec_KEY");
        assert_eq!(out["messages"][0]["content"][0]["text"], "sec_KEY");
        assert!(!out.to_string().contains("sk-live-123"));
        assert!(scrub_request(&v, &j(json!({"messages": []}))).is_none());
    }

    #[test]
    fn the_prompt_lists_aliases_never_values() {
        let v = vault();
        let out = add_section(&v, &j(json!([{"id": "base", "order": 0, "text": "hi"}]))).unwrap();
        let list = val(&out);
        assert_eq!(list.as_array().unwrap().len(), 2);
        let text = list[1]["text"].as_str().unwrap();
        assert!(text.contains("- sec_KEY") && text.contains("never see the value"));
        assert!(!list.to_string().contains("sk-live-123"));
        // Idempotent by id.
        assert_eq!(
            val(&add_section(&v, &out).unwrap())
                .as_array()
                .unwrap()
                .len(),
            2
        );
        assert!(add_section(&Vault::new(BTreeMap::new()).unwrap(), &out).is_none());
    }
}
