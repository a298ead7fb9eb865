//! Session refusals and repairs say what they are (issue 10 items 11–13; SES-06, SES-08,
//! SES-10), through the binary:
//!
//! - item 11: `keel run` / `keel resume` on a foreign or other-schema `sessions.sqlite3` fail
//!   with `SESSION_UNSUPPORTED` naming the file, as `sessions list` does (not `SESSION_EXISTS`);
//! - item 12: `sessions show` says what it cut of a torn tail, and `sessions list` names every
//!   file it could not read (`unreadable` with `--json`), on both backends;
//! - item 13: of two concurrent `keel resume` of one session, the loser gets `SESSION_LOCKED`
//!   with exit 1 — a lock conflict, not a usage error — and the log is untouched by it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use keel_tests::Env;
use keel_tests::model_server::{ModelServer, Reply};
use serde_json::{Value, json};

use super::agent_support::{agent_env, last_reason, run_json, server, session_of, stored_events};
use super::sessions_support::{Backend, env_for, jsonl_file, show, snapshot, write};

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

/// Exactly one `keel:` line on stderr, with `code`, naming every word of `names` (besides the
/// note a resume with another config prints first, issue 11 item 7).
fn one_refusal(run: &keel_tests::Run, code: &str, names: &[&str]) -> String {
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    let lines: Vec<&str> = run
        .error_lines()
        .into_iter()
        .filter(|l| !l.starts_with("keel: resuming session "))
        .collect();
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

fn append_bytes(path: &Path, bytes: &str) {
    let mut text = std::fs::read(path).expect("read log");
    text.extend_from_slice(bytes.as_bytes());
    std::fs::write(path, text).expect("write log");
}

/// The `keel:` stderr lines of a run that mention `what`.
fn said<'a>(run: &'a keel_tests::Run, what: &str) -> Vec<&'a str> {
    run.error_lines()
        .into_iter()
        .filter(|l| l.contains(what))
        .collect()
}

// Issue 10 item 12 (SES-06, B3): `sessions show` cutting a torn JSONL tail says so — the file,
// the line and its bytes — on stderr (text) and in `truncated` (`--json`); the file loses
// exactly those bytes and nothing else.
#[test]
fn ses_06_show_says_what_it_cut_of_a_torn_jsonl_tail() {
    let env = env_for(Backend::Jsonl);
    for (id, as_json) in [("torn-text", false), ("torn-json", true)] {
        write(&env, &format!("id={id} turns=1"));
        let file = jsonl_file(&env, id);
        let complete = std::fs::read(&file).expect("read");
        let lines = complete.iter().filter(|&&b| b == b'\n').count();
        let torn = r#"{"seq":99,"time":1,"type":"turn/st"#;
        append_bytes(&file, torn);
        let name = file
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        let mut argv = vec!["sessions", "show", id, "--profile", "w"];
        if as_json {
            argv.push("--json");
        }
        let run = env.keel(&argv);
        run.expect_code(0);
        let cut = said(&run, "cut");
        assert_eq!(cut.len(), 1, "show must say what it cut:\n{}", run.stderr);
        for w in [
            name.as_str(),
            &format!("line {}", lines + 1),
            &format!("{} bytes", torn.len()),
        ] {
            assert!(cut[0].contains(w), "`{w}` missing from: {}", cut[0]);
        }
        if as_json {
            let v: Value = serde_json::from_str(run.stdout.trim()).expect("show --json");
            let t = &v["truncated"];
            assert_eq!(t["path"], json!(file.to_string_lossy()), "{v}");
            assert_eq!(t["line"], json!(lines + 1), "{t}");
            assert_eq!(t["bytes"], json!(torn.len()), "{t}");
            assert!(t["reason"].is_string(), "{t}");
        }
        assert_eq!(
            std::fs::read(&file).expect("read"),
            complete,
            "exactly the torn line"
        );
        // Nothing left to cut: a second show says nothing, and `truncated` is null.
        let (again, v) = show(&env, id);
        assert!(said(&again, "cut").is_empty(), "{}", again.stderr);
        assert_eq!(v["truncated"], Value::Null);
    }
}

// Issue 10 item 12 (SES-06, B4): the same for an SQLite torn tail (an unparsable last row).
#[test]
fn ses_06_show_says_what_it_cut_of_a_torn_sqlite_tail() {
    let env = env_for(Backend::Sqlite);
    write(&env, "id=torn turns=1");
    let db = env.home().join("sessions").join("sessions.sqlite3");
    let next: i64 = {
        let c = rusqlite::Connection::open(&db).expect("open");
        c.execute(
            "INSERT INTO events (session_id, seq, type, time, data, surface_op)
             SELECT 'torn', MAX(seq) + 1, 'assistant/message', 1, '{\"text\":\"tor', '\"append\"'
             FROM events WHERE session_id = 'torn'",
            [],
        )
        .expect("torn row");
        c.query_row(
            "SELECT MAX(seq) FROM events WHERE session_id = 'torn'",
            [],
            |r| r.get(0),
        )
        .expect("max")
    };
    let run = env.keel(&["sessions", "show", "torn", "--json", "--profile", "w"]);
    run.expect_code(0);
    let cut = said(&run, "cut");
    assert_eq!(cut.len(), 1, "show must say what it cut:\n{}", run.stderr);
    for w in ["sessions.sqlite3", &format!("1 row from seq {next}")] {
        assert!(cut[0].contains(w), "`{w}` missing from: {}", cut[0]);
    }
    let v: Value = serde_json::from_str(run.stdout.trim()).expect("show --json");
    assert_eq!(v["truncated"]["rows"], 1, "{v}");
    assert_eq!(v["truncated"]["seq"], next, "{v}");
    let left: i64 = rusqlite::Connection::open(&db)
        .expect("open")
        .query_row(
            "SELECT count(*) FROM events WHERE session_id = 'torn' AND seq >= ?1",
            [next],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(left, 0, "the torn row is gone");
}

/// `sessions list` text and `--json` (profile `w`): `(stdout rows, stderr warnings, unreadable)`.
fn list_both(env: &Env) -> (String, Vec<String>, Vec<Value>) {
    let text = env.keel(&["sessions", "list", "--profile", "w"]);
    text.expect_code(0);
    let warnings = text.error_lines().iter().map(|l| (*l).to_owned()).collect();
    let json = env.keel(&["sessions", "list", "--json", "--profile", "w"]);
    json.expect_code(0);
    let v: Value = serde_json::from_str(json.stdout.trim()).expect("list --json");
    let unreadable = v["unreadable"]
        .as_array()
        .unwrap_or_else(|| panic!("list --json has no `unreadable` list: {v}"))
        .clone();
    (text.stdout, warnings, unreadable)
}

/// Each `(path, words)` is named by exactly one warning line and one `unreadable` entry.
fn reported(warnings: &[String], unreadable: &[Value], expected: &[(String, &str)]) {
    assert_eq!(warnings.len(), expected.len(), "{warnings:#?}");
    assert_eq!(unreadable.len(), expected.len(), "{unreadable:#?}");
    for (path, word) in expected {
        let lines: Vec<&String> = warnings.iter().filter(|l| l.contains(path)).collect();
        assert_eq!(lines.len(), 1, "no one warning names {path}: {warnings:#?}");
        assert!(lines[0].contains(word), "`{word}` missing: {}", lines[0]);
        let entry = unreadable
            .iter()
            .find(|u| u["path"] == json!(path))
            .unwrap_or_else(|| panic!("{path} not in {unreadable:#?}"));
        let reason = entry["reason"].as_str().unwrap_or_default();
        assert!(reason.contains(word), "`{word}` missing from {entry}");
    }
}

// Issue 10 item 12 (SES-08/09): `sessions list` names every session file it could not read —
// one stderr line each (text), an `unreadable` list of {path, reason} (`--json`) — and still
// lists the good ones, on both backends.
#[test]
fn ses_08_list_names_every_file_it_cannot_read() {
    let env = env_for(Backend::Jsonl);
    write(&env, "id=good turns=1");
    let good = jsonl_file(&env, "good");
    let dir = good.parent().expect("dir").to_path_buf();
    let broken = dir.join("broken.jsonl");
    std::fs::write(&broken, "not json at all\n").expect("write");
    let future = dir.join("future.jsonl");
    let text = std::fs::read_to_string(&good).expect("read");
    let text = text
        .replacen(r#""version":0"#, r#""version":7"#, 1)
        .replacen(r#""id":"good""#, r#""id":"future""#, 1);
    std::fs::write(&future, text).expect("write");
    let odd = dir.join("not a session.jsonl");
    std::fs::write(&odd, "").expect("write");
    let (rows, warnings, unreadable) = list_both(&env);
    assert!(rows.contains("good"), "{rows}");
    let path = |p: &Path| p.to_string_lossy().into_owned();
    reported(
        &warnings,
        &unreadable,
        &[
            (path(&broken), "corrupt"),
            (path(&future), "version 7"),
            (path(&odd), "not a session id"),
        ],
    );

    let env = env_for(Backend::Sqlite);
    write(&env, "id=good turns=1");
    write(&env, "id=future turns=1");
    let db = env.home().join("sessions").join("sessions.sqlite3");
    rusqlite::Connection::open(&db)
        .expect("open")
        .execute("UPDATE sessions SET version = 7 WHERE id = 'future'", [])
        .expect("version 7");
    let (rows, warnings, unreadable) = list_both(&env);
    assert!(rows.contains("good") && !rows.contains("future"), "{rows}");
    reported(&warnings, &unreadable, &[(path(&db), "version 7")]);
    assert_eq!(unreadable[0]["session_id"], "future");
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
