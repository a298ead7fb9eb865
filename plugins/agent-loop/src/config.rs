//! The `agent-loop` row config: which model route a turn starts from and the retry policy the
//! `agent/request-error` default applies (B14 defaults).

use serde::{Deserialize, Serialize};

/// The row config.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoopConfig {
    /// Provider the default call config names (an adapter must be registered for it).
    #[serde(default = "default_provider")]
    pub provider: String,
    /// Model; defaults to the adapter row's `model`.
    #[serde(default)]
    pub model: Option<String>,
    /// Output token cap written into the call config.
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// Sampling temperature written into the call config.
    #[serde(default)]
    pub temperature: Option<f64>,
    /// Model requests one turn may make before it ends `max-steps`.
    #[serde(default = "default_max_steps")]
    pub max_steps: u64,
    /// Retry policy for failed model calls.
    #[serde(default)]
    pub retry: RetryPolicy,
}

/// B14's retry policy: which failures retry, how often, how long to wait.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryPolicy {
    /// `normal` retries the retryable codes; `always` retries every failure; `never` none.
    #[serde(default = "default_mode")]
    pub mode: String,
    /// Retries after the first attempt.
    #[serde(default = "default_max_retries")]
    pub max_retries: u32,
    /// First backoff.
    #[serde(default = "default_initial")]
    pub initial_backoff_ms: u64,
    /// Backoff cap (a provider's `retry-after` may exceed it up to `max_retry_after_ms`).
    #[serde(default = "default_max_backoff")]
    pub max_backoff_ms: u64,
    /// Longest `retry-after` honoured; longer ones fail the turn instead of sleeping.
    #[serde(default = "default_max_retry_after")]
    pub max_retry_after_ms: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            mode: default_mode(),
            max_retries: default_max_retries(),
            initial_backoff_ms: default_initial(),
            max_backoff_ms: default_max_backoff(),
            max_retry_after_ms: default_max_retry_after(),
        }
    }
}

fn default_provider() -> String {
    "openai".to_owned()
}
fn default_max_steps() -> u64 {
    200
}
fn default_mode() -> String {
    "normal".to_owned()
}
fn default_max_retries() -> u32 {
    2
}
fn default_initial() -> u64 {
    500
}
fn default_max_backoff() -> u64 {
    10_000
}
fn default_max_retry_after() -> u64 {
    60_000
}

/// The JSON Schema the kernel validates the row against.
pub fn schema() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "provider": { "type": "string", "minLength": 1 },
            "model": { "type": "string", "minLength": 1 },
            "max_tokens": { "type": "integer", "minimum": 1 },
            "temperature": { "type": "number", "minimum": 0 },
            "max_steps": { "type": "integer", "minimum": 1 },
            "retry": {
                "type": "object",
                "properties": {
                    "mode": { "enum": ["normal", "always", "never"] },
                    "max_retries": { "type": "integer", "minimum": 0 },
                    "initial_backoff_ms": { "type": "integer", "minimum": 0 },
                    "max_backoff_ms": { "type": "integer", "minimum": 0 },
                    "max_retry_after_ms": { "type": "integer", "minimum": 0 }
                },
                "additionalProperties": false
            }
        },
        "additionalProperties": false
    })
}
