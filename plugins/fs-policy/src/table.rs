//! The observation table of B11 / FS-03: what each session has learnt about each target, and
//! the write and edit decisions that follow from it.
//!
//! Plain Rust over the SDK's plain `fs/*` value types (no kernel calls), so the whole decision table is unit-tested here and reusable
//! by the file tool's own tests. It does no I/O: the only input is what `fs/observed` reported.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

pub use keel_plugin_api::events::fs::Observation;
use keel_plugin_api::events::fs::{EditDecision, WriteDecision};
use keel_plugin_api::services::tools::FsCode;

/// Observed state keyed by (session id, target key). Interior mutability so the plugin can
/// share one table between its listeners.
#[derive(Debug, Default)]
pub struct ObservationTable {
    sessions: Mutex<HashMap<String, HashMap<String, Observation>>>,
}

impl ObservationTable {
    /// An empty table (every target unseen).
    pub fn new() -> Self {
        ObservationTable::default()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, HashMap<String, Observation>>> {
        // A poisoned table still holds consistent entries (every update is one insert).
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records an `fs/observed` report (the latest one wins). Never fails (FS-02).
    pub fn observe(&self, session_id: &str, target: &str, observation: Observation) {
        self.lock()
            .entry(session_id.to_owned())
            .or_default()
            .insert(target.to_owned(), observation);
    }

    /// The current state of a target, `None` when unseen.
    pub fn state(&self, session_id: &str, target: &str) -> Option<Observation> {
        self.lock()
            .get(session_id)
            .and_then(|targets| targets.get(target))
            .cloned()
    }

    /// The `fs/write-intent` decision (FS-03): unseen or absent → `create-if-absent`;
    /// present(v) → `replace-if-version` v.
    pub fn write_decision(&self, session_id: &str, target: &str) -> WriteDecision {
        match self.state(session_id, target) {
            None | Some(Observation::Absent) => WriteDecision::CreateIfAbsent,
            Some(Observation::Present { version }) => WriteDecision::ReplaceIfVersion { version },
        }
    }

    /// The `fs/edit-intent` decision (FS-03): unseen → error `FS_NOT_OBSERVED`; absent → error
    /// `FS_NOT_FOUND`; present(v) → `version` v.
    pub fn edit_decision(&self, session_id: &str, target: &str) -> EditDecision {
        match self.state(session_id, target) {
            None => EditDecision::Error {
                code: FsCode::NotObserved,
            },
            Some(Observation::Absent) => EditDecision::Error {
                code: FsCode::NotFound,
            },
            Some(Observation::Present { version }) => EditDecision::Version { version },
        }
    }

    /// Drops everything one session learnt (the session was disposed).
    pub fn forget_session(&self, session_id: &str) {
        self.lock().remove(session_id);
    }

    /// Drops all state (the policy is being disposed).
    pub fn clear(&self) {
        self.lock().clear();
    }

    /// How many sessions hold state (tests and diagnostics).
    pub fn session_count(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: &str = "s1";
    const T: &str = "/w/a.txt";

    fn present(v: &str) -> Observation {
        Observation::Present { version: v.into() }
    }

    fn replace(v: &str) -> WriteDecision {
        WriteDecision::ReplaceIfVersion { version: v.into() }
    }

    fn error(code: FsCode) -> EditDecision {
        EditDecision::Error { code }
    }

    // FS-03 / B11: the write column of the decision table.
    #[test]
    fn fs03_write_unseen_and_absent_create_if_absent_present_replaces_that_version() {
        let t = ObservationTable::new();
        assert_eq!(t.write_decision(S, T), WriteDecision::CreateIfAbsent);
        t.observe(S, T, Observation::Absent);
        assert_eq!(t.write_decision(S, T), WriteDecision::CreateIfAbsent);
        t.observe(S, T, present("abc123"));
        assert_eq!(t.write_decision(S, T), replace("abc123"));
    }

    // FS-03 / B11: the edit column of the decision table.
    #[test]
    fn fs03_edit_unseen_not_observed_absent_not_found_present_version_guard() {
        let t = ObservationTable::new();
        assert_eq!(t.edit_decision(S, T), error(FsCode::NotObserved));
        t.observe(S, T, Observation::Absent);
        assert_eq!(t.edit_decision(S, T), error(FsCode::NotFound));
        t.observe(S, T, present("v2"));
        assert_eq!(
            t.edit_decision(S, T),
            EditDecision::Version {
                version: "v2".into()
            }
        );
    }

    // FS-03: state is keyed by (owner session, target key).
    #[test]
    fn fs03_state_is_per_session_and_per_target() {
        let t = ObservationTable::new();
        t.observe(S, T, present("v1"));
        assert_eq!(t.state("other", T), None);
        assert_eq!(t.state(S, "/w/b.txt"), None);
        assert_eq!(
            t.state(S, T),
            Some(Observation::Present {
                version: "v1".into()
            })
        );
    }

    // The latest observation wins (a write reports the new version).
    #[test]
    fn fs03_later_observation_replaces_earlier() {
        let t = ObservationTable::new();
        t.observe(S, T, present("v1"));
        t.observe(S, T, present("v2"));
        assert_eq!(t.write_decision(S, T), replace("v2"));
        t.observe(S, T, Observation::Absent);
        assert_eq!(t.write_decision(S, T), WriteDecision::CreateIfAbsent);
    }

    // FS-03: dropping a session or the whole policy forgets everything (back to unseen).
    #[test]
    fn fs03_forget_and_clear_return_targets_to_unseen() {
        let t = ObservationTable::new();
        t.observe(S, T, present("v1"));
        t.observe("s2", T, present("v9"));
        t.forget_session(S);
        assert_eq!(t.state(S, T), None);
        assert_eq!(t.session_count(), 1);
        t.clear();
        assert_eq!(t.session_count(), 0);
        assert_eq!(t.edit_decision("s2", T), error(FsCode::NotObserved));
    }
}
