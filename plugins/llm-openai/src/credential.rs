//! Credential resolution (LLM-05, requirements B13): the row names a reference, and its value is
//! looked up at every request so a rotated key takes effect on the very next call.
//!
//! Today the only source is the process environment; this module is the one place to swap for a
//! credentials service (env > credentials file > `.env`) later. The value never leaves this
//! adapter except in the `Authorization` header: messages name the reference, not the key.

/// Resolves `reference`: its value, or `None` when unset, empty or not UTF-8 (all "absent").
pub fn resolve(reference: &str) -> Option<String> {
    std::env::var(reference).ok().filter(|v| !v.is_empty())
}

/// The `CREDENTIAL_MISSING` message for `reference` (names where to set it, never a value).
pub fn missing_message(reference: &str) -> String {
    format!(
        "credential {reference} is not set; export {reference}=… (the api_key_ref of this adapter row)"
    )
}

/// Replaces every occurrence of the key in `text` (providers sometimes echo what they received).
pub fn redact(text: &str, key: &str) -> String {
    if key.len() < 4 {
        return text.to_owned();
    }
    text.replace(key, "[redacted]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llm_05_missing_message_names_the_reference_only() {
        let m = missing_message("MY_KEY");
        assert!(m.contains("MY_KEY is not set"), "{m}");
        assert!(m.contains("export MY_KEY="), "{m}");
    }

    #[test]
    fn unset_reference_is_absent() {
        assert_eq!(resolve("KEEL_TEST_SURELY_UNSET_REFERENCE_42"), None);
    }

    #[test]
    fn redact_removes_the_key() {
        assert_eq!(
            redact("bad key sk-secret-1 given", "sk-secret-1"),
            "bad key [redacted] given"
        );
    }
}
