//! The five dispatch modes through real cdylibs: `proof-driver` dispatches, `proof-listener`
//! rows listen, and every test asserts on the trace file the listeners append to and on the
//! driver's JSON outcome line per step (EVT-01, EVT-02, EVT-05; ARCHITECTURE §4.4; Cordis
//! conformance cases 8–10, 14–15, 17–20, 24–25 of cordis-semantics §3).
//!
//! keel's decision on Cordis case 24 is pinned here: a waterfall `next` may be called again to
//! re-run the downstream chain. Errors, panics, faults, deadlines and ABI misuse are in
//! `bus_faults`.

use keel_tests::{Env, position};
use serde_json::{Value, json};

use super::proof::{LISTENER, chain, ok, only, profile};

// EVT-01, EVT-02, EVT-05; cases 8, 14, 15. One listener row serves every mode; each mode's
// outcome is checked on the driver's line and on the trace.
#[test]
fn every_mode_dispatches_to_its_listeners() {
    let env = Env::new();
    profile(
        &env,
        "",
        &[(
            "l",
            LISTENER,
            r#"listeners = [
  { event = "proof/emit", tag = "e1" },
  { event = "proof/emit", tag = "e2" },
  { event = "proof/waterfall", tag = "w1" },
  { event = "proof/waterfall", tag = "w2" },
  { event = "proof/async-waterfall", tag = "aw1" },
  { event = "proof/async-waterfall", tag = "aw2" },
  { event = "proof/parallel", tag = "p1" },
  { event = "proof/parallel", tag = "p2" },
  { event = "proof/serial", tag = "s1", action = "pass" },
  { event = "proof/serial", tag = "s2", action = "decide" },
  { event = "proof/serial", tag = "s3", action = "decide" },
]"#,
        )],
    );
    let run = env.drive(
        "p",
        "emit:hello,waterfall,async-waterfall,parallel:go,serial",
    );
    run.expect_code(0);
    assert_eq!(ok(&run, "emit:hello"), Value::Null);
    assert_eq!(ok(&run, "waterfall"), chain(102, &["w1", "w2", "terminal"]));
    // Each async listener adds 1 on the way in and multiplies by 10 on the way out.
    assert_eq!(
        ok(&run, "async-waterfall"),
        chain(10200, &["aw1", "aw2", "terminal"])
    );
    assert_eq!(ok(&run, "parallel:go"), Value::Null);
    // Serial stops at the first decision: s3 never runs.
    assert_eq!(ok(&run, "serial"), json!("s2"));

    let trace = env.trace();
    assert_eq!(only(&trace, "emit "), ["emit e1 hello", "emit e2 hello"]);
    assert_eq!(only(&trace, "waterfall "), ["waterfall w1", "waterfall w2"]);
    assert!(position(&trace, "waterfall w2") < position(&trace, "terminal waterfall"));
    assert_eq!(
        only(&trace, "parallel-start "),
        ["parallel-start p1 go", "parallel-start p2 go"]
    );
    assert_eq!(only(&trace, "parallel-end ").len(), 2);
    assert_eq!(only(&trace, "serial "), ["serial s1", "serial s2"]);
}

// ARCHITECTURE §4.4 shared rules; case 10 analogue (keel has an explicit `order`, lower first,
// instead of `prepend`). Ties keep registration order, which is only defined within one row
// (rows of one layer activate concurrently), so cross-row expectations use distinct orders.
#[test]
fn listeners_run_lower_order_first_then_in_registration_order() {
    let env = Env::new();
    profile(
        &env,
        "",
        &[
            (
                "x",
                LISTENER,
                r#"listeners = [
  { event = "proof/emit", tag = "a" },
  { event = "proof/emit", tag = "b" },
  { event = "proof/emit", tag = "c", order = -1 },
  { event = "proof/emit", tag = "d", order = -1 },
  { event = "proof/waterfall", tag = "wa" },
  { event = "proof/waterfall", tag = "wb", order = -1 },
]"#,
            ),
            (
                "y",
                LISTENER,
                r#"listeners = [
  { event = "proof/emit", tag = "late", order = 5 },
  { event = "proof/emit", tag = "early", order = -5 },
  { event = "proof/waterfall", tag = "wlate", order = 5 },
]"#,
            ),
        ],
    );
    let run = env.drive("p", "emit:o,waterfall");
    run.expect_code(0);
    assert_eq!(
        only(&env.trace(), "emit "),
        [
            "emit early o",
            "emit c o",
            "emit d o",
            "emit a o",
            "emit b o",
            "emit late o"
        ]
    );
    assert_eq!(
        ok(&run, "waterfall"),
        chain(103, &["wb", "wa", "wlate", "terminal"])
    );
}

// Snapshot rule (ARCHITECTURE §4.4); case 18. Listener `a` unregisters `b` (the next one in its
// row) synchronously while the emit is running: `b` still runs this time, not the next; `c`,
// which nobody removed, runs both times.
#[test]
fn listener_removed_mid_dispatch_runs_this_time_but_not_next() {
    let env = Env::new();
    profile(
        &env,
        "",
        &[(
            "l",
            LISTENER,
            r#"listeners = [
  { event = "proof/emit", tag = "a", action = "remove-next" },
  { event = "proof/emit", tag = "b" },
  { event = "proof/emit", tag = "c" },
]"#,
        )],
    );
    let run = env.drive("p", "emit:first,emit:second,status");
    run.expect_code(0);
    let trace = env.trace();
    // The removal completed inside a's call, before b was reached.
    assert!(position(&trace, "removed b") < position(&trace, "emit b first"));
    assert_eq!(
        only(&trace, "emit "),
        [
            "emit a first",
            "emit b first",
            "emit c first",
            "emit a second",
            "emit c second"
        ]
    );
    // PLG-05: the removed listener's effect is gone from the row's effect stack too.
    let status = ok(&run, "status");
    let row = status
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["row"] == "l"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(row["effects"], json!(["on(proof/emit)", "on(proof/emit)"]));
}

// Snapshot rule; case 19. Listener `c` registers `c-added` each time it is called: the new
// listener is not called in the dispatch that added it, and is called in the next one.
#[test]
fn listener_added_mid_dispatch_runs_from_the_next_dispatch() {
    let env = Env::new();
    profile(
        &env,
        "",
        &[(
            "l",
            LISTENER,
            r#"listeners = [
  { event = "proof/emit", tag = "c", action = "add" },
  { event = "proof/emit", tag = "d" },
]"#,
        )],
    );
    env.drive("p", "emit:one,emit:two").expect_code(0);
    assert_eq!(
        only(&env.trace(), "emit "),
        [
            "emit c one",
            "emit d one",
            "emit c two",
            "emit d two",
            // Added during `one`: runs in `two`. The copy added during `two` does not.
            "emit c-added two",
        ]
    );
}

// ARCHITECTURE §4.4 "nested dispatch runs immediately, depth-first"; case 20. Listener `n`
// re-emits `inner` from inside the `outer` dispatch; `m` sees `inner` before `outer`.
#[test]
fn nested_emit_runs_immediately_depth_first() {
    let env = Env::new();
    profile(
        &env,
        "",
        &[(
            "l",
            LISTENER,
            r#"listeners = [
  { event = "proof/emit", tag = "n", action = "nested" },
  { event = "proof/emit", tag = "m" },
]"#,
        )],
    );
    let run = env.drive("p", "emit:outer");
    run.expect_code(0);
    assert_eq!(ok(&run, "emit:outer"), Value::Null);
    assert_eq!(
        only(&env.trace(), "emit "),
        [
            "emit n outer",
            "emit n inner",
            "emit m inner",
            "emit m outer"
        ]
    );
}

// EVT-02 waterfall "not calling next short-circuits"; case 9, sync and async. The listener
// after the one that does not call `next` never runs, and neither does the terminal.
#[test]
fn waterfall_listener_that_skips_next_short_circuits() {
    let env = Env::new();
    profile(
        &env,
        "",
        &[(
            "l",
            LISTENER,
            r#"listeners = [
  { event = "proof/waterfall", tag = "w1" },
  { event = "proof/waterfall", tag = "w2", action = "short" },
  { event = "proof/waterfall", tag = "w3" },
  { event = "proof/async-waterfall", tag = "aw1" },
  { event = "proof/async-waterfall", tag = "aw2", action = "short" },
  { event = "proof/async-waterfall", tag = "aw3" },
]"#,
        )],
    );
    let run = env.drive("p", "waterfall,async-waterfall");
    run.expect_code(0);
    assert_eq!(ok(&run, "waterfall"), chain(2, &["w1", "w2"]));
    // aw2 returns its payload (value 2); aw1 multiplies on the way out.
    assert_eq!(ok(&run, "async-waterfall"), chain(20, &["aw1", "aw2"]));
    let trace = env.trace();
    assert_eq!(only(&trace, "waterfall "), ["waterfall w1", "waterfall w2"]);
    assert_eq!(
        only(&trace, "async-waterfall aw3"),
        Vec::<String>::new(),
        "aw3 must not run"
    );
    assert_eq!(only(&trace, "terminal "), Vec::<String>::new());
}

// ARCHITECTURE §4.4 "next may be called again … each call a fresh run"; keel's decision on
// case 24 (rc.6/DS behaviour, not PR #44's single-use next). Sync: the payload is `&mut`, so
// the second run sees the first run's changes. Async: each run gets the payload passed in.
#[test]
fn calling_next_twice_reruns_the_downstream_chain_and_terminal() {
    let env = Env::new();
    profile(
        &env,
        "",
        &[(
            "l",
            LISTENER,
            r#"listeners = [
  { event = "proof/waterfall", tag = "w1", action = "next-twice" },
  { event = "proof/waterfall", tag = "w2" },
  { event = "proof/async-waterfall", tag = "aw1", action = "next-twice" },
  { event = "proof/async-waterfall", tag = "aw2" },
]"#,
        )],
    );
    let run = env.drive("p", "waterfall,async-waterfall");
    run.expect_code(0);
    assert_eq!(
        ok(&run, "waterfall"),
        chain(203, &["w1", "w2", "terminal", "w2", "terminal"])
    );
    assert_eq!(
        ok(&run, "async-waterfall"),
        chain(1020, &["aw1", "aw2", "terminal"])
    );
    let trace = env.trace();
    assert_eq!(
        trace
            .iter()
            .filter(|l| l.starts_with("waterfall ") || *l == "terminal waterfall")
            .collect::<Vec<_>>(),
        [
            "waterfall w1",
            "waterfall w2",
            "terminal waterfall",
            "waterfall w2",
            "terminal waterfall"
        ]
    );
    assert_eq!(
        trace
            .iter()
            .filter(|l| l.starts_with("async-waterfall") || *l == "terminal async-waterfall")
            .collect::<Vec<_>>(),
        [
            "async-waterfall aw1",
            "async-waterfall aw2",
            "terminal async-waterfall",
            "async-waterfall aw2 back 1020",
            "async-waterfall aw1 first 1020",
            "async-waterfall aw2",
            "terminal async-waterfall",
            "async-waterfall aw2 back 1020",
        ]
    );
}

// EVT-02 waterfall as around-middleware; case 25 analogue. Each listener does `+1` before
// awaiting `next` and `*10` after it; the terminal adds 100. Nesting means the innermost
// listener's post-step runs first: ((0+1+1+100)*10)*10.
#[test]
fn async_waterfall_composes_as_nested_middleware() {
    let env = Env::new();
    profile(
        &env,
        "",
        &[(
            "l",
            LISTENER,
            r#"listeners = [
  { event = "proof/async-waterfall", tag = "outer" },
  { event = "proof/async-waterfall", tag = "inner" },
]"#,
        )],
    );
    let run = env.drive("p", "async-waterfall");
    run.expect_code(0);
    assert_eq!(
        ok(&run, "async-waterfall"),
        chain(10200, &["outer", "inner", "terminal"])
    );
    assert_eq!(
        only(&env.trace(), "async-waterfall"),
        [
            "async-waterfall outer",
            "async-waterfall inner",
            "async-waterfall inner back 1020",
            "async-waterfall outer back 10200"
        ]
    );
}

// Case 17: with no listeners, emit/parallel/serial give nothing and a waterfall returns the
// terminal's result.
#[test]
fn dispatch_without_listeners_returns_the_terminal_result() {
    let env = Env::new();
    profile(&env, "", &[]);
    let run = env.drive("p", "emit:x,waterfall,async-waterfall,parallel,serial");
    run.expect_code(0);
    assert_eq!(ok(&run, "emit:x"), Value::Null);
    assert_eq!(ok(&run, "waterfall"), chain(100, &["terminal"]));
    assert_eq!(ok(&run, "async-waterfall"), chain(100, &["terminal"]));
    assert_eq!(ok(&run, "parallel"), Value::Null);
    assert_eq!(ok(&run, "serial"), Value::Null);
    assert_eq!(
        env.trace(),
        ["terminal waterfall", "terminal async-waterfall"]
    );
}
