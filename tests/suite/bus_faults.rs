//! What the bus does when listeners misbehave, through real cdylibs: errors and panics are
//! contained or propagated per mode, panics and timeouts are counted toward a row's fault
//! threshold, hanging async listeners hit their deadline, and ABI-level misuse is refused with
//! a code (EVT-01, EVT-05, EVT-10; ARCHITECTURE §3 and §4.4; Cordis cases 4–7, 11–13).
//!
//! Deliberate deviations from Cordis rc.6, each pinned by a test below: emit contains listener
//! errors instead of aborting (case 11), and parallel runs every listener and aggregates the
//! failures in registration order (case 12, DS variant, not `Promise.all`).

use std::time::Duration;

use keel_tests::{Env, position};
use serde_json::{Value, json};

use super::proof::{LISTENER, chain, failed, ok, only, profile, row_status};

// EVT-10: emit contains each listener's error and panic, reports it on
// `kernel/listener-error` (seen by the `watch` row), and still runs the later listeners. This
// deviates from Cordis case 11 (rc.6 aborts the emit at the throwing listener) on purpose.
#[test]
fn emit_contains_listener_errors_and_panics() {
    let env = Env::new();
    profile(
        &env,
        "",
        &[
            (
                "l",
                LISTENER,
                r#"listeners = [
  { event = "proof/emit", tag = "a", action = "error", order = 1 },
  { event = "proof/emit", tag = "b", action = "panic", order = 2 },
  { event = "proof/emit", tag = "c", order = 3 },
]"#,
            ),
            ("w", LISTENER, "watch = true"),
        ],
    );
    let run = env.drive("p", "emit:x,emit:y");
    run.expect_code(0);
    assert_eq!(ok(&run, "emit:x"), Value::Null);
    assert_eq!(ok(&run, "emit:y"), Value::Null);
    let trace = env.trace();
    assert_eq!(
        only(&trace, "emit "),
        [
            "emit a x", "emit b x", "emit c x", "emit a y", "emit b y", "emit c y"
        ]
    );
    assert_eq!(
        only(&trace, "listener-error "),
        [
            "listener-error proof/emit l PROOF",
            "listener-error proof/emit l PANIC",
            "listener-error proof/emit l PROOF",
            "listener-error proof/emit l PANIC"
        ]
    );
}

// EVT-02, EVT-10 "decision seams", ARCHITECTURE §4.4: a waterfall or serial listener's error
// propagates to the dispatcher with its own code, and the chain stops there (cases 4, 6, 7).
// A single parallel failure also comes back with its own code (not AGGREGATE), after the
// other parallel listener ran.
#[test]
fn waterfall_serial_and_parallel_return_listener_errors_to_the_dispatcher() {
    let env = Env::new();
    profile(
        &env,
        "",
        &[(
            "l",
            LISTENER,
            r#"listeners = [
  { event = "proof/waterfall", tag = "w1" },
  { event = "proof/waterfall", tag = "w2", action = "error" },
  { event = "proof/waterfall", tag = "w3" },
  { event = "proof/async-waterfall", tag = "aw1" },
  { event = "proof/async-waterfall", tag = "aw2", action = "error" },
  { event = "proof/async-waterfall", tag = "aw3" },
  { event = "proof/serial", tag = "s1", action = "pass" },
  { event = "proof/serial", tag = "s2", action = "error" },
  { event = "proof/serial", tag = "s3", action = "decide" },
  { event = "proof/parallel", tag = "p1", action = "error" },
  { event = "proof/parallel", tag = "p2" },
]"#,
        )],
    );
    let run = env.drive("p", "waterfall,async-waterfall,serial,parallel,emit:after");
    run.expect_code(0);
    for (step, culprit) in [
        ("waterfall", "w2"),
        ("async-waterfall", "aw2"),
        ("serial", "s2"),
        ("parallel", "p1"),
    ] {
        let (code, message) = failed(&run, step);
        assert_eq!(code, "PROOF", "{step}: {message}");
        assert!(message.contains(culprit), "{step}: {message}");
    }
    let trace = env.trace();
    for absent in [
        "waterfall w3",
        "async-waterfall aw3",
        "serial s3",
        "terminal waterfall",
        "terminal async-waterfall",
    ] {
        assert!(
            !trace.iter().any(|l| l == absent),
            "{absent} ran:\n{trace:?}"
        );
    }
    assert!(trace.iter().any(|l| l == "parallel-end p2"), "{trace:?}");
    assert_eq!(ok(&run, "emit:after"), Value::Null);
}

// EVT-05, ARCHITECTURE §4.4 parallel; case 12 (DS variant). Every listener starts before any is
// awaited (even after p3 panics synchronously, before returning its future), all run to the
// end even though two fail, and the failures come back as AGGREGATE in registration order —
// p2 is listed before p3 although p3 failed first.
#[test]
fn parallel_starts_all_runs_all_and_aggregates_failures_in_registration_order() {
    let env = Env::new();
    profile(
        &env,
        "",
        &[(
            "l",
            LISTENER,
            r#"listeners = [
  { event = "proof/parallel", tag = "p1", sleep_ms = 200 },
  { event = "proof/parallel", tag = "p2", sleep_ms = 100, action = "error" },
  { event = "proof/parallel", tag = "p3", action = "panic-start" },
  { event = "proof/parallel", tag = "p4" },
]"#,
        )],
    );
    let run = env.drive("p", "parallel:go,emit:after");
    run.expect_code(0);
    let (code, message) = failed(&run, "parallel:go");
    assert_eq!(code, "AGGREGATE", "{message}");
    let (p2, p3) = (
        message.find("listener p2").expect("p2 in the aggregate"),
        message.find("listener p3").expect("p3 in the aggregate"),
    );
    assert!(p2 < p3, "registration order: {message}");
    assert!(message.contains("PANIC"), "{message}");

    let trace = env.trace();
    let last_start = ["p1", "p2", "p3", "p4"]
        .iter()
        .map(|t| position(&trace, &format!("parallel-start {t} go")))
        .max();
    let first_end = ["p1", "p4"]
        .iter()
        .map(|t| position(&trace, &format!("parallel-end {t}")))
        .min();
    assert!(
        last_start < first_end,
        "all start before any ends:\n{trace:?}"
    );
    assert_eq!(ok(&run, "emit:after"), Value::Null);
}

// Panics never cross (ARCHITECTURE §3), in sync (waterfall) and async (async waterfall,
// parallel, serial) listeners: each becomes `PANIC` on the dispatcher's line, the process
// survives, and the script's later steps still run (EVT-10).
#[test]
fn panics_in_sync_and_async_listeners_become_panic_errors() {
    let env = Env::new();
    profile(
        &env,
        "fault_threshold = 100",
        &[(
            "l",
            LISTENER,
            r#"listeners = [
  { event = "proof/emit", tag = "ok" },
  { event = "proof/waterfall", tag = "w", action = "panic" },
  { event = "proof/async-waterfall", tag = "aw", action = "panic" },
  { event = "proof/parallel", tag = "p", action = "panic" },
  { event = "proof/serial", tag = "s", action = "panic" },
]"#,
        )],
    );
    let run = env.drive("p", "waterfall,async-waterfall,parallel,serial,emit:after");
    run.expect_code(0);
    for step in ["waterfall", "async-waterfall", "parallel", "serial"] {
        let (code, message) = failed(&run, step);
        assert_eq!(code, "PANIC", "{step}: {message}");
    }
    assert_eq!(ok(&run, "emit:after"), Value::Null);
    assert!(env.trace().iter().any(|l| l == "emit ok after"));
}

// ARCHITECTURE §3 "faulted": after `fault_threshold` panics a row's listeners are skipped (its
// emit and waterfall listeners here) and `status` says `faulted: true`; other rows are
// unaffected. The kernel also
// reports the transition on `kernel/plugin-status`.
#[test]
fn row_is_faulted_after_threshold_panics_and_its_listeners_are_skipped() {
    let env = Env::new();
    profile(
        &env,
        "fault_threshold = 2",
        &[
            (
                "bad",
                LISTENER,
                r#"listeners = [
  { event = "proof/emit", tag = "bad", action = "panic" },
  { event = "proof/waterfall", tag = "bw" },
]"#,
            ),
            (
                "good",
                LISTENER,
                r#"watch = true
listeners = [
  { event = "proof/emit", tag = "good" },
  { event = "proof/waterfall", tag = "gw" },
]"#,
            ),
        ],
    );
    let run = env.drive("p", "emit:1,status,emit:2,status,emit:3,waterfall");
    run.expect_code(0);
    let bad_1 = row_status(&run, 1, "bad");
    assert_eq!(
        (&bad_1["faulted"], &bad_1["faults"]),
        (&json!(false), &json!(1))
    );
    let bad_2 = row_status(&run, 3, "bad");
    assert_eq!(
        (&bad_2["faulted"], &bad_2["faults"]),
        (&json!(true), &json!(2))
    );
    assert_eq!(bad_2["state"], "active");
    assert_eq!(row_status(&run, 3, "good")["faulted"], false);
    let trace = env.trace();
    assert_eq!(
        only(&trace, "emit bad"),
        ["emit bad 1", "emit bad 2"],
        "skipped once faulted"
    );
    assert!(trace.iter().any(|l| l == "emit good 3"));
    assert_eq!(ok(&run, "waterfall"), chain(101, &["gw", "terminal"]));
    assert!(
        trace
            .iter()
            .any(|l| l == "plugin-status bad active faulted=true")
    );
}

// ARCHITECTURE §4.4 "each listener call can carry a deadline": a hanging async listener gives
// `TIMEOUT` and the run goes on — with its own `deadline_ms` (async waterfall, serial) or the
// profile's `[kernel] listener_deadline_ms` (parallel). Timeouts count as faults. No timing is
// asserted beyond "the whole run finished" (the listeners would otherwise sleep an hour).
#[test]
fn hanging_async_listeners_time_out_and_the_run_continues() {
    let env = Env::new();
    profile(
        &env,
        "fault_threshold = 100\nlistener_deadline_ms = 2000",
        &[(
            "l",
            LISTENER,
            r#"listeners = [
  { event = "proof/emit", tag = "alive" },
  { event = "proof/async-waterfall", tag = "aw", action = "hang", deadline_ms = 300 },
  { event = "proof/serial", tag = "s", action = "hang", deadline_ms = 300 },
  { event = "proof/parallel", tag = "p", action = "hang" },
  { event = "proof/parallel", tag = "q" },
]"#,
        )],
    );
    let run = env.drive_within(
        "p",
        "async-waterfall,serial,parallel,emit:after,status",
        Duration::from_secs(120),
    );
    run.expect_code(0);
    for step in ["async-waterfall", "serial", "parallel"] {
        let (code, message) = failed(&run, step);
        assert_eq!(code, "TIMEOUT", "{step}: {message}");
    }
    assert!(failed(&run, "parallel").1.contains("2000 ms"));
    assert_eq!(ok(&run, "emit:after"), Value::Null);
    let trace = env.trace();
    assert!(trace.iter().any(|l| l == "parallel-end q"), "q still ran");
    assert!(trace.iter().any(|l| l == "emit alive after"));
    assert_eq!(row_status(&run, 4, "l")["faults"], 3);
}

// EVT-01 at the ABI: a foreign image that lies about an event's mode or payload type, or
// dispatches an event nobody declared, is refused with a code; no listener sees the payload.
#[test]
fn abi_misuse_is_refused_with_a_code() {
    let env = Env::new();
    profile(
        &env,
        "",
        &[(
            "l",
            LISTENER,
            r#"listeners = [
  { event = "proof/emit", tag = "e" },
  { event = "proof/waterfall", tag = "w" },
]"#,
        )],
    );
    let run = env.drive("p", "lying-mode,lying-layout,undeclared,emit:after");
    run.expect_code(0);
    assert_eq!(failed(&run, "lying-mode").0, "EVENT_MODE");
    assert_eq!(failed(&run, "lying-layout").0, "EVENT_LAYOUT");
    assert_eq!(failed(&run, "undeclared").0, "UNKNOWN_EVENT");
    assert_eq!(ok(&run, "emit:after"), Value::Null);
    assert_eq!(only(&env.trace(), "emit "), ["emit e after"]);
    assert_eq!(only(&env.trace(), "waterfall "), Vec::<String>::new());
}

// EVT-01: the declaring plugin's manifest fixes a custom event's payload layout. A plugin that
// dispatches first with another payload type cannot make the event its own: it is refused and
// the genuine dispatch still works (no listeners are needed for the check to hold).
#[test]
fn a_lying_first_dispatcher_cannot_poison_a_declared_event() {
    let env = Env::new();
    profile(&env, "", &[]);
    let run = env.drive("p", "lying-layout,emit:genuine,lying-mode,waterfall");
    run.expect_code(0);
    assert_eq!(failed(&run, "lying-layout").0, "EVENT_LAYOUT");
    assert_eq!(ok(&run, "emit:genuine"), Value::Null);
    assert_eq!(failed(&run, "lying-mode").0, "EVENT_MODE");
    assert_eq!(
        ok(&run, "waterfall")["log"],
        serde_json::json!(["terminal"])
    );
}

// An async-waterfall listener's deadline covers its `next`, i.e. everything downstream. When it
// expires, the fault goes to the listener that was actually running (here the hanging inner
// one), not to the outer listener whose clock ran out.
#[test]
fn an_expired_waterfall_deadline_blames_the_listener_that_was_running() {
    let env = Env::new();
    profile(
        &env,
        "fault_threshold = 1",
        &[
            (
                "outer",
                LISTENER,
                r#"listeners = [
  { event = "proof/async-waterfall", tag = "outer", order = 0, deadline_ms = 300 },
  { event = "proof/emit", tag = "outer-alive" },
]"#,
            ),
            (
                "inner",
                LISTENER,
                r#"listeners = [{ event = "proof/async-waterfall", tag = "inner", order = 1, action = "hang" }]"#,
            ),
        ],
    );
    let run = env.drive_within(
        "p",
        "async-waterfall,emit:after,status",
        Duration::from_secs(120),
    );
    run.expect_code(0);
    let (code, message) = failed(&run, "async-waterfall");
    assert_eq!(code, "TIMEOUT", "{message}");
    assert!(
        message.contains("row 'inner'") && message.contains("row 'outer'"),
        "{message}"
    );
    assert_eq!(row_status(&run, 2, "inner")["faulted"], true);
    assert_eq!(row_status(&run, 2, "outer")["faulted"], false);
    assert!(
        env.trace().iter().any(|l| l == "emit outer-alive after"),
        "outer keeps serving"
    );
}
