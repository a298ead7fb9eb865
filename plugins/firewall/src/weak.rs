//! Which values are too short or too common to be secrets (issue 23 item 2). Scrubbing such a
//! value rewrites every word that contains it (`none` inside `nonexistent`), so the firewall
//! never registers one for scrubbing and `keel secrets set` refuses one (`SECRET_WEAK`). The
//! rule is deliberately plain: under [`MIN_SECRET_BYTES`] bytes, or one of [`COMMON`]
//! (ASCII case-insensitive, surrounding whitespace ignored).

/// The shortest value treated as a secret, in bytes.
pub const MIN_SECRET_BYTES: usize = 8;

/// Placeholder words people put where a server wants no key. Only those of eight bytes or
/// more matter to the rule (shorter ones are caught by the length), but the list names the
/// short ones too so it reads as the set it is.
pub const COMMON: &[&str] = &[
    "none",
    "dummy",
    "x",
    "test",
    "null",
    "nil",
    "empty",
    "unused",
    "changeme",
    "change-me",
    "change_me",
    "password",
    "password1",
    "placeholder",
    "not-needed",
    "not_needed",
    "notneeded",
    "no-key",
    "nokey",
    "dummy-key",
    "dummykey",
    "dummy_key",
    "fake-key",
    "fakekey",
    "test-key",
    "testkey",
    "undefined",
    "anything",
    "whatever",
    "sk-no-key-required",
    "secret",
    "api-key",
    "api_key",
    "apikey",
    "your-api-key",
    "your_api_key",
    "local",
    "ollama",
    "llama",
    "lm-studio",
    "lmstudio",
    "vllm",
    "token",
];

/// Whether `value` is too short or too common to be a secret.
pub fn is_weak(value: &str) -> bool {
    let v = value.trim();
    v.len() < MIN_SECRET_BYTES || COMMON.iter().any(|c| c.eq_ignore_ascii_case(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_and_common_values_are_weak_and_real_looking_keys_are_not() {
        for v in ["none", "NONE", "x", "dummy", "Test", "null", "1234567"] {
            assert!(is_weak(v), "{v}");
        }
        for v in [
            "changeme",
            "PASSWORD",
            "ChangeMe",
            "sk-no-key-required",
            "not-needed",
        ] {
            assert!(is_weak(v), "{v}");
        }
        for v in [
            "sk-test-4c1d-canary",
            "12345678",
            "local-dummy-key-0000000000",
        ] {
            assert!(!is_weak(v), "{v}");
        }
    }
}
