//! SEC-03 for model requests: the `llm/stream` listener's scrub of `system` and the history,
//! in time that does not grow with the session.
//!
//! Why a cache: every request carries the whole history, and scanning all of it for secret
//! values at each step made the firewall's cost O(history) per request. The history arrives as
//! `Frozen` messages shared from the session, so each message's identity is stable from request
//! to request: the scrubber remembers, per message, the verdict against one vault snapshot
//! (clean, or the scrubbed replacement) and only scans messages it has not seen. When the vault
//! changes (`keel secrets set`, a credential registered mid-run) every verdict is dropped and
//! the next request scans everything once more, so a value learnt late is still scrubbed from
//! old messages. Entries unused for [`KEEP_FOR`] requests go.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use keel_plugin_api::events::llm::LlmCall;
use keel_plugin_api::sdk::Frozen;
use keel_plugin_api::services::llm::LlmRequest;
use serde_json::Value;

use crate::vault::Vault;

/// Requests a verdict survives without being used.
pub const KEEP_FOR: u64 = 8;

struct Verdict {
    _original: Frozen,
    scrubbed: Option<Frozen>,
    last_used: u64,
}

#[derive(Default)]
struct Cache {
    vault: Option<Arc<Vault>>,
    generation: u64,
    verdicts: HashMap<usize, Verdict>,
    scanned: u64,
}

/// The per-message verdicts of recent requests.
#[derive(Default)]
pub struct RequestScrubber {
    cache: Mutex<Cache>,
}

impl RequestScrubber {
    /// The call's request with every secret value in `system` and the messages replaced by its
    /// alias, or `None` when nothing changed (or the request cannot be read: the registry
    /// reports that itself).
    pub fn scrub(&self, vault: &Arc<Vault>, call: &LlmCall) -> Option<LlmRequest> {
        if vault.scrubs_nothing() {
            return None;
        }
        let mut request = call.request().ok()?;
        let mut changed = false;
        if let Some(scrubbed) = request.system.as_deref().and_then(|s| vault.scrub(s)) {
            request.system = Some(scrubbed);
            changed = true;
        }
        let mut cache = self
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !cache.vault.as_ref().is_some_and(|v| Arc::ptr_eq(v, vault)) {
            cache.verdicts.clear();
            cache.vault = Some(Arc::clone(vault));
        }
        cache.generation += 1;
        let generation = cache.generation;
        let Cache {
            verdicts, scanned, ..
        } = &mut *cache;
        for message in &mut request.messages {
            let verdict = verdicts.entry(message.identity()).or_insert_with(|| {
                *scanned += 1;
                Verdict {
                    _original: message.clone(),
                    scrubbed: scrub_message(vault, message),
                    last_used: generation,
                }
            });
            verdict.last_used = generation;
            if let Some(scrubbed) = &verdict.scrubbed {
                *message = scrubbed.clone();
                changed = true;
            }
        }
        verdicts.retain(|_, v| v.last_used + KEEP_FOR > generation);
        changed.then_some(request)
    }

    /// How many messages were scanned so far (each once per vault snapshot while cached).
    pub fn scanned(&self) -> u64 {
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .scanned
    }
}

/// One message with every string scrubbed, or `None` when it holds no value.
fn scrub_message(vault: &Vault, message: &Frozen) -> Option<Frozen> {
    if !vault.may_occur_in_json(message.as_str()) {
        return None;
    }
    let mut value: Value = message.parse().ok()?;
    if !vault.scrub_json(&mut value) {
        return None;
    }
    Frozen::freeze(&value).ok()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use keel_plugin_api::services::llm::LlmCallConfig;
    use serde_json::json;

    use super::*;
    use crate::store::SecretValue;

    fn vault(value: &str) -> Arc<Vault> {
        let mut secrets = BTreeMap::new();
        secrets.insert("KEY".to_owned(), SecretValue::new(value));
        Arc::new(Vault::new(secrets).unwrap())
    }

    fn call(system: &str, messages: &[Frozen]) -> LlmCall {
        LlmCall::new(&LlmRequest {
            session_id: Some("s".into()),
            config: LlmCallConfig::default(),
            system: Some(system.into()),
            messages: messages.to_vec(),
            tools: vec![],
            stream_id: None,
        })
        .unwrap()
    }

    fn msg(content: &str) -> Frozen {
        Frozen::freeze(&json!({"role": "tool", "tool_call_id": "c", "content": content})).unwrap()
    }

    // SEC-03: system and messages are scrubbed; issue 12: each message is scanned once per
    // vault snapshot, however many requests resend it.
    #[test]
    fn sec03_each_message_is_scanned_once_and_its_verdict_reused() {
        let v = vault("sk-live-123");
        let scrubber = RequestScrubber::default();
        let mut history = vec![msg("use sk-live-123 now")];
        for step in 0..20 {
            let out = scrubber
                .scrub(&v, &call("key sk-live-123", &history))
                .unwrap();
            assert_eq!(out.system.as_deref(), Some("key sec_KEY"));
            assert!(
                out.messages[0].as_str().contains("sec_KEY"),
                "{:?}",
                out.messages[0]
            );
            assert!(
                out.messages
                    .iter()
                    .all(|m| !m.as_str().contains("sk-live-123"))
            );
            history.push(msg(&format!("clean {step}")));
        }
        assert_eq!(scrubber.scanned(), 20, "one scan per message: 1 + 19 added");
    }

    // A value the vault learns later is scrubbed from messages already verdicted clean.
    #[test]
    fn sec03_a_new_vault_snapshot_rescans_the_history() {
        let scrubber = RequestScrubber::default();
        let history = vec![msg("token abc-999-xyz")];
        assert!(
            scrubber
                .scrub(&vault("other-value-1"), &call("s", &history))
                .is_none()
        );
        let out = scrubber
            .scrub(&vault("abc-999-xyz"), &call("s", &history))
            .unwrap();
        assert!(!out.messages[0].as_str().contains("abc-999-xyz"));
        assert_eq!(scrubber.scanned(), 2);
    }

    // Issue 12 (mutation-tested): a verdict unused for KEEP_FOR requests is dropped, one used
    // within that window is kept — the cache stays bounded without rescanning live history.
    #[test]
    fn a_verdict_lives_exactly_keep_for_requests_unused() {
        let v = vault("sk-live-123");
        let rescans = |idle: u64| {
            let scrubber = RequestScrubber::default();
            let (a, b) = (msg("first"), msg("second"));
            let _ = scrubber.scrub(&v, &call("s", std::slice::from_ref(&a)));
            for _ in 0..idle {
                let _ = scrubber.scrub(&v, &call("s", std::slice::from_ref(&b)));
            }
            let before = scrubber.scanned();
            let _ = scrubber.scrub(&v, &call("s", std::slice::from_ref(&a)));
            scrubber.scanned() - before
        };
        assert_eq!(rescans(KEEP_FOR - 1), 0, "still cached");
        assert_eq!(rescans(KEEP_FOR), 1, "dropped, scanned again");
    }
}
