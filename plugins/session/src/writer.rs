//! Write-behind (SES-04, B5): the append path hands committed events to a [`Writer`], which
//! makes them durable in the background, one batch per window.
//!
//! - `push` does no I/O: it queues the events and, when no window is armed, arms one (the
//!   first pending event starts it; later events do not reset it).
//! - When the window (`write_batch_max_delay_ms`, default 200) expires, one batch — everything
//!   pending — goes to the store. Events arriving during that write arm their own window.
//! - `flush` cancels the armed window and drains until everything pending at the call is
//!   durable (the barrier); it retries a failed batch immediately.
//! - A failed write keeps its events at the head of the queue, in order; the failure is logged
//!   (`tracing::error`), kept as [`Writer::last_error`] and returned by `flush`. Automatic
//!   retry pauses until the next `push` (which arms a fresh window) or an explicit `flush`.
//! - Writes never overlap (one async lock), so the store always sees contiguous batches.
//! - A write cannot be cancelled halfway (issue 23 item 7). The batch, the store call and the
//!   bookkeeping after it (the durable seq, the pending queue, the hook) are one shared future
//!   kept in the state: a caller dropped while it runs — a turn aborted inside its checkpoint
//!   flush — leaves it there, and the next writer, window or flush finishes it before anything
//!   else is written. Without that the dropped batch left `durable_next` behind the store and
//!   every later append was refused `SESSION_SEQ`.
//! - After every successful write the [`DurableHook`], if set, hears the last durable seq
//!   (the plugin emits `session/durable` from it, so the stream-json feed prints an event only
//!   once it is stored).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::FutureExt as _;
use futures::future::Shared;

use keel_plugin_api::services::session::{EventRecord, SessionHeader};

use crate::error::Result;
use crate::store::{BoxFut, Store, StoreAppend, Timer};

/// Default batching window.
pub const DEFAULT_DELAY_MS: u64 = 200;

/// Told `(session_id, last durable seq)` after every successful durable write.
pub type DurableHook = Arc<dyn Fn(&str, u64) + Send + Sync>;

/// A batch write under way; every clone awaits the same store call.
#[derive(Clone)]
struct Flight(Shared<BoxFut<Result<()>>>);

impl std::fmt::Debug for Flight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Flight")
    }
}

#[derive(Debug, Default)]
struct State {
    /// Sent with the first batch (a new session), then cleared.
    header: Option<SessionHeader>,
    pending: VecDeque<Arc<EventRecord>>,
    durable_next: u64,
    /// One past the last seq ever pushed: the target of a flush. Counting `pending` instead
    /// would miss a background batch that is in flight (drained from `pending`, not yet
    /// durable), and a flush could return before earlier events were stored.
    pushed_next: u64,
    /// The generation of the armed window, if one is armed.
    window: Option<u64>,
    generation: u64,
    paused: bool,
    last_error: Option<crate::error::SessionError>,
    /// The write in progress, if any: taken out of `pending`, not yet settled.
    in_flight: Option<Flight>,
}

struct Inner {
    session_id: String,
    store: Arc<dyn Store>,
    timer: Arc<dyn Timer>,
    delay: Duration,
    state: Mutex<State>,
    io: futures::lock::Mutex<()>,
    on_durable: std::sync::OnceLock<DurableHook>,
}

/// One session's write-behind queue.
#[derive(Clone)]
pub struct Writer {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("session_id", &self.inner.session_id)
            .finish_non_exhaustive()
    }
}

impl Writer {
    /// A writer for `session_id` whose store already holds `durable_next` events; `header` is
    /// `Some` for a session not yet materialised.
    pub fn new(
        session_id: &str,
        header: Option<SessionHeader>,
        durable_next: u64,
        store: Arc<dyn Store>,
        timer: Arc<dyn Timer>,
        delay: Duration,
    ) -> Self {
        Writer {
            inner: Arc::new(Inner {
                session_id: session_id.to_owned(),
                store,
                timer,
                delay,
                state: Mutex::new(State {
                    header,
                    durable_next,
                    pushed_next: durable_next,
                    ..State::default()
                }),
                io: futures::lock::Mutex::new(()),
                on_durable: std::sync::OnceLock::new(),
            }),
        }
    }

    /// Sets the hook told about every successful durable write (once; later calls are
    /// ignored).
    pub fn set_durable_hook(&self, hook: DurableHook) {
        let _ = self.inner.on_durable.set(hook);
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues committed events (no I/O) and arms the window if none is armed.
    pub fn push(&self, events: &[Arc<EventRecord>]) {
        if events.is_empty() {
            return;
        }
        let arm = {
            let mut st = self.state();
            st.pending.extend(events.iter().cloned());
            if let Some(last) = events.last() {
                st.pushed_next = st.pushed_next.max(last.seq + 1);
            }
            st.paused = false;
            if st.window.is_none() {
                st.generation += 1;
                st.window = Some(st.generation);
                Some(st.generation)
            } else {
                None
            }
        };
        if let Some(generation) = arm {
            let this = self.clone();
            let sleep = self.inner.timer.sleep(self.inner.delay);
            self.inner.timer.spawn(Box::pin(async move {
                sleep.await;
                let _ = this.write_window(generation).await;
            }));
        }
    }

    /// The window expired: write one batch unless a flush took over.
    async fn write_window(&self, generation: u64) -> Result<()> {
        let _io = self.inner.io.lock().await;
        {
            let mut st = self.state();
            if st.window != Some(generation) {
                return Ok(());
            }
            st.window = None;
        }
        self.write_batch().await
    }

    /// Writes everything pending as one batch (caller holds `io`). A write a dropped caller
    /// left in flight is finished first; its failure is this call's.
    async fn write_batch(&self) -> Result<()> {
        let left = self.state().in_flight.clone();
        if let Some(Flight(f)) = left {
            f.await?;
        }
        let flight = {
            let mut st = self.state();
            if st.pending.is_empty() {
                return Ok(());
            }
            let batch: Vec<Arc<EventRecord>> = st.pending.drain(..).collect();
            let req = StoreAppend {
                session_id: self.inner.session_id.clone(),
                header: st.header.clone(),
                events: batch,
                expected_next_seq: st.durable_next,
            };
            let this = self.clone();
            let fut: BoxFut<Result<()>> = Box::pin(async move { this.settle(req).await });
            let flight = Flight(fut.shared());
            st.in_flight = Some(flight.clone());
            flight
        };
        flight.0.await
    }

    /// One store call and its bookkeeping, run to the end by whoever polls the flight.
    async fn settle(&self, req: StoreAppend) -> Result<()> {
        let batch = req.events.clone();
        let result = self.inner.store.append(req).await;
        let mut st = self.state();
        st.in_flight = None;
        match result {
            Ok(next) => {
                st.durable_next = next;
                st.header = None;
                st.last_error = None;
                drop(st);
                // Flights run one at a time: the hook hears durable seqs in order.
                if let (Some(hook), Some(last)) = (self.inner.on_durable.get(), next.checked_sub(1))
                {
                    hook(&self.inner.session_id, last);
                }
                Ok(())
            }
            Err(e) => {
                tracing::error!(
                    session = %self.inner.session_id,
                    events = batch.len(),
                    "session write failed; {} events stay pending until the next event or flush: {e}",
                    batch.len()
                );
                for ev in batch.into_iter().rev() {
                    st.pending.push_front(ev);
                }
                st.paused = true;
                st.last_error = Some(e.clone());
                Err(e)
            }
        }
    }

    /// The barrier: cancels the armed window and drains until every event pushed before the
    /// call is durable. Returns the last durable seq (`None`: nothing stored yet).
    ///
    /// # Errors
    /// The store's error; the events stay pending, in order.
    pub async fn flush(&self) -> Result<Option<u64>> {
        let target = self.state().pushed_next;
        loop {
            let io_guard = self.inner.io.lock().await;
            {
                let mut st = self.state();
                st.window = None;
                let idle = st.pending.is_empty() && st.in_flight.is_none();
                if idle || st.durable_next >= target {
                    let rest = !st.pending.is_empty();
                    let durable = st.durable_next.checked_sub(1);
                    drop(st);
                    if rest {
                        // Events pushed during the flush keep their own window.
                        drop(io_guard);
                        self.rearm();
                    }
                    return Ok(durable);
                }
            }
            self.write_batch().await?;
        }
    }

    fn rearm(&self) {
        let pending: Vec<Arc<EventRecord>> = {
            let mut st = self.state();
            if st.window.is_some() || st.pending.is_empty() {
                return;
            }
            st.pending.drain(..).collect()
        };
        self.push(&pending);
    }

    /// The last durable seq (`None`: nothing stored yet).
    pub fn durable_seq(&self) -> Option<u64> {
        self.state().durable_next.checked_sub(1)
    }

    /// Events waiting to be written.
    pub fn pending(&self) -> usize {
        self.state().pending.len()
    }

    /// The last write failure, cleared by the next successful write.
    pub fn last_error(&self) -> Option<crate::error::SessionError> {
        self.state().last_error.clone()
    }

    /// Whether automatic retry is paused after a failure.
    pub fn paused(&self) -> bool {
        self.state().paused
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{BoxFut, MemStore};
    use crate::test_support::user;
    use keel_plugin_api::services::session::{FORMAT_VERSION, HeaderKind, StoreError};

    struct TokioTimer;
    impl Timer for TokioTimer {
        fn spawn(&self, task: BoxFut<()>) {
            tokio::spawn(task);
        }
        fn sleep(&self, d: Duration) -> BoxFut<()> {
            Box::pin(tokio::time::sleep(d))
        }
    }

    fn header() -> SessionHeader {
        SessionHeader {
            kind: HeaderKind::Session,
            version: FORMAT_VERSION,
            id: "w".into(),
            created_at: 0,
            cwd: "/".into(),
            parent_session: None,
            seed_length: None,
            parent_call_id: None,
            origin: None,
            delegation_depth: 0,
        }
    }

    fn writer(store: &MemStore, ms: u64) -> Writer {
        Writer::new(
            "w",
            Some(header()),
            0,
            Arc::new(store.clone()),
            Arc::new(TokioTimer),
            Duration::from_millis(ms),
        )
    }

    fn evs(range: std::ops::Range<u64>) -> Vec<Arc<EventRecord>> {
        range.map(|s| Arc::new(user(s, "x"))).collect()
    }

    async fn wait_until(mut cond: impl FnMut() -> bool) -> bool {
        for _ in 0..300 {
            if cond() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        cond()
    }

    #[tokio::test]
    async fn ses04_push_does_no_io_and_one_window_writes_one_batch() {
        let store = MemStore::new();
        let w = writer(&store, 150);
        w.push(&evs(0..3));
        w.push(&evs(3..5));
        assert_eq!(store.append_calls(), 0, "append does no I/O");
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert_eq!(
            store.append_calls(),
            0,
            "nothing is written before the window expires"
        );
        assert!(wait_until(|| store.append_calls() == 1).await);
        assert_eq!(store.stored("w").len(), 5, "one batch for the whole window");
        assert_eq!(w.durable_seq(), Some(4));
        // The next event starts a new window.
        w.push(&evs(5..6));
        assert!(wait_until(|| store.append_calls() == 2).await);
        assert_eq!(store.stored("w").len(), 6);
    }

    /// A store whose first append waits until released, to hold a background batch in flight.
    struct GatedStore {
        inner: MemStore,
        gate: Arc<tokio::sync::Semaphore>,
    }

    impl Store for GatedStore {
        fn append(&self, req: StoreAppend) -> BoxFut<Result<u64>> {
            let gate = Arc::clone(&self.gate);
            let inner = self.inner.clone();
            Box::pin(async move {
                let _permit = gate.acquire().await;
                inner.append(req).await
            })
        }
        fn load(&self, id: &str, repair: bool) -> BoxFut<Result<crate::store::Loaded>> {
            self.inner.load(id, repair)
        }
        fn list(&self) -> BoxFut<Result<crate::store::Listing>> {
            self.inner.list()
        }
        fn claim(&self, id: &str) -> BoxFut<Result<()>> {
            self.inner.claim(id)
        }
        fn release(&self, id: &str) -> BoxFut<Result<()>> {
            self.inner.release(id)
        }
    }

    /// A writer over a store whose appends wait for `gate`'s permits, and the store behind it.
    fn gated_writer(window: Duration) -> (MemStore, Arc<tokio::sync::Semaphore>, Writer) {
        let mem = MemStore::new();
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let store = GatedStore {
            inner: mem.clone(),
            gate: Arc::clone(&gate),
        };
        let w = Writer::new(
            "w",
            Some(header()),
            0,
            Arc::new(store),
            Arc::new(TokioTimer),
            window,
        );
        (mem, gate, w)
    }

    // Regression (found by the session bench): a flush issued while a background batch is in
    // flight must not return until every event pushed before it is durable, even when the
    // in-flight batch is larger than what is still pending.
    #[tokio::test]
    async fn ses04_flush_waits_for_events_in_an_in_flight_batch() {
        let (mem, gate, w) = gated_writer(Duration::from_millis(1));
        w.push(&evs(0..10));
        // Let the window fire: the 10 events are drained into the gated (in-flight) append.
        assert!(wait_until(|| w.pending() == 0).await);
        w.push(&evs(10..12));
        let flusher = {
            let w = w.clone();
            tokio::spawn(async move { w.flush().await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        gate.add_permits(100);
        let durable = flusher.await.unwrap().unwrap();
        assert_eq!(
            durable,
            Some(11),
            "flush covers the in-flight batch and what followed"
        );
        assert_eq!(mem.stored("w").len(), 12);
    }

    // Issue 23 item 7: a flush dropped while its write is in flight (a turn aborted in its
    // checkpoint) loses nothing — the next flush finishes that write first, so the store sees
    // contiguous seqs and no later batch is refused.
    #[tokio::test]
    async fn ses04_a_flush_dropped_mid_write_loses_nothing() {
        let (mem, gate, w) = gated_writer(Duration::from_secs(60));
        w.push(&evs(0..3));
        let dropped = tokio::time::timeout(Duration::from_millis(30), w.flush()).await;
        assert!(dropped.is_err(), "the gated write was still in flight");
        assert_eq!(w.pending(), 0, "the batch left the queue for the store");
        w.push(&evs(3..5));
        gate.add_permits(100);
        assert_eq!(w.flush().await.unwrap(), Some(4));
        let seqs: Vec<u64> = mem.stored("w").iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [0, 1, 2, 3, 4]);
        assert!(w.last_error().is_none());
    }

    // Issue 10 item 6: the hook hears the last durable seq after each durable write — never
    // at push time, never for a failed write.
    #[tokio::test]
    async fn ses04_the_durable_hook_hears_each_durable_write_only() {
        let store = MemStore::new();
        let w = writer(&store, 20);
        let heard = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&heard);
        w.set_durable_hook(Arc::new(move |id: &str, seq: u64| {
            sink.lock().unwrap().push((id.to_owned(), seq));
        }));
        let heard = move || heard.lock().unwrap().clone();
        w.push(&evs(0..3));
        assert!(heard().is_empty(), "pushed is not durable");
        assert!(wait_until(|| store.stored("w").len() == 3).await);
        assert!(wait_until(|| heard().len() == 1).await);
        assert_eq!(heard(), [("w".to_owned(), 2)]);
        store.fail_appends(1);
        w.push(&evs(3..5));
        assert!(wait_until(|| w.paused()).await);
        assert_eq!(heard().len(), 1, "a failed write is not durable");
        assert_eq!(w.flush().await.unwrap(), Some(4));
        assert_eq!(heard()[1], ("w".to_owned(), 4));
    }

    #[tokio::test]
    async fn ses04_flush_cancels_the_wait_and_drains() {
        let store = MemStore::new();
        let w = writer(&store, 300);
        assert_eq!(w.flush().await.unwrap(), None, "empty flush writes nothing");
        assert!(store.stored("w").is_empty());
        w.push(&evs(0..4));
        assert_eq!(w.flush().await.unwrap(), Some(3));
        assert_eq!(store.append_calls(), 1);
        assert_eq!(w.pending(), 0);
        // The cancelled window fires later and writes nothing.
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(store.append_calls(), 1);
    }

    #[tokio::test]
    async fn ses04_failed_write_keeps_events_pauses_and_flush_retries() {
        // Disk-full simulation: the write fails, events stay pending, nothing is lost.
        let store = MemStore::new();
        let w = writer(&store, 20);
        store.fail_appends(1);
        w.push(&evs(0..3));
        assert!(wait_until(|| w.paused()).await);
        assert_eq!(w.pending(), 3);
        assert!(w.last_error().unwrap().is(StoreError::Io));
        // Paused: no automatic retry.
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(store.append_calls(), 0);
        assert_eq!(w.pending(), 3);
        // An explicit flush fails while the store is still full…
        store.fail_appends(1);
        assert!(w.flush().await.unwrap_err().is(StoreError::Io));
        assert_eq!(w.pending(), 3);
        // …and succeeds, in order, once it recovers.
        assert_eq!(w.flush().await.unwrap(), Some(2));
        let seqs: Vec<u64> = store.stored("w").iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [0, 1, 2]);
        assert!(w.last_error().is_none());
    }

    #[tokio::test]
    async fn b5_next_event_after_failure_starts_a_fresh_window() {
        let store = MemStore::new();
        let w = writer(&store, 20);
        store.fail_appends(1);
        w.push(&evs(0..2));
        assert!(wait_until(|| w.paused()).await);
        w.push(&evs(2..3));
        assert!(!w.paused());
        assert!(wait_until(|| store.stored("w").len() == 3).await);
        let seqs: Vec<u64> = store.stored("w").iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [0, 1, 2], "retained events go first, in order");
    }

    #[tokio::test]
    async fn b5_events_after_a_flush_get_their_own_window() {
        let store = MemStore::new();
        let w = writer(&store, 20);
        w.push(&evs(0..2));
        assert_eq!(w.flush().await.unwrap(), Some(1));
        w.push(&evs(2..4));
        assert!(wait_until(|| store.stored("w").len() == 4).await);
        assert_eq!(store.append_calls(), 2);
    }
}
