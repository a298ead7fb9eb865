//! `keel acp`'s control paths (issue 26 item 3, SURF-03): `session/cancel` stops a running
//! tool tree and the prompt settles `cancelled`; a second prompt while one runs is refused as
//! invalid params; the session goes on afterwards. And the wire itself, in raw bytes: garbage,
//! truncated frames, an unknown method and a prompt for an unknown session are each answered
//! with a JSON-RPC error, stdout carries nothing but JSON-RPC, and the server stays up.

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use keel_tests::model_server::Reply;
use serde_json::{Value, json};

use crate::suite::acp_support::{acp_env, open_steps, run_client};
use crate::suite::agent_support::{args, processes_with_arg, server, stored_events, wait_for_file};

/// The sleep's argument: a value no other test uses, so its process can be found by it.
const SLEEP: &str = "30.2607";

// Cancel mid-tool: once the 30 s shell `sleep` runs (its pid file is there), it is stopped (its process is gone), the prompt answers
// `cancelled` well before the sleep would end, a second prompt sent while the first ran was
// refused with -32602, and the next prompt continues the same session.
#[test]
fn cancel_stops_the_tool_tree_and_a_second_prompt_meanwhile_is_refused() {
    let server = server(vec![
        Reply::tool_calls(vec![(
            "s1",
            "shell",
            args(json!({"command": format!("echo $$ > started.pid; exec sleep {SLEEP}")})),
        )]),
        Reply::text("after the cancel"),
    ]);
    let env = acp_env(&server, "");
    let mut steps = open_steps(&env, false);
    steps.extend([
        json!({"op": "prompt", "text": "sleep a while", "wait": false, "as": "long"}),
        json!({"op": "until_file", "path": env.work().join("started.pid")}),
        json!({"op": "prompt", "text": "me too"}),
        json!({"op": "cancel"}),
        json!({"op": "await", "name": "long"}),
        json!({"op": "prompt", "text": "go on"}),
    ]);
    let started = Instant::now();
    let t = run_client(&env, &[], Value::Array(steps), &[], Duration::from_secs(60));
    let took = started.elapsed();

    let second = t.result(4);
    assert_eq!(second["ok"], false, "{t}");
    assert_eq!(second["error"]["code"], -32602, "{t}");
    assert_eq!(t.result(2)["value"]["stopReason"], "cancelled", "{t}");
    assert!(
        took < Duration::from_secs(25),
        "the sleep was stopped, took {took:?}:\n{t}"
    );
    let pid_file = env.work().join("started.pid");
    assert!(
        wait_for_file(&pid_file, Duration::from_secs(1)),
        "the sleep ran:\n{t}"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while !processes_with_arg(SLEEP).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        processes_with_arg(SLEEP),
        Vec::<i32>::new(),
        "the sleep outlived the cancel"
    );
    assert_eq!(t.result(7)["value"]["stopReason"], "end_turn", "{t}");
    let id = t.result(1)["value"]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let reasons: Vec<String> = stored_events(&env, &id)
        .iter()
        .filter(|e| e["type"] == "turn/end")
        .map(|e| {
            e["data"]["reason"]["kind"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(reasons, ["aborted", "completed"]);
}

/// A raw `keel acp`: lines in, lines out.
struct Raw {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl Raw {
    fn send(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).expect("write to keel acp");
        self.stdin.flush().expect("flush");
    }

    /// The next stdout line, parsed (every line must be JSON-RPC 2.0).
    fn next(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(20))
            .expect("keel acp answered within 20 s");
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout carries only JSON-RPC, got {line:?}: {e}"));
        assert_eq!(v["jsonrpc"], "2.0", "{line}");
        v
    }
}

// Bad input never takes the server down: each frame is answered with a JSON-RPC error, and a
// valid request afterwards is served.
#[test]
fn garbage_truncated_frames_unknown_methods_and_sessions_get_errors_and_the_server_stays_up() {
    let server = server(vec![]);
    let env = acp_env(&server, "");
    let mut cmd = env.command(&["acp", "--profile", "t"]);
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn keel acp");
    let stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let mut raw = Raw {
        child,
        stdin,
        lines,
    };

    raw.send(b"this is not json\n");
    assert_eq!(raw.next()["error"]["code"], -32700);
    raw.send(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"par\n");
    assert_eq!(raw.next()["error"]["code"], -32700);
    raw.send(b"\xff\xfe\x00\n");
    assert!(raw.next()["error"]["code"].is_i64());
    // Before `initialize`, a request is refused as such.
    raw.send(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session/list\",\"params\":{}}\n");
    let early = raw.next();
    assert_eq!(early["id"], 2);
    assert_eq!(early["error"]["code"], -32600, "{early}");
    let init = json!({"jsonrpc": "2.0", "id": 3, "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}}});
    raw.send(format!("{init}\n").as_bytes());
    let answer = raw.next();
    assert_eq!(answer["id"], 3);
    assert_eq!(answer["result"]["protocolVersion"], 1, "{answer}");
    raw.send(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"no/such_method\",\"params\":{}}\n");
    let unknown = raw.next();
    assert_eq!(unknown["id"], 7);
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    let prompt = json!({"jsonrpc": "2.0", "id": 4, "method": "session/prompt",
        "params": {"sessionId": "no-such-session", "prompt": [{"type": "text", "text": "hi"}]}});
    raw.send(format!("{prompt}\n").as_bytes());
    let refused = raw.next();
    assert_eq!(refused["id"], 4);
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let load = json!({"jsonrpc": "2.0", "id": 5, "method": "session/load",
        "params": {"sessionId": "no-such-session", "cwd": env.work(), "mcpServers": []}});
    raw.send(format!("{load}\n").as_bytes());
    let missing = raw.next();
    assert_eq!(missing["id"], 5);
    assert!(missing["error"]["code"].is_i64(), "{missing}");
    // Still up: a valid request is served, and closing stdin ends the process with 0.
    let list = json!({"jsonrpc": "2.0", "id": 6, "method": "session/list", "params": {}});
    raw.send(format!("{list}\n").as_bytes());
    let listed = raw.next();
    assert_eq!(listed["id"], 6);
    assert!(listed["result"]["sessions"].is_array(), "{listed}");
    drop(raw.stdin);
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = raw.child.try_wait().expect("wait") {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "keel acp did not exit after stdin closed"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0));
    assert!(
        server.completions().is_empty(),
        "no bad frame reached the model"
    );
}

// Through the official client: a prompt for a session this connection never opened is invalid
// params, and the error says how to open one.
#[test]
fn a_prompt_without_a_session_of_this_connection_names_the_way_to_open_one() {
    let server = server(vec![]);
    let env = acp_env(&server, "");
    let steps = json!([
        {"op": "initialize"},
        {"op": "prompt", "session": "sess-unknown", "text": "hi"},
    ]);
    let t = run_client(&env, &[], steps, &[], Duration::from_secs(30));
    let r = t.result(1);
    assert_eq!(r["ok"], false, "{t}");
    assert_eq!(r["error"]["code"], -32602, "{t}");
    assert!(
        r["error"]["data"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("session/new")),
        "{t}"
    );
}
