//! The default retry decision (B14): retryable codes, attempt cap, exponential backoff with a
//! little jitter, and the provider's `retry-after` honoured. Pure, so it is unit-tested here;
//! `agent/request-error` listeners can override it per call (LOOP-11).

use std::hash::BuildHasher as _;

use keel_plugin_api::codes::{ErrorCode, Retry};
use keel_plugin_api::services::llm::LlmFailure;

use crate::config::{RetryMode, RetryPolicy};

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
    // The code's retry class decides (docs/errors.md): transient codes go to the policy,
    // `once` codes are capped at one retry whatever the mode, the rest fail.
    let class = failure.code.retry();
    let retryable = match policy.mode {
        RetryMode::Always => true,
        RetryMode::Never => false,
        RetryMode::Normal => matches!(class, Retry::Later | Retry::Once),
    };
    let cap = if class == Retry::Once {
        policy.max_retries.min(1)
    } else {
        policy.max_retries
    };
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

/// A jitter sample in `[0, 1)`, fresh on every call, without a RNG dependency: std's
/// `RandomState` is seeded from the OS per thread and takes new keys on each construction, so
/// hashing nothing with a new one gives unpredictable bits. (The clock's sub-second nanos
/// modulo 1000 were used before: on a clock coarser than a microsecond they are always 0, and
/// every retry would wait the same −10 %.)
pub fn jitter_sample() -> f64 {
    let bits = std::hash::RandomState::new().hash_one(());
    f64::from(u32::try_from(bits >> 32).unwrap_or(0)) / 4_294_967_296.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_plugin_api::services::llm::LlmCode;

    fn failure(code: LlmCode) -> LlmFailure {
        LlmFailure::new(code, "x")
    }

    #[test]
    fn b14_retryable_codes_retry_with_exponential_backoff() {
        let p = RetryPolicy::default();
        let f = failure(LlmCode::Server);
        assert_eq!(decide(&p, &f, 0, 0.5), Decision::Retry { delay_ms: 500 });
        assert_eq!(decide(&p, &f, 1, 0.5), Decision::Retry { delay_ms: 1000 });
        assert_eq!(decide(&p, &f, 2, 0.5), Decision::Fail);
    }

    #[test]
    fn b14_non_retryable_codes_fail_at_once() {
        let p = RetryPolicy::default();
        for code in [
            LlmCode::Auth,
            LlmCode::ContextWindowExceeded,
            LlmCode::BadRequest,
        ] {
            assert_eq!(decide(&p, &failure(code), 0, 0.5), Decision::Fail);
        }
    }

    // Issue 11 item 3: a request the server refused as malformed is retried once at most,
    // even when the policy allows more; a smaller policy still wins.
    #[test]
    fn invalid_request_is_retried_once_at_most() {
        let f = failure(LlmCode::InvalidRequest);
        for mode in [RetryMode::Normal, RetryMode::Always] {
            let p = RetryPolicy {
                mode,
                max_retries: 5,
                ..RetryPolicy::default()
            };
            assert!(matches!(decide(&p, &f, 0, 0.5), Decision::Retry { .. }));
            assert_eq!(decide(&p, &f, 1, 0.5), Decision::Fail, "{mode:?}");
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
        let mut f = failure(LlmCode::RateLimit);
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
        let f = failure(LlmCode::Timeout);
        for j in [0.0, 0.25, 0.99] {
            let Decision::Retry { delay_ms } = decide(&p, &f, 25, j) else {
                panic!("expected a retry");
            };
            assert!((9_000..=11_000).contains(&delay_ms), "{delay_ms}");
        }
        let never = RetryPolicy {
            mode: RetryMode::Never,
            ..RetryPolicy::default()
        };
        assert_eq!(decide(&never, &f, 0, 0.5), Decision::Fail);
    }

    /// Every code but `INVALID_REQUEST` (capped at one retry in every mode, tested apart), for
    /// the mode tests.
    fn all() -> impl Iterator<Item = LlmCode> {
        LlmCode::ALL
            .iter()
            .copied()
            .filter(|c| *c != LlmCode::InvalidRequest)
    }

    fn mode(mode: &str) -> RetryPolicy {
        RetryPolicy {
            mode: serde_json::from_value(serde_json::json!(mode)).unwrap(),
            ..RetryPolicy::default()
        }
    }

    /// Issue 11 item 11 (B14): `always` retries every code, the non-retryable ones too, with
    /// the same backoff, and still stops at `max_retries`.
    #[test]
    fn issue11_item11_always_retries_every_code_with_backoff_up_to_the_cap() {
        let p = mode("always");
        for code in all() {
            let f = failure(code);
            assert_eq!(
                decide(&p, &f, 0, 0.5),
                Decision::Retry { delay_ms: 500 },
                "{code:?}"
            );
            assert_eq!(
                decide(&p, &f, 1, 0.5),
                Decision::Retry { delay_ms: 1000 },
                "{code:?}"
            );
            assert_eq!(decide(&p, &f, 2, 0.5), Decision::Fail, "{code:?}");
        }
        let once = RetryPolicy {
            max_retries: 0,
            ..mode("always")
        };
        assert_eq!(
            decide(&once, &failure(LlmCode::Server), 0, 0.5),
            Decision::Fail
        );
    }

    /// `never` fails every code at once, a provider's `retry-after` notwithstanding; `normal`
    /// retries exactly the retryable ones.
    #[test]
    fn issue11_item11_never_fails_every_code_and_normal_follows_the_retryable_list() {
        let never = mode("never");
        let normal = mode("normal");
        for code in all() {
            let mut f = failure(code);
            assert_eq!(decide(&never, &f, 0, 0.5), Decision::Fail, "{code:?}");
            let expected = if matches!(
                code,
                LlmCode::EmptyResponse
                    | LlmCode::RateLimit
                    | LlmCode::Server
                    | LlmCode::Timeout
                    | LlmCode::Transport
                    | LlmCode::InvalidRequest
            ) {
                Decision::Retry { delay_ms: 500 }
            } else {
                Decision::Fail
            };
            assert_eq!(decide(&normal, &f, 0, 0.5), expected, "{code:?}");
            f.provider_retry_after_ms = Some(10);
            assert_eq!(decide(&never, &f, 0, 0.5), Decision::Fail, "{code:?}");
        }
    }

    /// `retry-after` replaces the backoff exactly (no jitter, no `max_backoff_ms` cap), is
    /// honoured up to and including `max_retry_after_ms`, and never lifts the attempt cap.
    #[test]
    fn issue11_item11_retry_after_is_exact_up_to_its_cap_inclusive() {
        let p = RetryPolicy::default();
        let mut f = failure(LlmCode::RateLimit);
        for (after, jitter) in [(0, 0.0), (20_000, 1.0), (60_000, 0.0)] {
            f.provider_retry_after_ms = Some(after);
            assert_eq!(
                decide(&p, &f, 1, jitter),
                Decision::Retry { delay_ms: after },
                "retry-after {after}"
            );
        }
        f.provider_retry_after_ms = Some(60_001);
        assert_eq!(decide(&p, &f, 0, 0.5), Decision::Fail);
        f.provider_retry_after_ms = Some(10);
        assert_eq!(decide(&p, &f, 2, 0.5), Decision::Fail, "attempt cap");
    }

    /// The jitter maps `[0, 1]` linearly onto ±10 % of the backoff, and values outside are
    /// clamped to the ends.
    #[test]
    fn issue11_item11_jitter_spans_exactly_ten_percent_either_side() {
        let p = RetryPolicy::default();
        let f = failure(LlmCode::Server);
        for (jitter, delay_ms) in [
            (0.0, 900),
            (0.25, 950),
            (0.5, 1000),
            (0.75, 1050),
            (1.0, 1100),
            (-3.0, 900),
            (7.0, 1100),
        ] {
            assert_eq!(
                decide(&p, &f, 1, jitter),
                Decision::Retry { delay_ms },
                "jitter {jitter}"
            );
        }
    }

    /// The backoff doubles per attempt up to `max_backoff_ms` (jitter applies on top of the
    /// cap), and huge attempts or backoffs saturate instead of overflowing.
    #[test]
    fn issue11_item11_backoff_doubles_then_caps_and_saturates() {
        let p = RetryPolicy {
            max_retries: u32::MAX,
            ..RetryPolicy::default()
        };
        let f = failure(LlmCode::Timeout);
        let delays: Vec<Decision> = (0..7).map(|a| decide(&p, &f, a, 0.5)).collect();
        let expected: Vec<Decision> = [500, 1000, 2000, 4000, 8000, 10_000, 10_000]
            .into_iter()
            .map(|delay_ms| Decision::Retry { delay_ms })
            .collect();
        assert_eq!(delays, expected);
        assert_eq!(decide(&p, &f, 30, 0.0), Decision::Retry { delay_ms: 9000 });
        assert_eq!(
            decide(&p, &f, u32::MAX - 1, 1.0),
            Decision::Retry { delay_ms: 11_000 }
        );
        let huge = RetryPolicy {
            initial_backoff_ms: u64::MAX / 2,
            max_backoff_ms: u64::MAX,
            ..p
        };
        assert_eq!(
            decide(&huge, &f, 3, 1.0),
            Decision::Retry { delay_ms: u64::MAX }
        );
    }

    /// Issue 11 item 11: the sample the loop feeds [`decide`] lies in `[0, 1)` and varies from
    /// call to call, over the whole range. Bounds chosen so that a uniform source fails them
    /// with probability below 1e-40; a constant, a clock-bound or an out-of-range source fails
    /// them always.
    #[test]
    fn issue11_item11_jitter_samples_are_uniform_in_the_unit_interval() {
        let samples: Vec<f64> = (0..1000).map(|_| jitter_sample()).collect();
        assert!(
            samples.iter().all(|s| (0.0..1.0).contains(s)),
            "{samples:?}"
        );
        let mut distinct: Vec<u64> = samples.iter().map(|s| s.to_bits()).collect();
        distinct.sort_unstable();
        distinct.dedup();
        assert!(distinct.len() > 900, "{} distinct", distinct.len());
        let below = samples.iter().filter(|s| **s < 0.1).count();
        let above = samples.iter().filter(|s| **s >= 0.9).count();
        assert!(
            below > 10 && above > 10,
            "{below} below 0.1, {above} above 0.9"
        );
        let mean = samples.iter().sum::<f64>() / 1000.0;
        assert!((0.4..0.6).contains(&mean), "mean {mean}");
        // And through the decision: a fleet failing at once spreads its retries.
        let p = RetryPolicy::default();
        let f = failure(LlmCode::Server);
        let mut delays: Vec<u64> = (0..100)
            .map(|_| match decide(&p, &f, 1, jitter_sample()) {
                Decision::Retry { delay_ms } => delay_ms,
                Decision::Fail => panic!("expected a retry"),
            })
            .collect();
        assert!(
            delays.iter().all(|d| (900..=1100).contains(d)),
            "{delays:?}"
        );
        delays.sort_unstable();
        delays.dedup();
        assert!(delays.len() > 50, "{delays:?}");
    }
}
