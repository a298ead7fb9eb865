//! [`SessionManager`]: the `keel.session` operations over a [`Store`], in plain Rust.
//!
//! Owns the set of *live* sessions of this process (created or opened here: one
//! [`SessionLog`] + one [`Writer`] each, the store's writer lock held) and the operations on
//! stored ones: `load` (commits recovery closers, SES-06), `inspect` (shows them, commits
//! nothing), `fork` (SES-07), `list`. A live session is never repaired: `load` of a live id
//! answers its committed events when it is balanced and refuses (`SESSION_LOCKED`: a live
//! writer holds it) while a turn is open — in this process or, detected through the store's
//! lock, in another one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use keel_plugin_api::services::session::TornTail;
use keel_plugin_api::services::session::{
    EventRecord, FORMAT_VERSION, HeaderKind, SessionHeader, StoreError,
};

use crate::error::{Result, SessionError};
use crate::fork::{Boundary, ChildLineage, plan_fork};
use crate::log::{SessionLog, now_ms};
use crate::recovery::closers;
use crate::store::{Loaded, Store, StoreAppend, Timer};
use crate::validate::{EventTypes, NewEvent, check_header, check_id, check_readable};
use crate::writer::{DEFAULT_DELAY_MS, DurableHook, Writer};

mod read;

/// The plugin's row config.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// write-behind batching window in ms (B5; default 200)
    #[serde(default = "default_delay")]
    #[schemars(range(min = 0, max = 60000))]
    pub write_batch_max_delay_ms: u64,
    /// plugin event types every reader must understand (besides the core set)
    #[serde(default)]
    pub event_types: Vec<String>,
}

fn default_delay() -> u64 {
    DEFAULT_DELAY_MS
}

impl Default for Config {
    fn default() -> Self {
        Config {
            write_batch_max_delay_ms: DEFAULT_DELAY_MS,
            event_types: Vec::new(),
        }
    }
}

/// Arguments of `create` (the contract's request).
pub type CreateArgs = keel_plugin_api::services::session::CreateSession;

/// What `open` did.
#[derive(Debug, Clone)]
pub struct Opened {
    /// The header.
    pub header: SessionHeader,
    /// The seq the next append gets.
    pub next_seq: u64,
    /// Recovery closers committed on open (empty for a balanced log).
    pub recovered: Vec<Arc<EventRecord>>,
}

/// What `load` / `inspect` return.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The header.
    pub header: SessionHeader,
    /// Durable (or, for a live session, committed) events; for `load`, including the closers.
    pub events: Vec<EventRecord>,
    /// Recovery closers: committed by `load`, only shown by `inspect`.
    pub recovered: Vec<EventRecord>,
    /// Whether `recovered` was committed.
    pub committed: bool,
    /// The store's torn-tail report, if any.
    pub truncated: Option<TornTail>,
}

struct Live {
    log: Mutex<SessionLog>,
    writer: Writer,
    /// Nothing is stored and nothing was claimed.
    ephemeral: bool,
    /// Serialises commit + hand-off + observer feed, so both see seq order.
    feed: Mutex<()>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The live sessions of this process and the operations on stored ones.
pub struct SessionManager {
    store: Arc<dyn Store>,
    timer: Arc<dyn Timer>,
    delay: Duration,
    types: Arc<EventTypes>,
    live: Mutex<HashMap<String, Arc<Live>>>,
    counter: AtomicU64,
    durable_hook: std::sync::OnceLock<DurableHook>,
}

impl std::fmt::Debug for SessionManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionManager")
            .field("live", &lock(&self.live).len())
            .finish_non_exhaustive()
    }
}

fn arcs(records: Vec<EventRecord>) -> Vec<Arc<EventRecord>> {
    records.into_iter().map(Arc::new).collect()
}

impl SessionManager {
    /// A manager over `store`, running write-behind timers on `timer`.
    pub fn new(store: Arc<dyn Store>, timer: Arc<dyn Timer>, config: &Config) -> Self {
        SessionManager {
            store,
            timer,
            delay: Duration::from_millis(config.write_batch_max_delay_ms),
            types: Arc::new(EventTypes::with_extra(config.event_types.iter().cloned())),
            live: Mutex::new(HashMap::new()),
            counter: AtomicU64::new(0),
            durable_hook: std::sync::OnceLock::new(),
        }
    }

    /// Sets the hook told `(session_id, last durable seq)` after every durable write of this
    /// manager: write-behind batches and flushes of live sessions, and committed recovery
    /// closers (once; later calls are ignored).
    pub fn set_durable_hook(&self, hook: DurableHook) {
        let _ = self.durable_hook.set(hook);
    }

    /// Tells the hook that `id` is durable up to `seq`.
    fn durable(&self, id: &str, seq: u64) {
        if let Some(hook) = self.durable_hook.get() {
            hook(id, seq);
        }
    }

    /// A writer wired to the durable hook.
    fn hooked(&self, writer: Writer) -> Writer {
        if let Some(hook) = self.durable_hook.get() {
            writer.set_durable_hook(Arc::clone(hook));
        }
        writer
    }

    fn live(&self, id: &str) -> Option<Arc<Live>> {
        lock(&self.live).get(id).cloned()
    }

    fn live_or_err(&self, id: &str) -> Result<Arc<Live>> {
        self.live(id).ok_or_else(|| {
            SessionError::new(
                StoreError::NotFound,
                format!("session '{id}' is not live in this process (create or open it first)"),
            )
        })
    }

    /// Ids of the live sessions.
    pub fn live_ids(&self) -> Vec<String> {
        lock(&self.live).keys().cloned().collect()
    }

    fn new_id(&self) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        format!("{}-{:x}-{n}", now_ms(), std::process::id())
    }

    /// Whether `id` exists in this process or in the store. When the store cannot tell — the
    /// session's record or the store itself is unreadable (`SESSION_UNSUPPORTED`, e.g. a
    /// foreign `sessions.sqlite3`; `SESSION_CORRUPT`; `SESSION_IO`) — that error is the
    /// answer: it names the file, where a guessed `SESSION_EXISTS` would mislead.
    async fn exists(&self, id: &str) -> Result<bool> {
        if self.live(id).is_some() {
            return Ok(true);
        }
        match self.store.load(id, false).await {
            Ok(_) => Ok(true),
            Err(e) if e.is(StoreError::NotFound) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn make_live(&self, log: SessionLog, writer: Writer) -> Result<()> {
        self.make_live_as(log, writer, false)
    }

    fn make_live_as(&self, log: SessionLog, writer: Writer, ephemeral: bool) -> Result<()> {
        let id = log.header().id.clone();
        let mut live = lock(&self.live);
        if live.contains_key(&id) {
            return Err(SessionError::new(
                StoreError::Locked,
                format!("session '{id}' is already live in this process"),
            ));
        }
        live.insert(
            id,
            Arc::new(Live {
                log: Mutex::new(log),
                writer,
                ephemeral,
                feed: Mutex::new(()),
            }),
        );
        Ok(())
    }

    /// Creates a live session. Nothing is written until the first flush.
    ///
    /// # Errors
    /// `SESSION_INVALID` (id, cwd), `SESSION_EXISTS`, `SESSION_LOCKED`, store errors.
    pub async fn create(&self, args: CreateArgs) -> Result<SessionHeader> {
        let id = args.id.unwrap_or_else(|| self.new_id());
        check_id(&id)?;
        if !args.cwd.starts_with('/') {
            return Err(SessionError::invalid(format!(
                "cwd {:?} must be an absolute path",
                args.cwd
            )));
        }
        if self.exists(&id).await? {
            return Err(SessionError::new(
                StoreError::Exists,
                format!("session '{id}' already exists"),
            ));
        }
        if !args.ephemeral {
            self.store.claim(&id).await?;
        }
        let header = SessionHeader {
            kind: HeaderKind::Session,
            version: FORMAT_VERSION,
            id: id.clone(),
            created_at: now_ms(),
            cwd: args.cwd,
            parent_session: args.parent_session,
            seed_length: None,
            parent_call_id: args.parent_call_id,
            origin: args.origin,
            delegation_depth: args.delegation_depth,
        };
        let ephemeral = args.ephemeral;
        let made = SessionLog::new(header.clone(), self.types.clone()).and_then(|log| {
            let writer = if ephemeral {
                // Nothing is stored: "durable" is as far as it goes, the in-memory store.
                self.hooked(Writer::new(
                    &id,
                    Some(header.clone()),
                    0,
                    Arc::new(crate::store::MemStore::default()),
                    self.timer.clone(),
                    self.delay,
                ))
            } else {
                self.writer(&id, Some(header.clone()), 0)
            };
            self.make_live_as(log, writer, ephemeral)
        });
        if let Err(e) = made {
            if !ephemeral {
                let _ = self.store.release(&id).await;
            }
            return Err(e);
        }
        Ok(header)
    }

    fn writer(&self, id: &str, header: Option<SessionHeader>, durable_next: u64) -> Writer {
        self.hooked(Writer::new(
            id,
            header,
            durable_next,
            self.store.clone(),
            self.timer.clone(),
            self.delay,
        ))
    }

    async fn load_checked(&self, id: &str, repair: bool) -> Result<Loaded> {
        check_id(id)?;
        let loaded = self.store.load(id, repair).await?;
        if let (true, Some(torn)) = (repair, &loaded.truncated) {
            tracing::warn!(
                session = id,
                "cut the torn tail of the session log: {}",
                serde_json::json!(torn)
            );
        }
        check_header(&loaded.header)?;
        check_readable(&loaded.events, &self.types)?;
        Ok(loaded)
    }

    /// Claims a stored session, repairs a crashed tail (committing the closers) and makes it
    /// live.
    ///
    /// # Errors
    /// `SESSION_LOCKED`, `SESSION_NOT_FOUND`, `SESSION_UNSUPPORTED`, `SESSION_CORRUPT`, store
    /// errors; the claim is released on failure.
    pub async fn open(&self, id: &str) -> Result<Opened> {
        check_id(id)?;
        if self.live(id).is_some() {
            return Err(SessionError::new(
                StoreError::Locked,
                format!("session '{id}' is already live in this process"),
            ));
        }
        self.store.claim(id).await?;
        match self.open_claimed(id).await {
            Ok(o) => Ok(o),
            Err(e) => {
                let _ = self.store.release(id).await;
                Err(e)
            }
        }
    }

    async fn open_claimed(&self, id: &str) -> Result<Opened> {
        let loaded = self.load_checked(id, true).await?;
        let closing = closers(&loaded.events);
        let mut log = SessionLog::replay(loaded.header, loaded.events, self.types.clone())?;
        let recovered = log.commit_records(closing)?.to_vec();
        if let (Some(first), Some(last)) = (recovered.first(), recovered.last()) {
            self.store
                .append(StoreAppend {
                    session_id: id.to_owned(),
                    header: None,
                    events: recovered.clone(),
                    expected_next_seq: first.seq,
                })
                .await?;
            self.durable(id, last.seq);
        }
        let header = log.header().clone();
        let next_seq = log.len();
        let writer = self.writer(id, None, next_seq);
        self.make_live(log, writer)?;
        Ok(Opened {
            header,
            next_seq,
            recovered,
        })
    }

    /// Appends a batch to a live session (no I/O): validated, seqs assigned, committed, queued
    /// for write-behind, then `observe` sees the committed events (in seq order across
    /// concurrent appenders). An observer cannot revert the append.
    ///
    /// # Errors
    /// `SESSION_NOT_FOUND` (not live), `SESSION_INVALID` (nothing committed).
    pub fn append(
        &self,
        id: &str,
        batch: Vec<NewEvent>,
        observe: impl FnOnce(&[Arc<EventRecord>]),
    ) -> Result<Vec<u64>> {
        let live = self.live_or_err(id)?;
        let _feed = lock(&live.feed);
        let committed = lock(&live.log).append(batch)?.to_vec();
        live.writer.push(&committed);
        observe(&committed);
        Ok(committed.iter().map(|e| e.seq).collect())
    }

    /// Drains a live session's writer (the work behind `session/flush`). Returns the last
    /// durable seq.
    ///
    /// # Errors
    /// `SESSION_NOT_FOUND` (not live); the store's error (events stay pending).
    pub async fn flush(&self, id: &str) -> Result<Option<u64>> {
        let live = self.live_or_err(id)?;
        live.writer.flush().await
    }

    /// The last durable seq of a live session.
    ///
    /// # Errors
    /// `SESSION_NOT_FOUND` (not live).
    pub fn durable_seq(&self, id: &str) -> Result<Option<u64>> {
        Ok(self.live_or_err(id)?.writer.durable_seq())
    }

    /// The writer's last failure (`None` when the last write succeeded).
    ///
    /// # Errors
    /// `SESSION_NOT_FOUND` (not live).
    pub fn write_error(&self, id: &str) -> Result<Option<SessionError>> {
        Ok(self.live_or_err(id)?.writer.last_error())
    }

    /// Drains and releases a live session; it stops being live.
    ///
    /// # Errors
    /// `SESSION_NOT_FOUND`; the store's error (the session stays live, nothing lost).
    pub async fn close(&self, id: &str) -> Result<SessionHeader> {
        let live = self.live_or_err(id)?;
        live.writer.flush().await?;
        let header = lock(&live.log).header().clone();
        lock(&self.live).remove(id);
        if !live.ephemeral {
            self.store.release(id).await?;
        }
        Ok(header)
    }

    /// Closes every live session (disposal drains, B5). Returns the closed headers; failures
    /// are logged and the session stays live.
    pub async fn close_all(&self) -> Vec<SessionHeader> {
        let mut closed = Vec::new();
        for id in self.live_ids() {
            match self.close(&id).await {
                Ok(h) => closed.push(h),
                Err(e) => tracing::error!(session = %id, "cannot drain session on disposal: {e}"),
            }
        }
        closed
    }

    /// Events of a live session (a copy).
    fn live_snapshot(live: &Live) -> (SessionHeader, Vec<EventRecord>, Option<u64>) {
        let log = lock(&live.log);
        (
            log.header().clone(),
            log.events().iter().map(|e| (**e).clone()).collect(),
            log.invariants().open_turn(),
        )
    }

    /// Forks `id` at `boundary` into a new durable session (SES-07). A live source is read in
    /// memory; a stored one is loaded (committing its recovery first).
    ///
    /// # Errors
    /// `SESSION_EXISTS` (child id, checked before the boundary), `SESSION_INVALID`,
    /// `SESSION_OPEN_TURN` (boundary inside an open turn), `SESSION_LOCKED` (a stored source
    /// live in another process with a turn open), load and store errors.
    pub async fn fork(
        &self,
        id: &str,
        boundary: Boundary,
        child_id: Option<String>,
        lineage: ChildLineage,
    ) -> Result<SessionHeader> {
        check_id(id)?;
        let child = child_id.unwrap_or_else(|| self.new_id());
        check_id(&child)?;
        let child_exists = self.exists(&child).await?;
        let (header, events) = match self.live(id) {
            Some(live) => {
                let (h, e, _) = Self::live_snapshot(&live);
                (h, e)
            }
            None if child_exists => {
                // Refuse the duplicate before touching (or repairing) the source.
                let (h, e) = (self.inspect(id).await?.header, Vec::new());
                (h, e)
            }
            None => {
                let s = self.load(id).await?;
                (s.header, s.events)
            }
        };
        let mut plan = plan_fork(&header, &events, boundary, &child, child_exists, now_ms())?;
        lineage.apply(&mut plan.header);
        // The child must be a valid session of its own before it is stored.
        SessionLog::replay(plan.header.clone(), plan.events.clone(), self.types.clone())?;
        self.store
            .append(StoreAppend {
                session_id: child,
                header: Some(plan.header.clone()),
                events: arcs(plan.events),
                expected_next_seq: 0,
            })
            .await?;
        Ok(plan.header)
    }

    /// Runs `f` on a live session's log (read-only access for embedders and benchmarks).
    ///
    /// # Errors
    /// `SESSION_NOT_FOUND` (not live).
    pub fn with_log<R>(&self, id: &str, f: impl FnOnce(&SessionLog) -> R) -> Result<R> {
        let live = self.live_or_err(id)?;
        let log = lock(&live.log);
        Ok(f(&log))
    }
}
