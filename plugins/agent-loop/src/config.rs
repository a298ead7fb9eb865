//! The `agent-loop` row config: which model route a turn starts from and the retry policy the
//! `agent/request-error` default applies (B14 defaults).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The row config; its JSON Schema is derived from it (`Manifest::config_type`).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoopConfig {
    /// Provider the default call config names (an adapter must be registered for it). Unset:
    /// the only registered provider, else `openai` (issue 15 item 2: a profile that swaps its
    /// one adapter, `llm-anthropic` for `llm-openai`, needs no second edit).
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub provider: Option<String>,
    /// Model; defaults to the adapter row's `model`.
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub model: Option<String>,
    /// Output token cap written into the call config.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub max_tokens: Option<u64>,
    /// Sampling temperature written into the call config.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub temperature: Option<f64>,
    /// Model requests one turn may make before it ends `max-steps`.
    #[serde(default = "default_max_steps")]
    #[schemars(range(min = 1))]
    pub max_steps: u64,
    /// Retry policy for failed model calls.
    #[serde(default)]
    pub retry: RetryPolicy,
}

/// Which failures a policy retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RetryMode {
    /// The codes whose retry class says a retry can help (docs/errors.md).
    #[default]
    Normal,
    /// Every failure.
    Always,
    /// None.
    Never,
}

/// B14's retry policy: which failures retry, how often, how long to wait.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryPolicy {
    /// `normal` retries the retryable codes; `always` retries every failure; `never` none.
    #[serde(default)]
    pub mode: RetryMode,
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
            mode: RetryMode::Normal,
            max_retries: default_max_retries(),
            initial_backoff_ms: default_initial(),
            max_backoff_ms: default_max_backoff(),
            max_retry_after_ms: default_max_retry_after(),
        }
    }
}

/// The provider when the row names none and several (or no) adapters are registered.
pub const DEFAULT_PROVIDER: &str = "openai";

fn default_max_steps() -> u64 {
    200
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
