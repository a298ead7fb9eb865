//! What the firewall's listeners do to their payloads, as plain functions over a [`Vault`]
//! (the SDK wiring is in `lib.rs`):
//!
//! - inbound (SEC-02): [`fill_args`] fills aliases in `tools/execute`'s parsed `args` (the
//!   logged `arguments` text keeps the aliases): as text, except in bash source
//!   ([`script_arg`]), where each becomes a quoted expansion of a variable handed over as a
//!   [`SecretEnv`] ([`crate::bash`], issue 10 item 9);
//! - outbound (SEC-03): [`scrub_result`] scrubs the body's whole `ToolResult` (content *and*
//!   meta) on its way out of `tools/execute`; [`scrub_post_decision`] makes the
//!   `tools/post-execute` decision carry scrubbed content (the decision can replace only
//!   `content`, hence the scrub of `meta` one stage earlier); [`scrub_request`] scrubs an
//!   `LlmRequest`'s `system` and `messages` before the adapter sees them;
//! - the prompt: [`alias_section`] tells the model which aliases exist, never values.

use keel_plugin_api::events::{Json, Typed};
use keel_plugin_api::sdk::Payload;
use keel_plugin_api::services::prompt::PromptSection;
use keel_plugin_api::services::secret_env::{SECRET_ENV_ARG, SecretEnv, SecretEnvName, script_arg};
use keel_plugin_api::services::tools::{PostDecision, ToolResult};
use serde_json::Value;

use crate::bash;
use crate::store::alias;
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

/// What the inbound fill made of a call's arguments.
#[derive(Debug, Clone, PartialEq)]
pub enum Filled {
    /// Nothing to fill (or not JSON, which the pipeline reports itself).
    Unchanged,
    /// The arguments to run with.
    Args(Json),
    /// An alias stands where no value can reach (a quoted heredoc): the call must not run.
    Refused(String),
}

/// The parsed arguments of a call of `tool` with aliases filled: as text, except in the
/// tool's bash source, where each becomes `"${sec_NAME}"` (as its quoting needs) and the
/// values travel under [`SECRET_ENV_ARG`]. A reserved argument the model wrote is dropped.
pub fn fill_args(vault: &Vault, tool: &str, args: &Json) -> Filled {
    // Neither an alias nor the reserved key can be spelled without one of these (a JSON
    // string spells a letter otherwise only as `\u…`): no parse on the hot path.
    let raw = args.text.as_str();
    let reserved = raw.contains(SECRET_ENV_ARG) || raw.contains("\\u");
    if !reserved && (vault.is_empty() || !raw.contains("sec_")) {
        return Filled::Unchanged;
    }
    let Some(mut v) = parse(args) else {
        return Filled::Unchanged;
    };
    let Some(obj) = v.as_object_mut() else {
        return Filled::Unchanged;
    };
    let mut changed = obj.remove(SECRET_ENV_ARG).is_some();
    let mut env = SecretEnv::default();
    let script = script_arg(tool);
    for (key, value) in obj.iter_mut() {
        match value {
            Value::String(source) if Some(key.as_str()) == script => {
                match bash::rewrite(source, |name| vault.secret(name).is_some()) {
                    Err(refusal) => return Filled::Refused(refusal.to_string()),
                    Ok(None) => {}
                    Ok(Some(rewritten)) => {
                        for name in &rewritten.names {
                            let (Ok(var), Some(secret)) =
                                (SecretEnvName::new(&alias(name)), vault.secret(name))
                            else {
                                continue;
                            };
                            env.insert(var, secret.to_owned());
                        }
                        *source = rewritten.command;
                        changed = true;
                    }
                }
            }
            other => changed |= vault.fill_json(other),
        }
    }
    env.put(&mut v);
    if changed {
        Filled::Args(text(&v))
    } else {
        Filled::Unchanged
    }
}

/// A JSON document with every string scrubbed, or `None` when nothing changed. A document
/// that is not JSON is scrubbed as text.
pub fn scrub_json_text(vault: &Vault, doc: &Json) -> Option<Json> {
    if !vault.may_occur_in_json(doc.text.as_str()) {
        return None;
    }
    match parse(doc) {
        Some(mut v) => vault.scrub_json(&mut v).then(|| text(&v)),
        None => vault
            .scrub(doc.text.as_str())
            .map(|t| Json { text: t.into() }),
    }
}

/// `tools/execute`'s result with every string scrubbed (content and meta), or `None` when
/// nothing changed. A document that is not a `ToolResult` (a foreign listener's) is scrubbed
/// as text: the pipeline reports it, and no value may ride in the report.
pub fn scrub_result(vault: &Vault, result: &Typed<ToolResult>) -> Option<Typed<ToolResult>> {
    if !vault.may_occur_in_json(result.text()) {
        return None;
    }
    let scrubbed = result.get().ok().and_then(|r| {
        let mut doc = serde_json::to_value(&r).ok()?;
        vault.scrub_json(&mut doc).then_some(())?;
        serde_json::from_value::<ToolResult>(doc).ok()
    });
    match scrubbed {
        Some(r) => Typed::new(&r).ok(),
        None => vault.scrub(result.text()).map(|t| {
            Typed::from_payload(Payload {
                text: t.into(),
                frozen: Default::default(),
            })
        }),
    }
}

/// The content of a result (`None` for a foreign listener's non-result).
pub fn result_content(result: &Typed<ToolResult>) -> Option<String> {
    result.get().ok().map(|r| r.content)
}

/// The decision to return from `tools/post-execute`, given what the rest of the chain decided
/// (`decision`) and the result's content before (`original`) and after (`scrubbed`) the
/// scrub: an `accept` carries scrubbed content whenever anything changed, a `block`'s
/// feedback is scrubbed.
pub fn scrub_post_decision(
    vault: &Vault,
    decision: PostDecision,
    original: Option<&str>,
    scrubbed: Option<&str>,
) -> PostDecision {
    match decision {
        PostDecision::Accept { content: Some(c) } => PostDecision::Accept {
            content: Some(vault.scrub(&c).unwrap_or(c)),
        },
        PostDecision::Accept { content: None } => PostDecision::Accept {
            content: scrubbed.filter(|s| Some(*s) != original).map(str::to_owned),
        },
        PostDecision::Block { feedback } => PostDecision::Block {
            feedback: vault.scrub(&feedback).unwrap_or(feedback),
        },
    }
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

/// Adds [`alias_section`] to the assembly's sections, replacing an earlier one.
pub fn add_section(sections: &mut Vec<PromptSection>, section: PromptSection) {
    sections.retain(|s| s.id != SECTION_ID);
    sections.push(section);
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

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

    fn filled(f: Filled) -> Value {
        match f {
            Filled::Args(a) => val(&a),
            other => panic!("expected filled arguments, got {other:?}"),
        }
    }

    #[test]
    fn sec02_inbound_fill_reaches_the_parsed_args() {
        let v = vault();
        let args = j(json!({"path": "k/sec_KEY", "content": "token: sec_KEY"}));
        assert_eq!(
            filled(fill_args(&v, "write_file", &args)),
            json!({"path": "k/sk-live-123", "content": "token: sk-live-123"})
        );
        assert_eq!(
            fill_args(&v, "shell", &j(json!({"command": "ls"}))),
            Filled::Unchanged
        );
        let not_json = Json {
            text: "not json".into(),
        };
        assert_eq!(fill_args(&v, "shell", &not_json), Filled::Unchanged);
    }

    /// Issue 10 item 9: in `shell`'s command the alias becomes a quoted expansion and the
    /// value travels as a typed variable; other arguments of the call still get text.
    #[test]
    fn sec02_shell_commands_get_expansions_and_the_values_as_variables() {
        let v = vault();
        let args = j(json!({"command": "curl -H 'X: sec_KEY' \"sec_KEY\"", "workdir": "sec_KEY"}));
        let out = filled(fill_args(&v, "shell", &args));
        assert_eq!(
            out,
            json!({
                "command": "curl -H 'X: '\"${sec_KEY}\"'' \"${sec_KEY}\"",
                "workdir": "sk-live-123",
                SECRET_ENV_ARG: {"sec_KEY": "sk-live-123"}
            })
        );
        let refused = fill_args(&v, "shell", &j(json!({"command": "cat <<'E'\nsec_KEY\nE"})));
        assert!(
            matches!(&refused, Filled::Refused(m)
                if m.contains("sec_KEY") && !m.contains("sk-live")),
            "{refused:?}"
        );
    }

    /// A reserved argument the model wrote never reaches the tool, with or without secrets,
    /// however it is spelled.
    #[test]
    fn sec02_a_model_written_secret_env_is_dropped() {
        let empty = Vault::new(BTreeMap::new()).unwrap();
        for v in [vault(), empty] {
            let args = j(json!({"command": "ls", SECRET_ENV_ARG: {"sec_X": "mine"}}));
            assert_eq!(
                filled(fill_args(&v, "shell", &args)),
                json!({"command": "ls"})
            );
            let escaped = Json {
                text: r#"{"command":"ls","keel\u005fsecret_env":{"sec_X":"m"}}"#.into(),
            };
            assert_eq!(
                filled(fill_args(&v, "shell", &escaped)),
                json!({"command": "ls"})
            );
        }
    }

    #[test]
    fn sec03_outbound_tool_result_content_and_meta_are_scrubbed() {
        let v = vault();
        let result: ToolResult = serde_json::from_value(
            json!({"content": "key=sk-live-123", "meta": {"before": "c2stbGl2ZS0xMjM="}}),
        )
        .unwrap();
        let out = scrub_result(&v, &Typed::new(&result).unwrap()).unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(out.text()).unwrap(),
            json!({"content": "key=sec_KEY", "meta": {"before": "sec_KEY"}})
        );
        let clean = Typed::new(&ToolResult::ok("clean")).unwrap();
        assert!(scrub_result(&v, &clean).is_none());
        // A document that is not a result is scrubbed as text.
        let forged = Typed::<ToolResult>::from_payload(Payload {
            text: "not json sk-live-123".into(),
            frozen: Default::default(),
        });
        assert_eq!(
            scrub_result(&v, &forged).unwrap().text(),
            "not json sec_KEY"
        );
    }

    #[test]
    fn sec03_outbound_post_execute_decisions_carry_scrubbed_content() {
        let v = vault();
        let accept = || PostDecision::Accept { content: None };
        let content = |c: &str| PostDecision::Accept {
            content: Some(c.into()),
        };
        let d = scrub_post_decision(&v, accept(), Some("k sk-live-123"), Some("k sec_KEY"));
        assert_eq!(d, content("k sec_KEY"));
        let d = scrub_post_decision(&v, accept(), Some("clean"), Some("clean"));
        assert_eq!(d, accept());
        // A later listener's replacement is scrubbed too.
        let d = scrub_post_decision(&v, content("echo sk-live-123"), None, None);
        assert_eq!(d, content("echo sec_KEY"));
        let block = PostDecision::Block {
            feedback: "saw sk-live-123".into(),
        };
        assert_eq!(
            scrub_post_decision(&v, block, None, None),
            PostDecision::Block {
                feedback: "saw sec_KEY".into()
            }
        );
    }

    #[test]
    fn the_prompt_lists_aliases_never_values() {
        let v = vault();
        let mut list = vec![PromptSection {
            id: "base".into(),
            order: 0,
            text: "hi".into(),
            complete: false,
        }];
        add_section(&mut list, alias_section(&v).unwrap());
        assert_eq!(list.len(), 2);
        let text = &list[1].text;
        assert!(text.contains("- sec_KEY") && text.contains("never see the value"));
        assert!(
            !serde_json::to_string(&list)
                .unwrap()
                .contains("sk-live-123")
        );
        // Idempotent by id.
        add_section(&mut list, alias_section(&v).unwrap());
        assert_eq!(list.len(), 2);
        assert!(alias_section(&Vault::new(BTreeMap::new()).unwrap()).is_none());
    }
}
