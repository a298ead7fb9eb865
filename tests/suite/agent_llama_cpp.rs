//! The agent against a model server that is not OpenAI (issue 11 items 1–5): the loopback
//! server's llama.cpp personality (`Personality::LlamaCpp`) reproduces llama-cpp-python's
//! server with `chatml-function-calling`, and the shipped-profile defaults of `llm-openai` must
//! still get a tool-calling task done, end an oversized prompt with the real error, and report
//! usage the server never sent as unknown. Assertions are on the world: files on disk, the
//! session file, the requests the server received.

use std::time::Duration;

use keel_tests::model_server::{
    LLAMA_CPP_N_CTX, ModelServer, Personality, Reply, Request, error_body,
};
use serde_json::{Value, json};

use crate::suite::agent_support::*;

/// A safety net for hangs.
const LIMIT: Duration = Duration::from_secs(60);

fn llama_cpp(replies: Vec<Reply>) -> ModelServer {
    ModelServer::start_as(Personality::llama_cpp(), replies)
}

fn streamed(reqs: &[Request]) -> Vec<Value> {
    reqs.iter().map(|r| r.body["stream"].clone()).collect()
}

/// Every assistant message with tool calls in every request, as sent.
fn tool_call_turns(reqs: &[Request]) -> Vec<Value> {
    reqs.iter()
        .flat_map(|r| r.messages().as_array().cloned().unwrap_or_default())
        .filter(|m| m["role"] == "assistant" && m["tool_calls"].is_array())
        .collect()
}

/// Items 1–3: a task that writes a file and reads it back with `shell` gets done against
/// llama.cpp with the adapter's defaults. `tool_choice: "auto"` goes with the tools (without
/// it the server answers in text and nothing is written); the first streamed request comes
/// back empty and is asked again without streaming in the same attempt (no `llm/retry`), and
/// the row stops streaming for the rest of the run; the assistant tool-call turns carry
/// `"content": ""` (null is a 500 there), so the requests after a tool call, and a resume,
/// are accepted.
#[test]
fn issue11_a_tool_calling_session_against_llama_cpp_changes_the_world() {
    let server = llama_cpp(vec![
        Reply::tool_calls(vec![(
            "w1",
            "write_file",
            args(json!({"path": "note.txt", "content": "llama wrote this\n"})),
        )]),
        Reply::tool_calls(vec![(
            "s1",
            "shell",
            args(json!({"command": "cat note.txt"})),
        )]),
        Reply::text("The note is written and reads back."),
        Reply::text("Resumed."),
    ]);
    let env = agent_env(&server, "");
    let run = env.keel_within(
        &[
            "run",
            "--profile",
            "t",
            "--output-format",
            "json",
            "write a note and read it",
        ],
        LIMIT,
    );
    run.expect_code(0);
    let result: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(result["result"], "The note is written and reads back.");
    assert_eq!(
        std::fs::read_to_string(work_file(&env, "note.txt")).unwrap(),
        "llama wrote this\n",
        "write_file ran"
    );
    let reqs = contract_holds(&server);
    assert_eq!(
        streamed(&reqs),
        [true, false, false, false].map(Value::from),
        "an empty stream, the same request unstreamed, then no more streaming"
    );
    assert_eq!(
        reqs[0].body["messages"], reqs[1].body["messages"],
        "the probe is the same request"
    );
    for r in &reqs {
        assert_eq!(r.body["tool_choice"], "auto", "{}", r.body);
    }
    // shell really read the file written a step before.
    let shell = tool_message(reqs[3].messages(), "s1");
    assert!(
        shell["content"]
            .as_str()
            .unwrap()
            .contains("llama wrote this"),
        "{shell}"
    );
    let turns = tool_call_turns(&reqs);
    assert!(!turns.is_empty());
    for t in &turns {
        assert_eq!(t["content"], "", "assistant tool-call turn: {t}");
    }
    let id = session_of(&result);
    let events = stored_events(&env, &id);
    assert!(
        !types(&events).contains(&"llm/retry".to_owned()),
        "the fallback is part of one attempt"
    );
    // Every answer came whole, with usage: the usage is known.
    assert_eq!(
        result["usage"],
        json!({"input_tokens": 30, "output_tokens": 15})
    );

    // A resumed session (a new run: it streams, falls back again) sends the old tool-call
    // turns with "" and is answered.
    let run = env.keel_within(&["resume", &id, "--profile", "t", "and again"], LIMIT);
    run.expect_code(0);
    assert_eq!(run.stdout.trim(), "Resumed.");
    let reqs = server.completions();
    assert_eq!(streamed(&reqs[4..]), [true, false].map(Value::from));
    for t in tool_call_turns(&reqs[4..]) {
        assert_eq!(t["content"], "", "resumed tool-call turn: {t}");
    }
}

/// Item 4: a prompt over the context window is a 200 with an empty stream there. keel asks
/// once without streaming, learns `context_length_exceeded`, and ends the turn after those two
/// requests, not three TRANSPORT attempts: CONTEXT_OVERFLOW (issue 14 item 5: one user message
/// leaves nothing to compact, so nothing is retried), with the server's words.
#[test]
fn issue11_an_oversized_prompt_against_llama_cpp_is_context_window_exceeded() {
    let server = llama_cpp(vec![Reply::text("never")]);
    let env = agent_env(&server, "");
    // Four bytes a token, well over the window; under the 128 KiB an argument may hold.
    let prompt = "word ".repeat(usize::try_from(LLAMA_CPP_N_CTX).unwrap() * 4 / 5 + 2000);
    let run = env.keel_within(
        &["run", "--profile", "t", "--output-format", "json", &prompt],
        LIMIT,
    );
    run.expect_code(1);
    assert!(run.stderr.contains("CONTEXT_OVERFLOW"), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("maximum context length is 16384 tokens"),
        "the server's own reason: {}",
        run.stderr
    );
    let reqs = server.completions();
    assert_eq!(streamed(&reqs), [true, false].map(Value::from));
    assert_eq!(server.consumed(), 0, "the model never ran");
    let result: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    let events = stored_events(&env, &session_of(&result));
    let reason = last_reason(&events);
    assert_eq!(reason["error"]["code"], "CONTEXT_OVERFLOW", "{reason}");
    assert!(!types(&events).contains(&"llm/retry".to_owned()));
}

/// Item 5: llama.cpp streams no usage. With no tools offered the answer streams, and the
/// result says the usage is unknown (null counts, `unknown_calls`), in `json` and in
/// `stream-json`'s result line, never `{0, 0}`; the logged answer has no usage.
#[test]
fn issue11_usage_a_server_never_sent_is_unknown_not_zero() {
    let server = llama_cpp(vec![Reply::text("hello"), Reply::text("again")]);
    // No tool row (the context row offers the coldcontext tools, the subagent row `agent`):
    // the answer streams.
    let env = agent_env(
        &server,
        "[[disable]]\nid = \"tool-fs\"\n\n[[disable]]\nid = \"tool-shell\"\n\n[[disable]]\nid = \"context\"\n\n[[disable]]\nid = \"subagent\"\n",
    );
    let unknown = json!({"input_tokens": null, "output_tokens": null, "unknown_calls": 1});
    let (run, result) = run_json(&env, "hi", &[]);
    run.expect_code(0);
    assert_eq!(result["result"], "hello");
    assert_eq!(result["usage"], unknown);
    let reqs = server.completions();
    assert!(reqs[0].body.get("tools").is_none(), "no tools were offered");
    assert_eq!(
        reqs[0].body["stream_options"],
        json!({"include_usage": true})
    );
    let events = stored_events(&env, &session_of(&result));
    let answer = events
        .iter()
        .find(|e| e["type"] == "assistant/message")
        .unwrap();
    assert!(answer["data"].get("usage").is_none(), "{answer}");

    let run = env.keel(&[
        "run",
        "--profile",
        "t",
        "--output-format",
        "stream-json",
        "hi",
    ]);
    run.expect_code(0);
    let last: Value = serde_json::from_str(run.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "result");
    assert_eq!(last["usage"], unknown);
}

/// Item 3: a 500 whose body is a request-validation error is INVALID_REQUEST and retried
/// once, not twice: two requests, one `llm/retry`.
#[test]
fn issue11_a_validation_500_is_retried_once() {
    let validation = || {
        Reply::status(
            500,
            error_body(
                "1 validation error:\n  {'type': 'string_type', 'loc': ('body', 'messages', 2, \
                 'typed-dict', 'content'), 'msg': 'Input should be a valid string', 'input': None}\n",
                "internal_server_error",
                "null",
            ),
        )
    };
    let server = server(vec![validation(), validation(), validation()]);
    let env = agent_env(&server, "");
    let (run, result) = run_json(&env, "hello", &[]);
    run.expect_code(1);
    assert!(run.stderr.contains("INVALID_REQUEST"), "{}", run.stderr);
    assert_eq!(server.completions().len(), 2);
    let events = stored_events(&env, &session_of(&result));
    let retries: Vec<&Value> = events.iter().filter(|e| e["type"] == "llm/retry").collect();
    assert_eq!(retries.len(), 1);
    assert_eq!(retries[0]["data"]["code"], "INVALID_REQUEST");
    assert_eq!(last_reason(&events)["error"]["code"], "INVALID_REQUEST");
}

/// Item 2: `stream = false` (here from the command line) sends no streamed request at all, so
/// llama.cpp never sees the empty-stream case; a value that is not true, false or "auto" (or a
/// tool_choice that is not one) is a one-line config error naming the row, before any request.
#[test]
fn issue11_the_stream_and_tool_choice_keys_from_the_command_line() {
    let server = llama_cpp(vec![
        Reply::tool_calls(vec![(
            "w1",
            "write_file",
            args(json!({"path": "a.txt", "content": "a"})),
        )]),
        Reply::text("done"),
    ]);
    let env = agent_env(&server, "");
    let (run, _) = run_json(&env, "write a", &["-c", "llm-openai.stream=false"]);
    run.expect_code(0);
    assert!(work_file(&env, "a.txt").exists());
    assert_eq!(
        streamed(&server.completions()),
        [false, false].map(Value::from)
    );
    for (bad, says) in [
        (
            "llm-openai.stream=yes",
            r#"/stream: "yes" is not one of true, false or "auto""#,
        ),
        (
            "llm-openai.tool_choice=sometimes",
            r#""sometimes" is not one of "auto", "none" or "required""#,
        ),
    ] {
        let run = env.keel(&["run", "--profile", "t", "-c", bad, "hi"]);
        run.expect_code(2);
        assert!(
            run.stderr.contains("row 'llm-openai'"),
            "{bad}: {}",
            run.stderr
        );
        assert!(run.stderr.contains(says), "{bad}: {}", run.stderr);
        assert_eq!(
            run.stderr.trim().lines().count(),
            1,
            "{bad}: {}",
            run.stderr
        );
    }
    assert_eq!(server.completions().len(), 2);
}
