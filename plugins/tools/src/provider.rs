//! The body: the terminal of `tools/execute`. It calls the provider's `execute` under the
//! call's deadline and the batch's cancellation, and turns whatever comes back into a
//! [`ToolResult`]: a provider error is `TOOL_FAILED`, an answer that is not a result is
//! `INVALID_TOOL_OUTPUT`, a deadline that fires first is `TOOL_TIMEOUT`, a cancel that comes
//! first is `ABORTED` (TOOL-09). Either way the provider call's future is dropped: that is how a
//! provider learns its caller went away (`tool-shell` then terminates the command's process
//! group, SBX-01). The race is generic over the timer and the cancel so it is tested without
//! the kernel's clock.

use std::future::Future;

use futures::future::{Either, select};
use keel_plugin_api::codes::ContractCode;
use keel_plugin_api::sdk::Result;
use keel_plugin_api::services::tools::{ToolCode, ToolResult};

/// Turns a provider's answer into a result (the SDK decoded it once: an answer that is not a
/// `ToolResult` arrives as `INVALID_ANSWER`).
pub fn settle(answer: Result<ToolResult>) -> ToolResult {
    match answer {
        Ok(result) => result,
        Err(e) if e.is(ContractCode::InvalidAnswer) => ToolResult::error(
            ToolCode::InvalidToolOutput,
            format!("the tool's answer is not a tool result: {}", e.message),
        ),
        Err(e) => ToolResult::error(ToolCode::ToolFailed, format!("the tool failed: {e}")),
    }
}

/// The result of a body stopped by a cancel (the turn was aborted while it ran).
pub fn stopped_by_cancel() -> ToolResult {
    ToolResult::error(
        ToolCode::Aborted,
        "the call was cancelled while it ran and was stopped before it finished",
    )
}

/// Runs `body`; when `deadline` (armed for `timeout_ms`) finishes first, the body is stopped
/// and the result is `TOOL_TIMEOUT`; when `cancelled` finishes first, it is stopped and the
/// result is `ABORTED`.
pub async fn run_body<B, D, C>(
    body: B,
    deadline: Option<D>,
    cancelled: C,
    timeout_ms: u64,
) -> ToolResult
where
    B: Future<Output = Result<ToolResult>>,
    D: Future<Output = ()>,
    C: Future<Output = ()>,
{
    let deadline = async move {
        match deadline {
            Some(d) => d.await,
            None => futures::future::pending().await,
        }
    };
    let (deadline, cancelled) = (std::pin::pin!(deadline), std::pin::pin!(cancelled));
    match select(std::pin::pin!(body), select(deadline, cancelled)).await {
        Either::Left((answer, _)) => settle(answer),
        Either::Right((Either::Left(((), _)), _)) => ToolResult::error(
            ToolCode::ToolTimeout,
            format!("the tool ran past its {timeout_ms} ms deadline and was stopped"),
        ),
        Either::Right((Either::Right(((), _)), _)) => stopped_by_cancel(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::channel::oneshot;
    use futures::executor::block_on;
    use futures::future::pending;
    use keel_plugin_api::sdk::Error;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn result(v: serde_json::Value) -> Result<ToolResult> {
        Ok(serde_json::from_value(v).unwrap())
    }

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
            async { result(json!({"content": "ok", "meta": {"exit": 0}})) },
            Some(deadline),
            pending(),
            50,
        ));
        assert_eq!(r.content, "ok");
        assert_eq!(r.meta, Some(json!({"exit": 0})));
    }

    #[test]
    fn a_deadline_that_fires_first_is_a_timeout_and_stops_the_body() {
        let (_tx, never) = oneshot::channel::<Result<ToolResult>>();
        let body = async move {
            never
                .await
                .unwrap_or_else(|_| result(json!({"content": "late"})))
        };
        let r = block_on(run_body(body, Some(async {}), pending(), 250));
        assert_eq!(code(&r), Some("TOOL_TIMEOUT"));
        assert!(r.content.contains("250 ms"));
    }

    #[test]
    fn no_deadline_waits_for_the_body() {
        let r = block_on(run_body(
            async { result(json!({"content": "done"})) },
            None::<std::future::Ready<()>>,
            pending(),
            0,
        ));
        assert_eq!(r, ToolResult::ok("done"));
    }

    // TOOL-09: a cancel reaches a running body at once (with or without a deadline): the body's
    // future is dropped, which is what tells its provider to stop, and the result is ABORTED.
    #[test]
    fn tool09_a_cancel_stops_a_running_body_and_drops_it() {
        for deadline in [None, Some(pending())] {
            let (tx, never) = oneshot::channel::<Result<ToolResult>>();
            let body = async move {
                never
                    .await
                    .unwrap_or_else(|_| result(json!({"content": "late"})))
            };
            let r = block_on(run_body(body, deadline, async {}, 0));
            assert_eq!(code(&r), Some("ABORTED"));
            assert!(r.is_error);
            assert!(tx.is_canceled(), "the body's future was dropped");
        }
    }

    #[test]
    fn provider_errors_and_bad_answers_become_error_results() {
        let r = settle(Err(Error::coded(
            keel_plugin_api::codes::ContractCode::Panic,
            "plugin panicked: x",
        )));
        assert_eq!(code(&r), Some("TOOL_FAILED"));
        assert!(r.content.contains("PANIC"));
        let r = settle(Err(Error::coded(
            keel_plugin_api::codes::ContractCode::InvalidAnswer,
            "missing field `content`",
        )));
        assert_eq!(code(&r), Some("INVALID_TOOL_OUTPUT"));
        let r = settle(result(
            json!({"content": "x", "is_error": true, "error": {"code": "FS_NOT_FOUND"}}),
        ));
        assert_eq!(code(&r), Some("FS_NOT_FOUND"));
    }
}
