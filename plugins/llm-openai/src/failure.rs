//! HTTP and transport trouble → provider-neutral [`LlmFailure`]s (LLM-04, B14).
//!
//! Pure functions of the status, the headers that matter and the body, so every mapping is
//! unit-tested without a server: 429 → `RATE_LIMIT` (with `retry-after`), 401/403 → `AUTH`,
//! 5xx → `SERVER` (but a 5xx whose body is a request-validation error → `INVALID_REQUEST`,
//! retried once at most), a 400/413 about the prompt's size → `CONTEXT_WINDOW_EXCEEDED`, other
//! 4xx → `BAD_REQUEST`. Messages quote the provider's own reason, with the key redacted.

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
    /// `retry-after-ms` header (wins over `retry-after`).
    pub retry_after_ms: Option<String>,
    /// `x-request-id` header.
    pub request_id: Option<String>,
}

/// A failure with `code` and the request id.
pub fn failure(code: LlmCode, message: String, request_id: Option<String>) -> LlmFailure {
    let mut f = LlmFailure::new(code, message);
    f.request_id = request_id;
    f
}

/// Whether an error body says the prompt does not fit the model's context.
pub fn mentions_context_overflow(body: &str) -> bool {
    let lower = body.to_ascii_lowercase();
    [
        "context_length_exceeded",
        "context length",
        "context window",
    ]
    .iter()
    .any(|needle| lower.contains(needle))
}

/// Whether an error body says the request failed the server's validation: a FastAPI
/// `{"detail": [{"loc": …, "msg": …}]}` body, or a message saying `validation error(s)` (what
/// pydantic and FastAPI print: llama-cpp-python wraps it in an OpenAI error with HTTP 500 when
/// an assistant message has `"content": null`, issue 11 item 3).
pub fn mentions_request_validation(body: &str) -> bool {
    let fastapi_detail = serde_json::from_str::<Value>(body).ok().is_some_and(|v| {
        v.get("detail").and_then(Value::as_array).is_some_and(|d| {
            d.iter()
                .any(|e| e.get("loc").is_some() && e.get("msg").is_some())
        })
    });
    fastapi_detail
        || provider_message(body)
            .to_ascii_lowercase()
            .contains("validation error")
}

/// The provider's own reason: `error.message` of a JSON body, else the (trimmed) text.
pub fn provider_message(body: &str) -> String {
    let from_json = serde_json::from_str::<Value>(body).ok().and_then(|v| {
        v.get("error")
            .and_then(|e| e.get("message").or(Some(e)))
            .or_else(|| v.get("message"))
            .map(|m| m.as_str().map_or_else(|| m.to_string(), str::to_owned))
    });
    let text = from_json.unwrap_or_else(|| body.trim().to_owned());
    let mut out: String = text.chars().take(MAX_QUOTE).collect();
    if text.chars().count() > MAX_QUOTE {
        out.push('…');
    }
    out
}

/// `retry-after-ms` (milliseconds) or `retry-after` (seconds, or an HTTP date), in ms from `now`.
pub fn retry_after_ms(info: &ResponseInfo, now: SystemTime) -> Option<u64> {
    if let Some(ms) = info
        .retry_after_ms
        .as_deref()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0)
    {
        return Some(ms.round() as u64);
    }
    let value = info.retry_after.as_deref()?.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| (secs * 1000.0).round() as u64);
    }
    let at = httpdate::parse_http_date(value).ok()?;
    let wait = at.duration_since(now).unwrap_or_default();
    Some(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX))
}

/// The failure for a non-success HTTP response. `key` is redacted from the quoted body.
pub fn from_status(
    provider: &str,
    info: &ResponseInfo,
    body: &str,
    key: &str,
    now: SystemTime,
) -> LlmFailure {
    let status = info.status;
    let code = match status {
        429 => LlmCode::RateLimit,
        401 | 403 => LlmCode::Auth,
        400 | 413 if mentions_context_overflow(body) => LlmCode::ContextWindowExceeded,
        500..=599 if mentions_request_validation(body) => LlmCode::InvalidRequest,
        500..=599 => LlmCode::Server,
        _ => LlmCode::BadRequest,
    };
    let quoted = if code == LlmCode::Auth {
        // Auth errors tend to echo (part of) the key; quote nothing.
        "the credential was rejected".to_owned()
    } else {
        credential::redact(&provider_message(body), key)
    };
    let mut f = failure(
        code,
        format!("{provider} returned HTTP {status}: {quoted}"),
        info.request_id.clone(),
    );
    f.status = Some(status);
    if code == LlmCode::RateLimit {
        f.provider_retry_after_ms = retry_after_ms(info, now);
    }
    f
}

pub use keel_llm_http_kit::{header_text, read_error_body};

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn info(status: u16) -> ResponseInfo {
        ResponseInfo {
            status,
            request_id: Some("req_1".into()),
            ..ResponseInfo::default()
        }
    }

    fn code(status: u16, body: &str) -> String {
        from_status("openai", &info(status), body, "sk-key", SystemTime::now())
            .code
            .to_string()
    }

    #[test]
    fn llm_04_status_mapping() {
        assert_eq!(code(429, ""), "RATE_LIMIT");
        assert_eq!(code(401, ""), "AUTH");
        assert_eq!(code(403, ""), "AUTH");
        assert_eq!(code(500, ""), "SERVER");
        assert_eq!(code(503, "overloaded"), "SERVER");
        assert_eq!(
            code(400, r#"{"error":{"code":"invalid_value"}}"#),
            "BAD_REQUEST"
        );
        assert_eq!(code(404, ""), "BAD_REQUEST");
        assert_eq!(code(422, ""), "BAD_REQUEST");
        let overflow = r#"{"error":{"message":"This model's maximum context length is 8192 tokens","code":"context_length_exceeded"}}"#;
        assert_eq!(code(400, overflow), "CONTEXT_WINDOW_EXCEEDED");
        assert_eq!(
            code(413, "prompt exceeds the context window"),
            "CONTEXT_WINDOW_EXCEEDED"
        );
        // Only 400/413 are read for overflow.
        assert_eq!(code(500, overflow), "SERVER");
    }

    // Issue 11 item 3: a 500 whose body is a request-validation error (llama-cpp-python's
    // wrapped pydantic/FastAPI error, or a bare FastAPI `detail` list) is INVALID_REQUEST, not
    // SERVER; other 500s stay SERVER, and a 4xx validation error stays BAD_REQUEST.
    #[test]
    fn a_5xx_request_validation_error_is_invalid_request() {
        let llama_cpp = r#"{"error":{"message":"1 validation error:
  {'type': 'string_type', 'loc': ('body', 'messages', 2, 'typed-dict', 'content'), 'msg': 'Input should be a valid string', 'input': None}
","type":"internal_server_error","param":null,"code":null}}"#;
        assert_eq!(code(500, llama_cpp), "INVALID_REQUEST");
        let pydantic_v1 = r#"{"error":{"message":"2 validation errors for Request
body -> messages -> 2 -> content
  none is not an allowed value","type":"internal_server_error"}}"#;
        assert_eq!(code(500, pydantic_v1), "INVALID_REQUEST");
        let fastapi = r#"{"detail":[{"type":"string_type","loc":["body","messages",2,"content"],"msg":"Input should be a valid string","input":null}]}"#;
        assert_eq!(code(500, fastapi), "INVALID_REQUEST");
        assert_eq!(
            code(502, "Validation Error: upstream refused"),
            "INVALID_REQUEST"
        );
        assert_eq!(
            code(500, r#"{"error":{"message":"CUDA out of memory"}}"#),
            "SERVER"
        );
        assert_eq!(code(500, r#"{"detail":"Internal Server Error"}"#), "SERVER");
        assert_eq!(code(422, fastapi), "BAD_REQUEST");
        let f = from_status("llama", &info(500), llama_cpp, "k", SystemTime::now());
        assert_eq!(f.status, Some(500));
        assert!(
            f.message.contains("Input should be a valid string"),
            "{}",
            f.message
        );
    }

    #[test]
    fn llm_04_failure_carries_status_request_id_and_provider_reason() {
        let f = from_status(
            "openai",
            &info(400),
            r#"{"error":{"message":"bad tool schema"}}"#,
            "sk-key",
            SystemTime::now(),
        );
        assert_eq!(f.status, Some(400));
        assert_eq!(f.request_id.as_deref(), Some("req_1"));
        assert_eq!(f.message, "openai returned HTTP 400: bad tool schema");
    }

    #[test]
    fn llm_05_quoted_bodies_never_carry_the_key() {
        let f = from_status(
            "openai",
            &info(400),
            "you sent sk-secret-value, which is odd",
            "sk-secret-value",
            SystemTime::now(),
        );
        assert!(!f.message.contains("sk-secret-value"), "{}", f.message);
        let f = from_status(
            "openai",
            &info(401),
            "Incorrect API key provided: sk-secret-value",
            "sk-secret-value",
            SystemTime::now(),
        );
        assert!(!f.message.contains("sk-secret"), "{}", f.message);
    }

    #[test]
    fn retry_after_seconds_date_and_ms() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let mut i = info(429);
        i.retry_after = Some("3".into());
        assert_eq!(retry_after_ms(&i, now), Some(3000));
        i.retry_after = Some("1.5".into());
        assert_eq!(retry_after_ms(&i, now), Some(1500));
        i.retry_after = Some(httpdate::fmt_http_date(now + Duration::from_secs(20)));
        assert_eq!(retry_after_ms(&i, now), Some(20_000));
        i.retry_after = Some(httpdate::fmt_http_date(now - Duration::from_secs(20)));
        assert_eq!(retry_after_ms(&i, now), Some(0));
        i.retry_after_ms = Some("250".into());
        assert_eq!(retry_after_ms(&i, now), Some(250));
        i.retry_after_ms = None;
        i.retry_after = Some("soon".into());
        assert_eq!(retry_after_ms(&i, now), None);
        let f = from_status(
            "openai",
            &{
                let mut i = info(429);
                i.retry_after = Some("2".into());
                i
            },
            "",
            "k",
            now,
        );
        assert_eq!(f.provider_retry_after_ms, Some(2000));
    }

    #[test]
    fn long_bodies_are_truncated() {
        let long = "x".repeat(2000);
        let m = provider_message(&long);
        assert_eq!(m.chars().count(), MAX_QUOTE + 1);
    }
}
