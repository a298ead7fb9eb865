//! The adapter row's config (ARCHITECTURE §11): its serde type and the JSON Schema the kernel
//! validates the row against before activation. Both deny unknown keys, so a typo fails the row
//! instead of being ignored.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};

/// Default credential reference.
pub const DEFAULT_KEY_REF: &str = "OPENAI_API_KEY";
/// Default provider name registered with `keel.llm`.
pub const DEFAULT_PROVIDER: &str = "openai";
/// Default idle-stream watchdog (B14: five minutes).
pub const DEFAULT_TIMEOUT_MS: u64 = 300_000;
/// Default TCP/TLS connect timeout.
pub const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 10_000;

/// The row config.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// API root, e.g. `https://api.openai.com/v1`; `/chat/completions` is appended.
    pub base_url: String,
    /// The row's model; registered as the provider's default model.
    pub model: String,
    /// Name of the credential (an environment-variable-style reference), never the key.
    #[serde(default = "default_key_ref")]
    pub api_key_ref: String,
    /// Provider name this row registers with `keel.llm`.
    #[serde(default = "default_provider")]
    pub provider: String,
    /// Output cap used when the call config has none.
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// Temperature used when the call config has none.
    #[serde(default)]
    pub temperature: Option<f64>,
    /// Extra request headers (they may override `User-Agent`, never `Authorization`).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Idle watchdog: the longest wait for the response or for the next stream event.
    #[serde(default = "default_timeout")]
    pub timeout_ms: u64,
    /// Connect timeout.
    #[serde(default = "default_connect_timeout")]
    pub connect_timeout_ms: u64,
}

fn default_key_ref() -> String {
    DEFAULT_KEY_REF.to_owned()
}

fn default_provider() -> String {
    DEFAULT_PROVIDER.to_owned()
}

fn default_timeout() -> u64 {
    DEFAULT_TIMEOUT_MS
}

fn default_connect_timeout() -> u64 {
    DEFAULT_CONNECT_TIMEOUT_MS
}

/// The JSON Schema of [`Config`].
pub fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "base_url": { "type": "string", "pattern": "^https?://" },
            "model": { "type": "string", "minLength": 1 },
            "api_key_ref": { "type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$" },
            "provider": { "type": "string", "minLength": 1 },
            "max_tokens": { "type": "integer", "minimum": 1 },
            "temperature": { "type": "number", "minimum": 0 },
            "headers": {
                "type": "object",
                "additionalProperties": { "type": "string" }
            },
            "timeout_ms": { "type": "integer", "minimum": 1 },
            "connect_timeout_ms": { "type": "integer", "minimum": 1 }
        },
        "required": ["base_url", "model"],
        "additionalProperties": false
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_the_optional_keys() {
        let c: Config =
            serde_json::from_value(json!({"base_url": "http://x/v1", "model": "m"})).unwrap();
        assert_eq!(c.api_key_ref, "OPENAI_API_KEY");
        assert_eq!(c.provider, "openai");
        assert_eq!(c.timeout_ms, 300_000);
        assert_eq!(c.connect_timeout_ms, 10_000);
        assert!(c.headers.is_empty());
    }

    #[test]
    fn unknown_keys_are_refused() {
        let r: Result<Config, _> =
            serde_json::from_value(json!({"base_url": "http://x", "model": "m", "api_key": "k"}));
        assert!(r.is_err());
        assert_eq!(schema()["additionalProperties"], json!(false));
    }
}
