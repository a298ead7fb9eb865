//! The agent end to end (issue 4 acceptance): the built `keel` binary, the built plugins, and the
//! loopback model server. Every assertion is on the world: files on disk, the session file, the
//! requests the server received.

use keel_tests::model_server::Reply;
use serde_json::{Value, json};

use crate::suite::agent_support::*;

/// TOOL-01, FS-03/05, B12, LOOP-03/04: a multi-step task that reads, edits, writes and runs.
#[test]
fn a_multi_step_task_reads_edits_and_runs_files() {
    let server = server(vec![
        Reply::tool_calls(vec![("c1", "read_file", args(json!({"path": "app.txt"})))]),
        Reply::tool_calls(vec![(
            "c2",
            "edit_file",
            args(
                json!({"path": "app.txt", "old_string": "version = 1", "new_string": "version = 2"}),
            ),
        )]),
        Reply::tool_calls(vec![(
            "c3",
            "write_file",
            args(json!({"path": "run.sh", "content": "cat app.txt > out.txt\necho ran\n"})),
        )]),
        Reply::tool_calls(vec![("c4", "shell", args(json!({"command": "sh run.sh"})))]),
        Reply::text("Bumped the version and ran the script."),
    ]);
    let env = agent_env(&server, "");
    env.file("work/app.txt", "name = demo\nversion = 1\n");
    let (run, result) = run_json(&env, "bump the version and run it", &[]);
    run.expect_code(0);
    assert_eq!(result["result"], "Bumped the version and ran the script.");
    assert_eq!(result["turn_end_reason"], "completed");
    assert_eq!(
        std::fs::read_to_string(work_file(&env, "app.txt")).unwrap(),
        "name = demo\nversion = 2\n"
    );
    assert_eq!(
        std::fs::read_to_string(work_file(&env, "out.txt")).unwrap(),
        "name = demo\nversion = 2\n",
        "the shell tool really ran the script in the working directory"
    );
    let reqs = contract_holds(&server);
    assert_eq!(reqs.len(), 5);
    // The model saw the file it read, and the shell's output.
    let read = tool_message(reqs[1].messages(), "c1");
    assert!(
        read["content"].as_str().unwrap().contains("version = 1"),
        "{read}"
    );
    let ran = tool_message(reqs[4].messages(), "c4");
    assert!(ran["content"].as_str().unwrap().contains("ran"), "{ran}");
    // The credential went out as a bearer token, and the user-agent names keel.
    assert_eq!(
        reqs[0].headers.get("authorization").map(String::as_str),
        Some(format!("Bearer {KEY_VALUE}").as_str())
    );
    // The log: one turn, five steps, each step closed, the turn completed.
    let events = stored_events(&env, &session_of(&result));
    let t = types(&events);
    assert_eq!(t.iter().filter(|x| *x == "step/start").count(), 5);
    assert_eq!(t.iter().filter(|x| *x == "step/end").count(), 5);
    assert_eq!(t.iter().filter(|x| *x == "tool/call").count(), 4);
    assert_eq!(t.iter().filter(|x| *x == "tool/result").count(), 4);
    // The session opens with the profile it was created under, then the turn (issue 11 item 7).
    assert_eq!(t[..2], ["session/profile", "turn/start"]);
    assert_eq!(last_reason(&events)["kind"], "completed");
    // tool/call keeps the raw argument string exactly as the model produced it (B9).
    let call = events.iter().find(|e| e["type"] == "tool/call").unwrap();
    assert_eq!(call["data"]["arguments"], args(json!({"path": "app.txt"})));
}

/// LOOP-06, TOOL-10: parallel calls' results reach the model in call order.
#[test]
fn parallel_tool_results_reach_the_model_in_call_order() {
    let server = server(vec![
        Reply::tool_calls(vec![
            ("r1", "read_file", args(json!({"path": "c.txt"}))),
            (
                "r2",
                "grep",
                args(json!({"pattern": "needle", "path": "."})),
            ),
            ("r3", "read_file", args(json!({"path": "a.txt"}))),
            ("r4", "list_dir", args(json!({"path": "."}))),
        ]),
        Reply::text("done"),
    ]);
    let env = agent_env(&server, "");
    env.file("work/a.txt", "alpha needle\n");
    env.file("work/c.txt", "gamma\n");
    let (run, _) = run_json(&env, "look around", &[]);
    run.expect_code(0);
    let reqs = contract_holds(&server);
    let msgs = reqs[1].messages().as_array().unwrap().clone();
    let ids: Vec<&str> = msgs
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["r1", "r2", "r3", "r4"]);
    assert!(
        tool_message(&Value::Array(msgs.clone()), "r1")["content"]
            .as_str()
            .unwrap()
            .contains("gamma")
    );
    assert!(
        tool_message(&Value::Array(msgs), "r3")["content"]
            .as_str()
            .unwrap()
            .contains("alpha")
    );
}

/// TOOL-03/05/08: in `ask` mode without an approver a mutating call is denied; the denial is
/// its result, the file is not written, and the audit pair is in the log.
#[test]
fn a_denied_tool_call_gets_its_denial_as_its_result() {
    let server = server(vec![
        Reply::tool_calls(vec![(
            "w1",
            "write_file",
            args(json!({"path": "x.txt", "content": "should not exist"})),
        )]),
        Reply::text("I could not write the file."),
    ]);
    let env = agent_env(
        &server,
        "[[replace]]\nid = \"approval\"\nconfig = { mode = \"ask\" }\n",
    );
    let (run, result) = run_json(&env, "write x", &[]);
    run.expect_code(0);
    assert!(
        !work_file(&env, "x.txt").exists(),
        "the denied write happened"
    );
    let reqs = contract_holds(&server);
    let denial = tool_message(reqs[1].messages(), "w1");
    assert!(
        denial["content"]
            .as_str()
            .unwrap()
            .contains("APPROVAL_UNAVAILABLE"),
        "{denial}"
    );
    let events = stored_events(&env, &session_of(&result));
    let asked = events
        .iter()
        .find(|e| e["type"] == "approval/asked")
        .expect("approval/asked");
    let decided = events
        .iter()
        .find(|e| e["type"] == "approval/decided")
        .expect("approval/decided");
    assert_eq!(asked["data"]["id"], decided["data"]["id"]);
    assert_eq!(decided["data"]["outcome"], "unavailable");
    let result_ev = events.iter().find(|e| e["type"] == "tool/result").unwrap();
    assert_eq!(result_ev["data"]["error"]["code"], "APPROVAL_UNAVAILABLE");
}

/// B9: an unknown tool and unparsable arguments are results the model reads, not crashes.
#[test]
fn unknown_tools_and_bad_arguments_are_error_results() {
    let server = server(vec![
        Reply::tool_calls(vec![
            ("u1", "teleport", args(json!({"to": "mars"}))),
            ("u2", "read_file", "{\"path\": \"a.txt\"".to_owned()),
        ]),
        Reply::text("ok"),
    ]);
    let env = agent_env(&server, "");
    let (run, _) = run_json(&env, "try", &[]);
    run.expect_code(0);
    let reqs = contract_holds(&server);
    let unknown = tool_message(reqs[1].messages(), "u1");
    assert!(
        unknown["content"]
            .as_str()
            .unwrap()
            .contains("UNKNOWN_TOOL"),
        "{unknown}"
    );
    let bad = tool_message(reqs[1].messages(), "u2");
    assert!(
        bad["content"]
            .as_str()
            .unwrap()
            .contains("INVALID_ARGUMENTS"),
        "{bad}"
    );
}

/// LOOP-05: the logged request header is what the model was sent (system prompt, tools, model).
#[test]
fn loop05_the_request_header_matches_the_request_sent() {
    let server = server(vec![Reply::text("hi")]);
    let env = agent_env(&server, "");
    let (run, result) = run_json(&env, "hello", &[]);
    run.expect_code(0);
    let reqs = contract_holds(&server);
    let body = &reqs[0].body;
    let events = stored_events(&env, &session_of(&result));
    let header = events
        .iter()
        .find(|e| e["type"] == "request/header")
        .expect("request/header");
    assert_eq!(header["data"]["reason"], "initial");
    let h = &header["data"]["header"];
    assert_eq!(h["config"]["model"], "test-model");
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["messages"][0]["role"], "system");
    assert_eq!(body["messages"][0]["content"], h["system"]);
    let sent: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    let logged: Vec<&str> = h["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(sent, logged);
    for name in [
        "read_file",
        "write_file",
        "edit_file",
        "list_dir",
        "glob",
        "grep",
        "shell",
    ] {
        assert!(logged.contains(&name), "{name} missing from {logged:?}");
    }
    // The user's words are the last message, after the system prompt.
    assert_eq!(body["messages"][1]["role"], "user");
    assert_eq!(body["messages"][1]["content"], "hello");
}

/// §11: `text` prints only the final answer; `stream-json` prints init, every durable event and
/// the result, one JSON object per line; `-` reads the prompt from stdin.
#[test]
fn output_formats_and_stdin_prompt() {
    let server = server(vec![Reply::text("four"), Reply::text("five")]);
    let env = agent_env(&server, "");
    let run = env.keel(&["run", "--profile", "t", "what is 2+2"]);
    run.expect_code(0);
    assert_eq!(run.stdout, "four\n");

    let mut cmd = env.command(&[
        "run",
        "--profile",
        "t",
        "--output-format",
        "stream-json",
        "-",
    ]);
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"and 2+3?").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["type"], "system");
    assert_eq!(lines[0]["subtype"], "init");
    assert_eq!(lines[0]["schema_version"], 1);
    let last = lines.last().unwrap();
    assert_eq!(last["type"], "result");
    assert_eq!(last["subtype"], "success");
    assert_eq!(last["is_error"], false);
    assert_eq!(last["result"], "five");
    assert_eq!(last["num_turns"], 1);
    assert!(last["usage"]["input_tokens"].as_u64().is_some());
    // Between them: keel's event lines, and Claude Code's message lines beside them (issue
    // 23 item 13).
    let seqs: Vec<u64> = lines[1..lines.len() - 1]
        .iter()
        .filter(|l| {
            let kind = l["type"].as_str().unwrap_or_default();
            assert!(["event", "assistant", "user"].contains(&kind), "{l}");
            kind == "event"
        })
        .map(|l| l["event"]["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(
        seqs,
        (0..seqs.len() as u64).collect::<Vec<_>>(),
        "every event, in order, once"
    );
    // The events printed are exactly the stored ones.
    let stored = stored_events(&env, last["session_id"].as_str().unwrap());
    assert_eq!(stored.len(), seqs.len());
    let reqs = server.completions();
    assert_eq!(
        reqs[1].messages().as_array().unwrap().last().unwrap()["content"],
        "and 2+3?"
    );
}

/// §11: `--max-turns` caps model requests; the run ends 1 with the reason on stderr.
#[test]
fn max_turns_ends_the_run_with_exit_1() {
    let server = server(vec![
        Reply::tool_calls(vec![("m1", "list_dir", args(json!({"path": "."})))]),
        Reply::tool_calls(vec![("m2", "list_dir", args(json!({"path": "."})))]),
        Reply::text("never reached"),
    ]);
    let env = agent_env(&server, "");
    let (run, result) = run_json(&env, "loop", &["--max-turns", "1"]);
    run.expect_code(1);
    assert!(run.stderr.contains("max-turns"), "{}", run.stderr);
    assert_eq!(server.completions().len(), 1);
    assert_eq!(result["turn_end_reason"], "max-turns");
    let events = stored_events(&env, &session_of(&result));
    assert_eq!(last_reason(&events)["kind"], "max-turns");
}

/// §11 `--ephemeral`: the run works and leaves no session behind.
#[test]
fn ephemeral_runs_leave_no_session() {
    let server = server(vec![Reply::text("ok")]);
    let env = agent_env(&server, "");
    let (run, _) = run_json(&env, "hi", &["--ephemeral"]);
    run.expect_code(0);
    let sessions = crate::suite::sessions_support::files_under(&env.home());
    assert!(
        sessions
            .iter()
            .all(|p| p.extension().is_none_or(|e| e != "jsonl")),
        "{sessions:?}"
    );
}

/// The README's main command: the demo profile runs the whole pipeline offline.
#[test]
fn the_demo_profile_runs_offline_and_changes_the_workspace() {
    let env = keel_tests::Env::new();
    let run = env.keel(&["run", "--profile", "demo", "tidy the notes"]);
    run.expect_code(0);
    let notes = std::fs::read_to_string(work_file(&env, "notes.md")).unwrap();
    assert!(
        notes.contains("- secrets never leave the firewall"),
        "{notes}"
    );
    assert!(work_file(&env, "count.sh").is_file());
    // The shell tool really ran the script: its result in the log carries the script's output.
    let id = crate::suite::sessions_support::files_under(&env.home())
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .expect("a session file");
    let events = stored_events(&env, &id);
    let shell = events
        .iter()
        .rfind(|e| e["type"] == "tool/result")
        .expect("tool results");
    assert!(
        shell["data"]["content"]
            .as_str()
            .unwrap()
            .contains("notes: 3"),
        "{shell}"
    );
    assert_eq!(last_reason(&events)["kind"], "completed");
}

/// A `keel run` started with stdout closed (`keel … >&-`) completes and writes a clean
/// session. The output guard puts `/dev/null` on a closed standard descriptor before it opens
/// anything, so no file opened later (its own pipes, a session file) can take number 1 and
/// receive what the driver prints.
#[test]
fn a_run_with_stdout_closed_keeps_its_session_file_clean() {
    let server = server(vec![Reply::text("finished without a stdout")]);
    let env = agent_env(&server, "");
    let keel = env.command(&["run", "--profile", "t", "--output-format", "json", "go"]);
    let mut closed = std::process::Command::new("sh");
    closed
        .arg("-c")
        .arg("exec \"$@\" >&-")
        .arg("sh")
        .arg(keel.get_program())
        .args(keel.get_args())
        .current_dir(keel.get_current_dir().unwrap())
        .stdin(std::process::Stdio::null());
    for (k, v) in keel.get_envs() {
        match v {
            Some(v) => closed.env(k, v),
            None => closed.env_remove(k),
        };
    }
    let out = closed.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stored = crate::suite::sessions_support::files_under(&env.home().join("sessions"));
    assert!(!stored.is_empty(), "no session was written");
    for path in stored {
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            !text.contains("finished without a stdout\",\"") && !text.contains("turn_end_reason"),
            "the driver's output landed in {}",
            path.display()
        );
        for line in text.lines() {
            assert!(
                serde_json::from_str::<Value>(line).is_ok(),
                "{}: not a JSON line: {line}",
                path.display()
            );
        }
    }
}
