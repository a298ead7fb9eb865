//! Recovering the children a crash left open (issue 16 item 1; SES-06, SUB-07). On
//! `agent/resumed` of a session — its own recovery closers already committed — the parent's
//! log is read; every `subagent/spawned` without a matching `subagent/ended` names a child
//! that was running when the process died. Each is loaded (`keel.session` `load` commits its
//! recovery closers), its own open children are recovered the same way, depth first, and the
//! parent records `subagent/ended {outcome:"interrupted"}` for it. Log order, one at a time:
//! the same logs always recover the same way.
//!
//! A child is never resumed: its call in the parent was answered `TOOL_OUTCOME_UNKNOWN` by the
//! parent's own closers, and the parent's model decides what to do next.

use std::collections::HashSet;

use futures::future::BoxFuture;
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::session::{EventRecord, SessionRef};
use keel_plugin_api::services::subagent::ChildOutcome;
use serde_json::{Value, json};

use crate::delegate::Shared;
use crate::delegate_run::audit;

/// A `subagent/spawned` record without its `subagent/ended`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenChild {
    /// The parent's call.
    pub call_id: String,
    /// The child session.
    pub child_session: String,
}

/// The children `events` started and never recorded as ended, in log order.
pub fn open_children(events: &[EventRecord]) -> Vec<OpenChild> {
    let ended: HashSet<&str> = events
        .iter()
        .filter(|e| e.kind == "subagent/ended")
        .filter_map(|e| e.data["child_session"].as_str())
        .collect();
    events
        .iter()
        .filter(|e| e.kind == "subagent/spawned")
        .filter_map(|e| {
            let child = e.data["child_session"].as_str()?;
            (!ended.contains(child)).then(|| OpenChild {
                call_id: e.data["call_id"].as_str().unwrap_or_default().to_owned(),
                child_session: child.to_owned(),
            })
        })
        .collect()
}

/// The `agent/resumed` listener: recovers `parent`'s open children and records them ended.
///
/// # Errors
/// The parent's log could not be read (the resume fails with it: the loop must not start on a
/// tree it could not settle).
pub async fn recover(shared: &Shared, parent: &str) -> Result<()> {
    let log = shared.sessions.load(SessionRef::new(parent)).await?;
    shared
        .registry
        .set_depth(parent, log.header.delegation_depth);
    let open = open_children(&log.events);
    for child in &open {
        let note = recover_child(shared, &child.child_session).await;
        let mut ended = json!({
            "call_id": child.call_id,
            "child_session": child.child_session,
            "outcome": ChildOutcome::Interrupted.as_str(),
        });
        if let Some(note) = note {
            ended["note"] = Value::String(note);
        }
        audit(shared, parent, "subagent/ended", &ended).await;
    }
    if !open.is_empty() {
        shared.sessions.flush(SessionRef::new(parent)).await?;
    }
    Ok(())
}

/// Loads `child` (committing its closers) and settles its own open children; answers a note
/// when the child could not be recovered (its log never became durable, …).
fn recover_child<'a>(shared: &'a Shared, child: &'a str) -> BoxFuture<'a, Option<String>> {
    Box::pin(async move {
        let log = match shared.sessions.load(SessionRef::new(child)).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(child = %child, "recovering the child session: {e}");
                return Some(format!("[{}] {}", e.code, e.message));
            }
        };
        let open = open_children(&log.events);
        if open.is_empty() {
            return None;
        }
        // Its own children are recorded in its log: it must be live to take the appends.
        if let Err(e) = shared.sessions.open(SessionRef::new(child)).await {
            tracing::warn!(child = %child, "opening the child session: {e}");
            return Some(format!("[{}] {}", e.code, e.message));
        }
        for grandchild in &open {
            let note = recover_child(shared, &grandchild.child_session).await;
            let mut ended = json!({
                "call_id": grandchild.call_id,
                "child_session": grandchild.child_session,
                "outcome": ChildOutcome::Interrupted.as_str(),
            });
            if let Some(note) = note {
                ended["note"] = Value::String(note);
            }
            audit(shared, child, "subagent/ended", &ended).await;
        }
        if let Err(e) = shared.sessions.close(SessionRef::new(child)).await {
            tracing::warn!(child = %child, "closing the child session: {e}");
        }
        None
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(seq: u64, kind: &str, data: Value) -> EventRecord {
        EventRecord {
            seq,
            time: 0,
            kind: kind.into(),
            data,
            ignorable: true,
            surface_op: None,
            source_event_seqs: None,
        }
    }

    #[test]
    fn only_spawned_children_without_an_end_are_open_in_log_order() {
        let events = vec![
            ev(
                0,
                "subagent/spawned",
                json!({"call_id": "a", "child_session": "c-a"}),
            ),
            ev(
                1,
                "subagent/spawned",
                json!({"call_id": "b", "child_session": "c-b"}),
            ),
            ev(
                2,
                "subagent/ended",
                json!({"call_id": "a", "child_session": "c-a", "outcome": "completed"}),
            ),
            ev(
                3,
                "subagent/spawned",
                json!({"call_id": "c", "child_session": "c-c"}),
            ),
        ];
        let open = open_children(&events);
        assert_eq!(
            open,
            vec![
                OpenChild {
                    call_id: "b".into(),
                    child_session: "c-b".into()
                },
                OpenChild {
                    call_id: "c".into(),
                    child_session: "c-c".into()
                },
            ]
        );
    }
}
