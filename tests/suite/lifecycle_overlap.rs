//! Lifecycle changes never overlap (issue 13 item 1), through the real `keel` binary and proof
//! cdylibs. Each test names one of the three cases the issue found:
//!
//! 1. a failed activation announces `loading → unloading → failed` on `kernel/plugin-status`;
//! 2. a provider unregistering a required service while a dependent is still inside its slow
//!    `activate` waits for that activation to end before the dependent's disposers run, and the
//!    reload that started the activation says it was overtaken;
//! 3. the same with an immediate re-provide: the dependent ends active on the new registration,
//!    with no overlap on the way.
//!
//! A `watch` row traces every `kernel/plugin-status` it sees, so the status grammar is checked
//! on a file: per fiber `pending → loading → active → unloading → disposed`, or `loading →
//! unloading → failed`, and nothing after the final state. The slow activation is the
//! consumer's `hold_for`; the provider's `drop_on` rendezvous on the trace file with it, so no
//! assertion depends on timing.

use keel_tests::{Env, position};
use serde_json::json;

use super::proof::{LISTENER, failed, ok, positions, profile, row_status};

/// The row states `w` saw announced for `row` after the driver's `emit:mark`, space-separated.
fn statuses_after_mark(trace: &[String], row: &str) -> String {
    let from = position(trace, "emit w mark");
    let prefix = format!("plugin-status {row} ");
    trace[from..]
        .iter()
        .filter_map(|l| l.strip_prefix(&prefix))
        .map(|rest| rest.split(' ').next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The watcher row: traces `kernel/plugin-status`, and `emit w TAG` for the driver's marks.
const WATCH: &str = r#"watch = true
listeners = [{ event = "proof/emit", tag = "w" }]"#;

/// Issue 13 item 1, case 1 (ARCHITECTURE §4.3 rollback): a reload whose activation fails
/// announces `unloading` before `failed` — the rollback's disposers run between the two — and
/// nothing after `failed`; the row's last good config then comes back `loading → active`.
#[test]
fn failed_activation_announces_unloading_before_failed() {
    let env = Env::new();
    profile(
        &env,
        "",
        &[
            ("w", LISTENER, WATCH),
            ("l", LISTENER, r#"effects = ["g1"]"#),
        ],
    );
    let reload = r#"reload:l:{"fail_activation":true,"effects":["f1"]}"#;
    let run = env.drive("p", &format!("emit:mark,{reload}"));
    run.expect_code(0);
    assert_eq!(failed(&run, reload).0, "RELOAD_FAILED");
    let trace = env.trace();
    assert_eq!(
        statuses_after_mark(&trace, "l"),
        [
            "unloading disposed",       // the old fiber, for the reload
            "loading unloading failed", // the failed attempt and its rollback
            "loading active",           // the last good config
            "unloading disposed",       // shutdown
        ]
        .join(" "),
        "{trace:?}"
    );
    let lines: Vec<&String> = trace
        .iter()
        .filter(|l| l.starts_with("plugin-status l") || *l == "dispose f1")
        .collect();
    let at = lines.iter().position(|l| *l == "dispose f1").unwrap_or(0);
    assert_eq!(
        lines[at - 1..=at + 1],
        [
            "plugin-status l unloading faulted=false",
            "dispose f1",
            "plugin-status l failed faulted=false"
        ],
        "{trace:?}"
    );
}

/// Issue 13 item 1, case 2 (ARCHITECTURE §4.3 inject): the provider unregisters `proof.counter`
/// while the consumer's reloaded fiber is inside its slow `activate`. The consumer's disposers
/// wait for that activation to end — its late `ctx.effect` is accepted, and it traces
/// `activated` before any disposer runs — then the fiber unloads; statuses read `loading →
/// active → unloading → disposed`, never `disposed` then `failed`; the reload answers that it
/// was overtaken, and the row waits `pending` for a provider.
#[test]
fn provider_leaving_during_a_slow_activation_waits_for_it_then_tears_down() {
    let env = Env::new();
    profile(
        &env,
        "",
        &[
            ("w", LISTENER, WATCH),
            ("prov", "proof-provider", r#"drop_on = "holding cons""#),
            ("cons", "proof-consumer", ""),
        ],
    );
    let reload = r#"reload:cons:{"hold_for":"unregistering prov"}"#;
    let run = env.drive("p", &format!("emit:mark,{reload},status"));
    run.expect_code(0);
    let trace = env.trace();
    let activated = position(&trace, "activated cons late-effect=OK");
    assert!(
        position(&trace, "unregistering prov") < activated,
        "{trace:?}"
    );
    let disposals = positions(&trace, "dispose cons service-ok provider=prov");
    assert_eq!(disposals.len(), 2, "old fiber and the held one: {trace:?}");
    assert!(
        activated < position(&trace, "dispose-late cons"),
        "{trace:?}"
    );
    assert!(
        position(&trace, "dispose-late cons") < disposals[1]
            && disposals[1] < position(&trace, "unregistered prov"),
        "{trace:?}"
    );
    assert_eq!(
        statuses_after_mark(&trace, "cons"),
        [
            "unloading disposed",                // the old fiber, for the reload
            "loading active unloading disposed", // the held fiber, provider gone
            "disposed",                          // the fresh pending fiber, at shutdown
        ]
        .join(" "),
        "{trace:?}"
    );
    let answer = ok(&run, reload);
    assert_eq!(
        (&answer["row"], &answer["state"]),
        (&json!("cons"), &json!("pending")),
        "{answer}"
    );
    let overtaken = answer["overtaken"].as_str().unwrap_or_default();
    assert!(
        overtaken.contains("proof.counter") && overtaken.contains("went away"),
        "the reload does not say it was overtaken: {answer}"
    );
    assert_eq!(row_status(&run, 2, "cons")["state"], "pending");
}

/// Issue 13 item 1, case 3: as case 2, but the provider serves a new `proof.counter` at once.
/// The held activation still ends before any disposer of it runs, the reload says it was
/// overtaken, and the row ends active again, activated after the new registration.
#[test]
fn provider_replaced_during_a_slow_activation_ends_active_on_the_new_one() {
    let env = Env::new();
    profile(
        &env,
        "",
        &[
            ("w", LISTENER, WATCH),
            (
                "prov",
                "proof-provider",
                "drop_on = \"holding cons\"\nreprovide = true",
            ),
            ("cons", "proof-consumer", ""),
        ],
    );
    let reload = r#"reload:cons:{"hold_for":"unregistering prov"}"#;
    let run = env.drive("p", &format!("emit:mark,{reload},wait:cons:active"));
    run.expect_code(0);
    let trace = env.trace();
    let activated = positions(&trace, "activated cons late-effect=OK");
    assert_eq!(
        activated.len(),
        2,
        "held fiber and its successor: {trace:?}"
    );
    let first_late = position(&trace, "dispose-late cons");
    assert!(activated[0] < first_late, "{trace:?}");
    let reprovided = position(&trace, "reprovided prov");
    let consumers = positions(&trace, "activate cons provider=prov");
    assert_eq!(consumers.len(), 3, "{trace:?}");
    assert!(
        first_late < reprovided && reprovided < consumers[2],
        "{trace:?}"
    );
    assert_eq!(
        statuses_after_mark(&trace, "cons"),
        [
            "unloading disposed",                // the old fiber, for the reload
            "loading active unloading disposed", // the held fiber, provider gone
            "loading active",                    // on the new registration
            "unloading disposed",                // shutdown
        ]
        .join(" "),
        "{trace:?}"
    );
    let answer = ok(&run, reload);
    assert!(
        answer["overtaken"]
            .as_str()
            .is_some_and(|why| why.contains("went away")),
        "the reload does not say it was overtaken: {answer}"
    );
    assert_eq!(ok(&run, "wait:cons:active")["state"], "active");
}
