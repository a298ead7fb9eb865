//! Token streaming through the binary (issue 26 item 1): with `--output-format stream-json
//! --include-partial-messages`, the model's first piece is a Claude Code `stream_event` line on
//! keel's stdout while the loopback model server still holds the rest of the stream (OpenAI and
//! Anthropic adapters); the session log keeps one `assistant/message` and no piece; a retried
//! request streams again as a new message; a crash mid-stream loses the pieces and the log
//! recovers as it always did; the default output has no `stream_event` line; the flag without
//! stream-json is a usage error; the scripted adapter streams word by word; a child's pieces
//! hang under the parent's `agent` call; a secret cut across pieces is still redacted.

use std::time::Duration;

use keel_tests::model_server::{Hold, ModelServer, Reply, split_pieces};
use keel_tests::workspace_root;
use serde_json::Value;

use crate::suite::agent_support::{KEY_REF, KEY_VALUE, agent_env, server, stored_events, types};
use crate::suite::anthropic_support::anthropic_env;
use crate::suite::stream_partial_support::{Live, WAIT, is_delta, stream_kinds, streamed_text};
use crate::suite::subagent_support::{agent_call, sub_env};

const TEXT: &str = "Streaming works: each piece shows as it is generated.";

fn partial_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut all = vec![
        "run",
        "--profile",
        "t",
        "--output-format",
        "stream-json",
        "--include-partial-messages",
    ];
    all.extend_from_slice(extra);
    all
}

fn session_id(lines: &[Value]) -> String {
    lines
        .iter()
        .find_map(|v| v["session_id"].as_str())
        .expect("a line names the session")
        .to_owned()
}

/// A delta line from the first piece of [`TEXT`] only (its words so far: the last one waits
/// for the next piece).
fn assert_first_piece(line: &Value) {
    let text = line["event"]["delta"]["text"].as_str().unwrap_or_default();
    assert!(
        !text.is_empty() && split_pieces(TEXT, 3)[0].starts_with(text),
        "{line}"
    );
}

/// What every streamed run must show once it ended: exit 0, the whole text in its pieces,
/// `message_stop` before the `assistant` line, one `assistant/message` in the log, no piece.
fn check_the_end(env: &keel_tests::Env, end: &crate::suite::stream_partial_support::Ended) {
    assert_eq!(end.code, 0, "{}", end.stderr);
    assert_eq!(streamed_text(&end.lines), TEXT);
    let kinds = stream_kinds(&end.lines);
    assert_eq!(kinds.first().map(String::as_str), Some("message_start"));
    assert_eq!(kinds.last().map(String::as_str), Some("message_stop"));
    let stop = end
        .lines
        .iter()
        .position(|v| v["type"] == "stream_event" && v["event"]["type"] == "message_stop");
    let answer = end.lines.iter().position(|v| v["type"] == "assistant");
    assert!(
        stop < answer,
        "message_stop comes before the assistant line"
    );
    let events = stored_events(env, &session_id(&end.lines));
    let kinds = types(&events);
    assert_eq!(
        kinds.iter().filter(|k| *k == "assistant/message").count(),
        1,
        "{kinds:?}"
    );
    assert!(!kinds.iter().any(|k| k.contains("delta")), "{kinds:?}");
    let answer = events
        .iter()
        .find(|e| e["type"] == "assistant/message")
        .unwrap();
    assert_eq!(answer["data"]["message"]["content"], TEXT);
}

#[test]
fn issue26_item1_openai_the_first_piece_is_on_stdout_while_the_server_holds_the_rest() {
    let (reply, hold) = Reply::text_held(TEXT);
    let server = server(vec![reply]);
    let env = agent_env(&server, "");
    let mut live = Live::start(&env, &partial_args(&["say it"]));
    hold.wait_reached(WAIT);
    let (_, first) = live.wait_for("the first text_delta", |v| is_delta(v, "text_delta"));
    // Read before the release: the rest of the stream has not been sent.
    assert_first_piece(&first);
    assert_eq!(first["parent_tool_use_id"], Value::Null);
    assert!(
        !live.values().iter().any(|v| v["type"] == "assistant"),
        "no answer before the stream ends"
    );
    hold.release();
    check_the_end(&env, &live.end());
}

#[test]
fn issue26_item1_anthropic_thinking_then_text_stream_while_the_server_holds_the_rest() {
    let hold = Hold::new();
    // Two thinking pieces and the first text piece, then the hold.
    let reply = Reply::text(TEXT)
        .thinking("plan it first", "sig-1")
        .held(&hold, 3);
    let server = server(vec![reply]);
    let env = anthropic_env(&server);
    let patch = workspace_root().join("profiles/patches/anthropic.toml");
    let patch = patch.to_string_lossy().into_owned();
    let base = format!("llm-anthropic.base_url={}", server.anthropic_base_url());
    let mut live = Live::start(
        &env,
        &partial_args(&["--patch", &patch, "-c", &base, "say it"]),
    );
    hold.wait_reached(WAIT);
    let (_, first) = live.wait_for("the first text_delta", |v| is_delta(v, "text_delta"));
    assert_first_piece(&first);
    let thinking: String = live
        .values()
        .iter()
        .filter(|v| is_delta(v, "thinking_delta"))
        .filter_map(|v| v["event"]["delta"]["thinking"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(thinking, "plan it first");
    hold.release();
    check_the_end(&env, &live.end());
}

/// The attempt of a `message_start` (its id ends `_<attempt>`).
fn attempt_of(start: &Value) -> String {
    let id = start["event"]["message"]["id"].as_str().unwrap_or_default();
    id.rsplit('_').next().unwrap_or_default().to_owned()
}

#[test]
fn issue26_item1_a_retried_request_streams_again_as_attempt_1() {
    let server = server(vec![
        Reply::disconnect_mid_stream(),
        Reply::text(TEXT).delay(Duration::from_millis(20)),
    ]);
    let env = agent_env(&server, "");
    let end = Live::start(&env, &partial_args(&["say it"])).end();
    assert_eq!(end.code, 0, "{}", end.stderr);
    let starts: Vec<&Value> = end
        .lines
        .iter()
        .filter(|v| v["type"] == "stream_event" && v["event"]["type"] == "message_start")
        .collect();
    assert_eq!(starts.len(), 2, "{:#?}", end.lines);
    assert_eq!(
        starts.iter().map(|s| attempt_of(s)).collect::<Vec<_>>(),
        ["0", "1"]
    );
    // The cut attempt's pieces, then its close, then the retry's whole text.
    let second = end
        .lines
        .iter()
        .position(|v| std::ptr::eq(v, starts[1]))
        .unwrap();
    assert_eq!(streamed_text(&end.lines[..second]), "partial answer");
    assert_eq!(
        stream_kinds(&end.lines[..second])
            .last()
            .map(String::as_str),
        Some("message_stop")
    );
    assert_eq!(streamed_text(&end.lines[second..]), TEXT);
    let kinds = types(&stored_events(&env, &session_id(&end.lines)));
    assert!(kinds.contains(&"llm/retry".to_owned()), "{kinds:?}");
    assert_eq!(
        kinds.iter().filter(|k| *k == "assistant/message").count(),
        1
    );
}

#[test]
fn issue26_item1_a_crash_mid_stream_loses_the_pieces_and_the_log_recovers() {
    let (reply, hold) = Reply::text_held(TEXT);
    let server = server(vec![reply, Reply::text("after the crash")]);
    let env = agent_env(&server, "");
    let mut live = Live::start(&env, &partial_args(&["say it"]));
    hold.wait_reached(WAIT);
    live.wait_for("the first text_delta", |v| is_delta(v, "text_delta"));
    let id = session_id(&live.values());
    let killed = live.kill();
    hold.release();
    assert_ne!(killed.code, 0);
    let before = types(&stored_events(&env, &id));
    assert!(
        !before.contains(&"assistant/message".to_owned()),
        "{before:?}"
    );
    assert!(!before.iter().any(|k| k.contains("delta")), "{before:?}");
    // The next run recovers the log as it always did and answers; the lost pieces are nowhere.
    let run = env.keel(&["resume", &id, "--profile", "t", "go on"]);
    run.expect_code(0);
    let events = stored_events(&env, &id);
    let answers: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "assistant/message")
        .collect();
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0]["data"]["message"]["content"], "after the crash");
    let sent = server.completions();
    let resumed = sent.last().unwrap().messages().to_string();
    assert!(!resumed.contains(&split_pieces(TEXT, 3)[0]), "{resumed}");
}

/// SEC-03: the adapter key, repeated by the model and cut across two reads of the stream, is
/// redacted in the `stream_event` lines as in the `assistant` line: no fragment of it reaches
/// stdout.
#[test]
fn issue26_item1_sec03_a_secret_cut_across_pieces_is_redacted_on_stdout() {
    let hold = Hold::new();
    let text = format!("the key is {KEY_VALUE} ok");
    let server = server(vec![Reply::text(text.as_str()).held(&hold, 2)]);
    let env = agent_env(&server, "");
    let mut live = Live::start(&env, &partial_args(&["say it"]));
    hold.wait_reached(WAIT);
    live.wait_for("the first text_delta", |v| is_delta(v, "text_delta"));
    hold.release();
    let end = live.end();
    assert_eq!(end.code, 0, "{}", end.stderr);
    let stdout: String = end.lines.iter().map(|v| format!("{v}\n")).collect();
    let fragment = &KEY_VALUE[..9];
    assert!(
        !split_pieces(&text, 3).iter().any(|p| p.contains(KEY_VALUE)),
        "the model server's pieces cut the key"
    );
    assert!(!stdout.contains(fragment), "{stdout}");
    let marker = format!("[credential {KEY_REF}]");
    assert_eq!(streamed_text(&end.lines), format!("the key is {marker} ok"));
}

#[test]
fn issue26_item1_without_the_flag_stream_json_is_unchanged() {
    let server = server(vec![Reply::text(TEXT), Reply::text(TEXT)]);
    let env = agent_env(&server, "");
    let shape = |lines: &[Value]| -> Vec<String> {
        lines
            .iter()
            .filter(|v| v["type"] != "stream_event")
            .map(|v| format!("{} {}", v["type"], v["event"]["type"]))
            .collect()
    };
    let plain = Live::start(
        &env,
        &[
            "run",
            "--profile",
            "t",
            "--output-format",
            "stream-json",
            "say it",
        ],
    )
    .end();
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    assert!(!plain.lines.iter().any(|v| v["type"] == "stream_event"));
    let partial = Live::start(&env, &partial_args(&["say it"])).end();
    assert_eq!(partial.code, 0, "{}", partial.stderr);
    assert!(partial.lines.iter().any(|v| v["type"] == "stream_event"));
    assert_eq!(shape(&plain.lines), shape(&partial.lines));
}

#[test]
fn issue26_item1_partial_messages_without_stream_json_is_a_usage_error() {
    let server = server(vec![]);
    let env = agent_env(&server, "");
    for format in ["text", "json"] {
        let run = env.keel(&[
            "run",
            "--profile",
            "t",
            "--output-format",
            format,
            "--include-partial-messages",
            "hi",
        ]);
        run.expect_code(2);
        assert!(
            run.stderr
                .contains("--include-partial-messages needs --output-format stream-json"),
            "{}",
            run.stderr
        );
    }
    assert!(server.completions().is_empty(), "no model request");
}

#[test]
fn issue26_item1_the_scripted_adapter_streams_word_by_word() {
    let env = keel_tests::Env::new();
    env.profile(
        "s",
        r#"bundles = ["base", "agent"]

[[replace]]
id = "approval"
config = { mode = "never" }

[[replace]]
id = "agent-loop"
config = { provider = "scripted" }

[[insert]]
id = "llm-scripted"
plugin = "llm-scripted"
config = { steps = [{ text = "one two three four", piece_delay_ms = 5 }] }

[[insert]]
id = "driver"
plugin = "headless"
"#,
    );
    let end = Live::start(
        &env,
        &[
            "run",
            "--profile",
            "s",
            "--output-format",
            "stream-json",
            "--include-partial-messages",
            "go",
        ],
    )
    .end();
    assert_eq!(end.code, 0, "{}", end.stderr);
    let pieces: Vec<&str> = end
        .lines
        .iter()
        .filter(|v| is_delta(v, "text_delta"))
        .filter_map(|v| v["event"]["delta"]["text"].as_str())
        .collect();
    assert_eq!(pieces, ["one ", "two ", "three ", "four"]);
}

/// A child agent's pieces print under the parent's `agent` call, the parent's with none; every
/// line names the run's session.
#[test]
fn issue26_item1_a_childs_pieces_carry_the_parents_agent_call() {
    let server = ModelServer::start_routed(
        vec![("[child]", vec![Reply::text("the child speaks")])],
        vec![
            Reply::tool_calls(vec![agent_call(
                "p1",
                "[child] say something",
                serde_json::json!({}),
            )]),
            Reply::text("the parent ends"),
        ],
    );
    let env = sub_env(&server, "", "");
    let end = Live::start(&env, &partial_args(&["delegate"])).end();
    assert_eq!(end.code, 0, "{}", end.stderr);
    let root = session_id(&end.lines);
    let under = |parent: Value| -> String {
        let lines: Vec<Value> = end
            .lines
            .iter()
            .filter(|v| v["type"] == "stream_event" && v["parent_tool_use_id"] == parent)
            .cloned()
            .collect();
        assert!(lines.iter().all(|v| v["session_id"] == root.as_str()));
        streamed_text(&lines)
    };
    assert_eq!(under(Value::from("p1")), "the child speaks");
    assert_eq!(under(Value::Null), "the parent ends");
}
