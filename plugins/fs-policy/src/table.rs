//! The observation table of B11 / FS-03: what each session has learnt about each target, and
//! the write and edit decisions that follow from it.
//!
//! Plain Rust with no SDK types, so the whole decision table is unit-tested here and reusable
//! by the file tool's own tests. It does no I/O: the only input is what `fs/observed` reported.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use keel_plugin_api::services::tools::FsCode;
use serde::Deserialize;
use serde_json::{Value, json};

/// What a session knows about one target. A missing entry means "unseen".
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Observation {
    /// The target existed with this content version.
    Present {
        /// The provider's content hash.
        version: String,
    },
    /// The target did not exist.
    Absent,
}

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

    /// Records an `fs/observed` report. Never fails (FS-02): an observation that does not
    /// parse is ignored, leaving the previous state in place, and `false` is returned.
    pub fn observe(&self, session_id: &str, target: &str, observation: &str) -> bool {
        let Ok(parsed) = serde_json::from_str::<Observation>(observation) else {
            return false;
        };
        self.lock()
            .entry(session_id.to_owned())
            .or_default()
            .insert(target.to_owned(), parsed);
        true
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
    pub fn write_decision(&self, session_id: &str, target: &str) -> Value {
        match self.state(session_id, target) {
            None | Some(Observation::Absent) => json!({ "kind": "create-if-absent" }),
            Some(Observation::Present { version }) => {
                json!({ "kind": "replace-if-version", "version": version })
            }
        }
    }

    /// The `fs/edit-intent` decision (FS-03): unseen → error `FS_NOT_OBSERVED`; absent → error
    /// `FS_NOT_FOUND`; present(v) → `version` v.
    pub fn edit_decision(&self, session_id: &str, target: &str) -> Value {
        match self.state(session_id, target) {
            None => json!({ "kind": "error", "code": FsCode::NotObserved }),
            Some(Observation::Absent) => json!({ "kind": "error", "code": FsCode::NotFound }),
            Some(Observation::Present { version }) => {
                json!({ "kind": "version", "version": version })
            }
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

    fn present(v: &str) -> String {
        json!({ "kind": "present", "version": v }).to_string()
    }

    // FS-03 / B11: the write column of the decision table.
    #[test]
    fn fs03_write_unseen_and_absent_create_if_absent_present_replaces_that_version() {
        let t = ObservationTable::new();
        assert_eq!(
            t.write_decision(S, T),
            json!({ "kind": "create-if-absent" })
        );
        assert!(t.observe(S, T, r#"{"kind":"absent"}"#));
        assert_eq!(
            t.write_decision(S, T),
            json!({ "kind": "create-if-absent" })
        );
        assert!(t.observe(S, T, &present("abc123")));
        assert_eq!(
            t.write_decision(S, T),
            json!({ "kind": "replace-if-version", "version": "abc123" })
        );
    }

    // FS-03 / B11: the edit column of the decision table.
    #[test]
    fn fs03_edit_unseen_not_observed_absent_not_found_present_version_guard() {
        let t = ObservationTable::new();
        assert_eq!(
            t.edit_decision(S, T),
            json!({ "kind": "error", "code": "FS_NOT_OBSERVED" })
        );
        t.observe(S, T, r#"{"kind":"absent"}"#);
        assert_eq!(
            t.edit_decision(S, T),
            json!({ "kind": "error", "code": "FS_NOT_FOUND" })
        );
        t.observe(S, T, &present("v2"));
        assert_eq!(
            t.edit_decision(S, T),
            json!({ "kind": "version", "version": "v2" })
        );
    }

    // FS-03: state is keyed by (owner session, target key).
    #[test]
    fn fs03_state_is_per_session_and_per_target() {
        let t = ObservationTable::new();
        t.observe(S, T, &present("v1"));
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
        t.observe(S, T, &present("v1"));
        t.observe(S, T, &present("v2"));
        assert_eq!(
            t.write_decision(S, T),
            json!({ "kind": "replace-if-version", "version": "v2" })
        );
        t.observe(S, T, r#"{"kind":"absent"}"#);
        assert_eq!(
            t.write_decision(S, T),
            json!({ "kind": "create-if-absent" })
        );
    }

    // FS-02: a malformed observation never fails and never changes state.
    #[test]
    fn fs02_malformed_observation_is_ignored() {
        let t = ObservationTable::new();
        t.observe(S, T, &present("v1"));
        assert!(!t.observe(S, T, "not json"));
        assert!(!t.observe(S, T, r#"{"kind":"present"}"#));
        assert!(!t.observe(S, T, r#"{"kind":"maybe"}"#));
        assert_eq!(
            t.state(S, T),
            Some(Observation::Present {
                version: "v1".into()
            })
        );
    }

    // FS-03: dropping a session or the whole policy forgets everything (back to unseen).
    #[test]
    fn fs03_forget_and_clear_return_targets_to_unseen() {
        let t = ObservationTable::new();
        t.observe(S, T, &present("v1"));
        t.observe("s2", T, &present("v9"));
        t.forget_session(S);
        assert_eq!(t.state(S, T), None);
        assert_eq!(t.session_count(), 1);
        t.clear();
        assert_eq!(t.session_count(), 0);
        assert_eq!(
            t.edit_decision("s2", T),
            json!({ "kind": "error", "code": "FS_NOT_OBSERVED" })
        );
    }
}
