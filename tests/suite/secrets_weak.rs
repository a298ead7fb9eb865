//! Values too short or too common to be secrets (issue 23 item 2), through the binary: a
//! placeholder key such as `none` is sent but never registered for scrubbing, so the words
//! that contain it reach the terminal, the model and the session log intact, and stderr says
//! so once per run naming the credential; a real-looking key is still scrubbed; `keel secrets
//! set` refuses a placeholder with `SECRET_WEAK`; and README's local-server line (an empty
//! `api_key_ref`) sends no `Authorization` header at all.

use std::ffi::OsStr;

use keel_tests::model_server::{ModelServer, Reply};
use keel_tests::{Env, Run};
use serde_json::json;

use crate::suite::agent_support::*;

/// The reference README's local-server example used to name.
const LOCAL: &str = "LOCAL_KEY";

/// A read of `notes.txt`, then `text`.
fn read_then(text: &str) -> ModelServer {
    server(vec![
        Reply::tool_calls(vec![(
            "r1",
            "read_file",
            args(json!({"path": "notes.txt"})),
        )]),
        Reply::text(text),
    ])
}

/// `keel run --profile t -c llm-openai.api_key_ref=REF "read the notes"` (text output, as on
/// a terminal) with `LOCAL_KEY=value`.
fn run_with_key(env: &Env, reference: &str, value: &str) -> Run {
    let key_ref = format!("llm-openai.api_key_ref={reference}");
    env.keel_with(
        &["run", "--profile", "t", "-c", &key_ref, "read the notes"],
        &[(LOCAL, OsStr::new(value))],
    )
}

/// Everything the run left: stdout, stderr, each request body, each session file.
fn everything(env: &Env, server: &ModelServer, run: &Run) -> String {
    let mut all = format!("{}\n{}\n", run.stdout, run.stderr);
    for r in server.requests() {
        all.push_str(&r.body.to_string());
        all.push('\n');
    }
    let stored = crate::suite::sessions_support::files_under(&env.home().join("sessions"));
    assert!(!stored.is_empty(), "no session files");
    for p in stored {
        all.push_str(&String::from_utf8_lossy(&std::fs::read(&p).unwrap()));
    }
    all
}

fn weak_notices(run: &Run) -> Vec<&str> {
    run.stderr
        .lines()
        .filter(|l| l.contains("too short or too common"))
        .collect()
}

/// Issue 23 item 2: with `LOCAL_KEY=none`, the model's "nonexistent" (and the file's "none"
/// and "NONE") reach stdout, the next request's tool result and the session log intact;
/// nothing anywhere says `[credential LOCAL_KEY]`; both requests still send `Bearer none`;
/// stderr has one notice naming LOCAL_KEY (two requests resolved it) and never the value.
#[test]
fn issue23_item2_a_placeholder_key_is_sent_but_never_scrubbed_and_said_once() {
    let server = read_then("the file is nonexistent, so none of it matters");
    let env = agent_env(&server, "");
    env.file("work/notes.txt", "nonexistent path; none; NONE\n");
    let run = run_with_key(&env, LOCAL, "none");
    run.expect_code(0);
    assert!(
        run.stdout
            .contains("the file is nonexistent, so none of it matters"),
        "stdout: {}",
        run.stdout
    );
    let reqs = contract_holds(&server);
    assert_eq!(reqs.len(), 2);
    for r in &reqs {
        assert_eq!(
            r.headers.get("authorization").map(String::as_str),
            Some("Bearer none"),
            "the request still sends the configured key"
        );
    }
    let result = tool_message(reqs[1].messages(), "r1")["content"].to_string();
    assert!(
        result.contains("nonexistent path; none; NONE"),
        "the tool result was rewritten: {result}"
    );
    let all = everything(&env, &server, &run);
    assert!(
        !all.contains("[credential"),
        "a placeholder was scrubbed somewhere:\n{all}"
    );
    let stored = crate::suite::sessions_support::files_under(&env.home().join("sessions"))
        .iter()
        .map(|p| String::from_utf8_lossy(&std::fs::read(p).unwrap()).into_owned())
        .collect::<String>();
    assert!(
        stored.contains("the file is nonexistent, so none of it matters"),
        "the session log lost the text"
    );
    let notices = weak_notices(&run);
    assert_eq!(notices.len(), 1, "one notice per run:\n{}", run.stderr);
    assert!(
        notices[0].starts_with("keel: credential LOCAL_KEY "),
        "{}",
        notices[0]
    );
    assert!(
        !notices[0].to_lowercase().contains("none"),
        "the notice prints the value: {}",
        notices[0]
    );
}

/// Issue 23 item 2: the same run with a long, real-looking key: the key in the file is still
/// scrubbed from the tool result, the output and the log, and no notice is printed.
#[test]
fn issue23_item2_a_real_looking_key_is_still_scrubbed() {
    const REAL: &str = "lk-8d2f61c0a9e4-canary";
    let server = read_then(&format!("the key is {REAL}"));
    let env = agent_env(&server, "");
    env.file("work/notes.txt", &format!("key={REAL}\n"));
    let run = run_with_key(&env, LOCAL, REAL);
    run.expect_code(0);
    let reqs = contract_holds(&server);
    assert_eq!(
        reqs[0].headers.get("authorization").map(String::as_str),
        Some(format!("Bearer {REAL}").as_str())
    );
    let result = tool_message(reqs[1].messages(), "r1")["content"].to_string();
    assert!(result.contains("[credential LOCAL_KEY]"), "{result}");
    assert!(
        run.stdout.contains("the key is [credential LOCAL_KEY]"),
        "{}",
        run.stdout
    );
    let all = everything(&env, &server, &run);
    assert!(!all.contains(REAL), "the key leaked:\n{all}");
    assert!(weak_notices(&run).is_empty(), "{}", run.stderr);
}

/// Issue 23 item 2: `keel secrets set` refuses placeholders and short values with
/// `SECRET_WEAK` (exit 2, nothing stored, the value not echoed) and stores a real one.
#[test]
fn issue23_item2_secrets_set_refuses_a_weak_value() {
    let server = server(vec![]);
    let env = agent_env(&server, "");
    for value in ["none", "Dummy", "changeme", "PASSWORD", "x", "abc1234"] {
        let out = secrets_set(&env, "WEAK", value);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{value}: {err}");
        assert!(
            err.starts_with("keel: error[SECRET_WEAK]: the value for WEAK "),
            "{value}: {err}"
        );
        assert!(!err.contains(value), "{value} echoed: {err}");
    }
    let list = env.keel(&["secrets", "list", "--json", "--profile", "t"]);
    list.expect_code(0);
    assert!(!list.stdout.contains("WEAK"), "{}", list.stdout);
    set_secret(&env, "STRONG", "a-real-secret-7c1e");
}

/// Issue 23 item 2: README's local-server line, `-c llm-openai.api_key_ref=` with no variable
/// set: the run answers, and no request carries an `Authorization` header.
#[test]
fn issue23_item2_an_empty_key_ref_sends_no_authorization_header() {
    let server = server(vec![Reply::text("Done.")]);
    let mut env = agent_env(&server, "");
    env.vars.retain(|(k, _)| k != KEY_REF);
    let run = env.keel(&[
        "run",
        "--profile",
        "t",
        "-c",
        "llm-openai.api_key_ref=",
        "task",
    ]);
    run.expect_code(0);
    assert!(run.stdout.contains("Done."), "{}", run.stdout);
    let reqs = server.completions();
    assert_eq!(reqs.len(), 1);
    assert!(
        !reqs[0].headers.contains_key("authorization"),
        "{:?}",
        reqs[0].headers
    );
    assert!(weak_notices(&run).is_empty(), "{}", run.stderr);
}
