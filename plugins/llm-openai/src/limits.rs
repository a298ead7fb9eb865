//! What a model can take (issue 14 item 1): `limits`' answer from the row's `context_window`,
//! `output_reserve` and `bytes_per_token`, else from [`DEFAULTS`], a table of OpenAI's own
//! models. The context manager compacts against it; without a window it compacts nothing, so
//! an unknown model is *unknown*, never a guess.
//!
//! Where the numbers come from: OpenAI's model pages (`platform.openai.com/docs/models/<name>`,
//! "Context window"), and the error OpenAI answers a request over it ("This model's maximum
//! context length is N tokens", the same number):
//! - `gpt-4o`, `gpt-4o-mini`, `chatgpt-4o`: 128,000.
//! - `gpt-4.1`, `gpt-4.1-mini`, `gpt-4.1-nano`: 1,047,576.
//! - `gpt-4-turbo` (and the `gpt-4-1106-preview` / `gpt-4-0125-preview` previews it replaced):
//!   128,000; `gpt-4-32k`: 32,768; `gpt-4`: 8,192.
//! - `gpt-3.5-turbo` (0125 and later, which the bare name serves): 16,385.
//! - `o1`, `o3`, `o3-mini`, `o4-mini`: 200,000; `o1-mini` and `o1-preview`: 128,000.
//! - `gpt-5`, `gpt-5-mini`, `gpt-5-nano`: 400,000 in total, of which up to 128,000 are output:
//!   OpenAI refuses a prompt over 272,000 tokens, so the table reserves 128,000 for the answer
//!   (a community report of that refusal: community.openai.com/t/1344734). `gpt-5-chat`:
//!   128,000.
//!
//! Open models are left out on purpose: a local server (llama.cpp, vLLM, Ollama) runs with the
//! context it was started with (`-c`, `--max-model-len`, `num_ctx`), usually less than the
//! model's trained length, so the row's `context_window` is the only true number there.
//!
//! A name matches the longest prefix in the table, after any `vendor/` route prefix (e.g.
//! `openai/gpt-4o` on a router), case-insensitively.

use keel_plugin_api::codes::ContractCode;
use keel_plugin_api::sdk::Error;
use keel_plugin_api::services::llm::{LlmCallConfig, ModelLimits};

use crate::config::Config;

/// One default: a model-name prefix, its window, and the answer it must keep room for when
/// the model's limit on input is lower than its window (`None`: the general rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Known {
    /// Model-name prefix.
    pub prefix: &'static str,
    /// Context window, tokens.
    pub window: u64,
    /// Output reserve the provider enforces, when it is not the general rule.
    pub reserve: Option<u64>,
}

const fn known(prefix: &'static str, window: u64) -> Known {
    Known {
        prefix,
        window,
        reserve: None,
    }
}

/// The table of defaults (see the module doc for the sources).
pub const DEFAULTS: &[Known] = &[
    known("gpt-4o", 128_000),
    known("gpt-4o-mini", 128_000),
    known("chatgpt-4o", 128_000),
    known("gpt-4.1", 1_047_576),
    known("gpt-4-turbo", 128_000),
    known("gpt-4-1106-preview", 128_000),
    known("gpt-4-0125-preview", 128_000),
    known("gpt-4-32k", 32_768),
    known("gpt-4", 8_192),
    known("gpt-3.5-turbo", 16_385),
    known("o1", 200_000),
    known("o1-mini", 128_000),
    known("o1-preview", 128_000),
    known("o3", 200_000),
    known("o4-mini", 200_000),
    Known {
        prefix: "gpt-5",
        window: 400_000,
        reserve: Some(128_000),
    },
    known("gpt-5-chat", 128_000),
];

/// The largest output reserve the general rule keeps: `min(window / 8, 4096)`.
pub const MAX_DEFAULT_RESERVE: u64 = 4096;

/// The table's entry for `model`: the longest matching prefix.
pub fn lookup(model: &str) -> Option<Known> {
    let name = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    DEFAULTS
        .iter()
        .filter(|k| name.starts_with(k.prefix))
        .max_by_key(|k| k.prefix.len())
        .copied()
}

/// `limits`' answer for `config` on `row`. The window: the row's `context_window` (`config`),
/// else the table's for the model (`table`), else unknown. The reserve: the `max_tokens` the
/// request will carry (the call's, else the row's), else the row's `output_reserve`, else the
/// table's, else `min(window / 8, 4096)`, else 0.
pub fn answer(row: &Config, config: &LlmCallConfig) -> ModelLimits {
    let model = if config.model.is_empty() {
        &row.model
    } else {
        &config.model
    };
    let (window, table_reserve, source) = match (row.context_window, lookup(model)) {
        (Some(w), _) => (Some(w), None, "config"),
        (None, Some(k)) => (Some(k.window), k.reserve, "table"),
        (None, None) => (None, None, "unknown"),
    };
    let output_reserve = config
        .max_tokens
        .or(row.max_tokens)
        .or(row.output_reserve)
        .or(table_reserve)
        .or_else(|| window.map(|w| (w / 8).min(MAX_DEFAULT_RESERVE)))
        .unwrap_or(0);
    ModelLimits {
        context_window: window,
        output_reserve,
        bytes_per_token: row.bytes_per_token,
        source: source.to_owned(),
    }
}

/// Refuses limits no model has, naming the key (the kernel's schema check refuses them first;
/// this holds for a row built any other way).
///
/// # Errors
/// `CONFIG`: a zero `context_window`, a `bytes_per_token` that is not above 0.
pub fn check(row: &Config) -> Result<(), Error> {
    if row.context_window == Some(0) {
        return Err(Error::coded(
            ContractCode::Config,
            "context_window: must be at least 1 token",
        ));
    }
    if let Some(b) = row.bytes_per_token
        && !(b > 0.0 && b.is_finite())
    {
        return Err(Error::coded(
            ContractCode::Config,
            format!("bytes_per_token: must be a number above 0, got {b}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
#[path = "limits_tests.rs"]
mod tests;
