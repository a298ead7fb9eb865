//! The `llm-anthropic` row's config (ARCHITECTURE §11): its serde type and the JSON Schema the
//! kernel validates the row against before activation. Both deny unknown keys, so a typo fails
//! the row instead of being ignored. The keys mirror `llm-openai`'s where the two APIs agree;
//! `max_tokens` has a default because the Messages API requires one on every request, and
//! `thinking_budget` turns on extended thinking.

use keel_llm_http_kit::defaults;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

/// Default API root (without `/v1`, as Anthropic's SDKs take it).
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// Default credential reference.
pub const DEFAULT_KEY_REF: &str = "ANTHROPIC_API_KEY";
/// Default provider name registered with `keel.llm`.
pub const DEFAULT_PROVIDER: &str = "anthropic";
/// Default output cap: the Messages API refuses a request without `max_tokens`. 8,192 is what
/// every current Claude model can produce (Claude 3 Haiku's 4,096 is the row's to lower).
pub const DEFAULT_MAX_TOKENS: u64 = 8_192;
/// The `anthropic-version` header this adapter speaks.
pub const API_VERSION: &str = "2023-06-01";
/// Idle-stream watchdog, the HTTP kit's: the longest silence inside a stream (Anthropic sends
/// `ping` events while a model thinks, so a live stream is never silent this long).
pub const DEFAULT_TIMEOUT_MS: u64 = defaults::TIMEOUT_MS;
/// Default TCP/TLS connect timeout.
pub const DEFAULT_CONNECT_TIMEOUT_MS: u64 = defaults::CONNECT_TIMEOUT_MS;
/// Default first-byte deadline (request sent → response head), the HTTP kit's.
pub const DEFAULT_FIRST_BYTE_TIMEOUT_MS: u64 = defaults::FIRST_BYTE_TIMEOUT_MS;
/// The smallest thinking budget the API accepts.
pub const MIN_THINKING_BUDGET: u64 = 1_024;

/// The row config.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// API root without `/v1`, e.g. `https://api.anthropic.com`; `/v1/messages` is appended.
    #[serde(default = "default_base_url")]
    #[schemars(regex(pattern = "^https?://"))]
    pub base_url: String,
    /// The row's model, e.g. `claude-sonnet-4-5`; registered as the provider's default model.
    #[schemars(length(min = 1))]
    pub model: String,
    /// Name of the credential (an environment-variable-style reference), never the key.
    #[serde(default = "default_key_ref")]
    #[schemars(regex(pattern = "^[A-Za-z_][A-Za-z0-9_]*$"))]
    pub api_key_ref: String,
    /// Provider name this row registers with `keel.llm`.
    #[serde(default = "default_provider")]
    #[schemars(length(min = 1))]
    pub provider: String,
    /// Output cap used when the call config has none (the API requires one).
    #[serde(default = "default_max_tokens")]
    #[schemars(range(min = 1))]
    pub max_tokens: u64,
    /// Temperature used when the call config has none (not sent with thinking on: the API
    /// refuses it).
    #[serde(default)]
    #[schemars(range(min = 0, max = 1))]
    pub temperature: Option<f64>,
    /// Extended thinking: the token budget of each answer's thinking (at least 1,024 and below
    /// `max_tokens`). Unset: no thinking.
    #[serde(default)]
    #[schemars(range(min = 1024))]
    pub thinking_budget: Option<u64>,
    /// Idle watchdog: once the response head has arrived, the longest wait for the next event.
    #[serde(default = "defaults::timeout_ms")]
    #[schemars(range(min = 1))]
    pub timeout_ms: u64,
    /// Connect timeout (TCP and TLS), part of the first-byte wait.
    #[serde(default = "defaults::connect_timeout_ms")]
    #[schemars(range(min = 1))]
    pub connect_timeout_ms: u64,
    /// First-byte deadline: the longest wait from sending the request to the response head.
    #[serde(default = "defaults::first_byte_timeout_ms")]
    #[schemars(range(min = 1))]
    pub first_byte_timeout_ms: u64,
    /// The model's context window in tokens, over the table of defaults (`limits`).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub context_window: Option<u64>,
    /// Tokens kept free for the answer (`limits`; default: the request's `max_tokens`).
    #[serde(default)]
    pub output_reserve: Option<u64>,
    /// Bytes of request per token for this model, for the context manager's estimate.
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub bytes_per_token: Option<f64>,
}

fn default_base_url() -> String {
    DEFAULT_BASE_URL.to_owned()
}

fn default_key_ref() -> String {
    DEFAULT_KEY_REF.to_owned()
}

fn default_provider() -> String {
    DEFAULT_PROVIDER.to_owned()
}

fn default_max_tokens() -> u64 {
    DEFAULT_MAX_TOKENS
}

/// The JSON Schema the kernel validates the row against, derived from [`Config`].
pub fn schema() -> Value {
    schemars::schema_for!(Config).to_value()
}

/// What the schema cannot say: a thinking budget must stay below the output cap.
///
/// # Errors
/// A message naming the keys.
pub fn check(config: &Config) -> Result<(), String> {
    if let Some(budget) = config.thinking_budget {
        if budget < MIN_THINKING_BUDGET {
            return Err(format!(
                "thinking_budget: {budget} is below the API's minimum of {MIN_THINKING_BUDGET}"
            ));
        }
        if budget >= config.max_tokens {
            return Err(format!(
                "thinking_budget ({budget}) must be below max_tokens ({})",
                config.max_tokens
            ));
        }
    }
    if config.context_window == Some(0) {
        return Err("context_window: must be at least 1 token".to_owned());
    }
    if let Some(b) = config.bytes_per_token
        && !(b > 0.0 && b.is_finite())
    {
        return Err(format!(
            "bytes_per_token: must be a number above 0, got {b}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn defaults_fill_the_optional_keys() {
        let c: Config = serde_json::from_value(json!({"model": "claude-sonnet-4-5"})).unwrap();
        assert_eq!(c.base_url, "https://api.anthropic.com");
        assert_eq!(c.api_key_ref, "ANTHROPIC_API_KEY");
        assert_eq!(c.provider, "anthropic");
        assert_eq!(c.max_tokens, 8_192);
        assert_eq!(c.thinking_budget, None);
        assert_eq!(c.first_byte_timeout_ms, 90_000);
        assert!(check(&c).is_ok());
    }

    #[test]
    fn unknown_keys_are_refused_and_the_budget_must_fit_under_max_tokens() {
        let r: Result<Config, _> =
            serde_json::from_value(json!({"model": "m", "api_key": "sk-literal"}));
        assert!(r.is_err());
        assert_eq!(schema()["additionalProperties"], json!(false));
        let c: Config = serde_json::from_value(
            json!({"model": "m", "max_tokens": 2000, "thinking_budget": 4000}),
        )
        .unwrap();
        let e = check(&c).unwrap_err();
        assert!(
            e.contains("thinking_budget") && e.contains("max_tokens"),
            "{e}"
        );
        assert_eq!(
            schema()["properties"]["thinking_budget"]["minimum"],
            json!(1024)
        );
    }
}
