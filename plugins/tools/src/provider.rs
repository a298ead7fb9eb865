//! The body: the terminal of `tools/execute`. It calls the provider's `"execute"` under the
//! call's deadline and turns whatever comes back into a [`ToolResult`]: a provider error is
//! `TOOL_FAILED`, an answer that is not a result is `INVALID_TOOL_OUTPUT`, a deadline that
//! fires first is `TOOL_TIMEOUT` (the body's future is dropped). The race is generic over the
//! timer so it is tested without the kernel's clock.

use std::future::Future;

use futures::future::{Either, select};
use keel_plugin_api::sdk::Result;
use keel_plugin_api::services::tools::{ToolResult, codes};
use serde_json::Value;

/// Turns a provider's answer into a result.
pub fn settle(answer: Result<Value>) -> ToolResult {
    match answer {
        Err(e) => ToolResult::error(codes::TOOL_FAILED, format!("the tool failed: {e}")),
        Ok(v) => serde_json::from_value::<ToolResult>(v).unwrap_or_else(|e| {
            ToolResult::error(
                codes::INVALID_TOOL_OUTPUT,
                format!("the tool's answer is not a tool result: {e}"),
            )
        }),
    }
}

/// Runs `body`; when `deadline` (armed for `timeout_ms`) finishes first, the body is stopped
/// and the result is `TOOL_TIMEOUT`.
pub async fn run_body<B, D>(body: B, deadline: Option<D>, timeout_ms: u64) -> ToolResult
where
    B: Future<Output = Result<Value>>,
    D: Future<Output = ()>,
{
    let Some(deadline) = deadline else {
        return settle(body.await);
    };
    let body = std::pin::pin!(body);
    let deadline = std::pin::pin!(deadline);
    match select(body, deadline).await {
        Either::Left((answer, _)) => settle(answer),
        Either::Right(((), _)) => ToolResult::error(
            codes::TOOL_TIMEOUT,
            format!("the tool ran past its {timeout_ms} ms deadline and was stopped"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::channel::oneshot;
    use futures::executor::block_on;
    use keel_plugin_api::sdk::Error;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn code(r: &ToolResult) -> Option<&str> {
        r.error.as_ref().map(|e| e.code.as_str())
    }

    #[test]
    fn a_body_that_answers_in_time_wins() {
        let (_tx, never) = oneshot::channel::<()>();
        let deadline = async move {
            let _ = never.await;
        };
        let r = block_on(run_body(
            async { Ok(json!({"content": "ok", "meta": {"exit": 0}})) },
            Some(deadline),
            50,
        ));
        assert_eq!(r.content, "ok");
        assert_eq!(r.meta, Some(json!({"exit": 0})));
    }

    #[test]
    fn a_deadline_that_fires_first_is_a_timeout_and_stops_the_body() {
        let (_tx, never) = oneshot::channel::<Result<Value>>();
        let body = async move {
            never
                .await
                .unwrap_or_else(|_| Ok(json!({"content": "late"})))
        };
        let r = block_on(run_body(body, Some(async {}), 250));
        assert_eq!(code(&r), Some(codes::TOOL_TIMEOUT));
        assert!(r.content.contains("250 ms"));
    }

    #[test]
    fn no_deadline_waits_for_the_body() {
        let r = block_on(run_body(
            async { Ok(json!({"content": "done"})) },
            None::<std::future::Ready<()>>,
            0,
        ));
        assert_eq!(r, ToolResult::ok("done"));
    }

    #[test]
    fn provider_errors_and_bad_answers_become_error_results() {
        let r = settle(Err(Error::new("PANIC", "plugin panicked: x")));
        assert_eq!(code(&r), Some(codes::TOOL_FAILED));
        assert!(r.content.contains("PANIC"));
        let r = settle(Ok(json!({"text": "no content field"})));
        assert_eq!(code(&r), Some(codes::INVALID_TOOL_OUTPUT));
        let r = settle(Ok(
            json!({"content": "x", "is_error": true, "error": {"code": "FS_NOT_FOUND"}}),
        ));
        assert_eq!(code(&r), Some("FS_NOT_FOUND"));
    }
}
