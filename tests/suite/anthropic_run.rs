//! The Anthropic adapter end to end (issue 15 item 2): the built `keel` binary with the
//! `llm-anthropic` row (switched in by the shipped patch) against the loopback model server's
//! Messages endpoint. Every assertion is on the world: files on disk, the session file, the
//! requests the server received.

use keel_tests::model_server::Reply;
use serde_json::{Value, json};

use crate::suite::agent_support::*;
use crate::suite::anthropic_support::*;

// Issue 15 item 2: a tool_use whose input arrives in input_json_delta pieces cut mid-token
// (inside keys, strings and a `\u` escape), in a body the server writes in two parts cut
// inside a UTF-8 character, writes exactly that content; the result goes back as a
// tool_result block naming the tool_use id, and the log has the call and its result.
#[test]
fn a_tool_use_split_mid_token_writes_the_exact_file_and_returns_its_result() {
    let arguments =
        r#"{"path": "notes/hello.txt", "content": "caf\u00e9 \u2615 and ☕ — done\nline 2\n"}"#;
    let server = server(vec![
        Reply::text_and_calls("Writing it.", vec![("toolu_01", "write_file", arguments)])
            .cache_usage(100, 900),
        Reply::text("Done."),
    ]);
    let env = anthropic_env(&server);
    let run = keel_anthropic(&env, &server, &["run"], &["write the note"]);
    run.expect_code(0);
    let result = result_of(&run);
    assert_eq!(result["result"], "Done.");
    assert_eq!(
        std::fs::read_to_string(work_file(&env, "notes/hello.txt")).unwrap(),
        "café ☕ and ☕ — done\nline 2\n"
    );
    assert!(
        server.completions().is_empty(),
        "nothing went to llm-openai's endpoint"
    );
    let reqs = server.anthropic_requests();
    assert_eq!(reqs.len(), 2);
    // The second request replays the tool_use and answers it in one user turn.
    let assistant = &assistant_turns(&reqs[1])[0];
    assert_eq!(
        assistant["content"],
        json!([
            {"type": "text", "text": "Writing it."},
            {"type": "tool_use", "id": "toolu_01", "name": "write_file",
             "input": serde_json::from_str::<Value>(arguments).unwrap()},
        ])
    );
    let results = last_user_blocks(&reqs[1]);
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0]["type"], "tool_result");
    assert_eq!(results[0]["tool_use_id"], "toolu_01");
    assert!(results[0].get("is_error").is_none(), "{}", results[0]);
    // The log: the call with the raw input text exactly as it was streamed, its result, and
    // the prompt's usage summed over the three input counts (10 + 100 + 900).
    let events = stored_events(&env, &session_of(&result));
    let call = events.iter().find(|e| e["type"] == "tool/call").unwrap();
    assert_eq!(call["data"]["call_id"], "toolu_01");
    assert_eq!(call["data"]["name"], "write_file");
    assert_eq!(call["data"]["arguments"], arguments);
    let tool_result = events.iter().find(|e| e["type"] == "tool/result").unwrap();
    assert_eq!(tool_result["data"]["call_id"], "toolu_01");
    let answer = events
        .iter()
        .find(|e| e["type"] == "assistant/message")
        .unwrap();
    assert_eq!(answer["data"]["usage"]["input_tokens"], 1010);
    assert_eq!(last_reason(&events)["kind"], "completed");
}

// Issue 15 item 2: what goes on the wire — the key from the environment under the default
// reference in `x-api-key` (no bearer token), `anthropic-version`, `/v1/messages` once (the
// base URL has no `/v1`), the system prompt at the top level and cache_control on exactly the
// last system block and the last tool.
#[test]
fn the_request_carries_the_key_version_and_cache_marks_on_the_stable_prefix() {
    let server = server(vec![Reply::text("hi")]);
    let env = anthropic_env(&server);
    let run = keel_anthropic(&env, &server, &["run"], &["hello"]);
    run.expect_code(0);
    let reqs = server.anthropic_requests();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert_eq!(r.path, "/v1/messages", "no /v1/v1");
    assert_eq!(
        r.headers.get("x-api-key").map(String::as_str),
        Some(ANTHROPIC_KEY)
    );
    assert_eq!(
        r.headers.get("anthropic-version").map(String::as_str),
        Some("2023-06-01")
    );
    assert!(!r.headers.contains_key("authorization"));
    let b = &r.body;
    assert_eq!(b["model"], "claude-sonnet-4-5");
    assert_eq!(b["stream"], true);
    assert_eq!(b["max_tokens"], 8192);
    let system = b["system"].as_array().expect("a top-level system");
    assert!(!system.is_empty());
    let ephemeral = json!({"type": "ephemeral"});
    assert_eq!(system.last().unwrap()["cache_control"], ephemeral);
    assert!(
        system[..system.len() - 1]
            .iter()
            .all(|s| s.get("cache_control").is_none())
    );
    let tools = b["tools"].as_array().expect("tools");
    assert!(tools.len() > 1);
    assert_eq!(tools.last().unwrap()["cache_control"], ephemeral);
    assert!(
        tools[..tools.len() - 1]
            .iter()
            .all(|t| t.get("cache_control").is_none())
    );
    assert!(tools.iter().all(|t| t["input_schema"].is_object()));
    assert!(
        b["messages"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["role"] != "system")
    );
}

// Issue 15 item 2: thinking blocks are kept in the session and sent back as the API requires —
// the thinking block with its identical signature, then the redacted one, before the tool_use
// of the assistant turn replayed; and a resumed session still sends them.
#[test]
fn thinking_blocks_are_logged_and_replayed_before_tool_use_even_after_resume() {
    let signature = "EqQBCkYIBxgCKkD+/sig==";
    let server = server(vec![
        Reply::tool_calls(vec![("toolu_t1", "list_dir", r#"{"path": "."}"#)])
            .thinking("I should look at the files first.", signature)
            .redacted_thinking("EmwKAhgBEgy3va3pzix"),
        Reply::text("Looked."),
        Reply::text("Still here."),
    ]);
    let env = anthropic_env(&server);
    let run = keel_anthropic(&env, &server, &["run"], &["look around"]);
    run.expect_code(0);
    let id = session_of(&result_of(&run));
    let expected = json!([
        {"type": "thinking", "thinking": "I should look at the files first.",
         "signature": signature},
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
        {"type": "tool_use", "id": "toolu_t1", "name": "list_dir", "input": {"path": "."}},
    ]);
    let reqs = server.anthropic_requests();
    assert_eq!(assistant_turns(&reqs[1])[0]["content"], expected);
    let events = stored_events(&env, &id);
    let answer = events
        .iter()
        .find(|e| e["type"] == "assistant/message")
        .unwrap();
    assert_eq!(
        answer["data"]["message"]["reasoning_blocks"],
        json!([
            {"text": "I should look at the files first.", "signature": signature},
            {"text": "", "signature": "EmwKAhgBEgy3va3pzix", "redacted": true},
        ])
    );
    let run = keel_anthropic(&env, &server, &["resume", &id], &["and again"]);
    run.expect_code(0);
    let reqs = server.anthropic_requests();
    assert_eq!(reqs.len(), 3);
    assert_eq!(assistant_turns(&reqs[2])[0]["content"], expected);
}
