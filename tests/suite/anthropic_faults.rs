//! The Anthropic adapter's faults through the binary (issue 15 item 2): an `overloaded_error`
//! event mid-stream and HTTP 529 go to the agent loop's one retry policy (with `retry-after`
//! honoured), a stream cut before `message_stop` is a normalised failure, a prompt that is too
//! long is CONTEXT_WINDOW_EXCEEDED, a refused key is AUTH, and a missing key is exit 2 before
//! any request, naming the row and the reference.

use keel_tests::model_server::{Reply, anthropic_error_body};

use crate::suite::agent_support::*;
use crate::suite::anthropic_support::*;

fn retries(events: &[serde_json::Value]) -> Vec<serde_json::Value> {
    events
        .iter()
        .filter(|e| e["type"] == "llm/retry")
        .map(|e| e["data"].clone())
        .collect()
}

// Issue 15 item 2: an SSE `overloaded_error` (after a `ping` and some text) is SERVER, which
// the loop's policy retries; the retry's answer completes the turn, the partial text is not.
#[test]
fn an_overloaded_error_event_is_retried_by_the_loop_policy() {
    let server = server(vec![
        Reply::stream_error("overloaded_error", "Overloaded"),
        Reply::text("recovered"),
    ]);
    let env = anthropic_env(&server);
    let run = keel_anthropic(&env, &server, &["run"], &["hello"]);
    run.expect_code(0);
    let result = result_of(&run);
    assert_eq!(result["result"], "recovered");
    assert_eq!(server.anthropic_requests().len(), 2);
    let events = stored_events(&env, &session_of(&result));
    let r = retries(&events);
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(r[0]["code"], "SERVER");
    let answers: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "assistant/message")
        .collect();
    assert_eq!(answers.len(), 1, "the broken answer was not logged");
}

// Issue 15 item 2: HTTP 529 with `retry-after: 1` is SERVER and the retry waits the
// provider's second (the delay is in the log).
#[test]
fn http_529_with_retry_after_is_retried_after_the_providers_delay() {
    let server = server(vec![
        Reply::status(529, anthropic_error_body("overloaded_error", "Overloaded"))
            .header("retry-after", "1"),
        Reply::text("ok"),
    ]);
    let env = anthropic_env(&server);
    let run = keel_anthropic(&env, &server, &["run"], &["hello"]);
    run.expect_code(0);
    let events = stored_events(&env, &session_of(&result_of(&run)));
    let r = retries(&events);
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(
        (r[0]["code"].as_str(), r[0]["delay_ms"].as_u64()),
        (Some("SERVER"), Some(1000))
    );
    let reqs = server.anthropic_requests();
    assert_eq!(reqs.len(), 2);
    assert!(reqs[1].at.duration_since(reqs[0].at).as_millis() >= 1000);
}

// Issue 15 item 2: a stream cut before `message_stop` is TRANSPORT every time: retried per
// the policy (2 retries), then the turn ends with that code, exit 1; no partial answer logged.
#[test]
fn a_stream_cut_before_message_stop_is_transport_retried_then_the_turn_ends() {
    let server = server(vec![
        Reply::disconnect_mid_stream(),
        Reply::disconnect_mid_stream(),
        Reply::disconnect_mid_stream(),
    ]);
    let env = anthropic_env(&server);
    let run = keel_anthropic(&env, &server, &["run"], &["hello"]);
    run.expect_code(1);
    assert!(run.stderr.contains("TRANSPORT"), "{}", run.stderr);
    assert!(run.stderr.contains("message_stop"), "{}", run.stderr);
    assert_eq!(server.anthropic_requests().len(), 3);
    let events = stored_events(&env, &session_of(&result_of(&run)));
    assert_eq!(retries(&events).len(), 2);
    let reason = last_reason(&events);
    assert_eq!(
        (reason["kind"].as_str(), reason["error"]["code"].as_str()),
        (Some("error"), Some("TRANSPORT"))
    );
    assert!(!events.iter().any(|e| e["type"] == "assistant/message"));
}

// Issue 15 item 2: a 401 is AUTH, never retried; a 400 "prompt is too long" is
// CONTEXT_WINDOW_EXCEEDED, the code the context row's server-overflow path acts on.
#[test]
fn auth_and_prompt_too_long_map_to_their_llm_codes() {
    let refused = server(vec![Reply::status(
        401,
        anthropic_error_body("authentication_error", "invalid x-api-key"),
    )]);
    let env = anthropic_env(&refused);
    let run = keel_anthropic(&env, &refused, &["run"], &["hello"]);
    run.expect_code(1);
    assert!(run.stderr.contains("AUTH"), "{}", run.stderr);
    assert_eq!(refused.anthropic_requests().len(), 1);

    let too_long = || {
        Reply::status(
            400,
            anthropic_error_body(
                "invalid_request_error",
                "prompt is too long: 210000 tokens > 200000 maximum",
            ),
        )
    };
    let server = server(vec![too_long(), too_long(), too_long()]);
    let env = anthropic_env(&server);
    let run = keel_anthropic(&env, &server, &["run"], &["hello"]);
    run.expect_code(1);
    // The context row's server-overflow path took it (it acts on CONTEXT_WINDOW_EXCEEDED
    // only): nothing to compact in a one-message session, so the turn ends CONTEXT_OVERFLOW
    // with the server's words.
    let events = stored_events(&env, &session_of(&result_of(&run)));
    let reason = last_reason(&events);
    assert_eq!(reason["error"]["code"], "CONTEXT_OVERFLOW", "{reason}");
    let message = reason["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("refused the request as over its context window")
            && message.contains("prompt is too long: 210000 tokens"),
        "{message}"
    );
    assert!(
        retries(&events).is_empty(),
        "not retried by the transient policy"
    );
}

// Issue 15 item 2, bad input: no key under the reference is exit 2 before any request, one
// line naming the row and the reference, never a value.
#[test]
fn a_missing_anthropic_key_exits_2_before_any_request_naming_the_row_and_reference() {
    let server = server(vec![Reply::text("never")]);
    let env = anthropic_env(&server).var(ANTHROPIC_KEY_REF, "");
    let run = keel_anthropic(&env, &server, &["run"], &["hello"]);
    run.expect_code(2);
    assert!(run.stderr.contains("CREDENTIAL_MISSING"), "{}", run.stderr);
    assert!(run.stderr.contains("row llm-anthropic"), "{}", run.stderr);
    assert!(run.stderr.contains(ANTHROPIC_KEY_REF), "{}", run.stderr);
    assert!(server.requests().is_empty());
}
