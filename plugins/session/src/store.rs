//! The storage seam as plain Rust: [`Store`] (what the core needs from `keel.session-store`),
//! [`Timer`] (spawn + sleep, so the writer runs on whatever executor hosts it), and
//! [`MemStore`], an in-memory store with failure injection for tests and benchmarks.
//!
//! The plugin adapter implements [`Store`] over the backend's `SessionStore` client; tests use
//! [`MemStore`] (disk-full simulation: `fail_appends(n)`).

use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use keel_plugin_api::services::session::{EventRecord, SessionHeader, StoreError, TornTail};
use serde_json::{Value, json};

use crate::error::{Result, SessionError};

/// A boxed `Send` future.
pub type BoxFut<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// One durable batch (`SessionStore::append`).
#[derive(Debug, Clone)]
pub struct StoreAppend {
    /// Session id.
    pub session_id: String,
    /// Required on the first append (materialises the session), refused later.
    pub header: Option<SessionHeader>,
    /// Contiguous events starting at `expected_next_seq`.
    pub events: Vec<Arc<EventRecord>>,
    /// Must equal the stored next seq.
    pub expected_next_seq: u64,
}

/// What `load` returns.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    /// The header.
    pub header: SessionHeader,
    /// Every complete event.
    pub events: Vec<EventRecord>,
    /// The store's torn-tail report (cut with `repair`, else only left out), else `None`.
    pub truncated: Option<TornTail>,
}

/// What `list` returns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Listing {
    /// Every readable session: header fields plus `events` and `updated_at`.
    pub sessions: Vec<Value>,
    /// What the store could not read, as it reports it: `{session_id, path, code, message}`.
    pub unreadable: Vec<Value>,
}

/// The backend contract the core uses (mirrors `SessionStore`).
pub trait Store: Send + Sync + 'static {
    /// Durable on success; on failure nothing of the batch is stored. Returns the next seq.
    fn append(&self, req: StoreAppend) -> BoxFut<Result<u64>>;
    /// Reads a session; `repair` cuts a torn tail physically.
    fn load(&self, session_id: &str, repair: bool) -> BoxFut<Result<Loaded>>;
    /// Every stored session (header fields plus `events` and `updated_at`), and what could
    /// not be read.
    fn list(&self) -> BoxFut<Result<Listing>>;
    /// Takes the one-live-writer lock.
    fn claim(&self, session_id: &str) -> BoxFut<Result<()>>;
    /// Releases it.
    fn release(&self, session_id: &str) -> BoxFut<Result<()>>;
}

/// Spawning and sleeping on the host's executor (the kernel's, in the plugin).
pub trait Timer: Send + Sync + 'static {
    /// Runs `task` in the background.
    fn spawn(&self, task: BoxFut<()>);
    /// Completes after `d`.
    fn sleep(&self, d: Duration) -> BoxFut<()>;
}

#[derive(Debug, Default)]
struct MemState {
    sessions: BTreeMap<String, (SessionHeader, Vec<EventRecord>)>,
    claimed: HashSet<String>,
    fail_appends: u32,
    appends: u64,
}

/// An in-memory [`Store`] for tests and benchmarks.
#[derive(Debug, Clone, Default)]
pub struct MemStore {
    state: Arc<Mutex<MemState>>,
}

impl MemStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, MemState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The next `n` appends fail with `SESSION_IO` (disk full) and store nothing.
    pub fn fail_appends(&self, n: u32) {
        self.lock().fail_appends = n;
    }

    /// Number of successful append calls (batches).
    pub fn append_calls(&self) -> u64 {
        self.lock().appends
    }

    /// The stored events of a session (empty when absent).
    pub fn stored(&self, id: &str) -> Vec<EventRecord> {
        self.lock()
            .sessions
            .get(id)
            .map(|(_, e)| e.clone())
            .unwrap_or_default()
    }

    /// Stores a session directly (fixtures: crashed logs, foreign versions).
    pub fn put(&self, header: SessionHeader, events: Vec<EventRecord>) {
        self.lock()
            .sessions
            .insert(header.id.clone(), (header, events));
    }

    /// Drops every claim (simulates the writer process dying).
    pub fn crash(&self) {
        self.lock().claimed.clear();
    }

    fn do_append(&self, req: StoreAppend) -> Result<u64> {
        let mut st = self.lock();
        if st.fail_appends > 0 {
            st.fail_appends -= 1;
            return Err(SessionError::new(
                StoreError::Io,
                "simulated: no space left on device",
            ));
        }
        let exists = st.sessions.contains_key(&req.session_id);
        match (&req.header, exists) {
            (Some(_), true) => {
                return Err(SessionError::new(
                    StoreError::Exists,
                    format!("session '{}' already exists", req.session_id),
                ));
            }
            (None, false) => return Err(SessionError::not_found(&req.session_id)),
            _ => {}
        }
        let stored_next = st
            .sessions
            .get(&req.session_id)
            .map_or(0, |(_, e)| e.len() as u64);
        if req.expected_next_seq != stored_next
            || req
                .events
                .iter()
                .enumerate()
                .any(|(i, e)| e.seq != stored_next + i as u64)
        {
            return Err(SessionError::new(
                StoreError::Seq,
                format!("batch does not continue the stored log at {stored_next}"),
            ));
        }
        let id = req.session_id.clone();
        let entry = match req.header {
            Some(h) => st.sessions.entry(id).or_insert((h, Vec::new())),
            None => st
                .sessions
                .get_mut(&id)
                .ok_or_else(|| SessionError::not_found(&id))?,
        };
        entry.1.extend(req.events.iter().map(|e| (**e).clone()));
        let next = entry.1.len() as u64;
        st.appends += 1;
        Ok(next)
    }
}

impl Store for MemStore {
    fn append(&self, req: StoreAppend) -> BoxFut<Result<u64>> {
        let r = self.do_append(req);
        Box::pin(async move { r })
    }

    fn load(&self, session_id: &str, _repair: bool) -> BoxFut<Result<Loaded>> {
        let r = self
            .lock()
            .sessions
            .get(session_id)
            .map(|(h, e)| Loaded {
                header: h.clone(),
                events: e.clone(),
                truncated: None,
            })
            .ok_or_else(|| SessionError::not_found(session_id));
        Box::pin(async move { r })
    }

    fn list(&self) -> BoxFut<Result<Listing>> {
        let sessions: Vec<Value> = self
            .lock()
            .sessions
            .values()
            .map(|(h, e)| {
                let mut v = serde_json::to_value(h).unwrap_or_else(|_| json!({}));
                v["events"] = json!(e.len());
                v["updated_at"] = json!(e.last().map_or(h.created_at, |e| e.time));
                v
            })
            .collect();
        Box::pin(async move {
            Ok(Listing {
                sessions,
                unreadable: Vec::new(),
            })
        })
    }

    fn claim(&self, session_id: &str) -> BoxFut<Result<()>> {
        let fresh = self.lock().claimed.insert(session_id.to_owned());
        let id = session_id.to_owned();
        Box::pin(async move {
            if fresh {
                Ok(())
            } else {
                Err(SessionError::new(
                    StoreError::Locked,
                    format!("session '{id}' has a live writer"),
                ))
            }
        })
    }

    fn release(&self, session_id: &str) -> BoxFut<Result<()>> {
        self.lock().claimed.remove(session_id);
        Box::pin(async { Ok(()) })
    }
}
