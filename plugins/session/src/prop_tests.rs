//! Property tests (ARCHITECTURE §7 tool-call contract, SES-01/03/06, B15): random valid logs
//! with random replacements, cut at random crash points, recovered and projected.
//!
//! A log is grown by interpreting random choices against the current state, so every appended
//! event is valid by construction (the invariants must accept it: that is a property too);
//! replacement attempts pick random ranges and may be refused (a refusal must leave the log and
//! its projection untouched). In half the logs the "server" numbers calls per response
//! (`call_0`, `call_1` in every step), so call ids repeat across steps (issue 11 item 10).

use std::sync::Arc;

use keel_plugin_api::services::session::{FORMAT_VERSION, HeaderKind, SessionHeader};
use proptest::prelude::*;
use serde_json::json;

use crate::core_events::{self as ce, ToolCall};
use crate::log::SessionLog;
use crate::projection::{Tail, check_contract, derive_messages};
use crate::recovery::closers;
use crate::validate::NewEvent;

fn header() -> SessionHeader {
    SessionHeader {
        kind: HeaderKind::Session,
        version: FORMAT_VERSION,
        id: "prop".into(),
        created_at: 0,
        cwd: "/".into(),
        parent_session: None,
        seed_length: None,
        parent_call_id: None,
        origin: None,
        delegation_depth: 0,
    }
}

/// The interpreter's view of the open tail.
#[derive(Default)]
struct Sim {
    turn: Option<u64>,
    next_turn: u64,
    step: Option<u64>,
    next_step: u64,
    /// (call id, tool/call logged) of unanswered calls, model order.
    pending: Vec<(String, bool)>,
    ids: u64,
    /// Calls declared in the open step (per-response numbering continues after them).
    step_calls: u64,
    /// The "server" numbers calls per response (`call_0` in every step).
    per_response: bool,
}

fn grow(choices: &[(u8, u16, u16)]) -> SessionLog {
    let mut log = SessionLog::new(header(), Arc::default()).unwrap();
    let mut s = Sim {
        per_response: choices.first().is_some_and(|c| c.1 % 2 == 0),
        ..Sim::default()
    };
    for &(op, a, b) in choices {
        let must = |log: &mut SessionLog, ev: NewEvent| {
            let kind = ev.kind.clone();
            if let Err(e) = log.append_one(ev) {
                panic!("valid {kind} refused: {e}");
            }
        };
        match op % 9 {
            0 if s.pending.is_empty() => {
                s.ids += 1;
                must(
                    &mut log,
                    ce::user_message(&format!("u{}", s.ids), format!("msg {a}")),
                );
            }
            1 => match (s.turn, s.step) {
                (None, _) => {
                    must(&mut log, ce::turn_start(s.next_turn));
                    s.turn = Some(s.next_turn);
                    s.next_turn += 1;
                    s.next_step = 0;
                }
                (Some(t), Some(st)) if s.pending.is_empty() => {
                    must(&mut log, ce::step_end(t, st));
                    s.step = None;
                }
                (Some(t), None) => {
                    let reason = ["completed", "aborted", "error", "max-tokens"][a as usize % 4];
                    must(&mut log, ce::turn_end(t, reason));
                    s.turn = None;
                }
                _ => {}
            },
            2 => {
                if let (Some(t), None) = (s.turn, s.step) {
                    must(&mut log, ce::step_start(t, s.next_step));
                    s.step = Some(s.next_step);
                    s.step_calls = 0;
                    s.next_step += 1;
                }
            }
            3 => {
                if let (Some(t), Some(st), true) = (s.turn, s.step, s.pending.is_empty()) {
                    let n = a % 4;
                    // Half the logs' "servers" number calls per response (`call_0` in every
                    // step, as llama.cpp does): ids then repeat across steps (issue 11 item 10).
                    let per_response = s.per_response;
                    let first = s.step_calls;
                    s.step_calls += u64::from(n);
                    let calls: Vec<ToolCall> = (0..n)
                        .map(|k| {
                            s.ids += 1;
                            ToolCall {
                                id: if per_response {
                                    format!("call_{}", first + u64::from(k))
                                } else {
                                    format!("c{}", s.ids)
                                },
                                name: "t".into(),
                                arguments: "{}".into(),
                            }
                        })
                        .collect();
                    if b % 3 == 0 {
                        must(&mut log, ce::assistant_chunk(t, st, json!({"d": "x"})));
                    }
                    let content = if b % 5 == 0 { "" } else { "text" };
                    must(&mut log, ce::assistant_message(t, st, content, &calls));
                    s.pending = calls.into_iter().map(|c| (c.id, false)).collect();
                }
            }
            4 => {
                if let (Some(t), Some(st)) = (s.turn, s.step)
                    && let Some(p) = s.pending.iter_mut().find(|p| !p.1)
                {
                    let call = ToolCall {
                        id: p.0.clone(),
                        name: "t".into(),
                        arguments: "{}".into(),
                    };
                    must(&mut log, ce::tool_call(t, st, &call));
                    p.1 = true;
                }
            }
            5 => {
                if let (Some(t), Some(st), Some((id, called))) =
                    (s.turn, s.step, s.pending.first().cloned())
                {
                    if called {
                        must(&mut log, ce::tool_result(t, st, &id, "ok"));
                        s.pending.remove(0);
                    } else if a % 2 == 0 {
                        must(
                            &mut log,
                            ce::tool_error(t, st, &id, "TOOL_NOT_STARTED", "skipped"),
                        );
                        s.pending.remove(0);
                    }
                }
            }
            6 | 7 => try_replace(&mut log, op % 9 == 7, a, b),
            8 if s.turn.is_some() => {
                must(
                    &mut log,
                    ce::todo_write(json!([{"content": "x", "status": "pending"}])),
                );
                must(
                    &mut log,
                    NewEvent::new("plugin/note", json!({"n": a})).ignorable(),
                );
            }
            _ => {}
        }
    }
    log
}

/// A random replacement: a summary over a random seq range, or a tool-result substitution.
fn try_replace(log: &mut SessionLog, substitute: bool, a: u16, b: u16) {
    let len = log.len();
    if len == 0 {
        return;
    }
    let visible: Vec<(u64, serde_json::Value)> = log.projection().iter_with_seqs().collect();
    let ev = if substitute {
        let tools: Vec<&(u64, serde_json::Value)> = visible
            .iter()
            .filter(|(_, m)| m["role"] == "tool")
            .collect();
        let Some((seq, m)) = tools.get(a as usize % tools.len().max(1)).copied() else {
            return;
        };
        let turn = log.invariants().open_turn().unwrap_or(0);
        NewEvent::replace(
            "tool/result",
            json!({"turn": turn, "step": 0, "call_id": m["tool_call_id"], "content": "pruned"}),
            *seq,
            *seq,
            vec![*seq],
        )
    } else {
        let x = u64::from(a) % len;
        let y = u64::from(b) % len;
        let (start, end) = (x.min(y), x.max(y));
        let sources: Vec<u64> = visible
            .iter()
            .map(|(s, _)| *s)
            .filter(|s| (start..=end).contains(s))
            .collect();
        NewEvent::replace(
            "user/message",
            json!({"id": "summary", "content": format!("summary of {start}..={end}")}),
            start,
            end,
            sources,
        )
    };
    let before = (log.len(), log.messages());
    if log.append_one(ev).is_err() {
        assert_eq!(
            (log.len(), log.messages()),
            before,
            "a refused replace changed the log"
        );
    }
}

fn choices() -> impl Strategy<Value = Vec<(u8, u16, u16)>> {
    prop::collection::vec((any::<u8>(), any::<u16>(), any::<u16>()), 0..160)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Incremental projection (with replacements and refused attempts) equals a projection
    /// from scratch, and a live log keeps the contract up to its in-flight step. SES-12: the
    /// model-visible history is rebuilt from the log alone and equals the live one.
    #[test]
    fn ses03_ses12_incremental_projection_matches_scratch_and_keeps_contract(c in choices()) {
        let log = grow(&c);
        let events: Vec<_> = log.events().iter().map(|e| (**e).clone()).collect();
        let scratch = derive_messages(&events).unwrap();
        prop_assert_eq!(&log.messages(), &scratch);
        prop_assert!(check_contract(&scratch, Tail::InFlight).is_ok());
        if log.invariants().pending_calls().is_empty() {
            let r = check_contract(&scratch, Tail::Closed);
            prop_assert!(r.is_ok(), "{:?}", r);
        }
    }

    /// SES-06 + §7: crash at any prefix → recover → the closed log replays under every rule,
    /// has no open turn, and its projection satisfies the tool-call contract.
    #[test]
    fn ses06_crash_anywhere_recover_project_contract_holds(c in choices(), cut in any::<prop::sample::Index>()) {
        let log = grow(&c);
        let events: Vec<_> = log.events().iter().map(|e| (**e).clone()).collect();
        let p = cut.index(events.len() + 1);
        let mut prefix = events[..p].to_vec();
        let closing = closers(&prefix);
        prop_assert_eq!(&closing, &closers(&prefix), "recovery is deterministic");
        prefix.extend(closing);
        let seqs_ok = prefix.iter().enumerate().all(|(i, e)| e.seq == i as u64);
        prop_assert!(seqs_ok);
        let recovered = SessionLog::replay(header(), prefix, Arc::default());
        prop_assert!(recovered.is_ok(), "{:?}", recovered.err());
        let recovered = recovered.unwrap();
        prop_assert_eq!(recovered.invariants().open_turn(), None);
        let r = check_contract(&recovered.messages(), Tail::Closed);
        prop_assert!(r.is_ok(), "{:?}", r);
        // A second recovery finds nothing to close.
        let all: Vec<_> = recovered.events().iter().map(|e| (**e).clone()).collect();
        prop_assert!(closers(&all).is_empty());
    }

    /// SES-07: a fork at a random boundary either is refused inside an open turn or yields a
    /// child that replays cleanly and starts balanced.
    #[test]
    fn ses07_fork_at_random_boundary(c in choices(), at in any::<prop::sample::Index>()) {
        use crate::fork::{Boundary, plan_fork};
        let log = grow(&c);
        let events: Vec<_> = log.events().iter().map(|e| (**e).clone()).collect();
        if events.is_empty() {
            return Ok(());
        }
        let b = at.index(events.len()) as u64;
        match plan_fork(log.header(), &events, Boundary::At(b), "child", false, 1) {
            Ok(plan) => {
                prop_assert_eq!(plan.header.seed_length, Some(b + 1));
                let child = SessionLog::replay(plan.header, plan.events, Arc::default()).unwrap();
                prop_assert_eq!(child.invariants().open_turn(), None);
                prop_assert!(check_contract(&child.messages(), Tail::Closed).is_ok());
            }
            Err(e) => prop_assert_eq!(e.code(), "SESSION_OPEN_TURN"),
        }
    }
}

/// The generator is worth its name: over a fixed sample it produces tool groups, accepted
/// replacements of both kinds, and crash points with both kinds of tool closers.
#[test]
fn generator_covers_the_interesting_shapes() {
    use keel_plugin_api::services::session::SurfaceOp;
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let (mut results, mut summaries, mut substitutions, mut unknown, mut not_started) =
        (0, 0, 0, 0, 0);
    let mut reused = 0;
    for _ in 0..200 {
        let c = choices().new_tree(&mut runner).unwrap().current();
        let log = grow(&c);
        let events: Vec<_> = log.events().iter().map(|e| (**e).clone()).collect();
        // Logs where one call id is declared in more than one step (issue 11 item 10).
        let mut steps_of: std::collections::HashMap<String, std::collections::HashSet<(u64, u64)>> =
            std::collections::HashMap::new();
        for e in events.iter().filter(|e| e.kind == "assistant/message") {
            for id in crate::invariants::tool_call_ids(&e.data).flatten() {
                let at = (
                    e.data["turn"].as_u64().unwrap(),
                    e.data["step"].as_u64().unwrap(),
                );
                steps_of.entry(id.to_owned()).or_default().insert(at);
            }
        }
        if steps_of.values().any(|s| s.len() > 1) {
            reused += 1;
        }
        for e in &events {
            match (&e.surface_op, e.kind.as_str()) {
                (Some(SurfaceOp::Replace { .. }), "tool/result") => substitutions += 1,
                (Some(SurfaceOp::Replace { .. }), _) => summaries += 1,
                (_, "tool/result") => results += 1,
                _ => {}
            }
        }
        for cut in [events.len() / 3, events.len() / 2, events.len() * 4 / 5] {
            for closer in closers(&events[..cut]) {
                match closer.data["error"]["code"].as_str() {
                    Some(crate::recovery::TOOL_OUTCOME_UNKNOWN) => unknown += 1,
                    Some(crate::recovery::TOOL_NOT_STARTED) => not_started += 1,
                    _ => {}
                }
            }
        }
    }
    let stats = (
        results,
        summaries,
        substitutions,
        unknown,
        not_started,
        reused,
    );
    eprintln!(
        "generator stats (results, summaries, substitutions, unknown, not_started, logs reusing a call id): {stats:?}"
    );
    assert!(
        results > 100
            && summaries > 20
            && substitutions > 5
            && unknown > 5
            && not_started > 5
            && reused > 10,
        "{stats:?}"
    );
}
