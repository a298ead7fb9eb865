//! What reaches the chat loop, on one channel: keys (or whole lines in plain mode) from the
//! input thread, and from the row's listeners the model's deltas (`agent/delta`), the session
//! log's events (`session/event`) and approval questions (`approval/answer`). A [`Tap`] holds
//! the sending end while a chat runs; with no chat running, the listeners return at once (the
//! row costs a lock and a check per event in `keel run`).

use std::sync::{Arc, Mutex, PoisonError};

use futures::channel::{mpsc, oneshot};
use keel_plugin_api::events::agent::DeltaData;
use keel_plugin_api::events::approval::ApprovalQuestion;
use keel_plugin_api::services::approval::ApprovalOutcome;

use crate::editor::Key;

/// One thing for the chat loop.
#[derive(Debug)]
pub enum Ui {
    /// A key (terminal mode).
    Key(Key),
    /// The terminal's new size.
    Resize(u16, u16),
    /// A whole line from stdin (plain mode); `None` at end of input.
    Line(Option<String>),
    /// A piece of a step's model stream.
    Delta {
        /// Session.
        session: String,
        /// Step within the turn.
        step: u64,
        /// The piece.
        data: DeltaData,
    },
    /// A session event was committed.
    Logged {
        /// Session.
        session: String,
        /// Its type (`tool/call`).
        kind: String,
        /// The whole record.
        record: serde_json::Value,
    },
    /// A child agent started (`subagent/started`) for a tool call of `parent_session`.
    Child {
        /// The delegating session.
        parent_session: String,
        /// The parent's `agent` tool call.
        parent_call_id: String,
        /// The child's session.
        child_session: String,
    },
    /// An approval question; the answer goes back on `reply`.
    Ask {
        /// The question.
        question: ApprovalQuestion,
        /// Where the outcome goes.
        reply: oneshot::Sender<ApprovalOutcome>,
    },
}

/// The sending end of the running chat's channel, shared with the listeners.
#[derive(Clone, Default)]
pub struct Tap(Arc<Mutex<Option<mpsc::UnboundedSender<Ui>>>>);

impl Tap {
    /// Opens the channel for a chat; a previous one is closed.
    pub fn open(&self) -> mpsc::UnboundedReceiver<Ui> {
        let (tx, rx) = mpsc::unbounded();
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(tx);
        rx
    }

    /// Closes it (the chat ended).
    pub fn close(&self) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// The sender while a chat runs.
    pub fn sender(&self) -> Option<mpsc::UnboundedSender<Ui>> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Sends `ui` to the running chat; `false` when none runs.
    pub fn send(&self, ui: Ui) -> bool {
        self.sender()
            .is_some_and(|tx| tx.unbounded_send(ui).is_ok())
    }
}
