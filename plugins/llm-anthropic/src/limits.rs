//! What a model can take (issue 14 item 1, for this adapter): `limits`' answer from the row's
//! `context_window`, `output_reserve` and `bytes_per_token`, else from [`DEFAULTS`].
//!
//! Where the numbers come from: Anthropic's models overview
//! (`docs.anthropic.com/en/docs/about-claude/models/overview`, "Context window") gives every
//! Claude 3, 3.5, 3.7 and 4.x model (Haiku, Sonnet, Opus) a 200,000-token window; Anthropic's
//! support article "How large is the Claude API's context window?" says the same, with 1M
//! tokens only for some Sonnet/Opus models behind a beta header this adapter does not send, so
//! the table says 200,000 and a row that opts into more sets `context_window`. Older models
//! (Claude 2, Instant) are retired and left out: an unknown model is *unknown*, never a guess.
//!
//! The reserve is the `max_tokens` the request will carry (the call's, else the row's
//! `output_reserve`, else the row's `max_tokens`, which always has a value): since Claude 3.7
//! the API refuses a request whose prompt plus `max_tokens` exceeds the window.
//!
//! A name matches the longest prefix in the table, after any `vendor/` route prefix,
//! case-insensitively.

use keel_plugin_api::services::llm::{LlmCallConfig, ModelLimits};

use crate::config::Config;

/// The table of defaults: model-name prefix → window (see the module doc for the sources).
pub const DEFAULTS: &[(&str, u64)] = &[
    ("claude-3", 200_000),
    ("claude-haiku-4", 200_000),
    ("claude-sonnet-4", 200_000),
    ("claude-opus-4", 200_000),
];

/// The table's window for `model`: the longest matching prefix.
pub fn lookup(model: &str) -> Option<u64> {
    let name = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    DEFAULTS
        .iter()
        .filter(|(prefix, _)| name.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, window)| *window)
}

/// `limits`' answer for `config` on `row`.
pub fn answer(row: &Config, config: &LlmCallConfig) -> ModelLimits {
    let model = if config.model.is_empty() {
        &row.model
    } else {
        &config.model
    };
    let (window, source) = match (row.context_window, lookup(model)) {
        (Some(w), _) => (Some(w), "config"),
        (None, Some(w)) => (Some(w), "table"),
        (None, None) => (None, "unknown"),
    };
    ModelLimits {
        context_window: window,
        output_reserve: config
            .max_tokens
            .or(row.output_reserve)
            .unwrap_or(row.max_tokens),
        bytes_per_token: row.bytes_per_token,
        source: source.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn row(extra: serde_json::Value) -> Config {
        let mut v = json!({"model": "claude-sonnet-4-5"});
        for (k, val) in extra.as_object().unwrap() {
            v[k] = val.clone();
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn claude_models_have_the_table_window_and_others_are_unknown() {
        assert_eq!(lookup("claude-sonnet-4-5-20250929"), Some(200_000));
        assert_eq!(lookup("claude-3-5-haiku-latest"), Some(200_000));
        assert_eq!(lookup("anthropic/Claude-Opus-4-1"), Some(200_000));
        assert_eq!(lookup("gpt-4o"), None);
        let call = LlmCallConfig::default();
        let l = answer(&row(json!({})), &call);
        assert_eq!(
            (l.context_window, l.output_reserve, l.source.as_str()),
            (Some(200_000), 8_192, "table")
        );
        let l = answer(&row(json!({"model": "mystery"})), &call);
        assert_eq!((l.context_window, l.source.as_str()), (None, "unknown"));
    }

    #[test]
    fn the_row_and_the_call_win_over_the_table() {
        let r = row(json!({"context_window": 1_000_000, "output_reserve": 1000}));
        let l = answer(&r, &LlmCallConfig::default());
        assert_eq!(
            (l.context_window, l.output_reserve, l.source.as_str()),
            (Some(1_000_000), 1000, "config")
        );
        let call = LlmCallConfig {
            max_tokens: Some(300),
            ..LlmCallConfig::default()
        };
        assert_eq!(answer(&r, &call).output_reserve, 300);
    }
}
