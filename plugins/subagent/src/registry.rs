//! The live children of this process (issue 16 item 1): how many each parent session runs
//! (the concurrency cap is checked against it, at once, never waited on), the depth of every
//! session this row knows (a child calling `agent` is one deeper), and which children are
//! still open, so the row's unload can converge the ones a cancelled call left behind
//! (SUB-07).
//!
//! Plain data behind one lock: every operation is a short critical section, never held across
//! an await.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// A child still open: whose it is and which call started it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveChild {
    /// The delegating session.
    pub parent: String,
    /// The parent's call.
    pub call_id: String,
}

#[derive(Debug, Default)]
struct Inner {
    running: HashMap<String, u32>,
    depth: HashMap<String, u32>,
    live: BTreeMap<String, LiveChild>,
}

/// The registry, shared by the tool, the resume listener and the unload effect.
#[derive(Debug, Default)]
pub struct Registry {
    inner: Mutex<Inner>,
}

/// Why a slot was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full {
    /// Children of the parent running now.
    pub running: u32,
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The depth of `session`: what it was recorded at, else 0 (a root agent).
    pub fn depth_of(&self, session: &str) -> u32 {
        self.lock().depth.get(session).copied().unwrap_or(0)
    }

    /// Records `session`'s depth (a child at its start, a resumed session from its header).
    pub fn set_depth(&self, session: &str, depth: u32) {
        if depth > 0 {
            self.lock().depth.insert(session.to_owned(), depth);
        }
    }

    /// Takes one of `parent`'s `max` slots, or says how many run.
    ///
    /// # Errors
    /// [`Full`] when `parent` already runs `max` children.
    pub fn reserve(self: &Arc<Self>, parent: &str, max: u32) -> Result<Slot, Full> {
        let mut inner = self.lock();
        let running = inner.running.entry(parent.to_owned()).or_insert(0);
        if *running >= max {
            return Err(Full { running: *running });
        }
        *running += 1;
        Ok(Slot {
            registry: Arc::clone(self),
            parent: parent.to_owned(),
        })
    }

    /// Children `parent` runs now.
    pub fn running(&self, parent: &str) -> u32 {
        self.lock().running.get(parent).copied().unwrap_or(0)
    }

    /// `child` is open (until [`Registry::closed`]).
    pub fn opened(&self, child: &str, parent: &str, call_id: &str) {
        self.lock().live.insert(
            child.to_owned(),
            LiveChild {
                parent: parent.to_owned(),
                call_id: call_id.to_owned(),
            },
        );
    }

    /// `child` is closed: it leaves the live set and the depth table.
    pub fn closed(&self, child: &str) {
        let mut inner = self.lock();
        inner.live.remove(child);
        inner.depth.remove(child);
    }

    /// Every child still open, in id order.
    pub fn live(&self) -> Vec<(String, LiveChild)> {
        self.lock()
            .live
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

/// One running child's place under its parent's cap; given back when dropped.
#[derive(Debug)]
pub struct Slot {
    registry: Arc<Registry>,
    parent: String,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut inner = self.registry.lock();
        if let Some(n) = inner.running.get_mut(&self.parent) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                inner.running.remove(&self.parent);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_counted_per_parent_and_given_back_on_drop() {
        let r = Arc::new(Registry::default());
        let a: Vec<Slot> = (0..2).map(|_| r.reserve("p", 2).unwrap()).collect();
        assert_eq!(r.reserve("p", 2).unwrap_err(), Full { running: 2 });
        let other = r.reserve("q", 2).unwrap();
        assert_eq!(r.running("p"), 2);
        drop(a);
        assert_eq!(r.running("p"), 0);
        assert!(r.reserve("p", 2).is_ok());
        drop(other);
        assert_eq!(r.running("q"), 0);
    }

    /// SUB-04 (no residue) and the concurrency cap: giving back one slot of several keeps
    /// the others counted (the cap still holds), and the last one leaves no entry behind.
    #[test]
    fn sub04_a_slot_given_back_keeps_the_others_counted_and_the_last_leaves_no_residue() {
        let r = Arc::new(Registry::default());
        let mut slots: Vec<Slot> = (0..3).map(|_| r.reserve("p", 3).unwrap()).collect();
        drop(slots.pop());
        assert_eq!(r.running("p"), 2);
        slots.push(r.reserve("p", 3).unwrap());
        assert_eq!(r.reserve("p", 3).unwrap_err(), Full { running: 3 });
        drop(slots);
        assert_eq!(r.running("p"), 0);
        let running = r.lock().running.clone();
        assert!(running.is_empty(), "no residue: {running:?}");
    }

    /// SUB-04: a root's depth (0) takes no entry: the table holds only children, which
    /// `closed` removes, so it returns to empty; an earlier record is not overwritten by it.
    #[test]
    fn sub04_a_root_depth_takes_no_entry_in_the_depth_table() {
        let r = Registry::default();
        r.set_depth("root", 0);
        let depth = r.lock().depth.clone();
        assert!(depth.is_empty(), "no entry for a root: {depth:?}");
        r.set_depth("c1", 2);
        r.set_depth("c1", 0);
        assert_eq!(r.depth_of("c1"), 2);
        r.closed("c1");
        assert!(r.lock().depth.is_empty());
    }

    #[test]
    fn depth_is_recorded_for_children_and_forgotten_when_they_close() {
        let r = Registry::default();
        assert_eq!(r.depth_of("root"), 0);
        r.set_depth("c1", 1);
        r.opened("c1", "root", "call_1");
        assert_eq!(r.depth_of("c1"), 1);
        assert_eq!(r.live().len(), 1);
        assert_eq!(r.live()[0].1.call_id, "call_1");
        r.closed("c1");
        assert_eq!(r.depth_of("c1"), 0);
        assert!(r.live().is_empty());
    }
}
