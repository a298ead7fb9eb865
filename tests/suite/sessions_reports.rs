//! Session refusals say what they are (issue 10; SES-08, SES-10), through the binary:
//!
//! - item 11: `keel run` / `keel resume` on a foreign or other-schema `sessions.sqlite3` fail
//!   with `SESSION_UNSUPPORTED` naming the file, as `sessions list` does (not `SESSION_EXISTS`);
//! - item 13: of two concurrent `keel resume` of one session, the loser gets `SESSION_LOCKED`
//!   with exit 1 — a lock conflict, not a usage error — and the log is untouched by it.

use std::path::PathBuf;
use std::time::Duration;

use keel_tests::Env;
use keel_tests::model_server::{ModelServer, Reply};

use super::agent_support::{agent_env, last_reason, run_json, server, session_of, stored_events};
use super::sessions_support::snapshot;

/// [`agent_env`] storing sessions in SQLite (`bundles = ["base", "agent", "sqlite"]`).
fn sqlite_agent_env(server: &ModelServer) -> Env {
    let env = agent_env(server, "");
    let path = env.path().join("config/profiles/t.toml");
    let text = std::fs::read_to_string(&path).expect("profile");
    let text = text.replacen(
        r#"bundles = ["base", "agent"]"#,
        r#"bundles = ["base", "agent", "sqlite"]"#,
        1,
    );
    std::fs::write(&path, text).expect("profile");
    env
}

fn sqlite_db(env: &Env) -> PathBuf {
    env.home().join("sessions").join("sessions.sqlite3")
}

/// Exactly one `keel:` line on stderr, with `code`, naming every word of `names`.
fn one_refusal(run: &keel_tests::Run, code: &str, names: &[&str]) -> String {
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    let lines = run.error_lines();
    assert_eq!(lines.len(), 1, "one clear line:\n{}", run.stderr);
    let line = lines[0].to_owned();
    assert!(
        line.starts_with(&format!("keel: error[{code}]: ")),
        "expected {code}: {line}"
    );
    for n in names {
        assert!(line.contains(n), "`{n}` missing from: {line}");
    }
    line
}

// Issue 10 item 11 (SES-10): a database of another application, or keel's at another schema
// version, is refused by `run` and `resume` as unsupported, naming the file — before any model
// request, with nothing written.
#[test]
fn ses_10_run_and_resume_on_a_foreign_or_other_schema_sqlite_are_unsupported() {
    let server = server(vec![Reply::text("stored"), Reply::text("never")]);
    // Keel's own database at another schema version.
    let env = sqlite_agent_env(&server);
    let (run, result) = run_json(&env, "hello", &[]);
    run.expect_code(0);
    let id = session_of(&result);
    let db = sqlite_db(&env);
    {
        let c = rusqlite::Connection::open(&db).expect("open");
        let v: i64 = c
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .expect("version");
        c.execute_batch(&format!("PRAGMA user_version = {}", v + 1))
            .expect("bump");
    }
    let before = snapshot(&env);
    let run = env.keel(&["run", "--profile", "t", "hello again"]);
    let line = one_refusal(&run, "SESSION_UNSUPPORTED", &["sessions.sqlite3"]);
    assert!(!line.contains("EXISTS"), "{line}");
    assert_eq!(run.code, 2, "before any request: {}", run.stderr);
    let run = env.keel(&["resume", &id, "--profile", "t", "go on"]);
    one_refusal(&run, "SESSION_UNSUPPORTED", &["sessions.sqlite3"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert_eq!(
        server.completions().len(),
        1,
        "no request after the refusal"
    );
    assert_eq!(before, snapshot(&env), "SES-10: refused, never migrated");

    // Another application's database at the same place.
    let server = self::server(vec![Reply::text("never")]);
    let env = sqlite_agent_env(&server);
    let db = sqlite_db(&env);
    std::fs::create_dir_all(db.parent().expect("parent")).expect("mkdir");
    {
        let c = rusqlite::Connection::open(&db).expect("create");
        c.execute_batch("PRAGMA application_id = 1234; CREATE TABLE notes(x TEXT);")
            .expect("foreign schema");
    }
    let before = snapshot(&env);
    for argv in [
        &["run", "--profile", "t", "hello"][..],
        &["resume", "some-session", "--profile", "t", "go on"][..],
    ] {
        let run = env.keel(argv);
        one_refusal(&run, "SESSION_UNSUPPORTED", &["sessions.sqlite3"]);
        assert_eq!(run.code, 2, "{argv:?}: {}", run.stderr);
    }
    let list = env.keel(&["sessions", "list", "--profile", "t"]);
    one_refusal(&list, "SESSION_UNSUPPORTED", &["sessions.sqlite3"]);
    assert!(server.completions().is_empty());
    assert_eq!(before, snapshot(&env));
}

// Issue 10 item 13 (SES-08, B3/B4 one live writer): two `keel resume` of one session — the one
// that loses gets `SESSION_LOCKED` and exit 1 (a lock conflict, as docs/session-format.md says;
// never `SESSION_OPEN_TURN`/exit 2), sends no request and leaves no trace in the log; the
// winner runs its turn to completion.
#[test]
fn ses_08_the_loser_of_two_concurrent_resumes_gets_session_locked() {
    let hold = Duration::from_secs(4);
    let server = server(vec![
        Reply::text("first"),
        Reply::text("second").delay(hold),
        Reply::text("third").delay(hold),
        Reply::text("spare"),
    ]);
    let env = agent_env(&server, "");
    let (run, result) = run_json(&env, "hello", &[]);
    run.expect_code(0);
    let id = session_of(&result);
    // The held replies outlast the profile's 2 s model timeout: lift it for these runs.
    let slow = ["-c", "llm-openai.timeout_ms=60000"];
    let resume = |prompt: &str| {
        let mut argv = vec!["resume", id.as_str(), "--profile", "t"];
        argv.extend(slow);
        argv.push(prompt);
        env.command(&argv)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn keel resume")
    };

    // The winner holds the session with its turn open (its model request is in flight).
    let winner = resume("winner one");
    server.wait_for(2, Duration::from_secs(60));
    let loser = env.keel(&[
        "resume",
        &id,
        "--profile",
        "t",
        slow[0],
        slow[1],
        "loser one",
    ]);
    let line = one_refusal(&loser, "SESSION_LOCKED", &[&id]);
    assert_eq!(
        loser.code, 1,
        "a lock conflict is not a usage error: {line}"
    );
    let out = winner.wait_with_output().expect("winner");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Both started at once: exactly one runs, the other is refused the same way.
    let (a, b) = (resume("racer a"), resume("racer b"));
    let outs = [a.wait_with_output(), b.wait_with_output()].map(|o| o.expect("racer"));
    let mut codes: Vec<i32> = outs.iter().map(|o| o.status.code().unwrap_or(-1)).collect();
    codes.sort_unstable();
    let stderr: Vec<String> = outs
        .iter()
        .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
        .collect();
    assert_eq!(codes, [0, 1], "{stderr:#?}");
    assert!(
        stderr
            .iter()
            .any(|e| e.contains("keel: error[SESSION_LOCKED]: ") && e.contains(&id)),
        "{stderr:#?}"
    );

    assert_eq!(server.completions().len(), 3, "the losers sent no request");
    let events = stored_events(&env, &id);
    let turns = events.iter().filter(|e| e["type"] == "turn/start").count();
    assert_eq!(turns, 3, "one turn per winning run");
    assert_eq!(last_reason(&events)["kind"], "completed");
    let log = serde_json::to_string(&events).expect("json");
    assert!(
        !log.contains("loser one"),
        "the loser's prompt reached the log"
    );
}
