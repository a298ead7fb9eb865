//! What the ACP server remembers between messages: the connection (so the row's listeners can
//! send `session/update`s), and per editor session its cwd, its one prompt slot (SURF-03), the
//! steps whose text already went out as deltas, and the "always" answers the person gave.
//!
//! The row's listeners run for every session in the process (children, other drivers' runs);
//! they act only on sessions an ACP client opened here, and do nothing at all while no ACP
//! connection runs ([`Shared::connection`] is `None`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{SessionId, SessionNotification, SessionUpdate};
use futures::channel::oneshot;

/// State shared by the connection's handlers and the row's listeners.
#[derive(Default)]
pub struct Shared {
    connection: Mutex<Option<ConnectionTo<Client>>>,
    sessions: Mutex<BTreeMap<String, Arc<Tracked>>>,
    client_fs: Mutex<ClientFs>,
}

/// What the client said it can do with files (`initialize`'s `clientCapabilities.fs`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientFs {
    /// `fs/read_text_file`.
    pub read: bool,
    /// `fs/write_text_file`.
    pub write: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Shared {
    /// The connection, while one runs.
    pub fn connection(&self) -> Option<ConnectionTo<Client>> {
        lock(&self.connection).clone()
    }

    /// Sets (or clears) the connection.
    pub fn set_connection(&self, c: Option<ConnectionTo<Client>>) {
        *lock(&self.connection) = c;
    }

    /// The client's fs capabilities.
    pub fn client_fs(&self) -> ClientFs {
        *lock(&self.client_fs)
    }

    /// Records the client's fs capabilities.
    pub fn set_client_fs(&self, fs: ClientFs) {
        *lock(&self.client_fs) = fs;
    }

    /// The tracked session `id`.
    pub fn session(&self, id: &str) -> Option<Arc<Tracked>> {
        if lock(&self.connection).is_none() {
            return None;
        }
        lock(&self.sessions).get(id).cloned()
    }

    /// Starts tracking a session (a second call for the same id keeps the first).
    pub fn track(&self, id: &str, cwd: PathBuf) -> Arc<Tracked> {
        Arc::clone(
            lock(&self.sessions)
                .entry(id.to_owned())
                .or_insert_with(|| {
                    Arc::new(Tracked {
                        id: id.to_owned(),
                        cwd,
                        state: Mutex::default(),
                    })
                }),
        )
    }

    /// Every tracked session id, and forgets them (the connection ended).
    pub fn take_all(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.sessions))
            .into_keys()
            .collect()
    }

    /// Sends `update` for session `id` to the client; `false` when no connection runs or the
    /// connection refused it.
    pub fn notify(&self, id: &str, update: SessionUpdate) -> bool {
        match self.connection() {
            Some(c) => c
                .send_notification(SessionNotification::new(SessionId::new(id), update))
                .is_ok(),
            None => false,
        }
    }
}

/// One editor session.
pub struct Tracked {
    /// Session id.
    pub id: String,
    /// Working directory the session was created or loaded with.
    pub cwd: PathBuf,
    state: Mutex<TrackedState>,
}

/// An "always" answer for a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Always {
    /// Allow every later call of the tool in this session without asking.
    Allow,
    /// Reject every later call of the tool in this session without asking.
    Reject,
}

#[derive(Default)]
struct TrackedState {
    prompting: bool,
    streamed: BTreeSet<(u64, u64)>,
    always: BTreeMap<String, Always>,
    turn_end: Option<oneshot::Sender<()>>,
}

impl Tracked {
    /// Takes the prompt slot; `false` when a prompt is in flight (SURF-03). `turn_end` is told
    /// when the log's next `turn/end` went out to the client.
    pub fn begin_prompt(&self, turn_end: oneshot::Sender<()>) -> bool {
        let mut s = lock(&self.state);
        if s.prompting {
            return false;
        }
        s.prompting = true;
        s.turn_end = Some(turn_end);
        true
    }

    /// Frees the prompt slot.
    pub fn end_prompt(&self) {
        let mut s = lock(&self.state);
        s.prompting = false;
        s.turn_end = None;
    }

    /// Whether a prompt is in flight.
    pub fn prompting(&self) -> bool {
        lock(&self.state).prompting
    }

    /// Marks step `(turn, step)` as streamed; `true` the first time.
    pub fn mark_streamed(&self, turn: u64, step: u64) -> bool {
        lock(&self.state).streamed.insert((turn, step))
    }

    /// Whether step `(turn, step)` was streamed.
    pub fn streamed(&self, turn: u64, step: u64) -> bool {
        lock(&self.state).streamed.contains(&(turn, step))
    }

    /// A `turn/end` went out.
    pub fn turn_ended(&self) {
        if let Some(tx) = lock(&self.state).turn_end.take() {
            let _ = tx.send(());
        }
    }

    /// The "always" answer for `tool`, if one was given.
    pub fn always(&self, tool: &str) -> Option<Always> {
        lock(&self.state).always.get(tool).copied()
    }

    /// Remembers an "always" answer for `tool`.
    pub fn set_always(&self, tool: &str, always: Always) {
        lock(&self.state).always.insert(tool.to_owned(), always);
    }
}
