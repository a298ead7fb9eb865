//! Fibers, effects, inject and row control through the real `keel` binary and proof cdylibs
//! (PLG-02..06, KRN-03; ARCHITECTURE §4.3; Cordis conformance cases C–D and cordis-semantics
//! §5). Rows are changed at runtime by the `proof-driver` script (`disable:`, `enable:`,
//! `reload:`), and every claim is checked on the trace file the plugins append to, on the
//! driver's JSON line per step, or on the exit code and error line of the binary.
//!
//! keel's decisions pinned here: teardown is strictly serial last-in-first-out across all of a
//! fiber's effects (Cordis case 50 / PR #144; this supersedes PLG-02's join-all across effects),
//! registration on an unloading fiber is refused (case 26, DS), and a failed reload rolls back
//! to the last good config.

use keel_tests::{Env, position};
use serde_json::{Value, json};

use super::proof::{LISTENER, failed, ok, only, positions, profile, row_status};

// PLG-02, PLG-05; ARCHITECTURE §4.3; case 40 analogue, keel's strict-serial answer to case 50,
// and case 34. Disabling the row disposes its effects last in first out, one at a time: e2's
// async disposer finishes before e1 starts, e3's error is logged and teardown goes on, and the
// row's listener never runs again (case 26, first half). Nothing is disposed twice at exit.
#[test]
fn effects_dispose_strictly_serial_last_in_first_out() {
    let env = Env::new();
    profile(
        &env,
        "",
        &[(
            "l",
            LISTENER,
            r#"effects = ["e1", { name = "e2", sleep_ms = 100 }, { name = "e3", fail = true }, "e4"]
listeners = [{ event = "proof/emit", tag = "a" }]"#,
        )],
    );
    let run = env.drive("p", "emit:before,disable:l,emit:after,status");
    run.expect_code(0);
    assert_eq!(
        ok(&run, "disable:l"),
        json!({"row": "l", "state": "disabled"})
    );
    assert_eq!(row_status(&run, 3, "l")["state"], "disabled");
    let trace = env.trace();
    let from = position(&trace, "dispose e4");
    assert_eq!(
        trace[from..from + 5],
        [
            "dispose e4",
            "dispose e3",
            "dispose e2",
            "disposed e2",
            "dispose e1"
        ]
    );
    assert_eq!(only(&trace, "emit "), ["emit a before"]);
    assert_eq!(positions(&trace, "dispose e1").len(), 1);
}

// ARCHITECTURE §4.3 "if activation fails, everything registered so far is rolled back"; case
// 33. A reload whose activation fails (an error, or a panic) disposes what the failed attempt
// registered — its disposers run LIFO and its listener never runs — while another fiber of
// the same plugin stays active and the row rolls back to its previous config.
#[test]
fn failed_activation_rolls_back_its_listeners_and_runs_its_disposers() {
    for failure in ["fail_activation", "panic_activation"] {
        let env = Env::new();
        profile(
            &env,
            "",
            &[
                (
                    "l",
                    LISTENER,
                    r#"effects = ["g1"]
listeners = [{ event = "proof/emit", tag = "g" }]"#,
                ),
                (
                    "other",
                    LISTENER,
                    r#"listeners = [{ event = "proof/emit", tag = "o" }]"#,
                ),
            ],
        );
        let reload = format!(
            r#"reload:l:{{"{failure}":true,"effects":["f1","f2"],"listeners":[{{"event":"proof/emit","tag":"f"}}]}}"#
        );
        let run = env.drive("p", &format!("{reload},emit:after"));
        run.expect_code(0);
        let (code, message) = failed(&run, &reload);
        assert_eq!(code, "RELOAD_FAILED", "{failure}: {message}");
        if failure == "panic_activation" {
            assert!(message.contains("PANIC"), "{message}");
        }
        let trace = env.trace();
        let from = position(&trace, "dispose g1");
        assert_eq!(
            trace[from..from + 5],
            [
                "dispose g1",
                "activate l",
                "dispose f2",
                "dispose f1",
                "activate l"
            ],
            "{failure}"
        );
        // The rolled-back l registered again after `other`: compare as a set.
        let mut emits = only(&trace, "emit ");
        emits.sort();
        assert_eq!(emits, ["emit g after", "emit o after"]);
    }
}

// KRN-03/KRN-07, ARCHITECTURE §4.2 and §11: a row whose activation fails at boot stops the
// run before the driver gets control: exit 2, one error line naming the row, and the failed
// row's disposers (rollback) and the healthy rows' disposers (shutdown) all ran.
#[test]
fn boot_exits_2_naming_the_row_whose_activation_fails() {
    for failure in ["fail_activation", "panic_activation"] {
        let env = Env::new();
        let broken = format!(
            "{failure} = true\neffects = [\"b1\", \"b2\"]\nlisteners = [{{ event = \"proof/emit\", tag = \"b\" }}]"
        );
        profile(
            &env,
            "",
            &[
                ("fine", LISTENER, r#"effects = ["ok1"]"#),
                ("broken", LISTENER, &broken),
            ],
        );
        let run = env.drive("p", "emit:x");
        run.expect_code(2);
        assert!(run.steps().is_empty(), "the driver ran:\n{}", run.stdout);
        let errors = run.error_lines();
        assert_eq!(errors.len(), 1, "{failure}: {}", run.stderr);
        assert!(
            errors[0].starts_with("keel: error[ACTIVATION]") && errors[0].contains("'broken'"),
            "{}",
            errors[0]
        );
        let trace = env.trace();
        assert!(position(&trace, "dispose b2") < position(&trace, "dispose b1"));
        position(&trace, "dispose ok1");
        assert_eq!(only(&trace, "emit "), Vec::<String>::new());
    }
}

// Case 26 (second half), ARCHITECTURE §4.3, cordis #91/#96: a disposer that tries to register
// a listener while its fiber is unloading is refused with INACTIVE_FIBER — on `disable` and
// at kernel shutdown alike.
#[test]
fn registration_is_refused_while_the_fiber_unloads() {
    let env = Env::new();
    profile(
        &env,
        "",
        &[
            (
                "l",
                LISTENER,
                r#"effects = ["lx"]
register_in_disposer = true
listeners = [{ event = "proof/emit", tag = "a" }]"#,
            ),
            (
                "m",
                LISTENER,
                r#"effects = ["mx"]
register_in_disposer = true"#,
            ),
        ],
    );
    env.drive("p", "emit:one,disable:l,emit:two").expect_code(0);
    let trace = env.trace();
    for effect in ["dispose lx", "dispose mx"] {
        let at = position(&trace, effect);
        assert_eq!(trace[at + 1], "register-in-disposer INACTIVE_FIBER");
    }
    assert_eq!(only(&trace, "emit "), ["emit a one"]);
}

// KRN-03, ARCHITECTURE §4.2: the consumer (listed first in the profile) activates only after
// its provider finished activating — the provider lingers after registering its service, so
// "registered" and "ACTIVE" differ — while a row of the provider's layer runs concurrently.
#[test]
fn consumer_activates_only_after_its_provider_is_active() {
    let env = Env::new();
    profile(
        &env,
        "",
        &[
            ("cons", "proof-consumer", ""),
            ("prov", "proof-provider", "activate_delay_ms = 500"),
            ("l", LISTENER, ""),
        ],
    );
    env.drive("p", "status").expect_code(0);
    let trace = env.trace();
    let activated = position(&trace, "activated prov");
    assert!(position(&trace, "activate prov") < activated);
    assert!(activated < position(&trace, "activate cons provider=prov"));
    // Same layer: l activates while prov is still activating — the layer's activations are
    // polled together, and prov lingers 500 ms (which of them starts first is not asserted).
    assert!(position(&trace, "activate l") < activated);
}

// PLG-03, ARCHITECTURE §4.3 inject, cordis-semantics §5.7: when the provider is disabled, its
// consumer unloads first and can still use the service in its disposer; the consumer is then
// pending; when the provider comes back, the consumer re-activates against it.
#[test]
fn provider_going_away_unloads_its_consumer_first_and_its_return_restores_it() {
    let env = Env::new();
    profile(
        &env,
        "",
        &[
            ("prov", "proof-provider", ""),
            ("cons", "proof-consumer", ""),
        ],
    );
    let run = env.drive("p", "disable:prov,status,enable:prov,status");
    run.expect_code(0);
    assert_eq!(row_status(&run, 1, "cons")["state"], "pending");
    assert_eq!(row_status(&run, 1, "prov")["state"], "disabled");
    assert_eq!(
        ok(&run, "enable:prov"),
        json!({"row": "prov", "state": "active"})
    );
    assert_eq!(row_status(&run, 3, "cons")["state"], "active");

    let trace = env.trace();
    let cons_gone = position(&trace, "dispose cons service-ok provider=prov");
    let prov_gone = position(&trace, "dispose prov");
    assert!(cons_gone < prov_gone, "{trace:?}");
    let prov_up = positions(&trace, "activate prov");
    let cons_up = positions(&trace, "activate cons provider=prov");
    assert_eq!((prov_up.len(), cons_up.len()), (2, 2), "{trace:?}");
    assert!(
        prov_gone < prov_up[1] && prov_up[1] < cons_up[1],
        "{trace:?}"
    );
}

// PLG-03, ARCHITECTURE §4.3 "dependents restart only when the provider's identity changes":
// restarting an unrelated row, or the provider's state changing behind its handle (the call
// counter), leaves the consumer alone; reloading the provider (a new fiber, a new service
// registration) restarts it.
#[test]
fn consumer_restarts_only_when_its_provider_identity_changes() {
    let env = Env::new();
    profile(
        &env,
        "",
        &[
            ("prov", "proof-provider", ""),
            ("cons", "proof-consumer", ""),
            (
                "l",
                LISTENER,
                r#"listeners = [{ event = "proof/emit", tag = "m" }]"#,
            ),
        ],
    );
    let run = env.drive(
        "p",
        "counter,disable:l,enable:l,counter,emit:mark,reload:prov:{},counter,emit:end",
    );
    run.expect_code(0);
    let steps = run.steps();
    let (first, second, third) = (&steps[0]["value"], &steps[3]["value"], &steps[6]["value"]);
    assert_eq!(first["fiber"], second["fiber"], "same provider identity");
    assert!(second["calls"].as_u64() > first["calls"].as_u64());
    assert_ne!(
        second["fiber"], third["fiber"],
        "reload made a new provider"
    );

    let trace = env.trace();
    let mark = position(&trace, "emit m mark");
    assert_eq!(positions(&trace, "activate l").len(), 2, "l restarted");
    let before: Vec<&String> = trace[..mark]
        .iter()
        .filter(|l| l.contains("cons"))
        .collect();
    assert_eq!(before, ["activate cons provider=prov"], "cons untouched");
    let end = position(&trace, "emit m end");
    assert_eq!(
        trace[mark + 1..end]
            .iter()
            .filter(|l| l.contains("cons") || l.contains("prov"))
            .collect::<Vec<_>>(),
        [
            "dispose cons service-ok provider=prov",
            "dispose prov",
            "activate prov",
            "activate cons provider=prov"
        ]
    );
}

// PLG-04: an optional requirement is a probe. The driver declares `proof.counter` optional:
// it gets the service while a provider is active and `null` (not an error) while none is.
#[test]
fn optional_probe_returns_none_without_a_provider() {
    let env = Env::new();
    profile(&env, "", &[("prov", "proof-provider", "")]);
    let run = env.drive("p", "counter,disable:prov,counter,enable:prov,counter");
    run.expect_code(0);
    let steps = run.steps();
    assert_eq!(steps[0]["value"]["row"], "prov");
    assert_eq!(steps[2]["step"], "counter");
    assert_eq!(
        (steps[2]["ok"].clone(), steps[2]["value"].clone()),
        (json!(true), Value::Null)
    );
    assert_eq!(steps[4]["value"]["row"], "prov");
}

// PLG-06, ARCHITECTURE §4.3 config reload: a config that fails the plugin's schema is refused
// before anything is torn down — ROW_CONFIG, `kernel/config-update-failed` is emitted, and the
// old fiber keeps running (its listener still fires, its effects were not disposed).
#[test]
fn reload_with_an_invalid_config_keeps_the_old_fiber() {
    let env = Env::new();
    profile(
        &env,
        "",
        &[
            (
                "l",
                LISTENER,
                r#"effects = ["le"]
listeners = [{ event = "proof/emit", tag = "a" }]"#,
            ),
            ("w", LISTENER, "watch = true"),
        ],
    );
    let reload = r#"reload:l:{"bogus":1}"#;
    let run = env.drive("p", &format!("{reload},emit:after,status"));
    run.expect_code(0);
    let (code, message) = failed(&run, reload);
    assert_eq!(code, "ROW_CONFIG", "{message}");
    assert!(message.contains("bogus"), "{message}");
    let l = row_status(&run, 2, "l");
    assert_eq!(l["state"], "active");
    assert_eq!(l["effects"], json!(["le", "on(proof/emit)"]));
    let trace = env.trace();
    let after = position(&trace, "emit a after");
    position(&trace, "config-update-failed l");
    assert_eq!(positions(&trace, "activate l").len(), 1);
    assert!(
        position(&trace, "dispose le") > after,
        "disposed only at exit"
    );
}

// PLG-06, ARCHITECTURE §4.3: a reload whose activation fails gives RELOAD_FAILED, emits
// `kernel/config-update-failed`, and rolls back to the *last good* config — the one from the
// previous successful reload, not the profile's.
#[test]
fn reload_whose_activation_fails_rolls_back_to_the_last_good_config() {
    let env = Env::new();
    profile(
        &env,
        "",
        &[
            ("l", LISTENER, r#"effects = ["orig"]"#),
            ("w", LISTENER, "watch = true"),
        ],
    );
    let good = r#"reload:l:{"effects":["good"],"listeners":[{"event":"proof/emit","tag":"g"}]}"#;
    let bad = r#"reload:l:{"fail_activation":true,"effects":["bad"]}"#;
    let run = env.drive("p", &format!("{good},{bad},emit:after,status"));
    run.expect_code(0);
    assert_eq!(ok(&run, good), json!({"row": "l", "state": "active"}));
    let (code, message) = failed(&run, bad);
    assert_eq!(code, "RELOAD_FAILED", "{message}");
    let l = row_status(&run, 3, "l");
    assert_eq!(l["state"], "active");
    assert_eq!(l["effects"], json!(["good", "on(proof/emit)"]));

    let trace = env.trace();
    let lines: Vec<&String> = trace
        .iter()
        .filter(|l| {
            l.starts_with("dispose ")
                || *l == "activate l"
                || *l == "config-update-failed l"
                || l.starts_with("emit ")
        })
        .collect();
    assert_eq!(
        lines,
        [
            "activate l",
            "dispose orig",
            "activate l",
            "dispose good",
            "activate l",
            "dispose bad",
            "config-update-failed l",
            "activate l",
            "emit g after",
            "dispose good",
        ]
    );
}

// ARCHITECTURE §4.3/§4.1 and `Kernel::shutdown`: at exit every row is disposed, dependents
// before their provider, each row's effects last in first out, and nothing before the driver
// is done.
#[test]
fn shutdown_disposes_every_row_dependents_first() {
    let env = Env::new();
    profile(
        &env,
        "",
        &[
            ("prov", "proof-provider", ""),
            ("cons", "proof-consumer", ""),
            (
                "l",
                LISTENER,
                r#"effects = ["l1", "l2"]
listeners = [{ event = "proof/emit", tag = "last" }]"#,
            ),
        ],
    );
    env.drive("p", "emit:end").expect_code(0);
    let trace = env.trace();
    let end = position(&trace, "emit last end");
    let disposals: Vec<&String> = trace.iter().filter(|l| l.starts_with("dispose ")).collect();
    assert_eq!(disposals.len(), 4, "{trace:?}");
    for line in &disposals {
        assert!(
            position(&trace, line) > end,
            "{line} before the driver finished"
        );
    }
    assert!(
        position(&trace, "dispose cons service-ok provider=prov")
            < position(&trace, "dispose prov")
    );
    assert!(position(&trace, "dispose l2") < position(&trace, "dispose l1"));
}

// KRN-03: rows in one layer activate concurrently. Each of the two rows waits in its activation
// until the other has arrived; if the kernel activated them one after the other, the first
// would wait for ever (10 s), fail, and boot would exit 2.
#[test]
fn rows_of_one_layer_activate_concurrently() {
    let env = Env::new();
    profile(
        &env,
        "",
        &[
            ("a", LISTENER, r#"barrier = { me = "a", peer = "b" }"#),
            ("b", LISTENER, r#"barrier = { me = "b", peer = "a" }"#),
        ],
    );
    let run = env.drive("p", "emit:x");
    run.expect_code(0);
    let trace = env.trace();
    assert!(trace.iter().any(|l| l == "barrier-pass a"), "{trace:?}");
    assert!(trace.iter().any(|l| l == "barrier-pass b"), "{trace:?}");
}
