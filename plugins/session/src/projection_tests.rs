//! Unit tests of `projection` (SES-03, the tool-call contract).

use super::*;
use crate::test_support::*;
use serde_json::json;

fn surface_replace(seq: u64, base: EventRecord, start: u64, end: u64, src: &[u64]) -> EventRecord {
    EventRecord {
        seq,
        surface_op: Some(replace_op(start, end)),
        source_event_seqs: Some(src.to_vec()),
        ..base
    }
}

fn closed_turn() -> Vec<EventRecord> {
    vec![
        user(0, "hello"),
        turn_start(1, 0),
        step_start(2, 0, 0),
        assistant(3, 0, 0, &["a", "b"]),
        call(4, 0, 0, "a"),
        result(5, 0, 0, "a"),
        call(6, 0, 0, "b"),
        result(7, 0, 0, "b"),
        step_end(8, 0, 0),
        turn_end(9, 0),
    ]
}

#[test]
fn ses03_surface_projects_roles_and_skips_non_surface() {
    let msgs = derive_messages(&closed_turn()).unwrap();
    let roles: Vec<_> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "tool"]);
    assert_eq!(msgs[1]["tool_calls"][1]["id"], "b");
    assert_eq!(msgs[3]["tool_call_id"], "b");
    assert!(check_contract(&msgs, Tail::Closed).is_ok());
}

#[test]
fn ses03_empty_assistant_message_projects_to_nothing() {
    let mut ev = assistant(0, 0, 0, &[]);
    assert!(ev.data["message"]["content"] != json!(""));
    ev.data["message"]["content"] = json!("");
    assert!(derive_messages(&[ev]).unwrap().is_empty());
}

#[test]
fn ses03_replace_shadows_without_rewriting_and_takes_the_position() {
    let mut log = closed_turn();
    log.push(user(10, "later"));
    let summary = surface_replace(11, user(11, "summary"), 0, 9, &[0, 3, 5, 7]);
    log.push(summary);
    let msgs = derive_messages(&log).unwrap();
    assert_eq!(msgs.len(), 2);
    assert_eq!(msgs[0]["content"], "summary");
    assert_eq!(msgs[1]["content"], "later");
    // The raw log still holds the shadowed events.
    assert_eq!(log[0].data["content"], "hello");
    assert_eq!(transcript(&log).count(), 5);
}

#[test]
fn ses03_replace_must_list_shadowed_seqs() {
    let mut log = closed_turn();
    log.push(surface_replace(10, user(10, "s"), 0, 9, &[0, 3, 5]));
    let e = derive_messages(&log).unwrap_err().to_string();
    assert!(
        e.contains("SES-03.replace-sources") && e.contains("seq 7"),
        "{e}"
    );
}

#[test]
fn replace_never_splits_a_call_group() {
    // Shadowing the assistant message but not its results.
    let mut log = closed_turn();
    log.push(surface_replace(10, user(10, "s"), 0, 3, &[0, 3]));
    assert!(
        derive_messages(&log)
            .unwrap_err()
            .to_string()
            .contains("K.replace-group")
    );
    // Shadowing results only.
    let mut log = closed_turn();
    log.push(surface_replace(10, user(10, "s"), 5, 7, &[5, 7]));
    assert!(
        derive_messages(&log)
            .unwrap_err()
            .to_string()
            .contains("K.replace-group")
    );
    // Nothing visible.
    let mut log = closed_turn();
    log.push(surface_replace(10, user(10, "s"), 8, 9, &[]));
    assert!(
        derive_messages(&log)
            .unwrap_err()
            .to_string()
            .contains("shadows no")
    );
}

#[test]
fn tool_result_substitution_keeps_the_slot() {
    let mut log = closed_turn();
    log.push(turn_start(10, 1));
    let pruned = surface_replace(11, result(11, 1, 0, "a"), 5, 5, &[5]);
    log.push(pruned);
    let msgs = derive_messages(&log).unwrap();
    assert_eq!(msgs[2]["tool_call_id"], "a");
    assert_eq!(msgs.len(), 4);
    assert!(check_contract(&msgs, Tail::Closed).is_ok());
    let mut bad = closed_turn();
    bad.push(surface_replace(10, result(10, 1, 0, "b"), 5, 5, &[5]));
    assert!(derive_messages(&bad).is_err());
}

#[test]
fn nested_replacements_and_undo() {
    let mut p = Projection::new();
    let mut log = closed_turn();
    log.push(user(10, "x"));
    log.push(surface_replace(11, user(11, "s1"), 0, 9, &[0, 3, 5, 7]));
    log.push(user(12, "y"));
    for e in &log {
        p.apply(&Arc::new(e.clone())).unwrap();
    }
    let before = p.messages();
    let undo = p
        .apply(&Arc::new(surface_replace(
            13,
            user(13, "s2"),
            10,
            11,
            &[10, 11],
        )))
        .unwrap();
    // s1 (anchor 0) and x (anchor 10) shadowed; s2 sits first, then y.
    assert_eq!(
        p.messages(),
        vec![
            json!({"role":"user","content":"s2"}),
            json!({"role":"user","content":"y"})
        ]
    );
    p.undo(undo);
    assert_eq!(p.messages(), before);
    assert_eq!(p.cursor(), 13);
}

#[test]
fn contract_checker_finds_dangling_orphan_and_interleaved() {
    let a = json!({"role":"assistant","content":"","tool_calls":[{"id":"a"},{"id":"b"}]});
    let ra = json!({"role":"tool","tool_call_id":"a","content":""});
    let rb = json!({"role":"tool","tool_call_id":"b","content":""});
    let u = json!({"role":"user","content":"x"});
    assert!(check_contract(&[a.clone(), ra.clone(), rb.clone()], Tail::Closed).is_ok());
    assert!(check_contract(&[a.clone(), ra.clone()], Tail::Closed).is_err());
    assert!(check_contract(&[a.clone(), ra.clone()], Tail::InFlight).is_ok());
    assert!(check_contract(&[a.clone(), rb.clone(), ra.clone()], Tail::Closed).is_err());
    assert!(check_contract(&[a, ra.clone(), u.clone(), rb], Tail::Closed).is_err());
    assert!(check_contract(&[u, ra], Tail::Closed).is_err());
}

#[test]
fn appends_stay_in_the_tail_until_a_replacement_reaches_them() {
    let mut p = Projection::new();
    let mut log = closed_turn();
    log.push(user(10, "x"));
    log.push(user(11, "y"));
    for e in &log {
        p.apply(&Arc::new(e.clone())).unwrap();
    }
    assert!(p.head.is_empty() && p.anchor_of.is_empty());
    assert_eq!(p.tail.len(), 6);
    // Replacing `x` settles the tail through seq 10 only; `y` stays in the tail.
    let undo = p
        .apply(&Arc::new(surface_replace(12, user(12, "s"), 10, 10, &[10])))
        .unwrap();
    assert_eq!(p.tail.iter().map(|n| n.seq).collect::<Vec<_>>(), [11]);
    assert_eq!(p.head.keys().copied().collect::<Vec<_>>(), [0, 3, 5, 7, 10]);
    assert_eq!(p.head[&10].seq, 12);
    assert_eq!(p.anchor_of.get(&12), Some(&10));
    let after = p.messages();
    // A later append goes to the tail again; undoing it and the replacement restores both.
    let mut q = p.clone();
    let undo2 = q.apply(&Arc::new(user(13, "z"))).unwrap();
    assert_eq!(q.tail.last().map(|n| n.seq), Some(13));
    q.undo(undo2);
    assert_eq!(q.messages(), after);
    q.undo(undo);
    assert_eq!(q.messages(), derive_messages(&log).unwrap());
    assert_eq!(q.anchor_of.get(&10), Some(&10));
    assert_eq!(q.len(), 6);
    // A failed replacement changes the representation at most, never the history.
    let mut log2 = log.clone();
    log2.push(surface_replace(12, user(12, "bad"), 3, 4, &[3]));
    let before = q.messages();
    assert!(q.apply(&Arc::new(log2[12].clone())).is_err());
    assert_eq!(q.messages(), before);
    assert_eq!(q.cursor(), 12);
}

// Issue 14: `surface` names each visible message's seq, role and calls, and marks replacements.
#[test]
fn surface_names_seqs_roles_and_replacements() {
    let mut log = closed_turn();
    log.push(surface_replace(10, result(10, 0, 0, "a"), 5, 5, &[5]));
    let mut p = Projection::new();
    for ev in &log {
        p.apply(&Arc::new(ev.clone())).unwrap();
    }
    let nodes = p.surface().unwrap();
    let seqs: Vec<u64> = nodes.iter().map(|n| n.seq).collect();
    assert_eq!(seqs, [0, 3, 10, 7]);
    let replaced: Vec<bool> = nodes.iter().map(|n| n.replacement).collect();
    assert_eq!(replaced, [false, false, true, false]);
    assert_eq!(
        nodes[1].role,
        SurfaceRole::Assistant {
            calls: vec!["a".into(), "b".into()]
        }
    );
    assert_eq!(
        nodes[2].role,
        SurfaceRole::Tool {
            call_id: "a".into()
        }
    );
    assert!(nodes[2].message.same(&p.shared().unwrap()[2]));
}

// Issue 15 item 2: signed reasoning blocks are part of the projected assistant message (so a
// resumed session sends them back); an empty list, like an older log's absent key, adds nothing.
#[test]
fn signed_reasoning_blocks_are_projected_and_an_empty_list_is_not() {
    let blocks = json!([{"text": "plan", "signature": "sig-1"}]);
    let mut ev = assistant(0, 0, 0, &["a"]);
    ev.data["message"]["reasoning_blocks"] = blocks.clone();
    let msgs = derive_messages(&[ev]).unwrap();
    assert_eq!(msgs[0]["reasoning_blocks"], blocks);
    assert_eq!(msgs[0]["tool_calls"][0]["id"], "a");
    let mut old = assistant(0, 0, 0, &["a"]);
    old.data["message"]["reasoning_blocks"] = json!([]);
    let msgs = derive_messages(&[old]).unwrap();
    assert!(msgs[0].get("reasoning_blocks").is_none(), "{}", msgs[0]);
}
