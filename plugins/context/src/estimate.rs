//! Token accounting (issue 14 item 1): bytes of a request → tokens, corrected per session from
//! what the provider reports.
//!
//! Why an estimate and not a tokenizer: keel talks to many servers (OpenAI, llama.cpp, vLLM,
//! …) whose tokenizers it cannot know from a model name, and a wrong exact count is worse than
//! an honest estimate that the provider's own `usage.prompt_tokens` corrects after every
//! request. The estimate counts the request as the model server receives it: the JSON text of
//! every message plus the system prompt and the tool schemas, at `bytes_per_token` (the
//! adapter's figure, else the row's default), until the first reported usage replaces it with
//! the session's measured ratio. A server that refuses a request as too long lowers the ratio
//! so that the refused request counts as over the window.

/// Bytes added per message for the wire framing the frozen message does not show (role tags,
/// separators a chat template inserts).
pub const MESSAGE_OVERHEAD_BYTES: u64 = 12;

/// The most bytes per token a real tokenizer was measured at on keel's requests (issue 23
/// item 19; docs/context.md, "Counting tokens"): the 270M model's server counted 1,623 tokens
/// for a first request of about 9,200 bytes (5.65), OpenAI's `o200k_base` and `cl100k_base`
/// count keel's headless first request (9,649 bytes: system prompt, ten tool schemas, one
/// user message) as 2,164 and 2,147 tokens (4.46 and 4.49). Before a provider has counted
/// anything, a request is refused as over the window only when it is over at this ratio too:
/// an estimate errs, and a server that counts fewer tokens than estimated must still get the
/// request (its answer calibrates the meter, its refusal teaches the ratio).
pub const UNCOUNTED_MAX_BYTES_PER_TOKEN: f64 = 6.0;

/// The ratio is kept within these bounds whatever a provider reports.
const MIN_BYTES_PER_TOKEN: f64 = 0.5;
const MAX_BYTES_PER_TOKEN: f64 = 16.0;

/// One session's meter.
#[derive(Debug, Clone, Default)]
pub struct Meter {
    /// Measured bytes per token, once a provider reported usage.
    measured: Option<f64>,
    /// The bytes of the last request this session fitted.
    last_bytes: Option<u64>,
}

impl Meter {
    /// The ratio in force: measured, else `fallback`.
    pub fn bytes_per_token(&self, fallback: f64) -> f64 {
        self.measured.unwrap_or(fallback)
    }

    /// Whether a provider's count (usage or a refusal) set the ratio.
    pub fn is_measured(&self) -> bool {
        self.measured.is_some()
    }

    /// The fewest tokens `bytes` can plausibly be: at the measured ratio once there is one,
    /// else at the higher of `fallback` and [`UNCOUNTED_MAX_BYTES_PER_TOKEN`] (what a refusal
    /// before any count is judged by).
    pub fn fewest_tokens(&self, bytes: u64, fallback: f64) -> u64 {
        match self.measured {
            Some(r) => tokens_at(bytes, r),
            None => tokens_at(bytes, fallback.max(UNCOUNTED_MAX_BYTES_PER_TOKEN)),
        }
    }

    /// How the tokens are counted, for the log.
    pub fn method(&self, fallback: f64) -> String {
        match self.measured {
            Some(r) => format!("calibrated ({r:.2} bytes/token)"),
            None => format!("estimated ({fallback:.2} bytes/token)"),
        }
    }

    /// Tokens of `bytes` at the ratio in force (rounded up).
    pub fn tokens(&self, bytes: u64, fallback: f64) -> u64 {
        tokens_at(bytes, self.bytes_per_token(fallback))
    }

    /// Remembers the size of the request about to be sent.
    pub fn sent(&mut self, bytes: u64) {
        self.last_bytes = Some(bytes);
    }

    /// The provider counted `input_tokens` for the last request sent.
    pub fn calibrate(&mut self, input_tokens: u64) {
        if let Some(bytes) = self.last_bytes
            && input_tokens > 0
        {
            #[allow(clippy::cast_precision_loss, reason = "ratios of request sizes")]
            let ratio = bytes as f64 / input_tokens as f64;
            self.measured = Some(ratio.clamp(MIN_BYTES_PER_TOKEN, MAX_BYTES_PER_TOKEN));
        }
    }

    /// The provider refused the last request as over `window` tokens: whatever the ratio was,
    /// that request counts as over the window from now on (with a 10 % margin).
    pub fn refused(&mut self, window: u64, fallback: f64) {
        let Some(bytes) = self.last_bytes else {
            return;
        };
        #[allow(clippy::cast_precision_loss, reason = "ratios of request sizes")]
        let at_most = bytes as f64 / (window as f64 + 1.0) * 0.9;
        let ratio = self.bytes_per_token(fallback).min(at_most);
        self.measured = Some(ratio.clamp(MIN_BYTES_PER_TOKEN, MAX_BYTES_PER_TOKEN));
    }
}

/// Tokens of `bytes` at `bytes_per_token`, rounded up.
pub fn tokens_at(bytes: u64, bytes_per_token: f64) -> u64 {
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "request sizes are far below 2^52 and the ratio is positive"
    )]
    let t = (bytes as f64 / bytes_per_token).ceil() as u64;
    t
}

/// The bytes `tokens` stand for at `bytes_per_token`, rounded down.
pub fn bytes_at(tokens: u64, bytes_per_token: f64) -> u64 {
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "token counts are far below 2^52 and the ratio is positive"
    )]
    let b = (tokens as f64 * bytes_per_token).floor() as u64;
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_ratio_until_usage_then_the_measured_one() {
        let mut m = Meter::default();
        assert_eq!(m.tokens(4000, 4.0), 1000);
        m.calibrate(500); // nothing sent yet: ignored
        assert_eq!(m.tokens(4000, 4.0), 1000);
        m.sent(3000);
        m.calibrate(1000);
        assert_eq!(m.tokens(4000, 4.0), 1334);
        assert!(m.method(4.0).starts_with("calibrated (3.00"));
    }

    #[test]
    fn a_refusal_makes_the_refused_size_count_as_over_the_window() {
        let mut m = Meter::default();
        m.refused(8_000, 4.0); // nothing sent yet: nothing learnt
        assert_eq!(m.bytes_per_token(4.0), 4.0);
        // 30 000 bytes looked like 7 500 tokens, under 8 000; the server said otherwise.
        m.sent(30_000);
        assert_eq!(m.tokens(30_000, 4.0), 7_500);
        m.refused(8_000, 4.0);
        let ratio = m.bytes_per_token(4.0);
        assert!((ratio - 30_000.0 / 8_001.0 * 0.9).abs() < 1e-9, "{ratio}");
        assert_eq!(m.tokens(30_000, 4.0), 8_890);
        // A measured ratio that already says so is kept.
        let mut m = Meter::default();
        m.sent(40_000);
        m.calibrate(20_000);
        m.refused(8_000, 4.0);
        assert_eq!(m.bytes_per_token(4.0), 2.0);
    }

    #[test]
    fn a_usage_of_zero_tokens_teaches_nothing() {
        let mut m = Meter::default();
        m.sent(4_000);
        m.calibrate(0);
        assert_eq!(m.bytes_per_token(4.0), 4.0);
        assert!(m.method(4.0).starts_with("estimated"));
        m.calibrate(1);
        assert_eq!(m.bytes_per_token(4.0), 16.0, "clamped");
    }

    #[test]
    fn before_any_count_the_fewest_tokens_are_at_the_highest_measured_ratio() {
        let mut m = Meter::default();
        // The first request: 9,176 bytes, 2,294 tokens estimated, 1,623 counted.
        assert_eq!(m.tokens(9_176, 4.0), 2_294);
        assert_eq!(m.fewest_tokens(9_176, 4.0), 1_530);
        assert!(
            m.fewest_tokens(9_176, 4.0) < 2_048 - 256,
            "a 2,048 window takes it"
        );
        m.sent(9_176);
        m.calibrate(1_623);
        assert!(m.is_measured());
        assert_eq!(m.fewest_tokens(9_176, 4.0), 1_623);
    }

    #[test]
    fn tokens_round_up_and_bytes_round_down() {
        assert_eq!(tokens_at(9, 4.0), 3);
        assert_eq!(bytes_at(3, 2.5), 7);
    }
}
