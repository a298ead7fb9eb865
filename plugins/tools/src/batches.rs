//! Running batches per session, so `cancel {session_id}` can reach them (TOOL-09). A cancel
//! only affects batches running at that moment; each batch removes itself when it ends (also
//! when its future is dropped).
//!
//! A batch's [`Cancel`] is both a flag (the scheduler reads it between events) and a future
//! (a running body awaits it beside its provider call, so a cancel stops the body at once
//! instead of waiting for it to finish on its own).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::FutureExt as _;
use futures::channel::oneshot;
use futures::future::Shared;

type Running = HashMap<String, Vec<(u64, Arc<Cancel>)>>;

/// One batch's cancellation: set once, seen by the scheduler and by every running body.
#[derive(Debug)]
pub struct Cancel {
    flag: AtomicBool,
    fire: Mutex<Option<oneshot::Sender<()>>>,
    fired: Shared<oneshot::Receiver<()>>,
}

impl Default for Cancel {
    fn default() -> Self {
        let (tx, rx) = oneshot::channel();
        Cancel {
            flag: AtomicBool::new(false),
            fire: Mutex::new(Some(tx)),
            fired: rx.shared(),
        }
    }
}

impl Cancel {
    /// Cancels (idempotent): the flag is set and every [`Cancel::fired`] future resolves.
    pub fn cancel(&self) {
        self.flag.store(true, Ordering::SeqCst);
        let tx = self
            .fire
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(tx) = tx {
            let _ = tx.send(());
        }
    }

    /// Whether the batch was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// The flag, as the scheduler reads it.
    pub fn flag(&self) -> &AtomicBool {
        &self.flag
    }

    /// Resolves once the batch is cancelled (never, otherwise).
    pub async fn fired(&self) {
        if self.fired.clone().await.is_err() {
            // Unreachable while `self` lives (it holds the sender); never read it as a cancel.
            futures::future::pending::<()>().await;
        }
    }
}

/// The running batches.
#[derive(Default)]
pub struct Batches {
    running: Mutex<Running>,
    next_id: AtomicU64,
}

/// A running batch's registration; dropping it unregisters the batch.
pub struct BatchGuard {
    batches: Arc<Batches>,
    session_id: String,
    id: u64,
    /// Set by `cancel`.
    pub cancel: Arc<Cancel>,
}

impl Batches {
    fn lock(&self) -> MutexGuard<'_, Running> {
        // Every update is one insert/remove: a poisoned map is still whole.
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a batch of `session_id`.
    pub fn begin(self: &Arc<Self>, session_id: &str) -> BatchGuard {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let cancel = Arc::new(Cancel::default());
        self.lock()
            .entry(session_id.to_owned())
            .or_default()
            .push((id, Arc::clone(&cancel)));
        BatchGuard {
            batches: Arc::clone(self),
            session_id: session_id.to_owned(),
            id,
            cancel,
        }
    }

    /// Cancels every running batch of `session_id`; returns how many.
    pub fn cancel(&self, session_id: &str) -> usize {
        let running = self.lock();
        let flags = running
            .get(session_id)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for (_, cancel) in flags {
            cancel.cancel();
        }
        flags.len()
    }
}

impl Drop for BatchGuard {
    fn drop(&mut self) {
        let mut running = self.batches.lock();
        if let Some(list) = running.get_mut(&self.session_id) {
            list.retain(|(id, _)| *id != self.id);
            if list.is_empty() {
                running.remove(&self.session_id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future as _;

    use super::*;

    #[test]
    fn tool09_cancel_reaches_only_running_batches_of_that_session() {
        let batches = Arc::new(Batches::default());
        // Nothing running: a cancel is not remembered.
        assert_eq!(batches.cancel("s1"), 0);
        let a = batches.begin("s1");
        assert!(!a.cancel.is_cancelled());
        let b = batches.begin("s2");
        assert_eq!(batches.cancel("s1"), 1);
        assert!(a.cancel.is_cancelled());
        assert!(!b.cancel.is_cancelled());
        drop(a);
        assert_eq!(batches.cancel("s1"), 0);
        let c = batches.begin("s1");
        assert!(!c.cancel.is_cancelled());
        drop(b);
        drop(c);
        assert!(batches.lock().is_empty());
    }

    #[test]
    fn tool09_a_cancel_wakes_every_waiting_body_and_is_idempotent() {
        let cancel = Arc::new(Cancel::default());
        let mut first = Box::pin(cancel.fired());
        let mut second = Box::pin(cancel.fired());
        let waker = futures::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(first.as_mut().poll(&mut cx).is_pending());
        assert!(second.as_mut().poll(&mut cx).is_pending());
        cancel.cancel();
        cancel.cancel();
        assert!(cancel.is_cancelled());
        assert!(cancel.flag().load(Ordering::SeqCst));
        assert!(first.as_mut().poll(&mut cx).is_ready());
        assert!(second.as_mut().poll(&mut cx).is_ready());
        // A body that starts waiting after the cancel sees it at once.
        futures::executor::block_on(cancel.fired());
    }
}
