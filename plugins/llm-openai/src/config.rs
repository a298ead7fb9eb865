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
/// Default idle-stream watchdog (B14: five minutes): the longest silence inside a response
/// stream once its head has arrived (a reasoning model may think that long between events).
pub const DEFAULT_TIMEOUT_MS: u64 = 300_000;
/// Default TCP/TLS connect timeout.
pub const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 10_000;
/// Default first-byte deadline: the longest wait, per attempt, from sending the request to the
/// response head (status line and headers). Ninety seconds leaves room for a local server
/// loading its model, and fails an endpoint that accepts connections but never answers within
/// minutes: with the agent loop's default 2 retries, 3 × 90 s instead of 3 × 300 s (issue 10
/// item 15).
pub const DEFAULT_FIRST_BYTE_TIMEOUT_MS: u64 = 90_000;

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
    /// Idle watchdog: once the response head has arrived, the longest wait for the next
    /// stream event (or error-body chunk).
    #[serde(default = "default_timeout")]
    pub timeout_ms: u64,
    /// Connect timeout (TCP and TLS), part of the first-byte wait.
    #[serde(default = "default_connect_timeout")]
    pub connect_timeout_ms: u64,
    /// First-byte deadline: the longest wait from sending the request (connecting included)
    /// to the response head.
    #[serde(default = "default_first_byte_timeout")]
    pub first_byte_timeout_ms: u64,
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

fn default_first_byte_timeout() -> u64 {
    DEFAULT_FIRST_BYTE_TIMEOUT_MS
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
            "connect_timeout_ms": { "type": "integer", "minimum": 1 },
            "first_byte_timeout_ms": { "type": "integer", "minimum": 1 }
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
        assert_eq!(c.first_byte_timeout_ms, 90_000);
        assert!(c.headers.is_empty());
    }

    // Issue 10 item 15: a dead endpoint fails within minutes, not 3 × 300 s. The deadlines
    // nest (connect within first byte), the first-byte one is minutes, and it is its own key.
    #[test]
    fn the_first_byte_deadline_is_minutes_and_configurable() {
        const MINUTE: u64 = 60_000;
        let d: Config =
            serde_json::from_value(json!({"base_url": "http://x/v1", "model": "m"})).unwrap();
        assert!(d.connect_timeout_ms < d.first_byte_timeout_ms);
        assert!((MINUTE..=2 * MINUTE).contains(&d.first_byte_timeout_ms));
        assert!(d.first_byte_timeout_ms < d.timeout_ms);
        // Three attempts (the loop's default 2 retries) stay under five minutes.
        assert!(3 * d.first_byte_timeout_ms < 5 * MINUTE);
        let c: Config = serde_json::from_value(
            json!({"base_url": "http://x/v1", "model": "m", "first_byte_timeout_ms": 250}),
        )
        .unwrap();
        assert_eq!((c.first_byte_timeout_ms, c.timeout_ms), (250, 300_000));
        assert_eq!(
            schema()["properties"]["first_byte_timeout_ms"],
            json!({ "type": "integer", "minimum": 1 })
        );
    }

    #[test]
    fn unknown_keys_are_refused() {
        let r: Result<Config, _> =
            serde_json::from_value(json!({"base_url": "http://x", "model": "m", "api_key": "k"}));
        assert!(r.is_err());
        assert_eq!(schema()["additionalProperties"], json!(false));
    }
}
