//! The default retry decision (B14): retryable codes, attempt cap, exponential backoff with a
//! little jitter, and the provider's `retry-after` honoured. Pure, so it is unit-tested here;
//! `agent/request-error` listeners can override it per call (LOOP-11).

use keel_plugin_api::services::llm::{FailureCode, LlmFailure};

use crate::config::RetryPolicy;

/// Retry after `delay_ms`, or fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Try again after the delay.
    Retry {
        /// Wait before the next attempt.
        delay_ms: u64,
    },
    /// The failure ends the turn.
    Fail,
}

/// Decides whether failed attempt number `attempt` (0-based) is retried.
pub fn decide(policy: &RetryPolicy, failure: &LlmFailure, attempt: u32, jitter: f64) -> Decision {
    let retryable = match policy.mode.as_str() {
        "always" => true,
        "never" => false,
        _ => FailureCode::is_retryable(&failure.code),
    };
    // The seam caps a code retrying is futile for (`INVALID_REQUEST`: once), whatever the mode.
    let cap = FailureCode::retry_cap(&failure.code)
        .map_or(policy.max_retries, |c| c.min(policy.max_retries));
    if !retryable || attempt >= cap {
        return Decision::Fail;
    }
    if let Some(after) = failure.provider_retry_after_ms {
        if after > policy.max_retry_after_ms {
            return Decision::Fail;
        }
        return Decision::Retry { delay_ms: after };
    }
    let base = policy
        .initial_backoff_ms
        .saturating_mul(1u64 << attempt.min(20))
        .min(policy.max_backoff_ms);
    // ±10 % jitter so a fleet of agents does not retry in lockstep.
    let factor = 1.0 + 0.1 * (jitter.clamp(0.0, 1.0) * 2.0 - 1.0);
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        reason = "a backoff in ms, at most max_backoff_ms * 1.1"
    )]
    let delay_ms = (base as f64 * factor).round() as u64;
    Decision::Retry { delay_ms }
}

/// A jitter sample in `[0, 1)` without a RNG dependency: the clock's sub-second nanos.
pub fn jitter_sample() -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    f64::from(nanos % 1000) / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(code: FailureCode) -> LlmFailure {
        LlmFailure::new(code, "x")
    }

    #[test]
    fn b14_retryable_codes_retry_with_exponential_backoff() {
        let p = RetryPolicy::default();
        let f = failure(FailureCode::Server);
        assert_eq!(decide(&p, &f, 0, 0.5), Decision::Retry { delay_ms: 500 });
        assert_eq!(decide(&p, &f, 1, 0.5), Decision::Retry { delay_ms: 1000 });
        assert_eq!(decide(&p, &f, 2, 0.5), Decision::Fail);
    }

    #[test]
    fn b14_non_retryable_codes_fail_at_once() {
        let p = RetryPolicy::default();
        for code in [
            FailureCode::Auth,
            FailureCode::ContextWindowExceeded,
            FailureCode::BadRequest,
        ] {
            assert_eq!(decide(&p, &failure(code), 0, 0.5), Decision::Fail);
        }
    }

    // Issue 11 item 3: a request the server refused as malformed is retried once at most,
    // even when the policy allows more; a smaller policy still wins.
    #[test]
    fn invalid_request_is_retried_once_at_most() {
        let f = failure(FailureCode::InvalidRequest);
        for mode in ["normal", "always"] {
            let p = RetryPolicy {
                mode: mode.into(),
                max_retries: 5,
                ..RetryPolicy::default()
            };
            assert!(matches!(decide(&p, &f, 0, 0.5), Decision::Retry { .. }));
            assert_eq!(decide(&p, &f, 1, 0.5), Decision::Fail, "{mode}");
        }
        let none = RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        };
        assert_eq!(decide(&none, &f, 0, 0.5), Decision::Fail);
    }

    #[test]
    fn b14_retry_after_is_honoured_and_capped() {
        let p = RetryPolicy::default();
        let mut f = failure(FailureCode::RateLimit);
        f.provider_retry_after_ms = Some(1234);
        assert_eq!(decide(&p, &f, 0, 0.9), Decision::Retry { delay_ms: 1234 });
        f.provider_retry_after_ms = Some(3_600_000);
        assert_eq!(decide(&p, &f, 0, 0.9), Decision::Fail);
    }

    #[test]
    fn jitter_stays_within_ten_percent_and_cap_holds() {
        let p = RetryPolicy {
            max_retries: 30,
            ..RetryPolicy::default()
        };
        let f = failure(FailureCode::Timeout);
        for j in [0.0, 0.25, 0.99] {
            let Decision::Retry { delay_ms } = decide(&p, &f, 25, j) else {
                panic!("expected a retry");
            };
            assert!((9_000..=11_000).contains(&delay_ms), "{delay_ms}");
        }
        let never = RetryPolicy {
            mode: "never".into(),
            ..RetryPolicy::default()
        };
        assert_eq!(decide(&never, &f, 0, 0.5), Decision::Fail);
    }
}
