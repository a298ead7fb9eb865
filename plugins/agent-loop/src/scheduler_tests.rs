//! One test per scheduler invariant (SCH-09), named with its requirement ID.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use keel_plugin_api::services::agent::InterruptLevel::{L1, L2, L3, L4};

use super::*;

/// A frame for the task `id` running at `level` (the caller's side of a suspension).
fn frame(id: &str, level: Level, steps: u64) -> TaskFrame {
    TaskFrame {
        task: id.into(),
        content: format!("text of {id}"),
        level,
        turn: steps * 10,
        steps,
        requests: steps + 1,
        preempts: 1,
    }
}

fn start_id(next: Option<Next>) -> String {
    match next {
        Some(Next::Start(t)) => t.id,
        other => panic!("expected a task to start, got {other:?}"),
    }
}

fn resume_id(next: Option<Next>) -> String {
    match next {
        Some(Next::Resume(f)) => f.task,
        other => panic!("expected a frame to resume, got {other:?}"),
    }
}

fn push(s: &Scheduler, id: &str, level: InterruptLevel) {
    let (_, dropped) = s.interrupt(id.into(), id.into(), level, Source::Loop);
    assert!(dropped.is_none());
}

/// SCH-03 `TopOnlyWinsOverHigherPrioritySuspended`: a waiting L1 is higher than the queued task
/// at the bottom of the stack but not than the L2 on top; only the top is compared, so the L2
/// resumes first, and the L1 runs before the bottom frame.
#[test]
fn sch03_top_only_wins_over_higher_priority_suspended() {
    let s = Scheduler::default();
    s.queue("q".into(), "q".into());
    assert_eq!(start_id(s.next()), "q");
    push(&s, "a2", L2);
    assert_eq!(s.preempt(frame("q", None, 1)), Ok("a2".into()));
    assert_eq!(start_id(s.next()), "a2");
    push(&s, "b3", L3);
    assert_eq!(s.preempt(frame("a2", Some(L2), 1)), Ok("b3".into()));
    assert_eq!(start_id(s.next()), "b3");
    // While b3 runs: an L1 and another L2 arrive; neither preempts L3.
    push(&s, "c1", L1);
    push(&s, "d2", L2);
    assert!(!s.should_preempt(Some(L3)));
    // b3 ends. Head d2 (L2) ties the top a2 (L2): the top resumes (same level queues).
    assert_eq!(resume_id(s.next()), "a2");
    // a2 ends. Head d2 beats the top q (level 0).
    assert_eq!(start_id(s.next()), "d2");
    // c1 (L1) is compared with the top q only, and wins over it.
    assert_eq!(start_id(s.next()), "c1");
    assert_eq!(resume_id(s.next()), "q");
    assert_eq!(s.next(), None);
}

/// SCH-03: nested preemption resumes in LIFO order.
#[test]
fn sch03_nested_preemption_resumes_lifo() {
    let s = Scheduler::default();
    s.queue("q".into(), "q".into());
    assert_eq!(start_id(s.next()), "q");
    let mut running = ("q".to_owned(), None);
    for (id, level) in [("i1", L1), ("i2", L2), ("i3", L3), ("i4", L4)] {
        push(&s, id, level);
        assert_eq!(s.preempt(frame(&running.0, running.1, 1)), Ok(id.into()));
        assert_eq!(start_id(s.next()), id);
        running = (id.to_owned(), Some(level));
    }
    let order: Vec<String> = std::iter::from_fn(|| s.next())
        .map(|n| match n {
            Next::Resume(f) => f.task,
            Next::Start(t) => panic!("nothing new was queued, got {t:?}"),
        })
        .collect();
    assert_eq!(order, ["i3", "i2", "i1", "q"]);
}

/// SCH-04: an equal level queues instead of nesting; L4 does not preempt L4; queued work
/// never preempts.
#[test]
fn sch04_equal_level_queues_and_l4_does_not_preempt_l4() {
    let s = Scheduler::default();
    for level in [L1, L2, L3, L4] {
        push(&s, "same", level);
        assert!(!s.should_preempt(Some(level)), "{level:?} vs {level:?}");
        let f = frame("running", Some(level), 2);
        assert_eq!(s.preempt(f.clone()), Err(f), "{level:?} is not nested");
        assert_eq!(start_id(s.next()), "same", "it waits in its queue");
    }
    s.queue("later".into(), "later".into());
    assert!(
        !s.should_preempt(None),
        "queued work never preempts queued work"
    );
    let f = frame("running", None, 0);
    assert_eq!(s.preempt(f.clone()), Err(f));
    // A lower level does not preempt either.
    push(&s, "low", L1);
    assert!(!s.should_preempt(Some(L2)));
    assert!(s.should_preempt(None), "any interrupt preempts queued work");
    assert_eq!(s.counts().suspended, 0);
}

/// SCH-05 (T-3): the depth reaches the structural bound of 4 while nesting every level, and no
/// push goes past it.
#[test]
fn sch05_depth_cap_during_nesting() {
    let s = Scheduler::default();
    s.queue("q".into(), "q".into());
    assert_eq!(start_id(s.next()), "q");
    let mut running = ("q".to_owned(), None);
    for (id, level) in [("i1", L1), ("i2", L2), ("i3", L3), ("i4", L4)] {
        push(&s, id, level);
        assert!(s.preempt(frame(&running.0, running.1, 1)).is_ok());
        assert_eq!(start_id(s.next()), id);
        running = (id.to_owned(), Some(level));
        assert!(s.dump().stack.len() <= MAX_DEPTH);
    }
    // L4 runs on a full stack: nothing can preempt it, whatever arrives.
    for (i, level) in [L1, L2, L3, L4].into_iter().enumerate() {
        push(&s, &format!("late{i}"), level);
        let f = frame("i4", Some(L4), 1);
        assert_eq!(s.preempt(f.clone()), Err(f));
    }
    let c = s.counts();
    assert_eq!((c.max_depth, c.over_depth), (MAX_DEPTH, 0));
    let levels: Vec<Level> = s.dump().stack.into_iter().map(|(_, l)| l).collect();
    assert_eq!(levels, [None, Some(L1), Some(L2), Some(L3)]);
}

/// SCH-05 (T-3): a push past the structural bound — reachable only by a caller that misstates
/// the running level, here five level-0 frames preempted by L1s — is counted once per push
/// past it and kept: every frame resumes, unchanged and in LIFO order, none demoted or dropped.
#[test]
fn sch05_a_push_past_the_structural_bound_is_counted_and_kept() {
    let s = Scheduler::default();
    let frames: Vec<TaskFrame> = (0..MAX_DEPTH as u64 + 2)
        .map(|i| frame(&format!("f{i}"), None, i))
        .collect();
    for (i, f) in frames.iter().enumerate() {
        let by = format!("i{i}");
        push(&s, &by, L1);
        assert_eq!(s.preempt(f.clone()), Ok(by.clone()), "push {i} is kept");
        assert_eq!(start_id(s.next()), by);
    }
    let c = s.counts();
    assert_eq!(c.over_depth, 2, "the 5th and 6th pushes: {c:?}");
    assert_eq!((c.max_depth, c.suspended), (MAX_DEPTH + 2, 6));
    let resumed: Vec<TaskFrame> = std::iter::from_fn(|| s.next())
        .map(|n| match n {
            Next::Resume(f) => f,
            Next::Start(t) => panic!("nothing new was queued, got {t:?}"),
        })
        .collect();
    assert_eq!(resumed, frames.into_iter().rev().collect::<Vec<_>>());
}

/// A seeded xorshift: the same sequence every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// SCH-06 `SuspendedEqualsResumed` (B16 E-stress): 100 queued and 100 interrupts at random
/// levels arrive at random step boundaries of a simulated driver; every resumed frame equals
/// the frame suspended, every task ends exactly once, the depth never passes 4, and once
/// drained `suspended == resumed`.
#[test]
fn sch06_suspended_equals_resumed_after_a_stress_run() {
    let s = Scheduler::new(1000);
    let mut rng = Rng(0x5eed_cafe_f00d_beef);
    let mut arrivals: Vec<(String, Option<InterruptLevel>)> = Vec::new();
    for i in 0..100 {
        arrivals.push((format!("q{i}"), None));
        let level = [L1, L2, L3, L4][rng.below(4) as usize];
        arrivals.push((format!("i{i}"), Some(level)));
    }
    // Shuffle the arrival order (Fisher–Yates with the seeded generator).
    for i in (1..arrivals.len()).rev() {
        arrivals.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let mut arrivals = arrivals.into_iter();
    let mut suspended: HashMap<String, TaskFrame> = HashMap::new();
    let mut ended: HashMap<String, u32> = HashMap::new();
    // The running task: its frame as it stands, and the steps it still has to do.
    let mut running: Option<(TaskFrame, u64)> = None;
    let mut preemptions = 0;
    loop {
        // 0–1 arrival per step boundary.
        for _ in 0..rng.below(2) {
            if let Some((id, level)) = arrivals.next() {
                match level {
                    None => s.queue(id.clone(), id),
                    Some(l) => {
                        let (_, dropped) = s.interrupt(id.clone(), id, l, Source::Loop);
                        assert!(dropped.is_none());
                    }
                }
            }
        }
        if let Some((mut f, left)) = running.take() {
            // A step ran and closed: a safe point.
            f.steps += 1;
            f.requests += 1;
            if left == 0 {
                *ended.entry(f.task.clone()).or_default() += 1;
            } else {
                f.preempts += 1;
                let copy = f.clone();
                match s.preempt(f) {
                    Ok(_) => {
                        preemptions += 1;
                        assert!(s.dump().stack.len() <= MAX_DEPTH);
                        suspended.insert(copy.task.clone(), copy);
                    }
                    Err(mut f) => {
                        assert_eq!(f, copy, "a frame not taken comes back unchanged");
                        f.preempts -= 1;
                        running = Some((f, left - 1));
                        continue;
                    }
                }
            }
        }
        match s.next() {
            Some(Next::Start(t)) => {
                let f = TaskFrame {
                    task: t.id.clone(),
                    content: t.content,
                    level: t.level,
                    turn: 0,
                    steps: 0,
                    requests: 0,
                    preempts: 0,
                };
                running = Some((f, rng.below(6)));
            }
            Some(Next::Resume(f)) => {
                let before = suspended.remove(&f.task);
                assert_eq!(before.as_ref(), Some(&f), "SuspendedEqualsResumed");
                running = Some((f, 1 + rng.below(3)));
            }
            None if arrivals.len() == 0 => break,
            None => {}
        }
    }
    let c = s.counts();
    assert_eq!(ended.len(), 200, "every task ended");
    assert!(ended.values().all(|&n| n == 1), "each exactly once");
    // This seed nests three deep and preempts 31 times (SCH-05 reaches 4 deterministically).
    assert!(preemptions > 20, "the run preempted ({preemptions})");
    assert!(c.max_depth >= 3, "{c:?}");
    assert_eq!(c.suspended, c.resumed, "{c:?}");
    assert_eq!(c.suspended, preemptions);
    assert!(c.max_depth <= MAX_DEPTH && c.over_depth == 0, "{c:?}");
    assert!(s.is_empty() && suspended.is_empty());
}

/// SCH-07: an interrupt pushed while the running task is inside a critical section (a tool
/// batch) is held: the scheduler never switches on its own, the interrupt waits in its queue
/// through the section, and it is selected only at the step boundary after it.
#[test]
fn sch07_an_interrupt_during_a_critical_section_waits_for_its_end() {
    let s = Scheduler::default();
    s.queue("q".into(), "q".into());
    assert_eq!(start_id(s.next()), "q");
    let section = |s: &Scheduler| {
        // The tool runs; an L4 arrives meanwhile.
        push(s, "urgent", L4);
        assert!(s.should_preempt(None), "it would preempt at a safe point");
        assert_eq!(s.dump().interrupts[3], ["urgent"], "recorded, not applied");
        assert_eq!(s.dump().immediate, None);
        assert!(
            s.dump().stack.is_empty(),
            "the running task was not suspended"
        );
        "tool result"
    };
    assert_eq!(section(&s), "tool result");
    // The step boundary after the section: the safe point applies it.
    assert_eq!(s.preempt(frame("q", None, 1)), Ok("urgent".into()));
    assert_eq!(start_id(s.next()), "urgent");
    assert_eq!(resume_id(s.next()), "q");
}

/// SCH-08: the hook fires on every push and pop, and each time while the lock is held.
#[test]
fn sch08_the_hook_fires_on_every_push_and_pop_under_the_lock() {
    let seen: Arc<Mutex<Vec<(Op, String, bool)>>> = Arc::default();
    let s = Arc::new_cyclic(|me: &std::sync::Weak<Scheduler>| {
        let me = me.clone();
        let seen = Arc::clone(&seen);
        Scheduler::new(2).with_hook(Box::new(move |n: &Notice<'_>| {
            let locked = me.upgrade().is_some_and(|s| s.is_locked());
            if let Ok(mut seen) = seen.lock() {
                seen.push((n.op, n.task.to_owned(), locked));
            }
        }))
    });
    s.queue("q".into(), "q".into());
    let _ = s.next();
    push(&s, "a", L2);
    let _ = s.preempt(frame("q", None, 1));
    let _ = s.next();
    let _ = s.next();
    push(&s, "b", L1);
    push(&s, "c", L1);
    let (_, dropped) = s.interrupt("d".into(), "d".into(), L3, Source::Plugin);
    assert_eq!(dropped.map(|t| t.id).as_deref(), Some("b"));
    let _ = s.take_all();
    let seen = seen.lock().unwrap().clone();
    let ops: Vec<(Op, &str)> = seen.iter().map(|(o, t, _)| (*o, t.as_str())).collect();
    assert_eq!(
        ops,
        [
            (Op::Queue, "q"),
            (Op::Start, "q"),
            (Op::Interrupt, "a"),
            (Op::Start, "a"),
            (Op::Suspend, "q"),
            (Op::Start, "a"),
            (Op::Resume, "q"),
            (Op::Interrupt, "b"),
            (Op::Interrupt, "c"),
            (Op::Interrupt, "d"),
            (Op::Drop, "b"),
            (Op::Take, "d"),
            (Op::Take, "c"),
        ]
    );
    assert!(
        seen.iter().all(|(_, _, locked)| *locked),
        "every notice under the lock: {seen:?}"
    );
    assert!(!s.is_locked(), "and released after");
}

/// SCH-10: a plugin's L4 is clamped to L3; the loop's own L4 stays L4.
#[test]
fn sch10_plugin_l4_is_clamped_to_l3() {
    let s = Scheduler::default();
    assert_eq!(clamp(L4, Source::Plugin), L3);
    assert_eq!(clamp(L4, Source::Loop), L4);
    for l in [L1, L2, L3] {
        assert_eq!(clamp(l, Source::Plugin), l);
    }
    let (level, _) = s.interrupt("p".into(), "p".into(), L4, Source::Plugin);
    assert_eq!(level, L3);
    assert_eq!(s.dump().interrupts[2], ["p"]);
    assert!(
        !s.should_preempt(Some(L3)),
        "a clamped L4 does not preempt an L3"
    );
    let (level, _) = s.interrupt("k".into(), "k".into(), L4, Source::Loop);
    assert_eq!(level, L4);
    assert!(s.should_preempt(Some(L3)));
}

/// B16 backpressure: a full set of interrupt queues drops the oldest entry of the lowest level
/// (possibly the newcomer), counts it, and hands it back for its terminal answer.
#[test]
fn overflow_drops_the_oldest_of_the_lowest_level_and_hands_it_back() {
    let s = Scheduler::new(3);
    push(&s, "a2", L2);
    push(&s, "b1", L1);
    push(&s, "c1", L1);
    let (_, dropped) = s.interrupt("d3".into(), "d3".into(), L3, Source::Plugin);
    assert_eq!(dropped.map(|t| t.id).as_deref(), Some("b1"), "oldest L1");
    let (_, dropped) = s.interrupt("e1".into(), "e1".into(), L1, Source::Plugin);
    assert_eq!(
        dropped.map(|t| t.id).as_deref(),
        Some("c1"),
        "older than e1"
    );
    let (_, dropped) = s.interrupt("f2".into(), "f2".into(), L2, Source::Plugin);
    assert_eq!(dropped.map(|t| t.id).as_deref(), Some("e1"));
    // Full of L2/L3: a new L1 is itself the oldest of the lowest level.
    let (_, dropped) = s.interrupt("g1".into(), "g1".into(), L1, Source::Plugin);
    assert_eq!(dropped.map(|t| t.id).as_deref(), Some("g1"));
    assert_eq!(s.counts().dropped, 4);
    let d = s.dump();
    assert_eq!(d.interrupts[1], ["a2", "f2"]);
    assert_eq!(d.interrupts[2], ["d3"]);
    assert_eq!(s.len(), 3);
}

/// `take_all` hands everything back in run order, the suspended frames marked, and leaves the
/// scheduler empty; `dump` shows every container at once.
#[test]
fn take_all_answers_the_run_order_with_suspended_frames_marked() {
    let s = Scheduler::default();
    s.queue("q1".into(), "q1".into());
    s.queue("q2".into(), "q2".into());
    assert_eq!(start_id(s.next()), "q1");
    push(&s, "a2", L2);
    assert!(s.preempt(frame("q1", None, 1)).is_ok());
    push(&s, "b1", L1);
    push(&s, "c3", L3);
    let d = s.dump();
    assert_eq!(d.immediate.as_deref(), Some("a2"));
    assert_eq!(d.queued, ["q2"]);
    assert_eq!(d.stack, [("q1".to_owned(), None)]);
    let taken: Vec<(String, bool)> = s
        .take_all()
        .into_iter()
        .map(|p| (p.id, p.suspended))
        .collect();
    let expect = [
        ("a2", false),
        ("c3", false),
        ("b1", false),
        ("q1", true),
        ("q2", false),
    ]
    .map(|(id, sus)| (id.to_owned(), sus));
    assert_eq!(taken, expect);
    assert!(s.is_empty());
    assert_eq!(s.counts().taken_frames, 1);
}
