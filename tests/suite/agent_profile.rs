//! `keel resume` runs a session under the profile it was created with (issue 11 item 7): the
//! session records `{name, digest}` as `session/profile`; `keel resume ID` without `--profile`
//! relaunches under it; an explicit `--profile` wins and says so in one line; a changed config
//! of the recorded profile is said, not fatal; a session that records no profile resumes under
//! the running one, as before. Profiles `a` and `default` point at two loopback model servers,
//! so the server that got the request shows which profile ran.

use std::io::Write as _;
use std::process::Stdio;

use keel_tests::Env;
use keel_tests::model_server::{ModelServer, Reply};
use serde_json::Value;

use crate::suite::agent_support::*;

/// Profiles `a` (server `a`) and `default` (server `b`), otherwise the agent test profile.
fn two_profiles(a: &ModelServer, b: &ModelServer) -> Env {
    let env = agent_env(a, "");
    let text = std::fs::read_to_string(env.path().join("config/profiles/t.toml")).unwrap();
    env.profile("a", &text);
    env.profile("default", &text.replace(&a.base_url(), &b.base_url()));
    env
}

/// `v` with object keys sorted at every level.
fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted(&m[k])))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// The digest the driver records, recomputed as documented from `keel config dump --json`.
fn dump_digest(env: &Env, profile: &str) -> String {
    let run = env.keel(&["config", "dump", "--json", "--profile", profile]);
    run.expect_code(0);
    let dump: Value = serde_json::from_str(&run.stdout).unwrap();
    let body = serde_json::json!({"kernel": dump["kernel"], "rows": dump["rows"]});
    let text = serde_json::to_string(&sorted(&body)).unwrap();
    blake3::hash(text.as_bytes()).to_hex().to_string()
}

/// The `keel: resuming …` notes on stderr.
fn notes(run: &keel_tests::Run) -> Vec<&str> {
    run.stderr
        .lines()
        .filter(|l| l.starts_with("keel: resuming"))
        .collect()
}

/// `keel run --profile a` with one prompt: the session id.
fn create_under_a(env: &Env) -> String {
    let run = env.keel(&["run", "--profile", "a", "--output-format", "json", "first"]);
    run.expect_code(0);
    session_of(&serde_json::from_str(run.stdout.trim()).unwrap())
}

/// Issue 11 item 7: the session records its profile; `keel resume` without `--profile` runs
/// under it although the default is another; `--profile default` runs under that one and says
/// so in one line.
#[test]
fn item7_resume_runs_under_the_recorded_profile_unless_profile_says_otherwise() {
    let a = server(vec![Reply::text("one"), Reply::text("two")]);
    let b = server(vec![Reply::text("three")]);
    let env = two_profiles(&a, &b);
    let id = create_under_a(&env);
    let events = stored_events(&env, &id);
    assert_eq!(events[0]["type"], "session/profile", "{:?}", types(&events));
    assert_eq!(events[0]["ignorable"], true);
    assert_eq!(events[0]["data"]["name"], "a");
    let digest = dump_digest(&env, "a");
    assert_eq!(events[0]["data"]["digest"], digest.as_str());
    assert_ne!(digest, dump_digest(&env, "default"));

    let run = env.keel(&["resume", &id, "--output-format", "json", "second"]);
    run.expect_code(0);
    assert_eq!(a.completions().len(), 2, "{}", run.stderr);
    assert_eq!(
        b.completions().len(),
        0,
        "the default profile's server got a request"
    );
    assert_eq!(notes(&run), Vec::<&str>::new());

    let run = env.keel(&["resume", &id, "--profile", "default", "third"]);
    run.expect_code(0);
    assert_eq!(b.completions().len(), 1, "{}", run.stderr);
    assert_eq!(a.completions().len(), 2);
    assert_eq!(
        notes(&run),
        [format!(
            "keel: resuming session {id} (recorded with profile a, digest {}) under profile default (--profile)",
            &digest[..12]
        )
        .as_str()]
    );
    // One session, one record: the resumes appended turns, not profiles.
    let events = stored_events(&env, &id);
    let profiles = events
        .iter()
        .filter(|e| e["type"] == "session/profile")
        .count();
    assert_eq!(profiles, 1);
    let prompts: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "user/message")
        .filter_map(|e| e["data"]["content"].as_str())
        .collect();
    assert_eq!(prompts, ["first", "second", "third"]);
    // The recorded profile reached the last request through the relaunch: the resumed turn
    // ran with a's history (the model saw all three prompts).
    let last = b.completions()[0].messages().to_string();
    assert!(last.contains("second") && last.contains("first"), "{last}");
}

/// Issue 11 item 7: the recorded profile changed since (another digest): the resume runs under
/// it and says so; the prompt read from stdin (`-`) is read once, by the relaunched run.
#[test]
fn item7_a_changed_recorded_profile_is_said_and_stdin_is_read_once() {
    let a = server(vec![Reply::text("one"), Reply::text("two")]);
    let b = server(vec![]);
    let env = two_profiles(&a, &b);
    let id = create_under_a(&env);
    let path = env.path().join("config/profiles/a.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace("timeout_ms = 2000", "timeout_ms = 3000"),
    )
    .unwrap();
    let mut child = env
        .command(&["resume", &id, "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"from stdin")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(a.completions().len(), 2, "{stderr}");
    assert_eq!(b.completions().len(), 0);
    let noted: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("keel: resuming"))
        .collect();
    assert_eq!(noted.len(), 1, "{stderr}");
    assert!(
        noted[0].contains(&format!("session {id} under profile a"))
            && noted[0].contains("config changed"),
        "{stderr}"
    );
    let last = a.completions()[1].messages().to_string();
    assert!(last.contains("from stdin"), "{last}");
}

/// Issue 11 item 7: the recorded profile is gone: one error line naming it and the session,
/// exit 2, no request anywhere.
#[test]
fn item7_a_recorded_profile_that_is_gone_is_one_error_line() {
    let a = server(vec![Reply::text("one")]);
    let b = server(vec![]);
    let env = two_profiles(&a, &b);
    let id = create_under_a(&env);
    std::fs::remove_file(env.path().join("config/profiles/a.toml")).unwrap();
    let run = env.keel(&["resume", &id, "again"]);
    let line = run.one_error("CONFIG_UNKNOWN_PROFILE");
    assert!(
        line.contains("profile 'a'")
            && line.contains(&format!("session {id} was created with it"))
            && line.contains("--profile"),
        "{line}"
    );
    assert_eq!(a.completions().len(), 1);
    assert_eq!(b.completions().len(), 0);
}

/// Issue 11 item 7: a session that records no profile (written before keel recorded it)
/// resumes under the running profile, without a note.
#[test]
fn item7_a_session_without_a_recorded_profile_resumes_as_before() {
    let a = server(vec![]);
    let b = server(vec![Reply::text("resumed")]);
    let env = two_profiles(&a, &b);
    let id = "old-session";
    let cwd = env.work().display().to_string();
    let lines = [
        format!(
            r#"{{"type":"session","version":0,"id":"{id}","created_at":1767225600000,"cwd":"{cwd}","delegation_depth":0}}"#
        ),
        r#"{"seq":0,"time":1767225600001,"type":"turn/start","data":{"turn":0}}"#.to_owned(),
        r#"{"seq":1,"time":1767225600002,"type":"step/start","data":{"turn":0,"step":0}}"#
            .to_owned(),
        r#"{"seq":2,"time":1767225600003,"type":"user/message","data":{"id":"msg_old-session_1","content":"hello"},"surface_op":"append"}"#.to_owned(),
        r#"{"seq":3,"time":1767225600004,"type":"assistant/message","data":{"turn":0,"step":0,"message":{"content":"hi"}},"surface_op":"append"}"#.to_owned(),
        r#"{"seq":4,"time":1767225600005,"type":"step/end","data":{"turn":0,"step":0}}"#
            .to_owned(),
        r#"{"seq":5,"time":1767225600006,"type":"turn/end","data":{"turn":0,"reason":{"kind":"completed"}}}"#.to_owned(),
    ];
    let dir = env.home().join("sessions");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{id}.jsonl")), lines.join("\n") + "\n").unwrap();
    let run = env.keel(&["resume", id, "go on"]);
    run.expect_code(0);
    assert_eq!(b.completions().len(), 1, "{}", run.stderr);
    assert_eq!(a.completions().len(), 0);
    assert_eq!(notes(&run), Vec::<&str>::new());
    let events = stored_events(&env, id);
    assert!(events.iter().all(|e| e["type"] != "session/profile"));
    // Item 6 too: the resumed message numbers after the one the log holds.
    let ids: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "user/message")
        .filter_map(|e| e["data"]["id"].as_str())
        .collect();
    assert_eq!(ids, ["msg_old-session_1", "msg_old-session_2"]);
}

/// The kernel's side of a relaunch, with the proof driver asking for one on every run: one
/// relaunch per process, under the named profile, with the same command line and
/// `profile_explicit: false`; a second request is refused (exit 1), never a loop; an explicit
/// `--profile` refuses the first.
#[test]
fn item7_the_kernel_relaunches_once_and_never_after_an_explicit_profile() {
    let env = Env::new();
    let driver = "[[insert]]\nid = \"driver\"\nplugin = \"proof-driver\"\n";
    env.profile("default", driver);
    env.profile(
        "other",
        &format!("{driver}\n[kernel]\nfault_threshold = 7\n"),
    );
    let run = env.keel(&["run", "relaunch:other,exit:0"]);
    run.expect_code(1);
    let runs: Vec<Value> = run
        .steps()
        .into_iter()
        .filter(|s| s["step"] == "relaunch")
        .map(|s| s["value"].clone())
        .collect();
    assert_eq!(runs.len(), 2, "{}", run.stdout);
    assert_eq!(runs[0]["profile"], "default");
    assert_eq!(runs[0]["explicit"], false);
    assert_eq!(runs[1]["profile"], "other");
    assert_eq!(runs[1]["explicit"], false);
    assert_eq!(runs[1]["identity"]["name"], "other");
    assert_eq!(
        runs[1]["identity"]["digest"],
        dump_digest(&env, "other").as_str()
    );
    assert_ne!(runs[0]["identity"]["digest"], runs[1]["identity"]["digest"]);
    let errors = run.errors();
    assert_eq!(errors.len(), 1, "{}", run.stderr);
    assert!(
        errors[0].contains("RELAUNCH_REFUSED") && errors[0].contains("keel relaunches once"),
        "{}",
        errors[0]
    );

    let run = env.keel(&["run", "--profile", "default", "relaunch:other"]);
    run.expect_code(1);
    assert_eq!(run.steps().len(), 1, "{}", run.stdout);
    assert!(
        run.errors()[0].contains("--profile chose the profile"),
        "{}",
        run.stderr
    );
}
