//! The turn's side of the input scheduler (issue 16, SCH-02/06/07): the frame a turn runs
//! under — fresh for a task's first turn, restored for a resumed one — and the suspension at a
//! step boundary when a waiting interrupt preempts it.
//!
//! Kept out of `turn.rs` because it is the one place a turn talks to the scheduler: the
//! frame is built here, carried by the turn, and handed to the stack here unchanged apart from
//! this turn's own progress (its turn number, steps and preempt count).

use serde_json::{Value, json};

use super::Turn;
use crate::agent::{InboxMessage, Job};
use crate::scheduler::TaskFrame;

/// The frame turn `turn` runs under, its opening messages, and its `turn/start` data
/// (`resumes` names the turn a resumed task was suspended from).
pub(super) fn opening(job: Job, turn: u64) -> (TaskFrame, Vec<InboxMessage>, Value) {
    let fresh = |task: String, content: String, level| TaskFrame {
        task,
        content,
        level,
        turn,
        steps: 0,
        requests: 0,
        preempts: 0,
    };
    match job {
        Job::Task(task) => {
            let first = vec![InboxMessage {
                id: task.id.clone(),
                content: task.content.clone(),
            }];
            let frame = fresh(task.id, task.content, task.level);
            (frame, first, json!({ "turn": turn }))
        }
        // Steering woke an idle agent: queued level, no opening message.
        Job::Steer => (
            fresh(format!("turn-{turn}"), String::new(), None),
            Vec::new(),
            json!({ "turn": turn }),
        ),
        Job::Resume(frame) => {
            let start = json!({ "turn": turn, "resumes": frame.turn });
            (frame, Vec::new(), start)
        }
    }
}

impl Turn<'_> {
    /// At a step boundary (the step and its tool batch closed, SCH-07): suspends the task when
    /// a waiting interrupt of a strictly higher level preempts it (SCH-04). Its frame goes on
    /// the stack and the preemptor's id comes back. Not while a retry of the failed step is
    /// pending (its attempt count and compaction trigger are not part of the frame).
    pub(super) fn suspend_for_interrupt(&mut self) -> Option<String> {
        if self.attempt > 0 || self.overflow.is_some() {
            return None;
        }
        let mut frame = self.task.clone();
        frame.turn = self.turn;
        frame.steps += self.step;
        frame.preempts += 1;
        self.agent.preempt(frame).ok()
    }
}
