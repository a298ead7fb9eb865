//! `keel acp` driven by an editor stand-in on the official TypeScript SDK (issue 26 item 3,
//! SURF-03): a prompt's answer and tool calls as updates, permissions answered by the editor
//! (the file is or is not on disk), and a session that survives a restart (`session/load`).

use std::time::Duration;

use keel_tests::model_server::Reply;
use serde_json::{Value, json};

use crate::suite::acp_support::{acp_env, open_steps, run_client, run_client_with};
use crate::suite::agent_support::{args, server, stored_events, types};

const LIMIT: Duration = Duration::from_secs(60);

fn session_of(t: &crate::suite::acp_support::Transcript, step: usize) -> String {
    t.result(step)["value"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("no session id:\n{t}"))
        .to_owned()
}

// SURF-03: initialize names the protocol and capabilities; a prompt's text reaches the model
// and its answer comes back as agent_message_chunk updates before the prompt settles with
// end_turn; the editor session is a keel session on disk.
#[test]
fn a_prompt_is_a_keel_turn_and_its_answer_streams_before_the_stop_reason() {
    let server = server(vec![Reply::text("hello from keel")]);
    let env = acp_env(&server, "");
    let mut steps = open_steps(&env, false);
    steps.push(json!({"op": "prompt", "text": "say hello"}));
    let t = run_client(&env, &[], Value::Array(steps), &[], LIMIT);

    let init = &t.result(0)["value"];
    assert_eq!(init["protocolVersion"], 1, "{t}");
    assert_eq!(init["agentCapabilities"]["loadSession"], true, "{t}");
    assert_eq!(init["agentInfo"]["name"], "keel", "{t}");
    let id = session_of(&t, 1);
    assert_eq!(t.result(2)["value"]["stopReason"], "end_turn", "{t}");
    assert_eq!(t.agent_text(), "hello from keel", "{t}");
    assert!(
        t.updates_of("user_message_chunk").is_empty(),
        "live, the prompt is not echoed:\n{t}"
    );
    let chunk = t
        .position(|l| l["update"]["sessionUpdate"] == "agent_message_chunk")
        .expect("a chunk");
    let answer = t.position(|l| l["step"] == 2).expect("the prompt's answer");
    assert!(
        chunk < answer,
        "the text arrives before the stop reason:\n{t}"
    );
    // The prompt reached the model, and the session is on disk with the turn.
    let reqs = server.completions();
    assert_eq!(reqs.len(), 1);
    assert!(reqs[0].messages().to_string().contains("say hello"));
    let events = stored_events(&env, &id);
    let kinds = types(&events);
    assert!(kinds.contains(&"turn/end".to_owned()), "{kinds:?}");
    assert!(
        t.of("exit").any(|l| l["code"] == 0),
        "keel exits 0 when stdin closes:\n{t}"
    );
}

// TOOL-03 through the editor: a mutating call asks with session/request_permission; allowed
// once, the file is written; rejected once, it is not. Both calls show as tool_call (kind
// edit, the file's location) and tool_call_update (completed / failed).
#[test]
fn permission_granted_once_writes_the_file_and_denied_once_does_not() {
    let write = |id: &str, path: &str| {
        Reply::tool_calls(vec![(
            id,
            "write_file",
            args(json!({"path": path, "content": format!("{path} body")})),
        )])
    };
    let server = server(vec![
        write("c1", "granted.txt"),
        Reply::text("wrote it"),
        write("c2", "denied.txt"),
        Reply::text("could not"),
    ]);
    let env = acp_env(&server, "");
    let mut steps = open_steps(&env, false);
    steps.push(json!({"op": "prompt", "text": "write granted.txt"}));
    steps.push(json!({"op": "prompt", "text": "write denied.txt"}));
    let t = run_client(
        &env,
        &["--approval", "ask"],
        Value::Array(steps),
        &["allow-once", "reject-once"],
        LIMIT,
    );

    let granted = env.work().join("granted.txt");
    assert_eq!(
        std::fs::read_to_string(&granted).ok().as_deref(),
        Some("granted.txt body"),
        "{t}"
    );
    assert!(!env.work().join("denied.txt").exists(), "{t}");
    let asked: Vec<&Value> = t.of("permission").collect();
    assert_eq!(asked.len(), 2, "{t}");
    assert_eq!(asked[0]["request"]["toolCall"]["toolCallId"], "c1");
    assert_eq!(asked[1]["request"]["toolCall"]["toolCallId"], "c2");
    let kinds: Vec<&str> = asked[0]["request"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["kind"].as_str())
        .collect();
    assert_eq!(
        kinds,
        ["allow_once", "allow_always", "reject_once", "reject_always"]
    );
    let calls = t.updates_of("tool_call");
    assert_eq!(calls.len(), 2, "{t}");
    assert_eq!(calls[0]["kind"], "edit");
    assert_eq!(
        calls[0]["locations"][0]["path"],
        granted.display().to_string()
    );
    let finished: Vec<(&str, &str)> = t
        .updates_of("tool_call_update")
        .iter()
        .filter_map(|u| Some((u["toolCallId"].as_str()?, u["status"].as_str()?)))
        .collect();
    assert_eq!(finished, [("c1", "completed"), ("c2", "failed")], "{t}");
    assert_eq!(t.result(2)["value"]["stopReason"], "end_turn");
    assert_eq!(t.result(3)["value"]["stopReason"], "end_turn");
    // The approval row audited both answers in the session log (TOOL-05).
    let id = session_of(&t, 1);
    let decided: Vec<String> = stored_events(&env, &id)
        .iter()
        .filter(|e| e["type"] == "approval/decided")
        .map(|e| e["data"]["outcome"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(decided, ["allowed-once", "rejected"]);
}

// "Allow always" is remembered for the tool in this session: the second write is not asked.
#[test]
fn allow_always_answers_the_next_call_of_that_tool_without_asking() {
    let server = server(vec![
        Reply::tool_calls(vec![(
            "c1",
            "write_file",
            args(json!({"path": "one.txt", "content": "1"})),
        )]),
        Reply::tool_calls(vec![(
            "c2",
            "write_file",
            args(json!({"path": "two.txt", "content": "2"})),
        )]),
        Reply::text("both"),
    ]);
    let env = acp_env(&server, "");
    let mut steps = open_steps(&env, false);
    steps.push(json!({"op": "prompt", "text": "write two files"}));
    let t = run_client(
        &env,
        &["--approval", "ask"],
        Value::Array(steps),
        &["allow-always"],
        LIMIT,
    );
    assert_eq!(t.of("permission").count(), 1, "{t}");
    assert!(env.work().join("one.txt").is_file(), "{t}");
    assert!(env.work().join("two.txt").is_file(), "{t}");
}

// An editor session survives a restart: a new `keel acp` process loads the session by id,
// replays its history as updates (the user's message, the agent's answer, the tool call),
// and the next prompt continues the same keel session.
#[test]
fn a_restarted_server_loads_the_session_and_replays_its_history() {
    let server = server(vec![
        Reply::tool_calls(vec![(
            "r1",
            "read_file",
            args(json!({"path": "notes.txt"})),
        )]),
        Reply::text("the notes say hi"),
        Reply::text("second answer"),
    ]);
    let env = acp_env(&server, "");
    env.file("work/notes.txt", "hi\n");
    let mut steps = open_steps(&env, false);
    steps.push(json!({"op": "prompt", "text": "read my notes"}));
    let first = run_client(&env, &[], Value::Array(steps), &[], LIMIT);
    let id = session_of(&first, 1);
    assert_eq!(
        first.result(2)["value"]["stopReason"],
        "end_turn",
        "{first}"
    );

    let steps = json!([
        {"op": "initialize"},
        {"op": "load", "session": id, "cwd": env.work()},
        {"op": "prompt", "text": "and again"},
    ]);
    let second = run_client(&env, &[], steps, &[], LIMIT);
    assert_eq!(second.result(1)["ok"], true, "{second}");
    let replayed_user: Vec<&str> = second
        .updates_of("user_message_chunk")
        .iter()
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(replayed_user, ["read my notes"], "{second}");
    let load_answer = second.position(|l| l["step"] == 1).expect("load answered");
    let replayed_text = second
        .position(|l| l["update"]["content"]["text"] == "the notes say hi")
        .expect("the old answer replayed");
    assert!(
        replayed_text < load_answer,
        "history comes before the load answer:\n{second}"
    );
    let calls = second.updates_of("tool_call");
    assert_eq!(calls.len(), 1, "{second}");
    assert_eq!(calls[0]["toolCallId"], "r1");
    assert_eq!(calls[0]["kind"], "read");
    assert_eq!(
        second.result(2)["value"]["stopReason"],
        "end_turn",
        "{second}"
    );
    // The same keel session: both turns in one log.
    let turns = stored_events(&env, &id)
        .iter()
        .filter(|e| e["type"] == "turn/end")
        .count();
    assert_eq!(turns, 2);
    let last = server.completions().pop().expect("a request");
    assert!(last.messages().to_string().contains("read my notes"));
}

// The editor's buffers are what the agent sees: with the client's fs capability, read_file of
// a file only the editor has (unsaved) answers the buffer's text, and write_file goes to the
// client's fs/write_text_file (recorded there) instead of the disk.
#[test]
fn with_the_clients_fs_reads_and_writes_go_through_the_editor() {
    let server = server(vec![
        Reply::tool_calls(vec![(
            "r1",
            "read_file",
            args(json!({"path": "draft.txt"})),
        )]),
        Reply::tool_calls(vec![(
            "w1",
            "write_file",
            args(json!({"path": "out.txt", "content": "from the agent"})),
        )]),
        Reply::text("done"),
    ]);
    let env = acp_env(&server, "");
    let draft = env.work().join("draft.txt");
    let out = env.work().join("out.txt");
    let files = json!({ draft.display().to_string(): "unsaved buffer text\n" });
    let mut steps = open_steps(&env, true);
    steps.push(json!({"op": "prompt", "text": "copy my draft"}));
    let t = run_client_with(&env, &[], Value::Array(steps), &[], &files, LIMIT);

    assert_eq!(t.result(2)["value"]["stopReason"], "end_turn", "{t}");
    let reads: Vec<&Value> = t.of("read").collect();
    assert!(
        reads
            .iter()
            .any(|r| r["path"] == draft.display().to_string()),
        "{t}"
    );
    let writes: Vec<&Value> = t.of("write").collect();
    assert_eq!(writes.len(), 1, "{t}");
    assert_eq!(writes[0]["path"], out.display().to_string());
    assert_eq!(writes[0]["content"], "from the agent");
    assert!(!out.exists(), "the write went to the editor, not the disk");
    assert!(!draft.exists());
    // The model read the buffer's text.
    let reqs = server.completions();
    assert!(
        reqs[1]
            .messages()
            .to_string()
            .contains("unsaved buffer text"),
        "{}",
        reqs[1].messages()
    );
}

// Streaming (issue 26 items 1 and 3): the model's first piece reaches the editor as an
// agent_message_chunk while the model server still holds the rest of the stream; the chunks
// arrive in order and add up to the answer; the log keeps one assistant/message and no deltas.
#[test]
fn the_first_chunk_reaches_the_editor_while_the_model_still_streams() {
    let (reply, hold) = Reply::text_held("the first words, then all the rest of the answer");
    let server = server(vec![reply]);
    let env = acp_env(&server, "");
    let marker = env.path().join("first-chunk.json");
    let mut steps = open_steps(&env, false);
    steps.extend([
        json!({"op": "prompt", "text": "stream please", "wait": false, "as": "p"}),
        json!({"op": "until", "kind": "agent_message_chunk"}),
        json!({"op": "touch", "path": marker}),
        json!({"op": "await", "name": "p"}),
    ]);
    let client = {
        let steps = Value::Array(steps);
        let env = &env;
        std::thread::scope(|scope| {
            let running = scope.spawn(move || run_client(env, &[], steps, &[], LIMIT));
            hold.wait_reached(Duration::from_secs(30));
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while !marker.exists() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            // The editor had text while the stream was still held.
            let seen_while_held = marker.exists();
            hold.release();
            let t = running.join().expect("the client thread");
            (t, seen_while_held)
        })
    };
    let (t, seen_while_held) = client;
    assert!(
        seen_while_held,
        "no chunk reached the editor while the model held its stream:\n{t}"
    );
    let first: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(&marker).unwrap()).unwrap();
    let early: String = first
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    let full = "the first words, then all the rest of the answer";
    assert!(!early.is_empty() && early.len() < full.len(), "{early:?}");
    assert!(full.starts_with(&early), "{early:?}");
    assert_eq!(
        t.agent_text(),
        full,
        "the chunks, in order, are the answer:\n{t}"
    );
    assert!(t.updates_of("agent_message_chunk").len() >= 2, "{t}");
    assert_eq!(t.result(2)["value"]["stopReason"], "end_turn", "{t}");
    let id = session_of(&t, 1);
    let kinds = types(&stored_events(&env, &id));
    assert_eq!(
        kinds.iter().filter(|k| *k == "assistant/message").count(),
        1
    );
    assert!(!kinds.iter().any(|k| k.contains("delta")), "{kinds:?}");
}
