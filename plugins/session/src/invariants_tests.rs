//! Unit tests of the B15/K invariants ([`super::Invariants`]): one rule per test, each with the
//! event that breaks it and the log that keeps it.

use super::*;
use crate::test_support::*;
use serde_json::json;

fn run(events: &[EventRecord]) -> Result<Invariants> {
    let mut s = Invariants::new();
    for e in events {
        s.apply(e)?;
    }
    Ok(s)
}

fn err_of(events: &[EventRecord]) -> String {
    run(events).unwrap_err().to_string()
}

#[test]
fn b15_turn_start_only_when_closed_and_numbered() {
    let s = run(&[turn_start(0, 0), turn_end(1, 0)]).unwrap();
    assert_eq!(s.next_turn(), 1);
    assert!(err_of(&[turn_start(0, 0), turn_start(1, 1)]).contains("B15.turn-start"));
    assert!(err_of(&[turn_start(0, 1)]).contains("numbered 0"));
}

#[test]
fn b15_turn_end_matches_open_turn_without_open_step() {
    assert!(err_of(&[turn_end(0, 0)]).contains("B15.turn-end"));
    let e = err_of(&[turn_start(0, 0), step_start(1, 0, 0), turn_end(2, 0)]);
    assert!(e.contains("B15.turn-end") && e.contains("seq 2"), "{e}");
    let mut end = turn_end(1, 0);
    end.data = json!({"turn": 0});
    assert!(err_of(&[turn_start(0, 0), end]).contains("reason"));
}

#[test]
fn b15_steps_inside_turn_and_numbered() {
    assert!(err_of(&[step_start(0, 0, 0)]).contains("B15.step-start"));
    assert!(err_of(&[turn_start(0, 0), step_start(1, 0, 1)]).contains("numbered 0"));
    let ok = [
        turn_start(0, 0),
        step_start(1, 0, 0),
        step_end(2, 0, 0),
        step_start(3, 0, 1),
        step_end(4, 0, 1),
        turn_end(5, 0),
        turn_start(6, 1),
        step_start(7, 1, 0),
    ];
    assert_eq!(run(&ok).unwrap().open_step(), Some(0));
}

#[test]
fn b15_stream_events_name_open_turn_and_step() {
    let head = vec![turn_start(0, 0), step_start(1, 0, 0)];
    let mut bad = head.clone();
    bad.push(chunk(2, 0, 1));
    assert!(err_of(&bad).contains("B15.open-step"));
    let mut bad = head.clone();
    bad.push(assistant(2, 0, 5, &[]));
    assert!(err_of(&bad).contains("B15.open-step"));
    let mut ok = head;
    ok.push(chunk(2, 0, 0));
    ok.push(assistant(3, 0, 0, &[]));
    assert!(run(&ok).is_ok());
}

#[test]
fn b15_tool_result_needs_prior_call_except_not_started() {
    let head = vec![
        turn_start(0, 0),
        step_start(1, 0, 0),
        assistant(2, 0, 0, &["a", "b"]),
    ];
    let mut bad = head.clone();
    bad.push(result(3, 0, 0, "a"));
    assert!(err_of(&bad).contains("B15.result-after-call"));
    let mut ok = head;
    ok.push(not_started_result(3, 0, 0, "a"));
    ok.push(call(4, 0, 0, "b"));
    ok.push(result(5, 0, 0, "b"));
    ok.push(step_end(6, 0, 0));
    assert!(run(&ok).is_ok());
}

#[test]
fn k_results_come_in_model_order_and_close_the_step() {
    let head = vec![
        turn_start(0, 0),
        step_start(1, 0, 0),
        assistant(2, 0, 0, &["a", "b"]),
        call(3, 0, 0, "a"),
        call(4, 0, 0, "b"),
    ];
    let mut bad = head.clone();
    bad.push(result(5, 0, 0, "b"));
    assert!(err_of(&bad).contains("K.result-order"));
    let mut bad = head.clone();
    bad.push(step_end(5, 0, 0));
    assert!(err_of(&bad).contains("K.step-end-pending"));
    let mut bad = head.clone();
    bad.push(user(5, "hi"));
    assert!(err_of(&bad).contains("K.calls-pending"));
    let mut bad = head;
    bad.push(call(5, 0, 0, "a"));
    assert!(err_of(&bad).contains("twice"));
}

/// Servers that number calls per response (`call_0` in every answer; issue 11 item 10): a
/// call id may repeat in a later step or turn, never within one step.
#[test]
fn k_a_call_id_repeats_across_steps_and_turns_never_within_a_step() {
    let e = err_of(&[
        turn_start(0, 0),
        step_start(1, 0, 0),
        assistant(2, 0, 0, &["call_0", "call_0"]),
    ]);
    assert!(
        e.contains("B15.data") && e.contains("repeats in this step"),
        "{e}"
    );
    // A second assistant message of the step cannot reuse an answered id either.
    let e = err_of(&[
        turn_start(0, 0),
        step_start(1, 0, 0),
        assistant(2, 0, 0, &["call_0"]),
        call(3, 0, 0, "call_0"),
        result(4, 0, 0, "call_0"),
        assistant(5, 0, 0, &["call_0"]),
    ]);
    assert!(
        e.contains("repeats in this step") && e.contains("seq 5"),
        "{e}"
    );
    let step = |seq: u64, turn: u64, s: u64| {
        vec![
            step_start(seq, turn, s),
            assistant(seq + 1, turn, s, &["call_0", "call_1"]),
            call(seq + 2, turn, s, "call_0"),
            call(seq + 3, turn, s, "call_1"),
            result(seq + 4, turn, s, "call_0"),
            result(seq + 5, turn, s, "call_1"),
            step_end(seq + 6, turn, s),
        ]
    };
    let mut log = vec![turn_start(0, 0)];
    log.extend(step(1, 0, 0));
    log.extend(step(8, 0, 1));
    log.push(turn_end(15, 0));
    log.push(turn_start(16, 1));
    log.extend(step(17, 1, 0));
    let s = run(&log[..15]).unwrap();
    assert_eq!(
        (s.open_turn(), s.open_step(), s.next_step()),
        (Some(0), None, 2)
    );
    let s = run(&log).unwrap();
    assert_eq!((s.open_turn(), s.open_step()), (Some(1), None));
    assert_eq!((s.next_turn(), s.next_step()), (2, 1));
    assert!(s.pending_calls().is_empty());
}

/// Replacements are not appends: a replacement assistant or user message is held to neither
/// the open-step rule nor the calls-pending rule (the projection checks what a replacement may
/// shadow).
#[test]
fn b15_replacements_are_not_held_to_the_append_rules() {
    let summary = |seq: u64, kind: &str| {
        let mut e = user(seq, "summary");
        e.kind = kind.into();
        e.data = json!({"id": "s", "content": "summary", "message": {"content": "summary"}});
        e.surface_op = Some(replace_op(0, 0));
        e
    };
    // Outside any step.
    assert!(run(&[user(0, "x"), summary(1, "assistant/message")]).is_ok());
    // While a call of the open step is unanswered.
    let mut log = vec![
        user(0, "x"),
        turn_start(1, 0),
        step_start(2, 0, 0),
        assistant(3, 0, 0, &["a"]),
    ];
    for kind in ["user/message", "assistant/message"] {
        let mut l = log.clone();
        l.push(summary(4, kind));
        let s = run(&l).unwrap();
        assert_eq!(s.pending_calls(), ["a".to_owned()], "{kind}");
    }
    // An append is held to them.
    log.push(user(4, "y"));
    assert!(err_of(&log).contains("K.calls-pending"));
}

/// A reused id is paired within its own step: the earlier step's `tool/call` does not stand
/// for the later one, and the later step's result is owed until it comes.
#[test]
fn k_a_reused_id_pairs_with_its_own_steps_call_and_result() {
    let head = vec![
        turn_start(0, 0),
        step_start(1, 0, 0),
        assistant(2, 0, 0, &["call_0"]),
        call(3, 0, 0, "call_0"),
        result(4, 0, 0, "call_0"),
        step_end(5, 0, 0),
        step_start(6, 0, 1),
        assistant(7, 0, 1, &["call_0"]),
    ];
    let s = run(&head).unwrap();
    assert_eq!(s.pending_calls(), ["call_0".to_owned()]);
    let mut bad = head.clone();
    bad.push(result(8, 0, 1, "call_0"));
    let e = err_of(&bad);
    assert!(
        e.contains("B15.result-after-call") && e.contains("seq 8"),
        "{e}"
    );
    let mut bad = head.clone();
    bad.push(step_end(8, 0, 1));
    assert!(err_of(&bad).contains("K.step-end-pending"));
    let mut ok = head;
    ok.push(call(8, 0, 1, "call_0"));
    ok.push(result(9, 0, 1, "call_0"));
    ok.push(step_end(10, 0, 1));
    assert!(run(&ok).is_ok());
}

/// B15: the right step number under the wrong turn is refused, for every event that names
/// its step (mutation testing found none covered).
#[test]
fn b15_an_event_naming_the_wrong_turn_with_the_right_step_is_refused() {
    let head = vec![
        turn_start(0, 0),
        turn_end(1, 0),
        turn_start(2, 1),
        step_start(3, 1, 0),
    ];
    let wrong: Vec<EventRecord> = vec![
        chunk(4, 0, 0),
        assistant(4, 0, 0, &[]),
        call(4, 0, 0, "a"),
        step_end(4, 0, 0),
    ];
    for ev in wrong {
        let kind = ev.kind.clone();
        let mut log = head.clone();
        log.push(ev);
        let e = err_of(&log);
        assert!(
            e.contains("turn Some(0) step Some(0)") && e.contains("seq 4"),
            "{kind}: {e}"
        );
    }
    // A result naming the wrong turn, once its call is logged under the right one.
    let mut log = head;
    log.push(assistant(4, 1, 0, &["a"]));
    log.push(call(5, 1, 0, "a"));
    log.push(result(6, 0, 0, "a"));
    assert!(err_of(&log).contains("B15.open-step"));
}

/// B15.data: a stream or tool event without `data.step` (or `data.turn`) is refused, not
/// read as step 0.
#[test]
fn b15_stream_and_tool_events_without_a_step_are_refused() {
    let head = vec![turn_start(0, 0), step_start(1, 0, 0)];
    let mut events = vec![
        chunk(2, 0, 0),
        assistant(2, 0, 0, &[]),
        call(2, 0, 0, "a"),
        step_end(2, 0, 0),
    ];
    let mut result_ev = result(2, 0, 0, "a");
    result_ev.seq = 4;
    for key in ["step", "turn"] {
        for ev in events.iter().chain([&result_ev]) {
            let mut ev = ev.clone();
            ev.data.as_object_mut().unwrap().remove(key);
            let mut log = head.clone();
            if ev.kind == "tool/result" {
                log.push(assistant(2, 0, 0, &["a"]));
                log.push(call(3, 0, 0, "a"));
            }
            let kind = ev.kind.clone();
            log.push(ev);
            let e = err_of(&log);
            assert!(
                e.contains("B15.data") && e.contains("needs data.turn and data.step"),
                "{kind} without {key}: {e}"
            );
        }
    }
    // Null is not a number either.
    let mut ev = events.remove(0);
    ev.data["step"] = Value::Null;
    let mut log = head;
    log.push(ev);
    assert!(err_of(&log).contains("B15.data"));
}

#[test]
fn b15_tool_result_replacement_and_bookkeeping_need_a_turn() {
    assert!(err_of(&[todo(0)]).contains("B15.in-turn"));
    let mut req = todo(0);
    req.kind = "request/header".into();
    assert!(err_of(&[req]).contains("B15.in-turn"));
    let mut rep = result(0, 0, 0, "a");
    rep.surface_op = Some(replace_op(0, 0));
    assert!(
        err_of(&[user(0, "x"), {
            rep.seq = 1;
            rep
        }])
        .contains("B15.replace-in-turn")
    );
    assert!(run(&[turn_start(0, 0), todo(1)]).is_ok());
}

#[test]
fn b15_end_seed_and_plugin_types_are_unconstrained() {
    let mut seed = todo(0);
    seed.kind = "session/end-seed".into();
    let mut plug = todo(1);
    plug.kind = "compaction/start".into();
    assert!(run(&[seed, plug]).is_ok());
}
