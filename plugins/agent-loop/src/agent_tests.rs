//! Unit tests of the agent's inbox, scheduler wiring and idle reports (LOOP-02/09/25, SCH-06/10).

use super::*;

fn agent() -> Agent {
    Agent::new("s".into(), "/w".into(), None, LogState::default())
}

/// `send` as a plugin would, answering the id.
fn send(a: &Agent, content: &str, target: InboxTarget) -> String {
    a.send(content.into(), target, None, Source::Plugin).id
}

fn texts(messages: &[InboxMessage]) -> Vec<&str> {
    messages.iter().map(|m| m.content.as_str()).collect()
}

#[test]
fn loop02_followups_queue_one_turn_each_in_order() {
    let a = agent();
    let ids: Vec<String> = (0..5)
        .map(|i| send(&a, &format!("f{i}"), InboxTarget::Followup))
        .collect();
    let mut unique = ids.clone();
    unique.dedup();
    assert_eq!(unique.len(), 5, "ids are distinct: {ids:?}");
    assert_eq!(a.sched.dump().queued, ids, "queued work, in order");
    let order: Vec<String> = a
        .take_pending()
        .inputs
        .into_iter()
        .map(|p| p.content)
        .collect();
    assert_eq!(order, ["f0", "f1", "f2", "f3", "f4"]);
    assert!(!a.state().steer_pending, "followups are not steering");
}

// SCH-01/10: an interrupt waits at its level (L1 by default), a plugin's L4 at L3, and
// `status` counts it as pending.
#[test]
fn sch10_send_queues_interrupts_at_their_clamped_level() {
    let a = agent();
    let l4 = a.send(
        "stop".into(),
        InboxTarget::Interrupt,
        Some(InterruptLevel::L4),
        Source::Plugin,
    );
    assert_eq!(l4.level, Some(InterruptLevel::L3));
    let l1 = a.send("bg".into(), InboxTarget::Interrupt, None, Source::Plugin);
    assert_eq!(l1.level, Some(InterruptLevel::L1));
    let f = a.send("f".into(), InboxTarget::Followup, None, Source::Plugin);
    assert_eq!(f.level, None, "a followup has no level");
    let d = a.sched.dump();
    assert_eq!(d.interrupts[2], [l4.id]);
    assert_eq!(d.interrupts[0], [l1.id]);
    assert_eq!(a.status().pending, 3);
}

// SCH-06 / LOOP-25: a suspended task counts as waiting (`wait_idle` is not answered while
// only a frame is left), `status` counts the suspension, and `take_pending` hands the
// frame back marked, after the interrupt that preempted it.
#[test]
fn sch06_a_suspended_task_is_pending_work_until_it_resumes() {
    let a = agent();
    let f = send(&a, "long job", InboxTarget::Followup);
    let Some(Next::Start(task)) = a.sched.next() else {
        panic!("the followup starts");
    };
    let i = a.send(
        "urgent".into(),
        InboxTarget::Interrupt,
        Some(InterruptLevel::L2),
        Source::Plugin,
    );
    let frame = TaskFrame {
        task: task.id,
        content: task.content,
        level: None,
        turn: 0,
        steps: 1,
        requests: 1,
        preempts: 1,
    };
    assert_eq!(a.preempt(frame), Ok(i.id.clone()));
    let status = a.status();
    assert_eq!(
        (status.pending, status.suspended, status.resumed),
        (2, 1, 0)
    );
    let mut rx = a.wait_idle();
    assert!(matches!(rx.try_recv(), Ok(None)), "suspended work is busy");
    let taken: Vec<(String, bool)> = a
        .take_pending()
        .inputs
        .into_iter()
        .map(|p| (p.id, p.suspended))
        .collect();
    assert_eq!(taken, [(i.id, false), (f, true)]);
    assert_eq!(a.status().pending, 0);
}

// Issue 11 item 6: a resumed agent numbers after the highest id of its own log.
#[test]
fn item6_a_resumed_agent_numbers_after_the_ids_its_log_holds() {
    let record = |kind: &str, data: Value| EventRecord {
        seq: 0,
        time: 0,
        kind: kind.into(),
        data,
        ignorable: false,
        surface_op: None,
        source_event_seqs: None,
    };
    let msg = |id: &str| record("user/message", json!({"id": id, "content": "x"}));
    let events = vec![
        msg("msg_s_1"),
        record("turn/start", json!({"turn": 0})),
        msg("msg_s_7"),
        msg("msg_s_3"),
        // A fork's seed (another prefix), a foreign id, a non-number: not ours.
        msg("msg_parent_40"),
        msg("msg_s_x"),
        msg("custom"),
        record("assistant/message", json!({"id": "msg_s_99"})),
    ];
    assert_eq!(last_message_number("s", &events), 7);
    assert_eq!(last_message_number("s", &[]), 0);
    // Session ids may hold `_`: the prefix is the whole `msg_{id}_`.
    assert_eq!(
        last_message_number("a_b", &[msg("msg_a_b_2"), msg("msg_a_5")]),
        2
    );
    let log = LogState {
        last_message: 7,
        ..LogState::default()
    };
    let a = Agent::new("s".into(), "/w".into(), None, log);
    assert_eq!(send(&a, "next", InboxTarget::Followup), "msg_s_8");
    assert_eq!(send(&a, "then", InboxTarget::Steer), "msg_s_9");
}

#[test]
fn loop02_steer_wakes_inject_waits_and_both_join_the_next_step() {
    let a = agent();
    send(&a, "quiet", InboxTarget::Inject);
    assert!(!a.has_steering(), "an inject alone does not wake the agent");
    send(&a, "now", InboxTarget::Steer);
    assert!(a.has_steering());
    let claimed = a.claim_next_step();
    assert_eq!(texts(&claimed), ["quiet", "now"]);
    assert!(!a.has_steering());
    assert!(a.claim_next_step().is_empty());
}

#[test]
fn loop09_parked_steering_comes_back_first_and_in_order() {
    let a = agent();
    send(&a, "later", InboxTarget::Inject);
    a.park(vec![
        InboxMessage {
            id: "1".into(),
            content: "a".into(),
        },
        InboxMessage {
            id: "2".into(),
            content: "b".into(),
        },
    ]);
    assert_eq!(texts(&a.claim_next_step()), ["a", "b", "later"]);
}

#[test]
fn loop25_wait_idle_waits_while_a_followup_is_queued() {
    let a = agent();
    send(&a, "f", InboxTarget::Followup);
    let mut rx = a.wait_idle();
    assert!(
        matches!(rx.try_recv(), Ok(None)),
        "a queued followup means busy"
    );
    let idle = agent();
    let mut rx = idle.wait_idle();
    assert!(
        matches!(rx.try_recv(), Ok(Some(_))),
        "an idle agent answers at once"
    );
}

// LOOP-25: a turn that ends before its caller reaches `wait_idle` keeps its report for
// that caller (it used to be taken by nobody, and the caller read an empty report).
#[test]
fn loop25_a_report_nobody_waited_for_is_kept_for_the_next_wait() {
    let a = agent();
    {
        let mut st = a.state();
        st.running = true;
        st.report.turn_end_reason = serde_json::json!({"kind": "error"});
        st.running = false;
        assert!(idle_answers(&mut st).is_empty());
    }
    let mut rx = a.wait_idle();
    let report = rx.try_recv().unwrap().unwrap();
    assert_eq!(report.turn_end_reason["kind"], "error");
    // With a waiter, the report goes to it and the next interval starts empty.
    let mut st = a.state();
    st.report.turn_end_reason = serde_json::json!({"kind": "completed"});
    let (tx, mut rx) = oneshot::channel();
    st.idle_waiters.push(tx);
    for (w, r) in idle_answers(&mut st) {
        let _ = w.send(r);
    }
    assert_eq!(
        rx.try_recv().unwrap().unwrap().turn_end_reason["kind"],
        "completed"
    );
    assert!(st.report.turn_end_reason.is_null());
}
