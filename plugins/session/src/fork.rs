//! Fork (SES-07, SES-13, B8): a new session seeded with a closed prefix of another.
//!
//! Pure planning: given the source's header and events, an inclusive boundary seq (default:
//! the last event) and the child id, produce the child's header and its first events — the
//! deep-copied seed (same seqs) followed by one `session/end-seed {}`. Checks, in order: the
//! child id's syntax, a duplicate child id (`SESSION_EXISTS`, before the boundary is looked
//! at), the boundary inside the log (`SESSION_INVALID`), the prefix not ending inside an open
//! turn (`SESSION_OPEN_TURN` — refused, never clipped). The child records `parent_session`,
//! `seed_length` and the inherited `cwd`; no call stack or live state is copied.

use keel_plugin_api::services::session::{EventRecord, FORMAT_VERSION, HeaderKind, SessionHeader};
use serde_json::json;

use crate::error::{Result, SessionError};
use crate::recovery::open_turn_start;
use crate::validate::check_id;

/// Where the seed ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Boundary {
    /// The last event (the default).
    Last,
    /// An inclusive seq.
    At(u64),
    /// Up to and including the last `turn/end`: the in-process subagent fork (SES-13).
    LastTurnEnd,
}

/// What an in-process fork records beyond the parent link (issue 16): the subagent's origin,
/// depth and the parent's call that started it. The default changes nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChildLineage {
    /// `"subagent"` for a delegated fork.
    pub origin: Option<String>,
    /// The child's depth (default: the parent's).
    pub delegation_depth: Option<u32>,
    /// The parent's tool call.
    pub parent_call_id: Option<String>,
}

impl ChildLineage {
    /// Writes the lineage into a planned child's header.
    pub fn apply(self, header: &mut SessionHeader) {
        if self.origin.is_some() {
            header.origin = self.origin;
        }
        if let Some(depth) = self.delegation_depth {
            header.delegation_depth = depth;
        }
        if self.parent_call_id.is_some() {
            header.parent_call_id = self.parent_call_id;
        }
    }
}

/// A planned child session.
#[derive(Debug, Clone, PartialEq)]
pub struct ForkPlan {
    /// The child's header.
    pub header: SessionHeader,
    /// Seed events then `session/end-seed`, seqs from 0.
    pub events: Vec<EventRecord>,
}

/// The seq of the last `turn/end` (the end of the completed-turn prefix), if any.
pub fn last_turn_end(events: &[EventRecord]) -> Option<u64> {
    events
        .iter()
        .rev()
        .find(|e| e.kind == "turn/end")
        .map(|e| e.seq)
}

/// Plans a fork of `events` (the source's log) into `child_id`.
///
/// # Errors
/// See the module doc.
pub fn plan_fork(
    source: &SessionHeader,
    events: &[EventRecord],
    boundary: Boundary,
    child_id: &str,
    child_exists: bool,
    now: u64,
) -> Result<ForkPlan> {
    check_id(child_id)?;
    if child_exists {
        return Err(SessionError::new(
            keel_plugin_api::services::session::StoreError::Exists,
            format!("session '{child_id}' already exists"),
        ));
    }
    let seed_len: usize = match boundary {
        Boundary::Last => events.len(),
        Boundary::LastTurnEnd => last_turn_end(events).map_or(0, |s| s as usize + 1),
        Boundary::At(seq) => {
            if seq >= events.len() as u64 {
                return Err(SessionError::invalid(format!(
                    "session '{}': fork boundary seq {seq} is outside the log ({} events)",
                    source.id,
                    events.len()
                )));
            }
            seq as usize + 1
        }
    };
    if let Some(start) = open_turn_start(events, seed_len) {
        return Err(SessionError::open_turn(format!(
            "session '{}': fork boundary seq {} is inside the turn opened at seq {start}; pick a seq between turns",
            source.id,
            seed_len.saturating_sub(1)
        )));
    }
    let mut seed: Vec<EventRecord> = events[..seed_len].to_vec();
    let time = seed.last().map_or(now, |e| e.time.max(now));
    seed.push(EventRecord {
        seq: seed_len as u64,
        time,
        kind: "session/end-seed".into(),
        data: json!({}),
        ignorable: false,
        surface_op: None,
        source_event_seqs: None,
    });
    Ok(ForkPlan {
        header: SessionHeader {
            kind: HeaderKind::Session,
            version: FORMAT_VERSION,
            id: child_id.to_owned(),
            created_at: now,
            cwd: source.cwd.clone(),
            parent_session: Some(source.id.clone()),
            seed_length: Some(seed_len as u64),
            parent_call_id: None,
            origin: None,
            delegation_depth: source.delegation_depth,
        },
        events: seed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::SessionLog;
    use crate::test_support::*;
    use keel_plugin_api::services::session::StoreError;
    use std::sync::Arc;

    fn src() -> SessionHeader {
        SessionHeader {
            kind: HeaderKind::Session,
            version: 0,
            id: "parent".into(),
            created_at: 1,
            cwd: "/proj".into(),
            parent_session: None,
            seed_length: None,
            parent_call_id: None,
            origin: None,
            delegation_depth: 0,
        }
    }

    fn closed_then_open() -> Vec<EventRecord> {
        vec![
            user(0, "hi"),
            turn_start(1, 0),
            step_start(2, 0, 0),
            assistant(3, 0, 0, &["a"]),
            call(4, 0, 0, "a"),
            result(5, 0, 0, "a"),
            step_end(6, 0, 0),
            turn_end(7, 0),
            todo_outside(8),
            turn_start(9, 1),
            step_start(10, 1, 0),
        ]
    }

    fn todo_outside(seq: u64) -> EventRecord {
        let mut e = todo(seq);
        e.kind = "session/end-seed".into(); // a log-only event between turns
        e
    }

    #[test]
    fn b8_empty_source_forks_to_an_empty_seed() {
        let p = plan_fork(&src(), &[], Boundary::Last, "child", false, 9).unwrap();
        assert_eq!(p.header.seed_length, Some(0));
        assert_eq!(p.events.len(), 1);
        assert_eq!(p.events[0].kind, "session/end-seed");
        assert!(plan_fork(&src(), &[], Boundary::At(0), "child", false, 9).is_err());
    }

    #[test]
    fn ses07_default_boundary_is_last_and_refused_inside_open_turn() {
        let e = plan_fork(&src(), &closed_then_open(), Boundary::Last, "c", false, 9).unwrap_err();
        assert!(e.is(StoreError::OpenTurn), "{e}");
        let e = plan_fork(&src(), &closed_then_open(), Boundary::At(5), "c", false, 9).unwrap_err();
        assert!(e.is(StoreError::OpenTurn));
        let mut closed = closed_then_open();
        closed.truncate(8);
        let p = plan_fork(&src(), &closed, Boundary::Last, "c", false, 9).unwrap();
        assert_eq!(p.header.seed_length, Some(8));
    }

    #[test]
    fn ses07_earlier_boundary_with_open_tail_and_log_only_events_between_turns() {
        let log = closed_then_open();
        let p = plan_fork(&src(), &log, Boundary::At(8), "c", false, 9).unwrap();
        assert_eq!(p.header.seed_length, Some(9));
        assert_eq!(p.header.parent_session.as_deref(), Some("parent"));
        assert_eq!(p.header.cwd, "/proj");
        assert_eq!(&p.events[..9], &log[..9]);
        assert_eq!(p.events[9].seq, 9);
        // The child log replays cleanly (a valid session of its own).
        SessionLog::replay(p.header, p.events, Arc::default()).unwrap();
    }

    #[test]
    fn ses07_invalid_boundary_and_duplicate_child_checked_first() {
        let log = closed_then_open();
        assert!(
            plan_fork(&src(), &log, Boundary::At(99), "c", false, 9)
                .unwrap_err()
                .is(StoreError::Invalid)
        );
        // Duplicate child id wins over an invalid boundary.
        assert!(
            plan_fork(&src(), &log, Boundary::At(99), "c", true, 9)
                .unwrap_err()
                .is(StoreError::Exists)
        );
        assert!(plan_fork(&src(), &log, Boundary::Last, "bad/id", false, 9).is_err());
    }

    #[test]
    fn ses13_subagent_fork_takes_the_completed_turn_prefix() {
        let log = closed_then_open();
        let p = plan_fork(&src(), &log, Boundary::LastTurnEnd, "sub", false, 9).unwrap();
        assert_eq!(p.header.seed_length, Some(8));
        assert_eq!(p.events[7].kind, "turn/end");
    }

    #[test]
    fn b8_every_turn_end_reason_is_a_closed_boundary() {
        for reason in [
            "completed",
            "aborted",
            "blocked",
            "error",
            "max-tokens",
            "interrupted",
        ] {
            let mut end = turn_end(1, 0);
            end.data["reason"] = json!({"kind": reason});
            let log = vec![turn_start(0, 0), end];
            assert!(
                plan_fork(&src(), &log, Boundary::Last, "c", false, 9).is_ok(),
                "{reason}"
            );
        }
    }

    #[test]
    fn b8_seed_is_a_deep_copy() {
        let log = vec![user(0, "x")];
        let mut p = plan_fork(&src(), &log, Boundary::Last, "c", false, 9).unwrap();
        p.events[0].data["content"] = json!("changed");
        assert_eq!(log[0].data["content"], "x");
    }
}
