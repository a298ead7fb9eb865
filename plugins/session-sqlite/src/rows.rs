//! Reading and writing the rows of one session: headers to and from `sessions`, envelopes to
//! and from `events`, and the torn-tail rule of B4. Rows are read in seq order; the first
//! defect (an unparsable row or a seq gap) is a torn tail when no `turn/end` follows it (all
//! rows from it on are cut), and corruption otherwise.
//!
//! A load answers the kept rows either as `Value` records or, for `format: "jsonl"`, as JSON
//! lines assembled from the columns: the stored `data` text goes in verbatim once its syntax is
//! checked ([`crate::line::check_json`]), so no `Value` is built for it.

use keel_session_store_kit::SharedFailures as _;
use std::fmt::Write as _;
use std::path::Path;

use keel_plugin_api::services::session::{EventRecord, HeaderKind, SessionHeader};
use rusqlite::{Connection, OptionalExtension, Row, params};
use serde_json::{Map, Value};

use crate::envelope;
use crate::error::SqliteError;
use crate::line::check_json;

/// The kept records of a session, in one of the two forms of a load answer.
#[derive(Debug, Clone)]
pub enum Events {
    /// One `Value` per record (the `events` array).
    Values(Vec<Value>),
    /// One JSON line per record, each ending with a newline (`events_jsonl`).
    Lines {
        /// The lines.
        text: String,
        /// How many.
        count: u64,
    },
}

impl Events {
    /// Number of records.
    pub fn len(&self) -> u64 {
        match self {
            Events::Values(v) => v.len() as u64,
            Events::Lines { count, .. } => *count,
        }
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The rows of a session that load keeps, and the torn tail it cuts.
#[derive(Debug, Clone)]
pub struct Scan {
    /// Every committed event (checked envelopes), seq 0.. in order.
    pub events: Events,
    /// `(seq, reason)` of the first cut row.
    pub torn: Option<(u64, String)>,
}

fn io<'a>(path: &'a Path, action: &'static str) -> impl Fn(rusqlite::Error) -> SqliteError + 'a {
    move |e| SqliteError::io(action, path, e)
}

fn to_i64(what: &str, v: u64) -> Result<i64, SqliteError> {
    i64::try_from(v).map_err(|_| SqliteError::invalid(format!("{what} {v} does not fit SQLite")))
}

/// The stored format version of session `id`, if it exists.
pub fn version(conn: &Connection, path: &Path, id: &str) -> Result<Option<i64>, SqliteError> {
    conn.query_row("SELECT version FROM sessions WHERE id = ?1", [id], |r| {
        r.get(0)
    })
    .optional()
    .map_err(io(path, "read"))
}

/// Inserts the `sessions` row of a new session.
pub fn insert_header(
    conn: &Connection,
    path: &Path,
    h: &SessionHeader,
    now: i64,
) -> Result<(), SqliteError> {
    let seed = h
        .seed_length
        .map(|s| to_i64("seed_length", s))
        .transpose()?;
    conn.execute(
        "INSERT INTO sessions (id, version, created_at, cwd, parent_session, seed_length, origin, delegation_depth, updated_at, parent_call_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![
            h.id,
            i64::from(h.version),
            to_i64("created_at", h.created_at)?,
            h.cwd,
            h.parent_session,
            seed,
            h.origin,
            i64::from(h.delegation_depth),
            now,
            h.parent_call_id
        ],
    )
    .map_err(io(path, "write"))?;
    Ok(())
}

/// Reads a header row (`version` already checked by the caller) from the columns
/// `id, version, created_at, cwd, parent_session, seed_length, origin, delegation_depth,
/// parent_call_id`.
pub fn header_from(row: &Row<'_>) -> rusqlite::Result<SessionHeader> {
    let version: i64 = row.get(1)?;
    let created_at: i64 = row.get(2)?;
    let seed: Option<i64> = row.get(5)?;
    let depth: i64 = row.get(7)?;
    Ok(SessionHeader {
        kind: HeaderKind::Session,
        version: u32::try_from(version).unwrap_or(u32::MAX),
        id: row.get(0)?,
        created_at: u64::try_from(created_at).unwrap_or(0),
        cwd: row.get(3)?,
        parent_session: row.get(4)?,
        seed_length: seed.map(|s| u64::try_from(s).unwrap_or(0)),
        origin: row.get(6)?,
        delegation_depth: u32::try_from(depth).unwrap_or(0),
        parent_call_id: row.get(8)?,
    })
}

/// Reads the header of session `id`.
pub fn header(
    conn: &Connection,
    path: &Path,
    id: &str,
) -> Result<Option<SessionHeader>, SqliteError> {
    conn.query_row(
        "SELECT id, version, created_at, cwd, parent_session, seed_length, origin, delegation_depth, parent_call_id
         FROM sessions WHERE id = ?1",
        [id],
        header_from,
    )
    .optional()
    .map_err(io(path, "read"))
}

/// Inserts one event row.
pub fn insert_event(
    conn: &Connection,
    path: &Path,
    id: &str,
    e: &EventRecord,
) -> Result<(), SqliteError> {
    let json =
        |v: serde_json::Result<String>| v.map_err(|e| SqliteError::invalid(format!("event: {e}")));
    let data = json(serde_json::to_string(&e.data))?;
    let sources = e
        .source_event_seqs
        .as_ref()
        .map(|s| json(serde_json::to_string(s)))
        .transpose()?;
    let surface = e
        .surface_op
        .as_ref()
        .map(|s| json(serde_json::to_string(s)))
        .transpose()?;
    let mut stmt = conn
        .prepare_cached(
            "INSERT INTO events (session_id, seq, type, time, data, source_event_seqs, surface_op, ignorable)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )
        .map_err(io(path, "write"))?;
    stmt.execute(params![
        id,
        to_i64("seq", e.seq)?,
        e.kind,
        to_i64("time", e.time)?,
        data,
        sources,
        surface,
        e.ignorable.then_some(1_i64)
    ])
    .map_err(io(path, "write"))?;
    Ok(())
}

/// A row that is not the expected record: why, and whether the row itself is still a valid
/// record that comes after the defect (a seq gap) rather than the defect (unparsable).
struct Defect {
    reason: String,
    row_follows: bool,
}

/// Checks one row and adds it to `out`.
fn decode(row: &Row<'_>, expected: u64, out: &mut Events) -> Result<(), Defect> {
    let bad = |reason: String| Defect {
        reason,
        row_follows: false,
    };
    let seq: i64 = row.get(0).map_err(|e| bad(format!("seq: {e}")))?;
    if u64::try_from(seq).ok() != Some(expected) {
        return Err(Defect {
            reason: format!("seq {seq} where {expected} was expected (missing record)"),
            row_follows: true,
        });
    }
    let kind: String = row.get(1).map_err(|e| bad(format!("type: {e}")))?;
    let time: i64 = row.get(2).map_err(|e| bad(format!("time: {e}")))?;
    let data: String = row.get(3).map_err(|e| bad(format!("data: {e}")))?;
    let sources: Option<String> = row
        .get(4)
        .map_err(|e| bad(format!("source_event_seqs: {e}")))?;
    let surface: Option<String> = row.get(5).map_err(|e| bad(format!("surface_op: {e}")))?;
    let ignorable: Option<i64> = row.get(6).map_err(|e| bad(format!("ignorable: {e}")))?;
    let json = |what: &str, text: &str| {
        serde_json::from_str::<Value>(text).map_err(|e| bad(format!("unparsable {what}: {e}")))
    };
    let ignorable = match ignorable {
        None => false,
        Some(1) => true,
        Some(other) => return Err(bad(format!("ignorable is {other}"))),
    };
    let surface = surface.map(|s| json("surface_op", &s)).transpose()?;
    let sources = sources.map(|s| json("source_event_seqs", &s)).transpose()?;
    let invalid = |e: String| bad(format!("invalid record: {e}"));
    match out {
        Events::Values(events) => {
            let mut map = Map::new();
            map.insert("seq".into(), Value::from(expected));
            map.insert("time".into(), Value::from(time));
            map.insert("type".into(), Value::from(kind));
            map.insert("data".into(), json("data", &data)?);
            if ignorable {
                map.insert("ignorable".into(), Value::Bool(true));
            }
            if let Some(s) = surface {
                map.insert("surface_op".into(), s);
            }
            if let Some(s) = sources {
                map.insert("source_event_seqs".into(), s);
            }
            let event = Value::Object(map);
            envelope::check(&event).map_err(invalid)?;
            events.push(event);
        }
        Events::Lines { text, count } => {
            // The same checks as `envelope::check` on the record above, field by field.
            let time = u64::try_from(time)
                .map_err(|_| invalid("'time' is not an unsigned integer".into()))?;
            check_json(&data).map_err(|e| bad(format!("unparsable data: {e}")))?;
            if let Some(s) = &surface {
                envelope::surface_op(s).map_err(invalid)?;
            }
            if let Some(s) = &sources {
                envelope::source_event_seqs(s).map_err(invalid)?;
            }
            let kind = Value::String(kind);
            let _ = write!(
                text,
                r#"{{"seq":{expected},"time":{time},"type":{kind},"data":"#
            );
            if data.contains('\n') {
                // Whitespace of a hand-edited row; a record must stay on one line.
                text.push_str(&json("data", &data)?.to_string());
            } else {
                text.push_str(&data);
            }
            if ignorable {
                text.push_str(r#","ignorable":true"#);
            }
            if let Some(s) = surface {
                let _ = write!(text, r#","surface_op":{s}"#);
            }
            if let Some(s) = sources {
                let _ = write!(text, r#","source_event_seqs":{s}"#);
            }
            text.push_str("}\n");
            *count += 1;
        }
    }
    Ok(())
}

/// Reads every row of session `id` and applies the torn-tail rule; `lines` picks the form of
/// [`Scan::events`].
pub fn scan(conn: &Connection, path: &Path, id: &str, lines: bool) -> Result<Scan, SqliteError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT seq, type, time, data, source_event_seqs, surface_op, ignorable
             FROM events WHERE session_id = ?1 ORDER BY seq",
        )
        .map_err(io(path, "read"))?;
    let mut rows = stmt.query([id]).map_err(io(path, "read"))?;
    let mut events = if lines {
        Events::Lines {
            text: String::new(),
            count: 0,
        }
    } else {
        Events::Values(Vec::new())
    };
    let mut defect: Option<(u64, String)> = None;
    while let Some(row) = rows.next().map_err(io(path, "read"))? {
        let row_seq: i64 = row.get(0).unwrap_or(-1);
        let is_turn_end = row.get::<_, String>(1).is_ok_and(|k| k == "turn/end");
        if let Some((seq, reason)) = &defect {
            if is_turn_end {
                return Err(SqliteError::Corrupt {
                    path: path.to_owned(),
                    id: id.to_owned(),
                    seq: *seq,
                    detail: format!("{reason}, before the committed turn/end at seq {row_seq}"),
                });
            }
            continue;
        }
        match decode(row, events.len(), &mut events) {
            Ok(()) => {}
            Err(d) => {
                let seq = events.len();
                if d.row_follows && is_turn_end {
                    return Err(SqliteError::Corrupt {
                        path: path.to_owned(),
                        id: id.to_owned(),
                        seq,
                        detail: format!(
                            "{}, before the committed turn/end at seq {row_seq}",
                            d.reason
                        ),
                    });
                }
                defect = Some((seq, d.reason));
            }
        }
    }
    Ok(Scan {
        events,
        torn: defect,
    })
}
