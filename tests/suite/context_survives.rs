//! Compaction survives everything else (issue 14 item 6; CTX-01, CTX-05, SES-03, SES-06):
//! resume and fork after a compaction send exactly the projection the session had, a SIGKILL
//! right after a compaction was appended or in the middle of one (its summarise side request in
//! flight, or its replacement line half written) leaves a valid log with either the old
//! projection or the new one, never half, and the projection replayed from the log is what the
//! model was sent.
//!
//! The scenario: three `read_file` steps of [`BIG`] files under a 16k window (server and row),
//! so the context manager compacts before the fourth request (see context_paths.rs).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use keel_tests::Env;
use keel_tests::model_server::{ModelServer, Reply, Request, check_tool_call_contract};
use serde_json::{Value, json};

use crate::suite::agent_support::{
    args, contract_holds, run_json, session_of, spawn_stream_json, stored_events, tool_message,
};
use crate::suite::context_support::*;

const WINDOW: u64 = 16_384;
const RESERVE: u64 = 1024;
const PROMPT: &str = "Summarise the history above for the agent itself.\n";

/// Runs turn 1 (three big reads, a compaction, "first done"); returns the session id and the
/// file texts.
fn compacted_session(env: &Env, server: &ModelServer) -> (String, Vec<String>) {
    let texts = big_files(env, &["a", "b", "c"]);
    let (run, result) = run_json(env, "read a.txt, b.txt and c.txt", &[]);
    run.expect_code(0);
    let reqs = server.completions();
    assert_eq!(reqs.len(), 4);
    assert!(
        !stubs(reqs[3].messages()).is_empty(),
        "the fourth request was compacted"
    );
    (session_of(&result), texts)
}

fn first_turn() -> Vec<Reply> {
    vec![
        read_call("a1", "a.txt"),
        read_call("b1", "b.txt"),
        read_call("c1", "c.txt"),
        Reply::text("first done"),
    ]
}

/// `before` + the assistant's answer (if any) + the user's next message, normalised.
fn continued(before: &Request, answer: Option<&str>, user: &str) -> Vec<Value> {
    let mut want = sent(before);
    if let Some(a) = answer {
        want.push(json!({"role": "assistant", "content": a, "calls": [], "tool_call_id": null}));
    }
    want.push(json!({"role": "user", "content": user, "calls": [], "tool_call_id": null}));
    want
}

/// Issue 14 item 6 (CTX-05, SES-03): `keel resume` after a compaction sends the projection the
/// session had — the last request of the first run, its answer and the new message — and the
/// replayed log is that request.
#[test]
fn resume_after_a_compaction_sends_the_same_projection() {
    let mut replies = first_turn();
    replies.push(Reply::text("second done"));
    let server = windowed(WINDOW, replies);
    let env = ctx_env(&server, Some((WINDOW, RESERVE)), "");
    let (id, _) = compacted_session(&env, &server);
    let run = env.keel(&["resume", &id, "--profile", "t", "and now?"]);
    run.expect_code(0);
    let reqs = contract_holds(&server);
    assert_eq!(reqs.len(), 5);
    same_history(
        "the resumed request vs the last one before",
        &sent(&reqs[4]),
        &continued(&reqs[3], Some("first done"), "and now?"),
    );
    assert_eq!(stubs(reqs[4].messages()), stubs(reqs[3].messages()));
    let events = stored_events(&env, &id);
    let mut replay = replayed(&events);
    replay.pop();
    same_history("replay vs the resumed request", &sent(&reqs[4]), &replay);
}

/// Issue 14 item 6 (CTX-05, SES-07): a fork of a compacted session carries the compaction; the
/// child's first request is the parent's projection, and the child reads a sunk result back.
#[test]
fn fork_after_a_compaction_keeps_the_projection_and_the_cold_tier() {
    let server = windowed(WINDOW, first_turn());
    let env = ctx_env(&server, Some((WINDOW, RESERVE)), "");
    let (id, texts) = compacted_session(&env, &server);
    let parent = stored_events(&env, &id);
    let stub = replacements(&parent, "sink")[0]["data"]["message"]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    let target = cold_refs(&stub)[0];
    let content = parent
        .iter()
        .find(|e| e["seq"] == target)
        .and_then(|e| e["data"]["content"].as_str())
        .expect("the reference names a result")
        .to_owned();
    assert!(texts.iter().any(|t| numbered(t) == content));

    let fork = env.keel(&["fork", &id, "--profile", "t"]);
    fork.expect_code(0);
    let child = fork
        .stdout
        .split_whitespace()
        .last()
        .expect("fork prints the child id")
        .to_owned();
    server.push(Reply::tool_calls(vec![(
        "r1",
        "coldcontext_read",
        args(json!({ "ref": format!("cold:{target}") })),
    )]));
    server.push(Reply::text("child done"));
    let run = env.keel(&["resume", &child, "--profile", "t", "go on in the fork"]);
    run.expect_code(0);
    let reqs = contract_holds(&server);
    assert_eq!(reqs.len(), 6);
    same_history(
        "the fork's first request vs the parent's last",
        &sent(&reqs[4]),
        &continued(&reqs[3], Some("first done"), "go on in the fork"),
    );
    assert_eq!(
        tool_message(reqs[5].messages(), "r1")["content"].as_str(),
        Some(content.as_str()),
        "the child reads the parent's sunk result byte for byte"
    );
    assert_eq!(
        stored_events(&env, &id).len(),
        parent.len(),
        "the parent is untouched"
    );
    let events = stored_events(&env, &child);
    let mut replay = replayed(&events);
    replay.pop();
    same_history(
        "the child's replay vs its last request",
        &sent(&reqs[5]),
        &replay,
    );
}

/// Spawns `keel run --output-format stream-json PROMPT` and SIGKILLs it from the server's hook
/// at the first request `when` accepts (once); returns the session id from the init line.
fn kill_at(env: &Env, server: &ModelServer, prompt: &str, when: fn(&Request) -> bool) -> String {
    let pid = Arc::new(AtomicU32::new(0));
    let fired = Arc::new(AtomicBool::new(false));
    {
        let (pid, fired) = (Arc::clone(&pid), Arc::clone(&fired));
        server.on_completion(move |r| {
            if fired.load(Ordering::SeqCst) || !when(r) {
                return;
            }
            // keel's pid is stored right after the spawn; the first request comes much later.
            let mut p = pid.load(Ordering::SeqCst);
            for _ in 0..1000 {
                if p != 0 {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
                p = pid.load(Ordering::SeqCst);
            }
            if let Some(p) = rustix::process::Pid::from_raw(p as i32) {
                fired.store(true, Ordering::SeqCst);
                let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
            }
        });
    }
    let child = spawn_stream_json(env, &[prompt]);
    pid.store(child.id(), Ordering::SeqCst);
    let out = child.wait_with_output().unwrap();
    assert!(fired.load(Ordering::SeqCst), "the kill never fired");
    assert_eq!(out.status.code(), None, "keel was not killed");
    // The server runs the hook before it records the request, on its own thread: wait until
    // the request that fired the kill is recorded, so callers count it (a race under load).
    for _ in 0..500 {
        if server.completions().iter().any(when) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let init: Value = serde_json::from_str(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .expect("the init line"),
    )
    .unwrap();
    init["session_id"].as_str().unwrap().to_owned()
}

/// `keel sessions show ID --json` recovers the log; asserts it is valid: contiguous seqs, the
/// tail closed, every replacement well formed (the replay asserts it).
fn recovered(env: &Env, id: &str) -> Vec<Value> {
    let show = env.keel(&["sessions", "show", id, "--json", "--profile", "t"]);
    show.expect_code(0);
    let v: Value = serde_json::from_str(show.stdout.trim()).unwrap();
    let events = v["events"].as_array().unwrap().clone();
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["seq"], i as u64, "seq not contiguous: {e}");
    }
    assert_eq!(
        events.last().unwrap()["type"],
        "turn/end",
        "tail not closed"
    );
    replayed(&events);
    events
}

/// Issue 14 item 6 (CTX-05, SES-06): SIGKILL right after a compaction was appended (the request
/// that carries its stub is in flight): the recovered log is valid and keeps the replacement,
/// and `keel resume` sends the same projection, stub included, keeping the contract.
#[test]
fn sigkill_after_a_compaction_then_resume_keeps_the_stub() {
    let mut replies = first_turn();
    replies.pop();
    replies.push(Reply::text("never read: keel is dead"));
    replies.push(Reply::text("resumed"));
    let server = windowed(WINDOW, replies);
    let env = ctx_env(&server, Some((WINDOW, RESERVE)), "");
    big_files(&env, &["a", "b", "c"]);
    let id = kill_at(&env, &server, "read a.txt, b.txt and c.txt", |r| {
        !stubs(r.messages()).is_empty()
    });
    let killed = server.completions();
    assert_eq!(killed.len(), 4);
    let events = recovered(&env, &id);
    assert!(
        !replacements(&events, "sink").is_empty(),
        "the compaction is durable"
    );
    let run = env.keel(&["resume", &id, "--profile", "t", "go on"]);
    run.expect_code(0);
    let reqs = contract_holds(&server);
    assert_eq!(reqs.len(), 5);
    assert!(counted(&reqs[4]) <= WINDOW);
    assert_eq!(
        stubs(reqs[4].messages()),
        stubs(reqs[3].messages()),
        "the stub survives"
    );
    same_history(
        "the resumed request vs the killed one",
        &sent(&reqs[4]),
        &continued(&reqs[3], None, "go on"),
    );
    let events = stored_events(&env, &id);
    let mut replay = replayed(&events);
    replay.pop();
    same_history("replay vs the resumed request", &sent(&reqs[4]), &replay);
}

/// Issue 14 item 6 (CTX-05, SES-06): SIGKILL during a summarise compaction (its side request in
/// flight): the recovered log has the old projection — no replacement, nothing half-written —
/// and `keel resume` compacts again and carries the new summary.
#[test]
fn sigkill_during_a_summarise_compaction_leaves_the_old_projection() {
    let replies = vec![
        read_call("a1", "a.txt"),
        read_call("b1", "b.txt"),
        read_call("c1", "c.txt"),
        Reply::text("SUMMARY ONE (never read: keel is dead)"),
        Reply::text("SUMMARY TWO"),
        Reply::text("resumed"),
    ];
    let server = windowed(WINDOW, replies);
    let env = ctx_env(
        &server,
        Some((WINDOW, RESERVE)),
        r#"{ strategies = ["summarise", "sink"], keep_recent_steps = 1, summarise = { prompt = "${this_dir}/summarise.md" } }"#,
    );
    env.file("config/profiles/summarise.md", PROMPT);
    big_files(&env, &["a", "b", "c"]);
    let id = kill_at(&env, &server, "read a.txt, b.txt and c.txt", |r| {
        r.messages()[0]["content"] == PROMPT
    });
    let reqs = server.completions();
    assert_eq!(reqs.len(), 4, "r1-r3 and the side request");
    let events = recovered(&env, &id);
    assert!(
        events.iter().all(|e| !is_replacement(e)),
        "a replacement was appended without its summary"
    );
    let run = env.keel(&["resume", &id, "--profile", "t", "go on"]);
    run.expect_code(0);
    let reqs = contract_holds(&server);
    assert_eq!(
        reqs.len(),
        6,
        "the side request again, then the turn's request"
    );
    assert_eq!(reqs[4].messages()[0]["content"], PROMPT);
    let last = &reqs[5];
    assert!(has_message(last.messages(), "assistant", "SUMMARY TWO"));
    assert!(!last.body.to_string().contains("SUMMARY ONE"));
    check_tool_call_contract(last.messages()).unwrap();
    let events = stored_events(&env, &id);
    let summaries = replacements(&events, "summarise");
    assert_eq!(summaries.len(), 1);
    let mut replay = replayed(&events);
    replay.pop();
    same_history("replay vs the resumed request", &sent(last), &replay);
}

/// Issue 14 item 6 (CTX-05, SES-06, SES-09): a crash in the middle of writing a compaction's
/// replacement (the JSONL line cut in half, as a SIGKILL during the write leaves it): the
/// recovery cuts the torn line, so the log holds the old projection whole — no replacement —
/// and `keel resume` compacts again into exactly one well-formed replacement.
#[test]
fn a_replacement_torn_by_a_crash_is_cut_and_the_session_compacts_again() {
    let mut replies = first_turn();
    replies.pop();
    replies.push(Reply::text("never read: keel is dead"));
    replies.push(Reply::text("resumed"));
    let server = windowed(WINDOW, replies);
    let env = ctx_env(&server, Some((WINDOW, RESERVE)), "");
    big_files(&env, &["a", "b", "c"]);
    let id = kill_at(&env, &server, "read a.txt, b.txt and c.txt", |r| {
        !stubs(r.messages()).is_empty()
    });
    let path = crate::suite::sessions_support::jsonl_file(&env, &id);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut at = 0;
    let mut cut = None;
    for line in text.split_inclusive('\n') {
        if line.contains(r#""op":"replace""#) {
            cut = Some(at + line.len() / 2);
            break;
        }
        at += line.len();
    }
    let cut = cut.expect("the compaction's replacement line");
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(cut as u64).unwrap();
    drop(file);

    let events = recovered(&env, &id);
    assert!(
        events.iter().all(|e| !is_replacement(e)),
        "the torn replacement was cut whole"
    );
    assert!(
        replayed(&events)
            .iter()
            .all(|m| !m["content"].as_str().unwrap_or_default().contains(STUB)),
        "the old projection has no stub"
    );
    let run = env.keel(&["resume", &id, "--profile", "t", "go on"]);
    run.expect_code(0);
    let reqs = contract_holds(&server);
    assert_eq!(reqs.len(), 5);
    let last = &reqs[4];
    assert!(counted(last) <= WINDOW);
    assert_eq!(stubs(last.messages()).len(), 1, "compacted again, once");
    let events = stored_events(&env, &id);
    assert_eq!(replacements(&events, "sink").len(), 1);
    let mut replay = replayed(&events);
    replay.pop();
    same_history("replay vs the resumed request", &sent(last), &replay);
}
