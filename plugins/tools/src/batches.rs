//! Running batches per session, so `cancel {session_id}` can reach them (TOOL-09). A cancel
//! only affects batches running at that moment; each batch removes itself when it ends (also
//! when its future is dropped).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

type Running = HashMap<String, Vec<(u64, Arc<AtomicBool>)>>;

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
    pub cancel: Arc<AtomicBool>,
}

impl Batches {
    fn lock(&self) -> MutexGuard<'_, Running> {
        // Every update is one insert/remove: a poisoned map is still whole.
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a batch of `session_id`.
    pub fn begin(self: &Arc<Self>, session_id: &str) -> BatchGuard {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let cancel = Arc::new(AtomicBool::new(false));
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
        for (_, flag) in flags {
            flag.store(true, Ordering::SeqCst);
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
    use super::*;

    #[test]
    fn tool09_cancel_reaches_only_running_batches_of_that_session() {
        let batches = Arc::new(Batches::default());
        // Nothing running: a cancel is not remembered.
        assert_eq!(batches.cancel("s1"), 0);
        let a = batches.begin("s1");
        assert!(!a.cancel.load(Ordering::SeqCst));
        let b = batches.begin("s2");
        assert_eq!(batches.cancel("s1"), 1);
        assert!(a.cancel.load(Ordering::SeqCst));
        assert!(!b.cancel.load(Ordering::SeqCst));
        drop(a);
        assert_eq!(batches.cancel("s1"), 0);
        let c = batches.begin("s1");
        assert!(!c.cancel.load(Ordering::SeqCst));
        drop(b);
        drop(c);
        assert!(batches.lock().is_empty());
    }
}
