//! The read side of [`SessionManager`]: `load` (commits recovery, SES-06), `inspect` (commits
//! nothing), `list`, `messages`. A live session is never repaired.

use std::collections::HashMap;
use std::sync::Arc;

use keel_plugin_api::sdk::Frozen;
use keel_plugin_api::services::session::{EventRecord, PROFILE_EVENT, StoreError, SurfaceNode};
use serde_json::{Value, json};

use super::{Live, SessionManager, Snapshot, arcs, lock};
use crate::error::{Result, SessionError};
use crate::projection::{Projection, derive_frozen};
use crate::recovery::closers;
use crate::store::{Listing, StoreAppend};
use crate::validate::check_id;

impl SessionManager {
    /// Loads a session that is not live, committing recovery closers (SES-06). For a live id
    /// (here or in another process): its events when balanced, `SESSION_LOCKED` while a turn
    /// is open — a live writer holds it, and it is never repaired.
    ///
    /// # Errors
    /// As described, plus `SESSION_NOT_FOUND`, `SESSION_UNSUPPORTED`, `SESSION_CORRUPT`.
    pub async fn load(&self, id: &str) -> Result<Snapshot> {
        check_id(id)?;
        if let Some(live) = self.live(id) {
            let (header, events, open) = Self::live_snapshot(&live);
            if let Some(turn) = open {
                return Err(live_open_turn(id, turn));
            }
            return Ok(Snapshot {
                header,
                events,
                recovered: Vec::new(),
                committed: false,
                truncated: None,
            });
        }
        match self.store.claim(id).await {
            Ok(()) => {
                let r = self.load_claimed(id).await;
                let _ = self.store.release(id).await;
                r
            }
            Err(e) if e.is(StoreError::Locked) => {
                // Live in another process: never repaired.
                let snap = self.inspect(id).await?;
                if snap.recovered.is_empty() {
                    Ok(snap)
                } else {
                    Err(SessionError::new(
                        StoreError::Locked,
                        format!(
                            "session '{id}' is held by a live writer in another process, with a turn open; it is never repaired while live (try again when that run ends)"
                        ),
                    ))
                }
            }
            Err(e) => Err(e),
        }
    }

    async fn load_claimed(&self, id: &str) -> Result<Snapshot> {
        let loaded = self.load_checked(id, true).await?;
        let recovered = closers(&loaded.events);
        if let Some(last) = recovered.last() {
            self.store
                .append(StoreAppend {
                    session_id: id.to_owned(),
                    header: None,
                    events: arcs(recovered.clone()),
                    expected_next_seq: loaded.events.len() as u64,
                })
                .await?;
            self.durable(id, last.seq);
        }
        let mut events = loaded.events;
        events.extend(recovered.iter().cloned());
        Ok(Snapshot {
            header: loaded.header,
            events,
            recovered,
            committed: true,
            truncated: loaded.truncated,
        })
    }

    /// Like [`SessionManager::load`] but commits nothing: closers are computed and returned in
    /// `recovered` only (not in `events`). Works on live sessions too.
    ///
    /// # Errors
    /// `SESSION_NOT_FOUND`, `SESSION_UNSUPPORTED`, `SESSION_CORRUPT`, store errors.
    pub async fn inspect(&self, id: &str) -> Result<Snapshot> {
        check_id(id)?;
        let (header, events, truncated) = match self.live(id) {
            Some(live) => {
                let (h, e, _) = Self::live_snapshot(&live);
                (h, e, None)
            }
            None => {
                let l = self.load_checked(id, false).await?;
                (l.header, l.events, l.truncated)
            }
        };
        let recovered = closers(&events);
        Ok(Snapshot {
            header,
            events,
            recovered,
            committed: false,
            truncated,
        })
    }

    /// Every stored session (the store's rows), live ones marked `"live": true`; live sessions
    /// not yet stored are listed too. What the store could not read is in `unreadable`, each
    /// `{path, reason, code, session_id}` (`session_id` `null` when the file names none).
    ///
    /// # Errors
    /// Store errors.
    pub async fn list(&self) -> Result<Listing> {
        let Listing {
            sessions: mut rows,
            unreadable,
        } = self.store.list().await?;
        let unreadable = unreadable.into_iter().map(unreadable_entry).collect();
        let live: HashMap<String, Arc<Live>> = lock(&self.live).clone();
        for row in &mut rows {
            let id = row.get("id").and_then(Value::as_str).unwrap_or_default();
            if live.contains_key(id) {
                row["live"] = Value::Bool(true);
            }
        }
        for (id, l) in &live {
            if !rows
                .iter()
                .any(|r| r.get("id").and_then(Value::as_str) == Some(id))
            {
                let log = lock(&l.log);
                let mut row = serde_json::to_value(log.header()).unwrap_or_default();
                row["events"] = Value::from(log.len());
                row["updated_at"] = Value::from(
                    log.events()
                        .last()
                        .map_or(log.header().created_at, |e| e.time),
                );
                row["live"] = Value::Bool(true);
                rows.push(row);
            }
        }
        Ok(Listing {
            sessions: rows,
            unreadable,
        })
    }

    /// The projected model history: incremental for a live session; for a stored one, derived
    /// over the durable events plus (uncommitted) recovery closers.
    ///
    /// # Errors
    /// Load errors; `SESSION_CORRUPT` when a stored log does not project.
    pub async fn messages(&self, id: &str) -> Result<Vec<Frozen>> {
        if let Some(live) = self.live(id) {
            return lock(&live.log).projection().shared();
        }
        let snap = self.inspect(id).await?;
        let mut events = snap.events;
        events.extend(snap.recovered);
        derive_frozen(&events).map_err(|e| SessionError::corrupt(e.message))
    }

    /// The visible history with each message's seq and role (issue 14), and the next seq: for
    /// a live session from its projection, for a stored one derived like `messages`.
    ///
    /// # Errors
    /// As [`SessionManager::messages`].
    pub async fn surface(&self, id: &str) -> Result<(Vec<SurfaceNode>, u64)> {
        if let Some(live) = self.live(id) {
            let log = lock(&live.log);
            return Ok((log.projection().surface()?, log.len()));
        }
        let snap = self.inspect(id).await?;
        let mut events = snap.events;
        events.extend(snap.recovered);
        let mut projection = Projection::new();
        for ev in &events {
            projection
                .apply(&Arc::new(ev.clone()))
                .map_err(|e| SessionError::corrupt(e.message))?;
        }
        Ok((projection.surface()?, events.len() as u64))
    }

    /// Events by seq, in the order asked (issue 14: the cold tier reads shadowed originals
    /// back): from the live log without copying the others, else from the stored log.
    ///
    /// # Errors
    /// `SESSION_INVALID` for a seq past the end; load errors.
    pub async fn read_events(&self, id: &str, seqs: &[u64]) -> Result<Vec<EventRecord>> {
        let pick = |events: &[Arc<EventRecord>]| -> Result<Vec<EventRecord>> {
            seqs.iter()
                .map(|&seq| {
                    usize::try_from(seq)
                        .ok()
                        .and_then(|i| events.get(i))
                        .map(|e| EventRecord::clone(e))
                        .ok_or_else(|| {
                            SessionError::invalid(format!(
                                "session '{id}' has no event with seq {seq} ({} events)",
                                events.len()
                            ))
                        })
                })
                .collect()
        };
        if let Some(live) = self.live(id) {
            return pick(lock(&live.log).events());
        }
        let snap = self.inspect(id).await?;
        let mut events: Vec<Arc<EventRecord>> = snap.events.into_iter().map(Arc::new).collect();
        events.extend(snap.recovered.into_iter().map(Arc::new));
        pick(&events)
    }
}

/// A backend's `{session_id, path, code, message}` as `{path, reason, code, session_id}`.
fn unreadable_entry(v: Value) -> Value {
    let field = |k: &str| v.get(k).cloned().unwrap_or(Value::Null);
    json!({
        "path": field("path"),
        "reason": field("message"),
        "code": field("code"),
        "session_id": field("session_id"),
    })
}

fn live_open_turn(id: &str, turn: u64) -> SessionError {
    SessionError::new(
        StoreError::Locked,
        format!(
            "session '{id}' is live in this process with turn {turn} open; a live session is never repaired (use inspect)"
        ),
    )
}

impl SessionManager {
    /// The profile session `id` was created under: the data of its first `session/profile`
    /// event, `None` when it records none (issue 11 item 7). Reads a stored session without
    /// repairing it (like [`SessionManager::inspect`]; live elsewhere is fine).
    ///
    /// # Errors
    /// `SESSION_NOT_FOUND`, `SESSION_UNSUPPORTED`, `SESSION_CORRUPT`, store errors.
    pub async fn recorded_profile(&self, id: &str) -> Result<Option<Value>> {
        check_id(id)?;
        let first = |events: &[EventRecord]| {
            events
                .iter()
                .find(|e| e.kind == PROFILE_EVENT)
                .map(|e| e.data.clone())
        };
        Ok(match self.live(id) {
            Some(live) => first(&Self::live_snapshot(&live).1),
            None => first(&self.load_checked(id, false).await?.events),
        })
    }
}
