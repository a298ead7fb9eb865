//! Sessions through the built binary (ARCHITECTURE §7, §11; requirements C6, B7, B8): the CLI
//! commands `keel sessions list|show` and `keel fork` on a profile of the
//! `proof-session-writer` driver, the `session` core plugin and each backend in turn, and the
//! shipped `default` profile. Everything is checked from the world: the stored log as
//! `keel sessions show --json` returns it, the files under `$KEEL_HOME`, and exit codes.

use keel_tests::Env;
use serde_json::Value;

use super::sessions_support::{
    BACKENDS, Backend, check_flush_points, check_recovered, crash_at, env_for, events, reason_is,
    seq_of, show, snapshot, write, writer_log,
};

fn lines(s: &str) -> Vec<&str> {
    s.lines().filter(|l| !l.trim().is_empty()).collect()
}

// ---------------------------------------------------------------------------------------------
// CLI: `keel sessions list|show`, `keel fork` (ARCHITECTURE §11).

// SES-01/SES-02/SES-08: a finished run is stored with contiguous seqs and the writer's events,
// and `sessions list` (text and JSON) shows it, on both backends.
#[test]
fn ses_08_list_and_show_a_finished_session_on_both_backends() {
    for backend in BACKENDS {
        let env = env_for(backend);
        write(&env, "id=alpha turns=2");
        write(&env, "id=beta turns=1");
        let (run, events) = events(&env, "alpha");
        assert_eq!(
            events.len(),
            writer_log(2).len(),
            "{backend:?}: {}",
            run.stdout
        );
        check_recovered(&events, events.len() as u64 - 1)
            .unwrap_or_else(|e| panic!("{backend:?}: {e}"));
        assert!(
            events
                .iter()
                .all(|e| reason_is(e, "completed") || e["type"] != "turn/end"),
            "{backend:?}: a finished session was given closers"
        );
        for e in &events {
            let surface = ["user/message", "assistant/message", "tool/result"]
                .contains(&e["type"].as_str().unwrap_or_default());
            assert_eq!(
                !e["surface_op"].is_null(),
                surface,
                "SES-02 surface fields: {e}"
            );
        }
        let (_, v) = show(&env, "alpha");
        assert_eq!(v["header"]["id"], "alpha", "{backend:?}: {v}");
        assert_eq!(
            v["header"]["version"], 0,
            "{backend:?}: format version 0 (SES-09)"
        );

        let text = env.keel(&["sessions", "list", "--profile", "w"]);
        text.expect_code(0);
        for id in ["alpha", "beta"] {
            assert!(
                text.stdout.contains(id),
                "{backend:?}: list lacks {id}:\n{}",
                text.stdout
            );
        }
        let json = env.keel(&["sessions", "list", "--json", "--profile", "w"]);
        json.expect_code(0);
        let v: Value = serde_json::from_str(json.stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "{backend:?}: list --json is not JSON ({e}): {}",
                json.stdout
            )
        });
        let sessions = v["sessions"]
            .as_array()
            .or(v.as_array())
            .cloned()
            .unwrap_or_default();
        let mut ids: Vec<&str> = sessions.iter().filter_map(|s| s["id"].as_str()).collect();
        ids.sort_unstable();
        assert_eq!(ids, ["alpha", "beta"], "{backend:?}: {v}");
        let alpha = sessions
            .iter()
            .find(|s| s["id"] == "alpha")
            .cloned()
            .unwrap_or_default();
        assert_eq!(alpha["events"], writer_log(2).len(), "{backend:?}: {alpha}");
    }
}

// The default profile ships sessions (base bundle, JSONL) without a driver: `sessions list`
// works with it and finds nothing in a fresh home.
#[test]
fn default_profile_lists_sessions() {
    let env = Env::new();
    let run = env.keel(&["sessions", "list", "--json"]);
    run.expect_code(0);
    let v: Value = serde_json::from_str(run.stdout.trim()).unwrap_or(Value::Null);
    let n = v["sessions"].as_array().or(v.as_array()).map(Vec::len);
    assert_eq!(n, Some(0), "{}\n{}", run.stdout, run.stderr);
}

// SES-06 (B7): `show` recovers a crashed session on read, says so on stderr, and commits the
// closers — a second `show` appends nothing. One call started (outcome unknown), two not.
#[test]
fn ses_06_show_recovers_a_crashed_session_once() {
    for backend in BACKENDS {
        let env = env_for(backend);
        let flushed = crash_at(&env, "crashed", 1, "call");
        let (first, events1) = events(&env, "crashed");
        assert!(
            first.stderr.to_lowercase().contains("recover"),
            "{backend:?}: show did not say it recovered:\n{}",
            first.stderr
        );
        check_recovered(&events1, flushed).unwrap_or_else(|e| panic!("{backend:?}: {e}"));
        let tail: Vec<&Value> = events1.iter().rev().take(5).rev().collect();
        let codes: Vec<&str> = tail[..3]
            .iter()
            .map(|e| e["data"]["error"]["code"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(
            codes,
            [
                "TOOL_OUTCOME_UNKNOWN",
                "TOOL_NOT_STARTED",
                "TOOL_NOT_STARTED"
            ],
            "{backend:?}"
        );
        // B7 wording: the unknown outcome says retry only read-only or idempotent calls, else
        // check the external state or ask the user; the not-started one allows a retry.
        let unknown = tail[0]["data"]["content"].to_string().to_lowercase();
        for w in ["read-only", "idempotent", "ask the user"] {
            assert!(
                unknown.contains(w),
                "{backend:?}: `{w}` missing from: {unknown}"
            );
        }
        let not_started = tail[1]["data"]["content"].to_string().to_lowercase();
        assert!(
            !not_started.is_empty() && !not_started.contains("idempotent"),
            "{backend:?}: {not_started}"
        );
        let before = snapshot(&env);
        let (second, events2) = events(&env, "crashed");
        assert_eq!(
            events1, events2,
            "{backend:?}: a second show changed the log"
        );
        assert!(
            !second.stderr.to_lowercase().contains("recover"),
            "{backend:?}: {}",
            second.stderr
        );
        if backend == Backend::Jsonl {
            assert_eq!(before, snapshot(&env), "a second show wrote to disk");
        }

        // An open step without calls gets `step/end` then `turn/end{interrupted}` only.
        let flushed = crash_at(&env, "open-step", 2, "step");
        let (_, events) = events(&env, "open-step");
        check_recovered(&events, flushed).unwrap_or_else(|e| panic!("{backend:?}: {e}"));
        let last: Vec<&Value> = events.iter().rev().take(3).collect();
        assert_eq!(last[0]["type"], "turn/end");
        assert_eq!(last[1]["type"], "step/end");
        assert_eq!(
            last[2]["type"], "step/start",
            "{backend:?}: no tool closers expected"
        );
    }
}

// SES-07 (B8): a fork at a closed boundary creates a child with lineage and the seed prefix;
// the default boundary is the last event; a boundary inside an open turn is refused with exit 2
// and one line naming the session and the seq, and nothing is created.
#[test]
fn ses_07_fork_takes_closed_prefixes_only() {
    for backend in BACKENDS {
        let env = env_for(backend);
        write(&env, "id=parent turns=2");
        let (_, parent) = events(&env, "parent");
        let first_end = writer_log(1).len() as u64 - 1;
        assert_eq!(parent[first_end as usize]["type"], "turn/end");

        let mut children = Vec::new();
        for at in [Some(first_end), None] {
            let mut args = vec!["fork", "parent", "--profile", "w"];
            let at_s = at.map(|a| a.to_string());
            if let Some(a) = &at_s {
                args.extend(["--at", a]);
            }
            let run = env.keel(&args);
            run.expect_code(0);
            let child = run
                .stdout
                .split_whitespace()
                .last()
                .unwrap_or_else(|| panic!("{backend:?}: fork printed no child id"))
                .to_owned();
            let (_, v) = show(&env, &child);
            let seed = at.map_or(parent.len() as u64, |a| a + 1);
            assert_eq!(v["header"]["parent_session"], "parent", "{backend:?}: {v}");
            assert_eq!(v["header"]["seed_length"], seed, "{backend:?}: {v}");
            let mut evs = v["events"].as_array().cloned().unwrap_or_default();
            // The seed, then (optionally) the `session/end-seed` marker fork writes after it.
            if evs.last().is_some_and(|e| e["type"] == "session/end-seed") {
                evs.pop();
            }
            assert_eq!(
                evs.len() as u64,
                seed,
                "{backend:?}: the child holds the seed only"
            );
            for (c, p) in evs.iter().zip(&parent) {
                assert_eq!(
                    (&c["type"], &c["data"]),
                    (&p["type"], &p["data"]),
                    "{backend:?}"
                );
            }
            children.push(child);
        }
        assert_ne!(children[0], children[1]);

        let before = snapshot(&env);
        let mut refusals = Vec::new();
        for inside in [first_end + 1, first_end + 4, parent.len() as u64 - 2] {
            let run = env.keel(&[
                "fork",
                "parent",
                "--at",
                &inside.to_string(),
                "--profile",
                "w",
            ]);
            run.expect_code(2);
            let errs = lines(&run.stderr);
            assert_eq!(
                errs.len(),
                1,
                "{backend:?}: one line expected:\n{}",
                run.stderr
            );
            refusals.push((inside, errs[0].to_owned()));
        }
        assert_eq!(
            before,
            snapshot(&env),
            "{backend:?}: a refused fork wrote something"
        );
        for (seq, line) in refusals {
            assert!(
                line.contains("'parent'") && line.contains(&format!("seq {seq}")),
                "{backend:?}: the refusal must name the session and the seq: {line}"
            );
        }
    }
}

// SES-04 (B5): `flush` is the barrier even while a background batch is in flight. A batching
// window of 0 ms keeps the background writer busy, so flushes race with window writes; every
// flush must still return only when the events appended before it are durable — and the
// finished log holds everything.
#[test]
fn ses_04_flush_drains_everything_while_background_writes_run() {
    for backend in BACKENDS {
        let env = env_for(backend);
        let run = env.keel(&[
            "run",
            "--profile",
            "w",
            "-c",
            "session.write_batch_max_delay_ms=0",
            "id=busy turns=40",
        ]);
        run.expect_code(0);
        let points: Vec<u64> = run
            .stdout
            .lines()
            .filter(|l| l.starts_with("flushed "))
            .map(|l| seq_of(l).1)
            .collect();
        check_flush_points(&points).unwrap_or_else(|e| panic!("{backend:?}: {e}"));
        let (_, log) = events(&env, "busy");
        assert_eq!(log.len(), writer_log(40).len(), "{backend:?}");
        check_recovered(&log, log.len() as u64 - 1).unwrap_or_else(|e| panic!("{backend:?}: {e}"));
    }
}
