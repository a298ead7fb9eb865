//! The input scheduler of one agent (SCH-01…10, B16, ARCHITECTURE §13 T-3): which task runs
//! next, and whether a waiting interrupt preempts the running one.
//!
//! A task is a turn's worth of work. Queued work (followups) has no level (effective level 0,
//! `None` here; `Option<InterruptLevel>` orders `None < L1 < … < L4`); an interrupt has a level
//! L1–L4 and only a **strictly higher** level preempts it (SCH-04). The containers are B16's:
//! - an `immediate` slot: the preemptor a [`Scheduler::preempt`] chose, taken first;
//! - four interrupt queues, FIFO within a level, bounded together by a capacity: on overflow
//!   the oldest entry of the lowest level is dropped, counted and handed back to the caller so
//!   its sender gets a terminal answer;
//! - a FIFO of queued work;
//! - the suspend stack, strict LIFO: only its top is compared with the interrupt head (SCH-03).
//!
//! Selection: immediate → the higher of (interrupt head, stack top; a tie resumes the stack,
//! same level queues rather than nests) → queued FIFO → idle.
//!
//! T-3: the depth is bounded by the levels. A frame is pushed only when a strictly higher
//! interrupt preempts it, and a queued task runs only on an empty stack, so the stack holds at
//! most one frame per level below L4 (0, L1, L2, L3): depth ≤ 4. Over-limit is unreachable; a
//! push past it is counted (`over_depth`) and still kept — never demoted, never dropped.
//!
//! The structure is synchronous and owns its lock. The notify hook runs on every push and pop
//! **while that lock is held** (SCH-08), so a hook sees each change in order with the state it
//! produced; a hook MUST NOT call back into the scheduler (it would deadlock). The agent's hook
//! only wakes its driver task.
//!
//! Left out of B16: the starvation guard (level boost after repeated preemption, preemption
//! cooldown) — with four levels and strict LIFO every suspended task resumes once the levels
//! above it drain; the bounded ready queue that blocks senders (followups queue unbounded).

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

use keel_plugin_api::services::agent::{InterruptLevel, PendingInput};

/// A task's level: `None` is queued work (level 0).
pub type Level = Option<InterruptLevel>;

/// How many interrupts may wait, all levels together, before the oldest lowest one is dropped.
pub const INTERRUPT_CAPACITY: usize = 64;

/// The structural depth bound of the suspend stack (T-3): one frame per level below L4.
pub const MAX_DEPTH: usize = 4;

/// Who raises an interrupt (SCH-10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Any plugin through `keel.agent` `send`: L4 is clamped to L3.
    Plugin,
    /// The loop itself (overflow, a failed task): may raise L4.
    Loop,
}

/// The level a `source` may raise: a plugin's L4 becomes L3 (SCH-10).
pub fn clamp(level: InterruptLevel, source: Source) -> InterruptLevel {
    match (level, source) {
        (InterruptLevel::L4, Source::Plugin) => InterruptLevel::L3,
        (l, _) => l,
    }
}

/// A task that has not started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    /// Its message id (the id `send` answered).
    pub id: String,
    /// Its text: the opening message of its turn.
    pub content: String,
    /// Its level.
    pub level: Level,
}

/// What a suspended task needs to go on where it stopped (SCH-02). Moved onto the stack and
/// moved back out unchanged (SCH-06 `SuspendedEqualsResumed`); the scheduler never edits one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskFrame {
    /// The task (the message id that opened it, or `turn-N` for a turn steering opened).
    pub task: String,
    /// The opening message's text (what `take_pending` hands back).
    pub content: String,
    /// Its level.
    pub level: Level,
    /// The turn it was suspended from (the resumed turn logs `resumes: turn`).
    pub turn: u64,
    /// Steps used so far, across its turns: the step budget continues.
    pub steps: u64,
    /// Model requests made so far.
    pub requests: u64,
    /// Times it was preempted, this suspension included.
    pub preempts: u32,
}

/// What runs next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// A task that has not started.
    Start(Task),
    /// A suspended task, its frame as it was pushed.
    Resume(TaskFrame),
}

/// A change the notify hook is told about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Queued work was pushed.
    Queue,
    /// An interrupt was pushed.
    Interrupt,
    /// An interrupt was dropped on overflow.
    Drop,
    /// A frame was pushed on the stack.
    Suspend,
    /// A task left a container to run (popped).
    Start,
    /// A frame was popped to run.
    Resume,
    /// Everything was taken out (`take_pending`).
    Take,
}

/// One notification (SCH-08).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Notice<'a> {
    /// What happened.
    pub op: Op,
    /// The task it happened to.
    pub task: &'a str,
    /// Its level.
    pub level: Level,
    /// The stack depth after the change.
    pub depth: usize,
}

/// The notify hook: runs under the scheduler's lock and must not call back into it.
pub type Hook = Box<dyn Fn(&Notice<'_>) + Send + Sync>;

/// The scheduler's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Frames pushed (SCH-06).
    pub suspended: u64,
    /// Frames popped to run; equals `suspended` once drained (and nothing was taken).
    pub resumed: u64,
    /// Frames handed out by `take_all` instead of resumed.
    pub taken_frames: u64,
    /// Interrupts dropped on overflow.
    pub dropped: u64,
    /// Pushes past [`MAX_DEPTH`] (unreachable by T-3; counted, never dropped).
    pub over_depth: u64,
    /// The deepest the stack has been.
    pub max_depth: usize,
}

/// An atomic snapshot (B16 `Dump()`): ids per container, in container order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dump {
    /// The immediate slot.
    pub immediate: Option<String>,
    /// Interrupt queues, index 0 = L1 … 3 = L4, front first.
    pub interrupts: [Vec<String>; 4],
    /// Queued work, front first.
    pub queued: Vec<String>,
    /// The stack, bottom first, with each frame's level.
    pub stack: Vec<(String, Level)>,
    /// The counters.
    pub counts: Counts,
}

#[derive(Default)]
struct Inner {
    immediate: Option<Task>,
    interrupts: [VecDeque<Task>; 4],
    queued: VecDeque<Task>,
    stack: Vec<TaskFrame>,
    counts: Counts,
}

impl Inner {
    fn waiting_interrupts(&self) -> usize {
        self.interrupts.iter().map(VecDeque::len).sum()
    }

    /// The highest non-empty level's queue index.
    fn head_index(&self) -> Option<usize> {
        (0..4).rev().find(|&i| !self.interrupts[i].is_empty())
    }

    fn head_level(&self) -> Level {
        self.head_index()
            .and_then(|i| self.interrupts[i].front())
            .and_then(|t| t.level)
    }

    /// Whether the interrupt head goes before the stack top (strictly higher; a tie resumes).
    fn head_beats_top(&self) -> bool {
        match (self.head_level(), self.stack.last()) {
            (None, _) => false,
            (Some(_), None) => true,
            (h, Some(top)) => h > top.level,
        }
    }
}

fn index(level: InterruptLevel) -> usize {
    usize::from(u8::from(level)).saturating_sub(1).min(3)
}

/// The input scheduler of one agent.
pub struct Scheduler {
    inner: Mutex<Inner>,
    hook: Option<Hook>,
    capacity: usize,
}

impl Default for Scheduler {
    fn default() -> Self {
        Scheduler::new(INTERRUPT_CAPACITY)
    }
}

impl Scheduler {
    /// An empty scheduler whose interrupt queues hold `capacity` tasks together (at least 1).
    pub fn new(capacity: usize) -> Self {
        Scheduler {
            inner: Mutex::new(Inner::default()),
            hook: None,
            capacity: capacity.max(1),
        }
    }

    /// With a notify hook (SCH-08). It runs under the lock: it must not call the scheduler.
    #[must_use]
    pub fn with_hook(mut self, hook: Hook) -> Self {
        self.hook = Some(hook);
        self
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A poisoned lock is recovered: every operation leaves the containers consistent.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Calls the hook; the caller holds the lock (`_held` proves it).
    fn notify(&self, _held: &Inner, op: Op, task: &str, level: Level, depth: usize) {
        if let Some(hook) = &self.hook {
            hook(&Notice {
                op,
                task,
                level,
                depth,
            });
        }
    }

    /// Whether the lock is held right now (for the SCH-08 test of the hook).
    #[cfg(test)]
    pub fn is_locked(&self) -> bool {
        matches!(
            self.inner.try_lock(),
            Err(std::sync::TryLockError::WouldBlock)
        )
    }

    /// Queues work that does not interrupt (a followup, level 0).
    pub fn queue(&self, id: String, content: String) {
        let mut inner = self.lock();
        inner.queued.push_back(Task {
            id: id.clone(),
            content,
            level: None,
        });
        let depth = inner.stack.len();
        self.notify(&inner, Op::Queue, &id, None, depth);
    }

    /// Queues an interrupt at `level` as `source` may raise it (SCH-10). Answers the effective
    /// level and, when the queues were full, the task dropped for it (the oldest of the lowest
    /// level: possibly this one), whose sender must get a terminal answer.
    pub fn interrupt(
        &self,
        id: String,
        content: String,
        level: InterruptLevel,
        source: Source,
    ) -> (InterruptLevel, Option<Task>) {
        let level = clamp(level, source);
        let mut inner = self.lock();
        inner.interrupts[index(level)].push_back(Task {
            id: id.clone(),
            content,
            level: Some(level),
        });
        let depth = inner.stack.len();
        self.notify(&inner, Op::Interrupt, &id, Some(level), depth);
        let mut dropped = None;
        if inner.waiting_interrupts() > self.capacity
            && let Some(lowest) = (0..4).find(|&i| !inner.interrupts[i].is_empty())
            && let Some(task) = inner.interrupts[lowest].pop_front()
        {
            inner.counts.dropped += 1;
            self.notify(&inner, Op::Drop, &task.id, task.level, depth);
            dropped = Some(task);
        }
        (level, dropped)
    }

    /// Whether the interrupt head preempts a task running at `running` (SCH-03/04: only the
    /// head is compared, and only strictly higher preempts).
    pub fn should_preempt(&self, running: Level) -> bool {
        let inner = self.lock();
        inner.head_level() > running
    }

    /// At a safe point of the running task (a step boundary, SCH-07): when the interrupt head
    /// preempts `frame`'s level, the head moves to the immediate slot and `frame` onto the
    /// stack, atomically; answers the preemptor's id. Otherwise `frame` comes back.
    ///
    /// # Errors
    /// `Err(frame)`, unchanged, when nothing waiting preempts it.
    pub fn preempt(&self, frame: TaskFrame) -> Result<String, TaskFrame> {
        let mut inner = self.lock();
        if inner.head_level() <= frame.level || inner.immediate.is_some() {
            return Err(frame);
        }
        let Some(task) = inner
            .head_index()
            .and_then(|i| inner.interrupts[i].pop_front())
        else {
            return Err(frame);
        };
        let depth = inner.stack.len();
        self.notify(&inner, Op::Start, &task.id, task.level, depth);
        let by = task.id.clone();
        inner.immediate = Some(task);
        if inner.stack.len() >= MAX_DEPTH {
            // T-3: unreachable (levels strictly increase up the stack); kept, and counted.
            inner.counts.over_depth += 1;
            tracing::error!(
                task = %frame.task,
                depth = inner.stack.len(),
                "scheduler stack past its structural bound"
            );
        }
        let (id, level) = (frame.task.clone(), frame.level);
        inner.stack.push(frame);
        inner.counts.suspended += 1;
        inner.counts.max_depth = inner.counts.max_depth.max(inner.stack.len());
        let depth = inner.stack.len();
        self.notify(&inner, Op::Suspend, &id, level, depth);
        Ok(by)
    }

    /// The next task to run (selection order in the module doc), taken out of its container.
    pub fn next(&self) -> Option<Next> {
        let mut inner = self.lock();
        let next = if let Some(task) = inner.immediate.take() {
            Next::Start(task)
        } else if inner.head_beats_top() {
            let task = inner
                .head_index()
                .and_then(|i| inner.interrupts[i].pop_front())?;
            Next::Start(task)
        } else if let Some(frame) = inner.stack.pop() {
            inner.counts.resumed += 1;
            Next::Resume(frame)
        } else {
            Next::Start(inner.queued.pop_front()?)
        };
        let depth = inner.stack.len();
        match &next {
            Next::Start(t) => self.notify(&inner, Op::Start, &t.id, t.level, depth),
            Next::Resume(f) => self.notify(&inner, Op::Resume, &f.task, f.level, depth),
        }
        Some(next)
    }

    /// Takes every waiting input, in the order it would have run, suspended frames marked.
    pub fn take_all(&self) -> Vec<PendingInput> {
        let mut inner = self.lock();
        let mut out = Vec::new();
        let pending = |t: Task, suspended| PendingInput {
            id: t.id,
            content: t.content,
            level: t.level,
            suspended,
        };
        if let Some(t) = inner.immediate.take() {
            out.push(pending(t, false));
        }
        loop {
            if inner.head_beats_top() {
                if let Some(t) = inner
                    .head_index()
                    .and_then(|i| inner.interrupts[i].pop_front())
                {
                    out.push(pending(t, false));
                }
            } else if let Some(f) = inner.stack.pop() {
                inner.counts.taken_frames += 1;
                out.push(PendingInput {
                    id: f.task,
                    content: f.content,
                    level: f.level,
                    suspended: true,
                });
            } else {
                break;
            }
        }
        out.extend(inner.queued.drain(..).map(|t| pending(t, false)));
        for p in &out {
            self.notify(&inner, Op::Take, &p.id, p.level, 0);
        }
        out
    }

    /// Tasks waiting (immediate, interrupts, queued, suspended).
    pub fn len(&self) -> usize {
        let inner = self.lock();
        usize::from(inner.immediate.is_some())
            + inner.waiting_interrupts()
            + inner.queued.len()
            + inner.stack.len()
    }

    /// Nothing waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The counters.
    pub fn counts(&self) -> Counts {
        self.lock().counts
    }

    /// An atomic snapshot of every container.
    pub fn dump(&self) -> Dump {
        let inner = self.lock();
        let ids = |q: &VecDeque<Task>| q.iter().map(|t| t.id.clone()).collect::<Vec<_>>();
        Dump {
            immediate: inner.immediate.as_ref().map(|t| t.id.clone()),
            interrupts: [
                ids(&inner.interrupts[0]),
                ids(&inner.interrupts[1]),
                ids(&inner.interrupts[2]),
                ids(&inner.interrupts[3]),
            ],
            queued: ids(&inner.queued),
            stack: inner
                .stack
                .iter()
                .map(|f| (f.task.clone(), f.level))
                .collect(),
            counts: inner.counts,
        }
    }
}

#[cfg(test)]
#[path = "scheduler_tests.rs"]
mod tests;
