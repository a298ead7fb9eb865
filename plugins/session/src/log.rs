//! [`SessionLog`]: one session's header and events in memory — the write site.
//!
//! `append` validates each event (SES-01/02), assigns `seq` (= log length, contiguous) and
//! `time` (epoch ms, never decreasing), stages the B15 invariants and the projection, and
//! commits the whole batch or nothing. Committed events are `Arc`s that nobody can mutate; the
//! writer and observers share them without copying. No I/O happens here (SES-04): durability is
//! the writer's job.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use keel_plugin_api::services::session::{EventRecord, SessionHeader, StoreError};
use serde_json::Value;

use crate::error::{Result, SessionError};
use crate::invariants::Invariants;
use crate::projection::Projection;
use crate::validate::{EventTypes, NewEvent, check_header, check_new, check_readable};

/// Epoch milliseconds now.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// One session's log: header, committed events, balance state and projection.
#[derive(Debug, Clone)]
pub struct SessionLog {
    header: SessionHeader,
    events: Vec<Arc<EventRecord>>,
    invariants: Invariants,
    projection: Projection,
    last_time: u64,
    types: Arc<EventTypes>,
}

impl SessionLog {
    /// An empty log for `header`.
    ///
    /// # Errors
    /// When the header is invalid (version, id, relative cwd).
    pub fn new(header: SessionHeader, types: Arc<EventTypes>) -> Result<Self> {
        check_header(&header).map_err(|e| SessionError::invalid(e.message))?;
        Ok(SessionLog {
            last_time: header.created_at,
            header,
            events: Vec::new(),
            invariants: Invariants::new(),
            projection: Projection::new(),
            types,
        })
    }

    /// Rebuilds a log from stored events (read side): unknown required types are
    /// `SESSION_UNSUPPORTED` (SES-09), broken seqs or rules `SESSION_CORRUPT`.
    ///
    /// Checked here: the header (version, id, absolute cwd), seqs contiguous from 0, every type
    /// known or `ignorable`, and the structural rules a damaged log breaks — the B15 balance
    /// ([`Invariants::apply`]) and the projection's surface rules (replace ranges, sources).
    /// Not re-run: the write-site data checks of `check_new` (finite numbers, no duplicate
    /// keys, per-type payload shapes), which every stored record passed when it was appended;
    /// duplicate keys could not be seen here anyway, the records being parsed already. The
    /// backend has checked each record's envelope and JSON syntax on load.
    ///
    /// # Errors
    /// As described.
    pub fn replay(
        header: SessionHeader,
        events: Vec<EventRecord>,
        types: Arc<EventTypes>,
    ) -> Result<Self> {
        check_header(&header)?;
        check_readable(&events, &types)?;
        let mut log = SessionLog::new(header, types)?;
        for ev in events {
            let ev = Arc::new(ev);
            log.invariants
                .apply(&ev)
                .and_then(|_| log.projection.apply(&ev).map(drop))
                .map_err(|e| SessionError::corrupt(format!("stored log: {}", e.message)))?;
            log.last_time = log.last_time.max(ev.time);
            log.events.push(ev);
        }
        Ok(log)
    }

    /// The header.
    pub fn header(&self) -> &SessionHeader {
        &self.header
    }

    /// Committed events, in seq order.
    pub fn events(&self) -> &[Arc<EventRecord>] {
        &self.events
    }

    /// Number of committed events (= the next seq).
    pub fn len(&self) -> u64 {
        self.events.len() as u64
    }

    /// Whether no event was committed.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// The balance state (open turn/step, pending calls).
    pub fn invariants(&self) -> &Invariants {
        &self.invariants
    }

    /// The incremental projection.
    pub fn projection(&self) -> &Projection {
        &self.projection
    }

    /// The model history (owned copies).
    pub fn messages(&self) -> Vec<Value> {
        self.projection.messages()
    }

    /// The known event types.
    pub fn types(&self) -> &Arc<EventTypes> {
        &self.types
    }

    /// Appends a batch at the current time. See [`SessionLog::append_at`].
    ///
    /// # Errors
    /// As [`SessionLog::append_at`].
    pub fn append(&mut self, batch: Vec<NewEvent>) -> Result<&[Arc<EventRecord>]> {
        self.append_at(batch, now_ms())
    }

    /// Appends a batch as of `now` (epoch ms; the stored time never decreases): all events or
    /// none. Returns the committed events.
    ///
    /// # Errors
    /// `SESSION_INVALID` naming the rule and seq of the first refused event; nothing of the
    /// batch is committed then.
    pub fn append_at(&mut self, batch: Vec<NewEvent>, now: u64) -> Result<&[Arc<EventRecord>]> {
        let start = self.events.len();
        let time = self.last_time.max(now);
        let mut records = Vec::with_capacity(batch.len());
        for (i, ev) in batch.into_iter().enumerate() {
            let seq = (start + i) as u64;
            check_new(&ev, seq, &self.types)?;
            records.push(EventRecord {
                seq,
                time,
                kind: ev.kind,
                data: ev.data,
                ignorable: ev.ignorable,
                surface_op: ev.surface_op,
                source_event_seqs: ev.source_event_seqs,
            });
        }
        self.stage(records)?;
        Ok(&self.events[start..])
    }

    /// Appends one event now; returns its seq (the hot path for benchmarks and the loop).
    ///
    /// # Errors
    /// As [`SessionLog::append_at`].
    pub fn append_one(&mut self, ev: NewEvent) -> Result<u64> {
        let seq = self.len();
        check_new(&ev, seq, &self.types)?;
        let time = self.last_time.max(now_ms());
        let rec = EventRecord {
            seq,
            time,
            kind: ev.kind,
            data: ev.data,
            ignorable: ev.ignorable,
            surface_op: ev.surface_op,
            source_event_seqs: ev.source_event_seqs,
        };
        let mut staged = self.invariants.clone();
        staged.apply(&rec)?;
        let rec = Arc::new(rec);
        self.projection.apply(&rec)?;
        self.invariants = staged;
        self.last_time = time;
        self.events.push(rec);
        Ok(seq)
    }

    /// Commits records whose seq and time are already assigned (recovery closers, a fork's
    /// end-seed): seqs must continue the log; every rule still applies.
    ///
    /// # Errors
    /// `SESSION_SEQ` for a gap, `SESSION_INVALID` for a broken rule.
    pub fn commit_records(&mut self, records: Vec<EventRecord>) -> Result<&[Arc<EventRecord>]> {
        let start = self.events.len();
        for (i, r) in records.iter().enumerate() {
            if r.seq != (start + i) as u64 {
                return Err(SessionError::new(
                    StoreError::Seq,
                    format!(
                        "record seq {} does not continue the log at {}",
                        r.seq,
                        start + i
                    ),
                ));
            }
        }
        self.stage(records)?;
        Ok(&self.events[start..])
    }

    fn stage(&mut self, records: Vec<EventRecord>) -> Result<()> {
        let records: Vec<Arc<EventRecord>> = records.into_iter().map(Arc::new).collect();
        let mut staged = self.invariants.clone();
        for r in &records {
            staged.apply(r)?;
        }
        let mut undos = Vec::with_capacity(records.len());
        for r in &records {
            match self.projection.apply(r) {
                Ok(u) => undos.push(u),
                Err(e) => {
                    for u in undos.into_iter().rev() {
                        self.projection.undo(u);
                    }
                    return Err(e);
                }
            }
        }
        self.invariants = staged;
        for r in records {
            self.last_time = self.last_time.max(r.time);
            self.events.push(r);
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::core_events as ce;
    use crate::test_support::tc;
    use keel_plugin_api::services::session::{FORMAT_VERSION, HeaderKind};
    use serde_json::json;

    pub(crate) fn header(id: &str) -> SessionHeader {
        SessionHeader {
            kind: HeaderKind::Session,
            version: FORMAT_VERSION,
            id: id.into(),
            created_at: 5,
            cwd: "/work".into(),
            parent_session: None,
            seed_length: None,
            parent_call_id: None,
            origin: None,
            delegation_depth: 0,
        }
    }

    fn log() -> SessionLog {
        SessionLog::new(header("s"), Arc::default()).unwrap()
    }

    #[test]
    fn ses01_seq_is_contiguous_and_time_monotonic() {
        let mut l = log();
        let got: Vec<u64> = l
            .append_at(vec![ce::user_message("u", "a"), ce::turn_start(0)], 100)
            .unwrap()
            .iter()
            .map(|e| e.seq)
            .collect();
        assert_eq!(got, [0, 1]);
        let later = l.append_at(vec![ce::turn_end(0, "completed")], 50).unwrap();
        assert_eq!((later[0].seq, later[0].time), (2, 100));
        assert_eq!(l.append_one(ce::user_message("v", "b")).unwrap(), 3);
        assert!(l.events()[3].time >= 100);
    }

    #[test]
    fn ses01_batch_is_all_or_nothing() {
        let mut l = log();
        l.append_at(vec![ce::turn_start(0)], 1).unwrap();
        let before = (l.len(), l.messages(), l.invariants().clone());
        let e = l
            .append_at(
                vec![
                    ce::step_start(0, 0),
                    ce::user_message("u", "x"),
                    ce::step_start(0, 1), // second open step: refused
                ],
                2,
            )
            .unwrap_err();
        assert!(
            e.message.contains("seq 3") && e.message.contains("B15.step-start"),
            "{e}"
        );
        assert_eq!((l.len(), l.messages(), l.invariants().clone()), before);
        // Projection failure after invariants passed is rolled back too.
        let e = l
            .append_at(
                vec![
                    ce::user_message("u", "x"),
                    NewEvent::replace("user/message", json!({"content":"s"}), 1, 1, vec![]),
                ],
                3,
            )
            .unwrap_err();
        assert!(e.message.contains("SES-03.replace-sources"), "{e}");
        assert_eq!((l.len(), l.messages()), (before.0, before.1));
    }

    #[test]
    fn ses01_invalid_data_is_refused_at_the_write_site() {
        let mut l = log();
        assert!(l.append_one(ce::user_message("u", json!(-0.0))).is_err());
        assert!(
            l.append_one(NewEvent::new("turn/start", json!([0])))
                .is_err()
        );
        assert!(l.is_empty());
    }

    #[test]
    fn ses01_returned_events_and_messages_are_copies_or_immutable() {
        let mut l = log();
        l.append_one(ce::user_message("u", "original")).unwrap();
        let mut msgs = l.messages();
        msgs[0]["content"] = json!("mutated");
        let mut ev = (*l.events()[0]).clone();
        ev.data["content"] = json!("mutated");
        assert_eq!(l.messages()[0]["content"], "original");
        assert_eq!(l.events()[0].data["content"], "original");
    }

    #[test]
    fn replay_rebuilds_state_and_refuses_broken_logs() {
        let mut l = log();
        l.append_at(
            vec![
                ce::turn_start(0),
                ce::step_start(0, 0),
                ce::assistant_message(0, 0, "", &[tc("a")]),
            ],
            1,
        )
        .unwrap();
        let events: Vec<EventRecord> = l.events().iter().map(|e| (**e).clone()).collect();
        let r = SessionLog::replay(header("s"), events.clone(), Arc::default()).unwrap();
        assert_eq!(r.invariants(), l.invariants());
        assert_eq!(r.messages(), l.messages());
        let mut broken = events;
        broken.remove(1);
        broken[1].seq = 1;
        let e = SessionLog::replay(header("s"), broken, Arc::default()).unwrap_err();
        assert!(e.is(StoreError::Corrupt), "{e}");
    }

    #[test]
    fn commit_records_requires_continuation() {
        let mut l = log();
        let mut r = crate::test_support::user(1, "x");
        assert!(
            l.commit_records(vec![r.clone()])
                .unwrap_err()
                .is(StoreError::Seq)
        );
        r.seq = 0;
        assert_eq!(l.commit_records(vec![r]).unwrap().len(), 1);
    }
}
