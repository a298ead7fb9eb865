//! Issue 14 item 2: plugins may change or veto a compaction plan on `context/compact`. A vetoed
//! plan appends nothing, and a request that no longer fits ends the turn `CONTEXT_OVERFLOW`
//! before it is sent: never a silent cut, never a request over the window.

use keel_tests::Env;
use keel_tests::model_server::{ModelServer, Reply, Window};
use serde_json::{Value, json};

use crate::suite::agent_support::{
    contract_holds, last_reason, run_json, session_of, stored_events,
};
use crate::suite::context_support::ctx_env_with;

const WINDOW: u64 = 4000;

/// The row and the server share a 4,000-token window; the context row keeps one step.
fn profile(server: &ModelServer, extra: &str) -> Env {
    ctx_env_with(
        server,
        Some((WINDOW, 500)),
        "{ keep_recent_steps = 1 }",
        extra,
    )
}

/// Six steps that each read a 4 KB file (about 1,000 tokens a result) under a 4,000-token
/// window, then an answer.
fn steps(env: &Env) -> Vec<Reply> {
    let mut replies = Vec::new();
    for k in 0..6 {
        let name = format!("f{k}.txt");
        std::fs::write(env.work().join(&name), format!("file {k} ").repeat(500)).unwrap();
        replies.push(Reply::tool_calls(vec![(
            format!("c{k}"),
            "read_file",
            json!({ "path": name }).to_string(),
        )]));
    }
    replies.push(Reply::text("done"));
    replies
}

fn replacements(events: &[Value]) -> usize {
    events
        .iter()
        .filter(|e| e["surface_op"].is_object())
        .count()
}

#[test]
fn a_vetoed_plan_appends_nothing_and_the_turn_ends_context_overflow_before_sending() {
    let server = ModelServer::start_windowed(Window::new(WINDOW), Vec::new());
    // The veto action never writes its marker (it vetoes every time).
    let env = profile(
        &server,
        "[[insert]]\nid = \"proof-hooks\"\nplugin = \"proof-agent-hooks\"\nconfig = { seam = \"context/compact\", action = \"veto\", marker = \"/nonexistent/keel-veto-marker\" }\n",
    );
    for r in steps(&env) {
        server.push(r);
    }
    let (run, result) = run_json(&env, "read the files", &[]);
    run.expect_code(1);
    assert!(run.stderr.contains("CONTEXT_OVERFLOW"), "{}", run.stderr);
    let events = stored_events(&env, &session_of(&result));
    assert_eq!(last_reason(&events)["error"]["code"], "CONTEXT_OVERFLOW");
    assert_eq!(replacements(&events), 0, "the veto let nothing be replaced");
    let reqs = contract_holds(&server);
    assert!(reqs.len() < 7, "the turn ended before the answer");
    for r in &reqs {
        assert!(
            r.prompt_tokens() <= WINDOW,
            "no request over the window was sent"
        );
    }
}

#[test]
fn without_the_veto_the_same_session_sinks_and_completes() {
    let server = ModelServer::start_windowed(Window::new(WINDOW), Vec::new());
    let env = profile(&server, "");
    for r in steps(&env) {
        server.push(r);
    }
    let (run, result) = run_json(&env, "read the files", &[]);
    run.expect_code(0);
    let events = stored_events(&env, &session_of(&result));
    assert!(replacements(&events) > 0, "something sank");
    let reqs = contract_holds(&server);
    assert_eq!(reqs.len(), 7);
    assert!(reqs.iter().all(|r| r.prompt_tokens() <= WINDOW));
}
