//! Unit and property tests of the planner (CTX-05, CTX-06: no run ever splits a call from its
//! results, and every run appends as a valid replacement).

use proptest::prelude::*;

use super::*;

fn user(seq: u64) -> PlanNode {
    PlanNode {
        seq,
        role: Role::User,
        bytes: 50,
        stub: false,
    }
}
fn call(seq: u64, calls: usize) -> PlanNode {
    PlanNode {
        seq,
        role: Role::Assistant { calls },
        bytes: 100,
        stub: false,
    }
}
fn result(seq: u64, bytes: u64) -> PlanNode {
    PlanNode {
        seq,
        role: Role::Tool,
        bytes,
        stub: false,
    }
}
fn stub(seq: u64) -> PlanNode {
    PlanNode {
        seq,
        role: Role::Assistant { calls: 0 },
        bytes: 300,
        stub: true,
    }
}

/// A user message, then `n` one-call groups of 8 KB results (seqs as a log assigns them).
fn session(n: u64) -> Vec<PlanNode> {
    let mut nodes = vec![user(0)];
    for k in 0..n {
        nodes.push(call(1 + 3 * k, 1));
        nodes.push(result(3 + 3 * k, 8000));
    }
    nodes
}

#[test]
fn sinks_the_oldest_groups_only_as_far_as_needed_and_keeps_the_newest() {
    let nodes = session(10);
    let runs = plan_runs(&nodes, 20_000, 4, 300);
    // Three groups free 24 300 − 300 ≥ 20 000.
    assert_eq!(runs.ranges, [(1, 7)]);
    assert_eq!(runs.seqs(&nodes), [vec![1, 3, 4, 6, 7, 9]]);
    // Asking for everything stops at the newest four groups.
    let runs = plan_runs(&nodes, u64::MAX, 4, 300);
    assert_eq!(runs.ranges, [(1, 13)]);
}

#[test]
fn user_messages_and_incomplete_groups_are_never_in_a_run() {
    let mut nodes = session(3);
    nodes.insert(3, user(100)); // steering between groups 1 and 2 (late seq: after all)
    nodes.push(call(200, 2));
    nodes.push(result(201, 10)); // one result of two
    let runs = plan_runs(&nodes, u64::MAX, 1, 10);
    for &(s, e) in &runs.ranges {
        assert!(nodes[s..e].iter().all(|n| n.role != Role::User));
        assert!(nodes[s..e].iter().all(|n| n.seq < 200));
    }
}

#[test]
fn a_run_over_an_earlier_stub_grows_to_its_seq_closure() {
    // Groups 1-3 were sunk at seq 20 into a stub at their place; groups 4-6 (seqs 10..18)
    // were appended before that compaction and groups 7-9 after it.
    let mut nodes = vec![user(0), stub(20)];
    for k in 0..3 {
        nodes.push(call(10 + 3 * k, 1));
        nodes.push(result(11 + 3 * k, 8000));
    }
    for k in 0..3 {
        nodes.push(call(21 + 3 * k, 1));
        nodes.push(result(22 + 3 * k, 8000));
    }
    // Freeing one group's worth: the stub alone is pointless, and stub + group 4 (seqs 10..20)
    // would leave groups 5 and 6 (seqs 13..19) inside the range; the run must take them too.
    let runs = plan_runs(&nodes, 5000, 2, 300);
    assert_eq!(runs.ranges, [(1, 8)]);
    assert!(closed(&nodes, 1, 8));
    assert!(!closed(&nodes, 1, 4));
}

#[test]
fn plain_assistant_text_sinks_but_a_run_of_earlier_stubs_alone_does_not() {
    let text = |seq| PlanNode {
        bytes: 5000,
        ..call(seq, 0)
    };
    let nodes = [user(0), text(1), text(2), call(3, 0)];
    assert_eq!(plan_runs(&nodes, 100, 1, 300).ranges, [(1, 2)]);
    let big_stub = |seq| PlanNode {
        bytes: 5000,
        ..stub(seq)
    };
    let nodes = [user(0), big_stub(1), big_stub(2), call(3, 0)];
    assert_eq!(plan_runs(&nodes, 100, 1, 300), Runs::default());
}

#[test]
fn a_need_met_by_the_first_segment_leaves_the_next_one_and_the_bytes_add_up() {
    // Two segments split by a steering message; the first frees what is needed.
    let mut nodes = session(3);
    nodes.push(user(50));
    for k in 0..3 {
        nodes.push(call(51 + 3 * k, 1));
        nodes.push(result(53 + 3 * k, 8000));
    }
    let runs = plan_runs(&nodes, 8000, 1, 300);
    assert_eq!(runs.ranges, [(1, 5)]);
    // Freeing exactly what is needed is enough.
    assert_eq!(plan_runs(&nodes, 7800, 1, 300).ranges, [(1, 3)]);
    assert_eq!(runs.bytes, 16_200);
    // Needing more takes the next segment too (only as far as needed), summing the bytes.
    let runs = plan_runs(&nodes, 30_000, 1, 300);
    assert_eq!(runs.ranges, [(1, 7), (8, 10)]);
    assert_eq!(runs.bytes, 4 * 8100);
    // A run exactly the size of its stub frees nothing and is not taken.
    let tiny = [user(0), call(1, 1), result(2, 200), call(3, 0)];
    assert_eq!(plan_runs(&tiny, 10, 1, 300), Runs::default());
    let enough = [user(0), call(1, 1), result(2, 201), call(3, 0)];
    assert_eq!(plan_runs(&enough, 1, 1, 300).ranges, [(1, 3)]);
}

#[test]
fn nothing_to_sink_is_an_empty_plan() {
    assert_eq!(plan_runs(&[user(0)], 100, 4, 10), Runs::default());
    assert_eq!(plan_runs(&session(3), 100, 4, 10), Runs::default());
    assert_eq!(
        plan_runs(&[user(0), stub(5), call(6, 0)], 100, 1, 300),
        Runs::default()
    );
}

/// One step of a simulated session: append a user message or a group, or compact.
#[derive(Debug, Clone)]
enum Op {
    User,
    Group { calls: usize, bytes: u64 },
    Text,
    Compact { need: u64, keep: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => Just(Op::User),
        5 => (0usize..3, 1u64..20_000).prop_map(|(calls, bytes)| Op::Group { calls, bytes }),
        1 => Just(Op::Text),
        2 => (1u64..200_000, 1usize..5).prop_map(|(need, keep)| Op::Compact { need, keep }),
    ]
}

proptest! {
    // Whatever the history and however often it was compacted, every plan is a set of
    // disjoint, closed runs of whole units, without user messages or the kept newest units,
    // and applying it keeps every call next to all its results.
    #[test]
    fn every_plan_is_whole_units_closed_and_disjoint(ops in proptest::collection::vec(op(), 1..60)) {
        let mut nodes: Vec<PlanNode> = vec![user(0)];
        let mut next = 1u64;
        for op in ops {
            match op {
                Op::User => { nodes.push(user(next)); next += 1; }
                Op::Text => { nodes.push(call(next, 0)); next += 1; }
                Op::Group { calls, bytes } => {
                    nodes.push(call(next, calls));
                    next += 2; // a tool/call event between
                    for _ in 0..calls { nodes.push(result(next, bytes)); next += 2; }
                }
                Op::Compact { need, keep } => {
                    let runs = plan_runs(&nodes, need, keep, 300);
                    let units = units(&nodes);
                    let kept: Vec<&Unit> = units.iter().filter(|u| u.sinkable).rev().take(keep).collect();
                    let mut last_end = 0;
                    for &(s, e) in &runs.ranges {
                        prop_assert!(s >= last_end && s < e && e <= nodes.len());
                        last_end = e;
                        prop_assert!(units.iter().any(|u| u.start == s), "starts inside a unit");
                        prop_assert!(units.iter().any(|u| u.end == e), "ends inside a unit");
                        prop_assert!(nodes[s..e].iter().all(|n| n.role != Role::User));
                        prop_assert!(closed(&nodes, s, e));
                        for u in &kept { prop_assert!(u.end <= s || u.start >= e, "a kept unit sank"); }
                        for u in units.iter().filter(|u| u.start >= s && u.end <= e) {
                            prop_assert!(u.sinkable, "an incomplete group or stray result sank");
                        }
                    }
                    // Apply: each run becomes one stub with the next seq, at its place.
                    for &(s, e) in runs.ranges.iter().rev() {
                        nodes.splice(s..e, [stub(next)]);
                        next += 1;
                    }
                    // The contract: every assistant message is followed by exactly its results.
                    let mut i = 0;
                    while i < nodes.len() {
                        if let Role::Assistant { calls } = nodes[i].role {
                            let results = nodes[i + 1..].iter().take_while(|n| n.role == Role::Tool).count();
                            prop_assert!(results == calls || i + 1 + results == nodes.len());
                            i += results;
                        }
                        i += 1;
                    }
                }
            }
        }
    }
}
