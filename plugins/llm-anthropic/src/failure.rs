//! Anthropic's errors → the provider-neutral [`LlmFailure`] codes `llm-openai` uses (LLM-04,
//! B14), so the agent loop's one retry policy handles both adapters alike:
//!
//! | Anthropic | code | retried by the loop |
//! |---|---|---|
//! | HTTP 429, `rate_limit_error` | `RATE_LIMIT` (with `retry-after`) | yes |
//! | HTTP 529, `overloaded_error`; 500/503, `api_error` | `SERVER` (529/503 with `retry-after`) | yes |
//! | HTTP 401/403, `authentication_error`, `permission_error` | `AUTH` | no |
//! | HTTP 400/413 "prompt is too long", `request_too_large` | `CONTEXT_WINDOW_EXCEEDED` | no (the context row compacts) |
//! | other 4xx, `invalid_request_error`, `not_found_error` | `BAD_REQUEST` | no |
//!
//! Pure functions of the status, the headers that matter and the body (or the SSE `error`
//! event), so every mapping is unit-tested without a server. Messages quote the provider's
//! reason with the key redacted; an auth failure quotes nothing.

use std::time::SystemTime;

use keel_plugin_api::services::llm::{LlmCode, LlmFailure};
use serde_json::Value;

use crate::credential;

/// The longest provider message quoted in a failure.
const MAX_QUOTE: usize = 500;

/// The response facts a failure is built from.
#[derive(Debug, Clone, Default)]
pub struct ResponseInfo {
    /// HTTP status.
    pub status: u16,
    /// `retry-after` header.
    pub retry_after: Option<String>,
    /// `request-id` header.
    pub request_id: Option<String>,
}

/// A failure with `code` and the request id.
pub fn failure(code: LlmCode, message: String, request_id: Option<String>) -> LlmFailure {
    let mut f = LlmFailure::new(code, message);
    f.request_id = request_id;
    f
}

/// Whether an error message says the prompt does not fit the model's context
/// (`prompt is too long: 210000 tokens > 200000 maximum`, and the limit-plus-`max_tokens` form).
pub fn mentions_context_overflow(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    ["prompt is too long", "context window", "context length"]
        .iter()
        .any(|needle| lower.contains(needle))
}

/// The code of an Anthropic error `type` (HTTP body or SSE `error` event).
pub fn code_of(kind: &str, message: &str) -> LlmCode {
    match kind {
        "rate_limit_error" => LlmCode::RateLimit,
        "overloaded_error" | "api_error" => LlmCode::Server,
        "authentication_error" | "permission_error" => LlmCode::Auth,
        "request_too_large" => LlmCode::ContextWindowExceeded,
        _ if mentions_context_overflow(message) => LlmCode::ContextWindowExceeded,
        "invalid_request_error" | "not_found_error" => LlmCode::BadRequest,
        // An error type this adapter does not know, mid-stream: the provider's trouble.
        _ => LlmCode::Server,
    }
}

/// The failure an SSE `error` event carries (the HTTP status was already 200).
pub fn from_stream_error(kind: &str, message: &str, request_id: Option<String>) -> LlmFailure {
    let code = code_of(kind, message);
    let mut f = failure(
        code,
        format!(
            "anthropic sent an error event mid-stream: {kind}: {}",
            quote(message)
        ),
        request_id,
    );
    if kind == "overloaded_error" {
        f.status = Some(529);
    }
    f
}

/// `error.type` and `error.message` of an Anthropic error body, else the trimmed text.
fn body_error(body: &str) -> (String, String) {
    let parsed = serde_json::from_str::<Value>(body).ok();
    let error = parsed.as_ref().and_then(|v| v.get("error"));
    let field = |k: &str| {
        error
            .and_then(|e| e.get(k))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    (
        field("type").unwrap_or_default(),
        field("message").unwrap_or_else(|| body.trim().to_owned()),
    )
}

fn quote(text: &str) -> String {
    let mut out: String = text.chars().take(MAX_QUOTE).collect();
    if text.chars().count() > MAX_QUOTE {
        out.push('…');
    }
    out
}

/// `retry-after` (seconds, or an HTTP date), in ms from `now`.
pub fn retry_after_ms(value: Option<&str>, now: SystemTime) -> Option<u64> {
    let value = value?.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| (secs * 1000.0).round() as u64);
    }
    let at = httpdate::parse_http_date(value).ok()?;
    let wait = at.duration_since(now).unwrap_or_default();
    Some(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX))
}

/// The failure for a non-success HTTP response. `key` is redacted from the quoted body.
pub fn from_status(info: &ResponseInfo, body: &str, key: &str, now: SystemTime) -> LlmFailure {
    let status = info.status;
    let (kind, message) = body_error(body);
    let code = match status {
        429 => LlmCode::RateLimit,
        401 | 403 => LlmCode::Auth,
        400 | 413 if kind == "request_too_large" || mentions_context_overflow(&message) => {
            LlmCode::ContextWindowExceeded
        }
        500..=599 => LlmCode::Server,
        _ => LlmCode::BadRequest,
    };
    let quoted = if code == LlmCode::Auth {
        "the credential was rejected".to_owned()
    } else {
        credential::redact(&quote(&message), key)
    };
    let mut f = failure(
        code,
        format!("anthropic returned HTTP {status}: {quoted}"),
        info.request_id.clone(),
    );
    f.status = Some(status);
    if matches!(status, 429 | 503 | 529) {
        f.provider_retry_after_ms = retry_after_ms(info.retry_after.as_deref(), now);
    }
    f
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn body(kind: &str, message: &str) -> String {
        serde_json::json!({"type": "error", "error": {"type": kind, "message": message}})
            .to_string()
    }

    fn at(status: u16, b: &str) -> LlmFailure {
        let info = ResponseInfo {
            status,
            retry_after: Some("2".into()),
            request_id: Some("req_1".into()),
        };
        from_status(&info, b, "sk-ant-secret", SystemTime::now())
    }

    #[test]
    fn statuses_map_to_the_llm_codes_the_retry_policy_knows() {
        let f = at(429, &body("rate_limit_error", "slow down"));
        assert_eq!(
            (f.code, f.provider_retry_after_ms),
            (LlmCode::RateLimit, Some(2000))
        );
        let f = at(529, &body("overloaded_error", "Overloaded"));
        assert_eq!(
            (f.code, f.provider_retry_after_ms),
            (LlmCode::Server, Some(2000))
        );
        assert_eq!(f.status, Some(529));
        assert_eq!(at(500, &body("api_error", "x")).code, LlmCode::Server);
        let f = at(
            401,
            &body("authentication_error", "invalid x-api-key sk-ant-secret"),
        );
        assert_eq!(f.code, LlmCode::Auth);
        assert!(!f.message.contains("sk-ant"), "{}", f.message);
        let f = at(
            400,
            &body(
                "invalid_request_error",
                "prompt is too long: 210000 tokens > 200000 maximum",
            ),
        );
        assert_eq!(f.code, LlmCode::ContextWindowExceeded);
        assert!(f.message.contains("210000 tokens"), "{}", f.message);
        assert_eq!(
            at(413, &body("request_too_large", "big")).code,
            LlmCode::ContextWindowExceeded
        );
        assert_eq!(
            at(400, &body("invalid_request_error", "bad")).code,
            LlmCode::BadRequest
        );
        assert_eq!(
            at(404, &body("not_found_error", "model")).code,
            LlmCode::BadRequest
        );
        assert_eq!(
            at(400, &body("invalid_request_error", "bad")).provider_retry_after_ms,
            None
        );
        assert_eq!(
            at(418, "not json").message,
            "anthropic returned HTTP 418: not json"
        );
    }

    #[test]
    fn stream_error_events_map_like_their_statuses() {
        let f = from_stream_error("overloaded_error", "Overloaded", None);
        assert_eq!((f.code, f.status), (LlmCode::Server, Some(529)));
        assert_eq!(
            from_stream_error("api_error", "x", None).code,
            LlmCode::Server
        );
        assert_eq!(
            from_stream_error("rate_limit_error", "x", None).code,
            LlmCode::RateLimit
        );
        assert_eq!(
            from_stream_error("brand_new_error", "x", None).code,
            LlmCode::Server
        );
        assert_eq!(
            from_stream_error("invalid_request_error", "prompt is too long", None).code,
            LlmCode::ContextWindowExceeded
        );
    }

    #[test]
    fn retry_after_takes_seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(retry_after_ms(Some("1.5"), now), Some(1500));
        let date = httpdate::fmt_http_date(now + Duration::from_secs(20));
        assert_eq!(retry_after_ms(Some(&date), now), Some(20_000));
        assert_eq!(retry_after_ms(Some("soon"), now), None);
        // A negative or non-finite number is no delay at all, never a huge or a wrapped one.
        assert_eq!(retry_after_ms(Some("-1"), now), None);
        assert_eq!(retry_after_ms(Some("inf"), now), None);
        assert_eq!(retry_after_ms(Some("NaN"), now), None);
    }

    // cargo mutants: the error type alone decides, and quotes are cut only when too long.
    #[test]
    fn error_types_map_without_a_message_and_quotes_end_in_an_ellipsis_only_when_cut() {
        assert_eq!(
            code_of("request_too_large", "Request exceeds the maximum size"),
            LlmCode::ContextWindowExceeded
        );
        assert_eq!(code_of("permission_error", ""), LlmCode::Auth);
        let exact = "x".repeat(MAX_QUOTE);
        assert_eq!(quote(&exact), exact);
        let long = "y".repeat(MAX_QUOTE + 1);
        let cut = quote(&long);
        assert_eq!(cut.chars().count(), MAX_QUOTE + 1);
        assert!(cut.ends_with('…'), "{cut}");
    }
}
