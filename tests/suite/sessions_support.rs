//! Helpers the session suites share (`sessions`, `sessions_crash`, `sessions_bad_input`): a
//! profile of the `proof-session-writer` driver, the shipped sessions rows and one backend;
//! running, spawning and killing the writer; reading a session back through
//! `keel sessions show --json` and the files under `$KEEL_HOME`; and independent re-derivations
//! of the writer's log, of the recovery closers of requirements B7 and of the model projection
//! with its tool-call contract (ARCHITECTURE §7), so the tests never take the plugins' word.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use keel_tests::{Env, Run};
use serde_json::Value;

/// The two `keel.session-store` providers; every behavioural test runs on both (SES-08).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `session-jsonl` (the `base` bundle).
    Jsonl,
    /// `session-sqlite` (`base` then `sqlite`).
    Sqlite,
}

pub const BACKENDS: [Backend; 2] = [Backend::Jsonl, Backend::Sqlite];

impl Backend {
    /// The shipped bundles that select this backend.
    fn bundles(self) -> &'static str {
        match self {
            Backend::Jsonl => r#"bundles = ["base"]"#,
            Backend::Sqlite => r#"bundles = ["base", "sqlite"]"#,
        }
    }
}

/// An environment whose profile `w` is the shipped sessions rows plus the writer driver.
pub fn env_for(backend: Backend) -> Env {
    let env = Env::new();
    env.profile(
        "w",
        &format!(
            "{}\n\n[[insert]]\nid = \"writer\"\nplugin = \"proof-session-writer\"\n",
            backend.bundles()
        ),
    );
    env
}

/// Runs the writer script to completion; panics unless it finished (`done …`).
pub fn write(env: &Env, script: &str) -> Run {
    let run = env.keel(&["run", "--profile", "w", script]);
    run.expect_code(0);
    assert!(
        run.stdout.lines().any(|l| l.starts_with("done ")),
        "the writer did not finish:\n{}\n{}",
        run.stdout,
        run.stderr
    );
    run
}

/// A running `keel run` whose stdout lines arrive on a channel.
pub struct Live {
    pub child: Child,
    pub lines: mpsc::Receiver<String>,
    reader: std::thread::JoinHandle<()>,
    stderr: std::thread::JoinHandle<String>,
}

/// Spawns the writer without waiting.
pub fn spawn(env: &Env, script: &str) -> Live {
    let mut child = env
        .command(&["run", "--profile", "w", script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn keel");
    let out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let (tx, lines) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(out)
            .lines()
            .map_while(std::result::Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    Live {
        child,
        lines,
        reader,
        stderr,
    }
}

impl Live {
    /// Waits for the first line starting with `prefix` (safety net: 60 s, never a timing assert).
    pub fn wait_for(&self, prefix: &str) -> String {
        loop {
            match self.lines.recv_timeout(Duration::from_secs(60)) {
                Ok(l) if l.starts_with(prefix) => return l,
                Ok(_) => {}
                Err(e) => panic!("no `{prefix}` line from the writer ({e})"),
            }
        }
    }

    /// SIGKILLs the process and returns every stdout line it printed after the ones consumed,
    /// plus its stderr.
    pub fn kill(mut self) -> (Vec<String>, String) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = self.reader.join();
        let rest = self.lines.try_iter().collect();
        (rest, self.stderr.join().unwrap_or_default())
    }
}

/// `(session id, durable seq)` of a `flushed`/`stopped`/`done` line.
pub fn seq_of(line: &str) -> (String, u64) {
    let mut words = line.split_whitespace().skip(1);
    let id = words.next().unwrap_or_default().to_owned();
    let seq = words
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad writer line {line:?}"));
    (id, seq)
}

/// `keel sessions show ID --json` (profile `w`): the run and its parsed stdout.
pub fn show(env: &Env, id: &str) -> (Run, Value) {
    let run = env.keel(&["sessions", "show", id, "--json", "--profile", "w"]);
    let value = serde_json::from_str(run.stdout.trim()).unwrap_or(Value::Null);
    (run, value)
}

/// The events of a `show --json` answer, asserting it succeeded.
pub fn events(env: &Env, id: &str) -> (Run, Vec<Value>) {
    let (run, value) = show(env, id);
    run.expect_code(0);
    let events = value["events"]
        .as_array()
        .unwrap_or_else(|| panic!("`show --json` has no events array: {}", run.stdout))
        .clone();
    (run, events)
}

/// Every regular file under `dir`, sorted.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Path and bytes of every data file under `$KEEL_HOME`, for before/after comparisons.
pub fn snapshot(env: &Env) -> Vec<(PathBuf, Vec<u8>)> {
    // `$KEEL_HOME/cache` is start-up data (the library digest cache, issue 25 item 2) that any
    // start may record, not session data.
    let cache = env.home().join("cache");
    files_under(&env.home())
        .into_iter()
        .filter(|p| {
            // Lock files and SQLite's shared-memory index hold no session data; the WAL's
            // frames are part of the database's logical content, compared below.
            let name = p.to_string_lossy();
            !name.ends_with("-shm")
                && !name.ends_with("-wal")
                && !name.ends_with(".lock")
                && !p.starts_with(&cache)
        })
        .map(|p| {
            let bytes = sqlite_content(&p).unwrap_or_else(|| std::fs::read(&p).unwrap_or_default());
            (p, bytes)
        })
        .collect()
}

/// The logical content of a keel SQLite session database (stamps, sessions, events), or `None`
/// for anything else. Raw bytes are not comparable: opening a database whose writer was killed
/// checkpoints its WAL into the main file, which rewrites pages without changing any row.
fn sqlite_content(path: &Path) -> Option<Vec<u8>> {
    if path.extension().is_none_or(|e| e != "sqlite3") {
        return None;
    }
    let db =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .ok()?;
    let mut out = String::new();
    for pragma in ["application_id", "user_version"] {
        let v: i64 = db
            .query_row(&format!("PRAGMA {pragma}"), [], |r| r.get(0))
            .ok()?;
        out.push_str(&format!("{pragma}={v}\n"));
    }
    for sql in [
        "SELECT id, version, created_at, cwd, parent_session, seed_length, origin, delegation_depth FROM sessions ORDER BY id",
        "SELECT session_id, seq, type, time, data, source_event_seqs, surface_op, ignorable FROM events ORDER BY session_id, seq",
    ] {
        let mut stmt = db.prepare(sql).ok()?;
        let n = stmt.column_count();
        let rows = stmt
            .query_map([], |r| {
                let cells: Vec<String> = (0..n)
                    .map(|i| {
                        format!(
                            "{:?}",
                            r.get_ref(i).map(|v| format!("{v:?}")).unwrap_or_default()
                        )
                    })
                    .collect();
                Ok(cells.join("|"))
            })
            .ok()?;
        for row in rows {
            out.push_str(&row.ok()?);
            out.push('\n');
        }
    }
    Some(out.into_bytes())
}

/// The JSONL file of session `id` under `$KEEL_HOME` (the one file whose name contains it).
pub fn jsonl_file(env: &Env, id: &str) -> PathBuf {
    let hits: Vec<PathBuf> = files_under(&env.home())
        .into_iter()
        .filter(|p| {
            p.extension().is_some_and(|e| e == "jsonl")
                && p.file_stem().is_some_and(|s| s.to_string_lossy() == id)
        })
        .collect();
    assert_eq!(
        hits.len(),
        1,
        "expected one {id}.jsonl under {}: {:?}",
        env.home().display(),
        files_under(&env.home())
    );
    hits[0].clone()
}

/// `(type, turn, step, call_id)`: what identifies one event of the writer's log.
pub type Shape = (String, u64, Option<u64>, Option<String>);

fn shape_of(e: &Value) -> Shape {
    let d = &e["data"];
    (
        e["type"].as_str().unwrap_or_default().to_owned(),
        d["turn"].as_u64().unwrap_or(u64::MAX),
        d["step"].as_u64(),
        d["call_id"].as_str().map(str::to_owned),
    )
}

/// The writer's log for `turns` complete turns of its default script (`steps=1`, tool calls
/// cycling 1, 2, 3): the same sequence `proof-session-writer` appends, derived independently.
pub fn writer_log(turns: u64) -> Vec<Shape> {
    let mut log = Vec::new();
    let e = |kind: &str, t, s, c: Option<String>| (kind.to_owned(), t, s, c);
    for t in 0..turns {
        log.push(e("turn/start", t, None, None));
        log.push(e("user/message", u64::MAX, None, None));
        for step in 0..=1u64 {
            log.push(e("step/start", t, Some(step), None));
            log.push(e("assistant/message", t, Some(step), None));
            let n = if step == 0 { 1 + t % 3 } else { 0 };
            for i in 0..n {
                let id = format!("call-{t}-{step}-{i}");
                log.push(e("tool/call", t, Some(step), Some(id.clone())));
                log.push(e("tool/result", t, Some(step), Some(id)));
            }
            log.push(e("step/end", t, Some(step), None));
        }
        log.push(e("turn/end", t, None, None));
    }
    log
}

/// An expected recovery closer (requirements B7).
#[derive(Debug, PartialEq, Eq)]
pub enum Closer {
    /// A result for an unmatched call: `(call_id, code, seq of its tool/call if logged)`.
    Result(String, &'static str, Option<u64>),
    StepEnd,
    TurnEnd,
}

/// The closers B7 prescribes for `events` (an independent re-derivation of the algorithm).
pub fn closers_for(events: &[Value]) -> Vec<Closer> {
    let (mut open_turn, mut open_step) = (false, false);
    let mut pending: Vec<(String, Option<u64>)> = Vec::new();
    for e in events {
        let d = &e["data"];
        match e["type"].as_str().unwrap_or_default() {
            "turn/start" => (open_turn, open_step, pending) = (true, false, Vec::new()),
            "turn/end" => (open_turn, open_step, pending) = (false, false, Vec::new()),
            "step/start" => open_step = true,
            "step/end" => (open_step, pending) = (false, Vec::new()),
            "assistant/message" => {
                for c in d["message"]["tool_calls"].as_array().into_iter().flatten() {
                    pending.push((c["id"].as_str().unwrap_or_default().to_owned(), None));
                }
            }
            "tool/call" => {
                if let Some(p) = pending.iter_mut().find(|p| d["call_id"] == p.0.as_str()) {
                    p.1 = e["seq"].as_u64();
                }
            }
            "tool/result" => pending.retain(|p| d["call_id"] != p.0.as_str()),
            _ => {}
        }
    }
    if !open_turn {
        return Vec::new();
    }
    let mut out: Vec<Closer> = pending
        .into_iter()
        .map(|(id, call)| {
            let code = if call.is_some() {
                "TOOL_OUTCOME_UNKNOWN"
            } else {
                "TOOL_NOT_STARTED"
            };
            Closer::Result(id, code, call)
        })
        .collect();
    if open_step {
        out.push(Closer::StepEnd);
    }
    out.push(Closer::TurnEnd);
    out
}

/// Whether a `turn/end` reason is `interrupted` (a string or `{kind: …}`).
pub fn reason_is(e: &Value, kind: &str) -> bool {
    let r = &e["data"]["reason"];
    r == kind || r["kind"] == kind
}

/// Checks that `found` (the tail after the writer's own events) is exactly `expected`.
fn check_closers(found: &[Value], expected: &[Closer]) -> Result<(), String> {
    if found.len() != expected.len() {
        return Err(format!(
            "expected closers {expected:?}, found {} events after the writer's",
            found.len()
        ));
    }
    for (e, c) in found.iter().zip(expected) {
        let d = &e["data"];
        let ok = match c {
            Closer::Result(id, code, call) => {
                e["type"] == "tool/result"
                    && d["call_id"] == id.as_str()
                    && d["is_error"] == true
                    && d["error"]["code"] == *code
                    && e["surface_op"] == "append"
                    && call.is_none_or(|s| e["source_event_seqs"] == serde_json::json!([s]))
            }
            Closer::StepEnd => e["type"] == "step/end",
            Closer::TurnEnd => e["type"] == "turn/end" && reason_is(e, "interrupted"),
        };
        if !ok {
            return Err(format!("closer {e} is not {c:?}"));
        }
    }
    Ok(())
}

/// The projected model history over `events` (surface events; a replacement shadows its range):
/// `(role, call ids)` per message.
pub fn projection(events: &[Value]) -> Vec<(String, Vec<String>)> {
    let shadowed = |seq: u64| {
        events.iter().any(|e| {
            let op = &e["surface_op"];
            op["op"] == "replace"
                && e["seq"].as_u64() > Some(seq)
                && op["start"].as_u64().is_some_and(|s| s <= seq)
                && op["end"].as_u64().is_some_and(|end| seq <= end)
        })
    };
    let mut out = Vec::new();
    for e in events {
        if e["surface_op"].is_null() || shadowed(e["seq"].as_u64().unwrap_or(0)) {
            continue;
        }
        let d = &e["data"];
        match e["type"].as_str().unwrap_or_default() {
            "user/message" => out.push(("user".to_owned(), Vec::new())),
            "assistant/message" => {
                let ids = d["message"]["tool_calls"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| c["id"].as_str().unwrap_or_default().to_owned())
                    .collect();
                out.push(("assistant".to_owned(), ids));
            }
            "tool/result" => out.push((
                "tool".to_owned(),
                vec![d["call_id"].as_str().unwrap_or_default().to_owned()],
            )),
            _ => {}
        }
    }
    out
}

/// The tool-call contract (ARCHITECTURE §7): every assistant message with calls is followed
/// immediately by exactly one result per call id, in call order; no result stands alone.
pub fn tool_call_contract(messages: &[(String, Vec<String>)]) -> Result<(), String> {
    let mut i = 0;
    while i < messages.len() {
        let (role, ids) = &messages[i];
        match role.as_str() {
            "tool" => return Err(format!("orphan tool result {ids:?} at message {i}")),
            "assistant" => {
                for (k, id) in ids.iter().enumerate() {
                    match messages.get(i + 1 + k) {
                        Some((r, got)) if r == "tool" && got == &vec![id.clone()] => {}
                        other => {
                            return Err(format!(
                                "call {id} of message {i} is not answered next (found {other:?})"
                            ));
                        }
                    }
                }
                i += 1 + ids.len();
            }
            _ => i += 1,
        }
    }
    Ok(())
}

/// SES-04/B6: `flush` is the barrier — it returns only when everything appended before it is
/// durable. The writer flushes right after appending a `step/start` or a `tool/call` (and after
/// its last `turn/end`), so every durable seq it printed must be the seq of one of those events
/// in its (deterministic) log; a smaller one means the flush returned early.
pub fn check_flush_points(flushed: &[u64]) -> Result<(), String> {
    let Some(&max) = flushed.iter().max() else {
        return Ok(());
    };
    let mut turns = 1;
    let mut log = writer_log(turns);
    while log.len() as u64 <= max {
        turns *= 2;
        log = writer_log(turns);
    }
    for &seq in flushed {
        let kind = log[seq as usize].0.as_str();
        if !["step/start", "tool/call", "turn/end"].contains(&kind) {
            return Err(format!(
                "a flush returned durable seq {seq} ({kind}), short of the events appended before \
                 it: the barrier did not drain"
            ));
        }
    }
    Ok(())
}

/// The whole acceptance check of a recovered writer log: `seq` contiguous from 0; the events
/// up to `flushed` are the writer's, unchanged; after the writer's events come exactly the B7
/// closers; the log ends with `turn/end`; the projection keeps the tool-call contract.
pub fn check_recovered(events: &[Value], flushed: u64) -> Result<(), String> {
    for (i, e) in events.iter().enumerate() {
        if e["seq"].as_u64() != Some(i as u64) {
            return Err(format!("seq not contiguous at index {i}: {e}"));
        }
    }
    let turns = events.iter().filter(|e| e["type"] == "turn/start").count() as u64;
    let expected = writer_log(turns + 1);
    let k = events
        .iter()
        .zip(&expected)
        .take_while(|(e, x)| {
            let s = shape_of(e);
            // user/message carries no turn field.
            (s.0 == x.0 && s.2 == x.2 && s.3 == x.3) && (s.1 == x.1 || x.0 == "user/message")
        })
        .count();
    if (k as u64) <= flushed {
        return Err(format!(
            "flushed event {flushed} is missing or changed: the writer's events stop at seq {k}"
        ));
    }
    check_closers(&events[k..], &closers_for(&events[..k]))?;
    match events.last() {
        Some(e) if e["type"] == "turn/end" => {}
        other => return Err(format!("the tail is not closed: last event {other:?}")),
    }
    tool_call_contract(&projection(events))
}

/// Runs the writer until it parks at `stop`, then SIGKILLs it; returns the durable seq.
pub fn crash_at(env: &Env, id: &str, turns: u64, stop: &str) -> u64 {
    let live = spawn(env, &format!("id={id} turns={turns} stop={stop}"));
    let (_, seq) = seq_of(&live.wait_for("stopped "));
    let _ = live.kill();
    seq
}
