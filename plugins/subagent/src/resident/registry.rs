//! The registry of live resident children (SUB-01, SUB-04): who is whose child under which
//! name, and the ONE [`Registry::cleanup`] both stop paths end in — the singular
//! `resident_stop` and the plural ones (the parent session closing, the row unloading). It
//! unregisters the child's inbound route (its name and its session) and closes and deletes its
//! temp memory, so N create/destroy cycles leave the registry, the open handles and the temp
//! directory where they started.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use keel_plugin_api::prelude::*;
use keel_plugin_api::services::resident::ResidentCode;

use crate::memory::ChildMemory;

/// One live resident child.
#[derive(Debug)]
pub struct Resident {
    /// The parent session.
    pub parent: String,
    /// Its name under the parent.
    pub name: String,
    /// Its own session.
    pub child: String,
    /// Its depth (the root agent is 0).
    pub depth: u32,
    /// The named profile it runs under, if any.
    pub agent: Option<String>,
    /// The parent's `resident_start` call that created it (its `subagent/spawned` record).
    pub call_id: String,
    /// Its temp store and its read-only handle on the parent's main store.
    pub memory: ChildMemory,
    stopping: AtomicBool,
    last_result: Mutex<String>,
}

impl Resident {
    /// A child not yet registered.
    pub fn new(
        parent: &str,
        name: &str,
        child: &str,
        depth: u32,
        agent: Option<String>,
        memory: ChildMemory,
    ) -> Self {
        Resident {
            parent: parent.to_owned(),
            name: name.to_owned(),
            child: child.to_owned(),
            depth,
            agent,
            call_id: String::new(),
            memory,
            stopping: AtomicBool::new(false),
            last_result: Mutex::new(String::new()),
        }
    }

    /// `self`, started by the parent's call `call_id`.
    #[must_use]
    pub fn started_by(mut self, call_id: &str) -> Self {
        call_id.clone_into(&mut self.call_id);
        self
    }

    /// The child's last answer as this row saw it: `fresh` when not empty (a `status` or a
    /// `wait_idle` report), else the last one remembered (a report is handed to one waiter
    /// only, so `status` may no longer hold it).
    pub fn last_result(&self, fresh: &str) -> String {
        let mut last = self
            .last_result
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !fresh.is_empty() {
            fresh.clone_into(&mut last);
        }
        last.clone()
    }

    /// Claims the child's teardown: `true` for the first caller only, so two stop paths racing
    /// (a `resident_stop` and the parent closing) do not both take its inputs.
    pub fn claim_stop(&self) -> bool {
        !self.stopping.swap(true, Ordering::SeqCst)
    }
}

#[derive(Debug, Default)]
struct Inner {
    by_name: BTreeMap<(String, String), Arc<Resident>>,
    by_child: HashMap<String, (String, String)>,
}

/// The live resident children of this row.
#[derive(Debug, Default)]
pub struct Registry {
    inner: Mutex<Inner>,
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Registers `r` under its parent and name and under its session.
    ///
    /// # Errors
    /// `RESIDENT_EXISTS` when the parent already has a live child of that name; `r`'s memory
    /// is removed then (it was never registered, so no cleanup would reach it).
    pub fn insert(&self, r: Resident) -> Result<Arc<Resident>> {
        let mut inner = self.lock();
        let key = (r.parent.clone(), r.name.clone());
        if inner.by_name.contains_key(&key) {
            let e = Error::coded(
                ResidentCode::Exists,
                format!(
                    "resident_start: session {} already has a resident child named {:?}",
                    r.parent, r.name
                ),
            );
            drop(inner);
            r.memory.remove();
            return Err(e);
        }
        let r = Arc::new(r);
        inner.by_child.insert(r.child.clone(), key.clone());
        inner.by_name.insert(key, Arc::clone(&r));
        Ok(r)
    }

    /// The child `name` of `parent`.
    pub fn get(&self, parent: &str, name: &str) -> Option<Arc<Resident>> {
        self.lock()
            .by_name
            .get(&(parent.to_owned(), name.to_owned()))
            .cloned()
    }

    /// The resident child whose session is `child`.
    pub fn by_child(&self, child: &str) -> Option<Arc<Resident>> {
        let inner = self.lock();
        let key = inner.by_child.get(child)?;
        inner.by_name.get(key).cloned()
    }

    /// Whether `parent` has a live child named `name`.
    pub fn contains(&self, parent: &str, name: &str) -> bool {
        self.get(parent, name).is_some()
    }

    /// The live children of `parent`, by name.
    pub fn of_parent(&self, parent: &str) -> Vec<Arc<Resident>> {
        self.lock()
            .by_name
            .iter()
            .filter(|((p, _), _)| p == parent)
            .map(|(_, r)| Arc::clone(r))
            .collect()
    }

    /// Every live child.
    pub fn all(&self) -> Vec<Arc<Resident>> {
        self.lock().by_name.values().cloned().collect()
    }

    /// Live children in all.
    pub fn len(&self) -> usize {
        self.lock().by_name.len()
    }

    /// No live child.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The one teardown of a child's resources (SUB-04), called by every stop path:
    /// unregisters it (by name and by session: nothing routes to it any more) and closes and
    /// deletes its temp memory. Idempotent: `None` when `child` was not registered.
    pub fn cleanup(&self, child: &str) -> Option<Arc<Resident>> {
        let removed = {
            let mut inner = self.lock();
            let key = inner.by_child.remove(child)?;
            inner.by_name.remove(&key)
        };
        if let Some(r) = &removed {
            r.memory.remove();
        }
        removed
    }
}
