//! One agent: a session, its inbox, and the task that drives turns (LOOP-01/02/07/25).
//!
//! Inputs that are tasks of their own go through the agent's [`Scheduler`] (SCH-01): followups
//! are queued work, `interrupt`s wait at their level (a plugin's L4 clamped to L3, SCH-10) and
//! may preempt the running turn at a step boundary. Steer and inject stay `next-step` inputs of
//! whichever turn runs: consumed at the next step boundary; a steer wakes an idle agent, an
//! inject waits for something else to wake it. The driver task runs the scheduler's next task
//! while there is one and answers `wait_idle` callers when nothing runs or waits.
//!
//! Lock order: the state lock, then the scheduler's own; the scheduler's notify hook only
//! wakes the driver (it takes neither lock, SCH-08).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use futures::StreamExt as _;
use futures::channel::{mpsc, oneshot};
use keel_plugin_api::events::agent::{
    DiscardReason, DiscardedMessage, InboxDiscardedData, RunState, StatusData,
};
use keel_plugin_api::services::agent::{
    AgentOverrides, AgentStatus, InboxTarget, InterruptLevel, PendingInputs, RunReport,
};
use keel_plugin_api::services::session::EventRecord;
use serde_json::{Value, json};

use crate::scheduler::{Next, Op, Scheduler, Source, Task, TaskFrame};
use crate::seams::Seams;

/// What `send` did with a message.
#[derive(Debug)]
pub struct Sent {
    /// Its id.
    pub id: String,
    /// The level an interrupt waits at (after the clamp).
    pub level: Option<InterruptLevel>,
    /// An interrupt the full queues dropped for it (it needs its terminal answer).
    pub dropped: Option<Task>,
}

/// What one turn runs.
#[derive(Debug)]
pub enum Job {
    /// A task that has not started: its message opens the turn.
    Task(Task),
    /// Steering woke an idle agent: a turn of queued level with no opening message.
    Steer,
    /// A suspended task goes on from its frame.
    Resume(TaskFrame),
}

/// A message waiting in the inbox.
#[derive(Debug, Clone, PartialEq)]
pub struct InboxMessage {
    /// Stable id (logged in `user/message`).
    pub id: String,
    /// Text.
    pub content: String,
}

impl InboxMessage {
    /// As `user/message` data (and as the JSON `agent/pre-step` sees).
    pub fn to_json(&self) -> Value {
        json!({ "id": self.id, "content": self.content, "source": { "kind": "user" } })
    }

    /// The message as `agent/pre-step` carries it (the same JSON as [`Self::to_json`]).
    pub fn to_step(&self) -> keel_plugin_api::events::agent::StepMessage {
        keel_plugin_api::events::agent::StepMessage {
            id: self.id.clone(),
            content: self.content.clone(),
            source: Some(json!({ "kind": "user" })),
        }
    }
}

/// Where the log stands, for numbering and request headers.
#[derive(Debug, Default)]
pub struct LogState {
    /// The next turn number.
    pub next_turn: u64,
    /// The last logged `request/header` body.
    pub last_header: Option<Value>,
    /// Reason for the next header: `initial`, `resume`.
    pub header_reason: &'static str,
    /// The last logged route (`request/context`).
    pub last_route: Option<(String, String)>,
    /// The number of the last message id handed out (`msg_{session}_{n}`); a resumed agent
    /// starts from the highest one its log holds ([`last_message_number`]).
    pub last_message: u64,
}

/// The highest `n` among the `msg_{session_id}_{n}` ids of the `user/message` events in
/// `events` (0 when there is none). Each process used to count from 1 again, so a resumed
/// session logged `msg_S_1` a second time (issue 11 item 6). Numbering after the highest id
/// the log holds keeps ids unique within the session however many processes wrote it, and
/// keeps them ordered and reproducible (a random suffix would only make a clash unlikely).
/// Ids of another shape (a fork's seed carries its parent's `msg_P_n`) cannot clash with
/// this session's prefix and are ignored.
pub fn last_message_number(session_id: &str, events: &[EventRecord]) -> u64 {
    let prefix = format!("msg_{session_id}_");
    events
        .iter()
        .filter(|e| e.kind == "user/message")
        .filter_map(|e| e.data.get("id").and_then(Value::as_str))
        .filter_map(|id| id.strip_prefix(&prefix)?.parse::<u64>().ok())
        .max()
        .unwrap_or(0)
}

/// Mutable agent state.
#[derive(Default)]
pub struct State {
    next_step_inbox: VecDeque<InboxMessage>,
    steer_pending: bool,
    running: bool,
    closing: bool,
    idle_waiters: Vec<oneshot::Sender<RunReport>>,
    /// The interval's report (LOOP-25: from the first message to idle).
    pub report: RunReport,
    /// Model requests made in this interval (for `max_turns`).
    pub requests: u64,
    /// Model requests the running turn may still make after the one in progress (the
    /// `agent` tool draws a child's budget from it; issue 23 item 19).
    pub steps_left: Option<u64>,
    /// Log bookkeeping.
    pub log: LogState,
}

/// One agent.
pub struct Agent {
    /// Session id.
    pub session_id: String,
    /// Working root.
    pub cwd: String,
    /// Cap on model requests per interval (`--max-turns`).
    pub max_turns: Option<u64>,
    /// A child's own settings (its named profile, issue 16); empty for a root agent.
    pub overrides: AgentOverrides,
    /// The agent is a child (child-only tools are offered to it).
    pub child: bool,
    /// Its delegation depth (0 at top level).
    pub depth: u32,
    /// Its session is kept in memory only.
    pub ephemeral: bool,
    state: Mutex<State>,
    /// The input scheduler (issue 16 item 3).
    sched: Scheduler,
    wake: mpsc::UnboundedSender<()>,
    wake_rx: Mutex<Option<mpsc::UnboundedReceiver<()>>>,
    /// Set by `abort`; the turn ends `aborted{user}` at its next boundary.
    pub aborted: AtomicBool,
    exited: Mutex<Option<oneshot::Receiver<()>>>,
}

impl Agent {
    /// A new, idle agent.
    pub fn new(session_id: String, cwd: String, max_turns: Option<u64>, log: LogState) -> Self {
        let (wake, wake_rx) = mpsc::unbounded();
        // SCH-08: runs under the scheduler's lock, so it only wakes the driver.
        let waker = wake.clone();
        let sched = Scheduler::default().with_hook(Box::new(move |n| {
            tracing::debug!(op = ?n.op, task = n.task, level = ?n.level, depth = n.depth, "scheduler");
            if matches!(n.op, Op::Queue | Op::Interrupt) {
                let _ = waker.unbounded_send(());
            }
        }));
        Agent {
            session_id,
            cwd,
            max_turns,
            overrides: AgentOverrides::default(),
            child: false,
            depth: 0,
            ephemeral: false,
            state: Mutex::new(State {
                log,
                ..State::default()
            }),
            sched,
            wake,
            wake_rx: Mutex::new(Some(wake_rx)),
            aborted: AtomicBool::new(false),
            exited: Mutex::new(None),
        }
    }

    /// The agent as a child with its own settings (issue 16).
    #[must_use]
    pub fn with_overrides(mut self, overrides: AgentOverrides, child: bool) -> Self {
        self.overrides = overrides;
        self.child = child;
        self
    }

    /// Where the agent stands in a delegation tree: its depth, and whether its session (and
    /// so its children's) is kept in memory only.
    #[must_use]
    pub fn in_tree(mut self, depth: u32, ephemeral: bool) -> Self {
        self.depth = depth;
        self.ephemeral = ephemeral;
        self
    }

    /// Locks the state (a poisoned lock is recovered: the state stays consistent per field).
    pub fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues a message (LOOP-02): a followup as queued work, an interrupt at `level` (default
    /// L1) as `source` may raise it, steer and inject for the next step.
    pub fn send(
        &self,
        content: String,
        target: InboxTarget,
        level: Option<InterruptLevel>,
        source: Source,
    ) -> Sent {
        let mut st = self.state();
        st.log.last_message += 1;
        let id = format!("msg_{}_{}", self.session_id, st.log.last_message);
        let mut sent = Sent {
            id: id.clone(),
            level: None,
            dropped: None,
        };
        match target {
            InboxTarget::Followup => self.sched.queue(id, content),
            InboxTarget::Interrupt => {
                let level = level.unwrap_or(InterruptLevel::L1);
                let (level, dropped) = self.sched.interrupt(id, content, level, source);
                sent.level = Some(level);
                sent.dropped = dropped;
            }
            InboxTarget::Steer => {
                st.next_step_inbox.push_back(InboxMessage { id, content });
                st.steer_pending = true;
                drop(st);
                let _ = self.wake.unbounded_send(());
            }
            InboxTarget::Inject => st.next_step_inbox.push_back(InboxMessage { id, content }),
        }
        sent
    }

    /// `abort`: the work in hand — a running turn, or a message already sent that no turn
    /// has taken yet — ends `aborted{user}` at its next boundary. An idle agent has nothing
    /// to abort; the flag is not left set for a later message (issue 23 item 7: the flag used
    /// to be cleared when the next turn started, so an interrupt right after a message was
    /// lost when the turn started after it).
    pub fn request_abort(&self) {
        let st = self.state();
        if st.running || !self.sched.is_empty() || st.steer_pending {
            self.aborted.store(true, Ordering::Release);
        }
    }

    /// Takes every input the scheduler holds, in run order, suspended tasks marked (SUB-02:
    /// the caller decides where they go). The running turn goes on.
    pub fn take_pending(&self) -> PendingInputs {
        let _st = self.state();
        PendingInputs {
            inputs: self.sched.take_all(),
        }
    }

    /// The agent's state, without waiting.
    pub fn status(&self) -> AgentStatus {
        let st = self.state();
        let counts = self.sched.counts();
        AgentStatus {
            session_id: self.session_id.clone(),
            running: st.running,
            pending: self.sched.len() as u64,
            suspended: counts.suspended,
            resumed: counts.resumed,
            last_result: st.report.result.clone(),
            depth: self.depth,
            ephemeral: self.ephemeral,
            steps_left: st.running.then_some(st.steps_left).flatten(),
        }
    }

    /// At a step boundary of the running task (SCH-07: never inside a tool batch): when a
    /// waiting interrupt preempts it, its frame goes on the stack and the preemptor's id comes
    /// back; else the frame does.
    pub fn preempt(&self, frame: TaskFrame) -> Result<String, TaskFrame> {
        if !self.sched.should_preempt(frame.level) {
            return Err(frame);
        }
        let by = self.sched.preempt(frame)?;
        tracing::info!(session = %self.session_id, by = %by, scheduler = ?self.sched.dump(), "task suspended");
        Ok(by)
    }

    /// Takes everything queued for the next step.
    pub fn claim_next_step(&self) -> Vec<InboxMessage> {
        let mut st = self.state();
        st.steer_pending = false;
        st.next_step_inbox.drain(..).collect()
    }

    /// Puts rejected steering back, first in line (LOOP-09: never stranded).
    pub fn park(&self, messages: Vec<InboxMessage>) {
        let mut st = self.state();
        for m in messages.into_iter().rev() {
            st.next_step_inbox.push_front(m);
        }
    }

    /// Whether steering waits for the next step.
    pub fn has_steering(&self) -> bool {
        self.state().steer_pending
    }

    /// Resolves when the agent is idle, with the interval's report.
    pub fn wait_idle(&self) -> oneshot::Receiver<RunReport> {
        let (tx, rx) = oneshot::channel();
        let mut st = self.state();
        let busy = st.running || !self.sched.is_empty() || st.steer_pending;
        if busy {
            st.idle_waiters.push(tx);
        } else {
            let report = std::mem::take(&mut st.report);
            st.requests = 0;
            let _ = tx.send(report);
        }
        rx
    }

    /// Starts the driver task on the kernel's runtime.
    pub fn start(self: &Arc<Self>, seams: Arc<Seams>) -> keel_plugin_api::sdk::Result<()> {
        let rx = self
            .wake_rx
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let Some(rx) = rx else {
            return Ok(());
        };
        let (done_tx, done_rx) = oneshot::channel();
        *self
            .exited
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(done_rx);
        let agent = Arc::clone(self);
        seams.ctx.clone().spawn(async move {
            agent.drive(&seams, rx).await;
            let _ = done_tx.send(());
        })
    }

    /// Stops the driver and waits for it to exit (LOOP-07).
    pub async fn stop(&self) {
        self.state().closing = true;
        let _ = self.wake.unbounded_send(());
        let rx = self
            .exited
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(rx) = rx {
            let _ = rx.await;
        }
    }

    async fn drive(self: &Arc<Self>, seams: &Seams, mut wake: mpsc::UnboundedReceiver<()>) {
        loop {
            let job = {
                let mut st = self.state();
                if st.closing {
                    break;
                }
                let job = match self.sched.next() {
                    Some(Next::Start(task)) => Some(Job::Task(task)),
                    Some(Next::Resume(frame)) => Some(Job::Resume(frame)),
                    None if st.steer_pending => Some(Job::Steer),
                    None => None,
                };
                // Busy from the moment the task leaves the scheduler, under the same lock, so a
                // `wait_idle` in between never sees an idle agent with work in hand.
                if job.is_some() && !st.running {
                    st.running = true;
                    drop(st);
                    emit_status(seams, &self.session_id, RunState::Running);
                }
                job
            };
            let Some(first) = job else {
                if wake.next().await.is_none() {
                    break;
                }
                continue;
            };
            let ran = crate::turn::run(self, seams, first).await;
            // An abort is spent by the turn it ended (or that ended on its own meanwhile).
            self.aborted.store(false, Ordering::Release);
            if let Err(e) = ran {
                // The session itself refused a write: nothing more can be logged for it.
                tracing::error!(session = %self.session_id, code = %e.code, "agent stopped: {}", e.message);
                let mut st = self.state();
                st.report.turn_end_reason = json!({
                    "kind": "error",
                    "error": { "code": e.code.to_string(), "message": e.message.to_string() }
                });
                st.next_step_inbox.clear();
                st.steer_pending = false;
                let dropped = self.sched.take_all();
                drop(st);
                let messages: Vec<DiscardedMessage> = dropped
                    .iter()
                    .map(|p| DiscardedMessage {
                        id: p.id.clone(),
                        content: p.content.clone(),
                        level: p.level,
                        suspended: Some(p.suspended),
                        source: None,
                    })
                    .collect();
                discarded(seams, &self.session_id, messages, DiscardReason::Stopped);
            }
            let idle = {
                let st = self.state();
                self.sched.is_empty() && !st.steer_pending
            };
            if idle {
                self.set_running(seams, false);
            }
        }
        self.set_running(seams, false);
    }

    fn set_running(&self, seams: &Seams, running: bool) {
        let waiters = {
            let mut st = self.state();
            if st.running == running {
                return;
            }
            st.running = running;
            if running {
                Vec::new()
            } else {
                idle_answers(&mut st)
            }
        };
        let status = if running {
            RunState::Running
        } else {
            RunState::Idle
        };
        emit_status(seams, &self.session_id, status);
        for (w, report) in waiters {
            let _ = w.send(report);
        }
    }
}

/// The agent just went idle: the interval's report for everyone waiting. With nobody waiting
/// yet (a turn that ended before its caller got to `wait_idle`), the report stays for the next
/// `wait_idle`, which answers at once with it — taking it here would hand that caller an empty
/// report (a turn that failed fast read as "did not complete").
fn idle_answers(st: &mut State) -> Vec<(oneshot::Sender<RunReport>, RunReport)> {
    if st.idle_waiters.is_empty() {
        return Vec::new();
    }
    let report = std::mem::take(&mut st.report);
    st.requests = 0;
    std::mem::take(&mut st.idle_waiters)
        .into_iter()
        .map(|w| (w, report.clone()))
        .collect()
}

/// `agent/inbox/discarded {messages, reason}`: the terminal answer of inputs that will never
/// run (`overflow`: dropped by full interrupt queues; `stopped`: the session refused writes).
pub fn discarded(
    seams: &Seams,
    session_id: &str,
    messages: Vec<DiscardedMessage>,
    reason: DiscardReason,
) {
    if messages.is_empty() {
        return;
    }
    let data = InboxDiscardedData {
        messages,
        reason: Some(reason),
    };
    if let Ok(p) = Seams::point(session_id, 0, 0, &data) {
        let _ = seams.ctx.emit(crate::DISPATCH.inbox_discarded, &p);
    }
}

fn emit_status(seams: &Seams, session_id: &str, status: RunState) {
    if let Ok(p) = Seams::point(session_id, 0, 0, &StatusData { status }) {
        let _ = seams.ctx.emit(crate::DISPATCH.status, &p);
    }
}

#[cfg(test)]
#[path = "agent_tests.rs"]
mod tests;
