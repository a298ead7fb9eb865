//! The parent's log records its resident children (issue 16 item 2; SES-06 for residents): a
//! durable, ignorable `subagent/spawned {call_id, child_session, agent, mode:"resident",
//! depth, resident}` before the child takes any input, and `subagent/ended {call_id,
//! child_session, outcome, resident, …}` when a stop path ends it. A crash between the two
//! leaves a `subagent/spawned` without its end, which the delegate work's `agent/resumed`
//! listener ([`crate::delegate_resume`]) settles on `keel resume PARENT` like a one-shot
//! child's: the child's log gets its recovery closers, the parent `subagent/ended
//! {outcome:"interrupted"}`.
//!
//! A stop path may run after the parent session closed (its `session/disposed`, the row
//! unloading): the end is then written by opening the parent again, appending, flushing and
//! closing it, with this row's own `session/disposed` listener told to let that close pass.

use keel_plugin_api::prelude::*;
use keel_plugin_api::services::session::{AppendEvents, EventInput, SessionCode, SessionRef};
use keel_plugin_api::services::tools::ToolCall;
use serde_json::{Value, json};

use super::Host;
use super::registry::Resident;

/// The `mode` of a resident child's `subagent/spawned`.
pub const MODE: &str = "resident";

/// `subagent/ended` data for `r`.
pub fn ended(r: &Resident, outcome: &str, extra: &Value) -> Value {
    let mut v = json!({
        "call_id": r.call_id,
        "child_session": r.child,
        "outcome": outcome,
        "resident": r.name,
    });
    if let (Some(v), Some(extra)) = (v.as_object_mut(), extra.as_object()) {
        v.extend(extra.clone());
    }
    v
}

impl Host {
    /// Appends `subagent/spawned` for a resident child to its parent's log, durably.
    ///
    /// # Errors
    /// The parent's log refused it (the start fails: a child must not run unrecorded).
    pub(super) async fn log_spawned(
        &self,
        call: &ToolCall,
        child: &str,
        agent: Option<&str>,
        depth: u32,
        name: &str,
    ) -> Result<()> {
        let data = json!({
            "call_id": call.call_id,
            "child_session": child,
            "agent": agent,
            "mode": MODE,
            "depth": depth,
            "resident": name,
        });
        let event = EventInput::new("subagent/spawned", &data)?.ignorable();
        self.append_flush(&call.session_id, vec![event]).await
    }

    /// Appends `subagent/ended` records to `parent`'s log, durably, opening the parent again
    /// when it is no longer live. Never fails: what could not be written is logged (a later
    /// `keel resume` of the parent records the child `interrupted` instead).
    pub(super) async fn log_ended(&self, parent: &str, records: &[Value]) {
        if records.is_empty() {
            return;
        }
        let events = match records
            .iter()
            .map(|d| EventInput::new("subagent/ended", d).map(EventInput::ignorable))
            .collect::<Result<Vec<_>>>()
        {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(parent = %parent, "subagent/ended could not be built: {e}");
                return;
            }
        };
        let Err(live) = self.append_flush(parent, events.clone()).await else {
            return;
        };
        if let Err(e) = self.reopen_and_append(parent, events).await {
            let level_debug = e.is(SessionCode::NotFound);
            if level_debug {
                // An ephemeral parent is gone with its close: nothing to record into.
                tracing::debug!(parent = %parent, "subagent/ended not logged: {live}; {e}");
            } else {
                tracing::warn!(parent = %parent, "subagent/ended could not be logged: {live}; {e}");
            }
        }
    }

    async fn append_flush(&self, session: &str, events: Vec<EventInput>) -> Result<()> {
        self.sessions
            .append(AppendEvents {
                session_id: session.to_owned(),
                events,
            })
            .await?;
        self.sessions.flush(SessionRef::new(session)).await?;
        Ok(())
    }

    /// Opens a closed parent, appends, flushes and closes it again (its close is not a stop
    /// path: the `session/disposed` listener lets it pass).
    async fn reopen_and_append(&self, parent: &str, events: Vec<EventInput>) -> Result<()> {
        self.sessions.open(SessionRef::new(parent)).await?;
        let written = self.append_flush(parent, events).await;
        self.reopened(parent, true);
        let closed = self.sessions.close(SessionRef::new(parent)).await;
        self.reopened(parent, false);
        written.and(closed)
    }

    /// Marks `parent` as closed by [`Host::log_ended`] (or no longer).
    fn reopened(&self, parent: &str, on: bool) {
        let mut set = self
            .reopened
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if on {
            set.insert(parent.to_owned());
        } else {
            set.remove(parent);
        }
    }

    /// Whether `session` is being closed by [`Host::log_ended`].
    pub(super) fn is_reopened(&self, session: &str) -> bool {
        self.reopened
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(session)
    }
}
