//! Small local models (issue 23 item 19), through the binary against the loopback model
//! server: streamed requests ask for usage (`stream_options`), a server that refuses the field
//! with a 400 still answers (asked again without it, and not asked again that run), an answer
//! reporting zero prompt tokens counts as unknown usage, and an `agent` child's step budget is
//! drawn from its parent's, so a model cannot fan out past its own budget.

use keel_tests::model_server::{ModelServer, Personality, Reply};
use serde_json::json;

use crate::suite::agent_support::*;
use crate::suite::subagent_support::*;

/// Issue 23 item 19 (a): the first request streams with `stream_options.include_usage`; the
/// server refuses it (400 naming the field) and the same request without it is answered; the
/// next request of the run (after a tool call) asks for no usage at once. The run completes,
/// and its usage is unknown (the server's streams carry none), not zero.
#[test]
fn issue23_item19_a_server_that_refuses_stream_options_still_answers() {
    let server = ModelServer::start_as(
        Personality::RefusesStreamOptions,
        vec![
            Reply::tool_calls(vec![("r1", "read_file", args(json!({"path": "a.txt"})))]),
            Reply::text("read it"),
        ],
    );
    let env = agent_env(&server, "");
    env.file("work/a.txt", "alpha\n");
    let (run, result) = run_json(&env, "read a.txt", &[]);
    run.expect_code(0);
    assert_eq!(result["result"], "read it", "{result}");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3, "refused, asked again, after the tool");
    assert_eq!(
        reqs[0].body["stream_options"],
        json!({"include_usage": true}),
        "a streamed request asks for usage"
    );
    assert_eq!(reqs[0].body["stream"], true);
    for (i, r) in reqs.iter().enumerate().skip(1) {
        assert_eq!(r.body["stream"], true, "request {i} still streams");
        assert!(
            r.body.get("stream_options").is_none(),
            "request {i} asked for usage again: {}",
            r.body
        );
    }
    assert_eq!(reqs[0].body["messages"], reqs[1].body["messages"]);
    assert!(result["usage"]["input_tokens"].is_null(), "{result}");
    assert_eq!(result["usage"]["unknown_calls"], 2, "{result}");
    assert!(
        !run.stderr.contains("stream_options"),
        "the fallback is silent: {}",
        run.stderr
    );
}

/// Issue 23 item 19 (b): an answer whose usage says zero prompt tokens counts as unknown, not
/// as zero: the result's usage is `null` with one unknown call, and the logged assistant
/// message carries no usage.
#[test]
fn issue23_item19_zero_prompt_tokens_count_as_unknown_usage() {
    let server = server(vec![Reply::text("hi").usage(0, 3)]);
    let env = agent_env(&server, "");
    let (run, result) = run_json(&env, "hello", &[]);
    run.expect_code(0);
    assert!(result["usage"]["input_tokens"].is_null(), "{result}");
    assert_eq!(result["usage"]["unknown_calls"], 1, "{result}");
    let events = stored_events(&env, &session_of(&result));
    let message = events
        .iter()
        .find(|e| e["type"] == "assistant/message")
        .expect("an assistant message");
    assert!(message["data"].get("usage").is_none(), "{message}");
}

/// Issue 23 item 19 (d): with `agent-loop.max_steps = 6`, the parent's first request leaves 5;
/// its child may make half of that, 2, though its own script would go on calling tools: the
/// child's conversation gets exactly 2 requests and ends at its step limit, and the parent
/// still answers.
#[test]
fn issue23_item19_a_childs_step_budget_is_drawn_from_the_parents() {
    let looping: Vec<Reply> = (0..8)
        .map(|i| {
            Reply::tool_calls(vec![(
                format!("c{i}"),
                "read_file".to_owned(),
                args(json!({"path": "a.txt"})),
            )])
        })
        .collect();
    let server = ModelServer::start_routed(
        vec![("[loop]", looping)],
        vec![
            Reply::tool_calls(vec![agent_call("p1", "[loop] keep reading", json!({}))]),
            Reply::text("parent done"),
        ],
    );
    let env = sub_env(&server, "", "");
    env.file("work/a.txt", "alpha\n");
    let (run, result) = run_json(&env, "delegate", &["-c", "agent-loop.max_steps=6"]);
    run.expect_code(0);
    assert_eq!(result["result"], "parent done", "{result}");
    let child = server.routed(Some("[loop]"));
    assert_eq!(child.len(), 2, "the child's requests");
    assert_eq!(server.routed(None).len(), 2, "the parent's requests");
    let parent_next = server.routed(None).pop().unwrap();
    let answer = tool_message(parent_next.messages(), "p1")["content"].to_string();
    assert!(
        answer.contains("max-steps") || answer.contains("step"),
        "{answer}"
    );
}

/// Issue 23 item 19 (d): a parent with one request left after the current one can give a
/// child nothing: the `agent` call is refused with `SUBAGENT_LIMIT` and no child request is
/// made.
#[test]
fn issue23_item19_a_parent_with_no_steps_to_spare_starts_no_child() {
    let server = ModelServer::start_routed(
        vec![("[kid]", vec![Reply::text("kid done")])],
        vec![
            Reply::tool_calls(vec![agent_call("p1", "[kid] do it", json!({}))]),
            Reply::text("parent done"),
        ],
    );
    let env = sub_env(&server, "", "");
    let (run, result) = run_json(&env, "delegate", &["-c", "agent-loop.max_steps=2"]);
    run.expect_code(0);
    assert_eq!(result["result"], "parent done", "{result}");
    assert!(server.routed(Some("[kid]")).is_empty());
    let parent_next = server.routed(None).pop().unwrap();
    let answer = tool_message(parent_next.messages(), "p1")["content"].to_string();
    assert!(answer.contains("SUBAGENT_LIMIT"), "{answer}");
}

/// Issue 23 item 19 (c): a 2,048-token window (`context_window = 2048`, 256 kept for the
/// answer) and a first request of 7.2–10.7 kB (the system prompt and the tool schemas): at the
/// default 4 bytes a token it looks over the window, yet no tokenizer keel was measured
/// against counts it so; before the provider counted anything it is sent, not refused, and
/// the server's count then calibrates the meter.
#[test]
fn issue23_item19_a_small_window_is_not_refused_before_the_first_request() {
    let server = server(vec![Reply::text("fits").usage(1_500, 2)]);
    let env = agent_env(&server, "");
    let (run, result) = run_json(&env, "hello", &["-c", "llm-openai.context_window=2048"]);
    let reqs = server.completions();
    let bytes = reqs.first().map_or(0, |r| r.body.to_string().len());
    run.expect_code(0);
    assert_eq!(result["result"], "fits", "{result}");
    assert_eq!(reqs.len(), 1);
    assert!(
        (7_200..10_700).contains(&bytes),
        "the first request is {bytes} bytes: out of the range this test is about"
    );
}
