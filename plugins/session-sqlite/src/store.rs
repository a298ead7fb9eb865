//! [`SqliteStore`]: the `keel.session-store` contract over one SQLite database,
//! `<root>/sessions.sqlite3` (requirements B4). One transaction per `append` batch asserts
//! contiguity (a `sessions` row appears only with the first batch); `load` cuts a torn tail in
//! one transaction when asked to repair; `claim` is a `flock` on `<root>/<id>.lock`.
//!
//! The connection is opened on first use and validated by [`crate::schema`]; a foreign or
//! differently versioned database is refused on every call, never migrated. Calls are
//! synchronous; the plugin runs them on a thread of its own.

use keel_session_store_kit::SharedFailures as _;
use std::collections::HashSet;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use keel_plugin_api::prelude::Result as SdkResult;
use keel_plugin_api::services::session::{
    AppendBatch, BatchStored, FORMAT_VERSION, ListedSession, LoadStored, SessionHeader, SessionRef,
    StoredListing, StoredLog, StoredUnreadable, TornTail,
};
use keel_session_store_kit::{Backend, KitError};
use rusqlite::{Connection, TransactionBehavior};

use crate::args::{self, AppendArgs, LoadFormat};
use crate::error::SqliteError;
use crate::lock::Locks;
use crate::rows;

/// The database file name inside the root.
pub const DB_FILE: &str = "sessions.sqlite3";

/// What `load` returns.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The header.
    pub header: SessionHeader,
    /// Every committed event (checked envelopes), in the requested form.
    pub events: rows::Events,
    /// The torn tail that was cut (or would be, without `repair`).
    pub truncated: Option<Torn>,
}

/// A torn tail: the rows from `seq` on, which a repair deletes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Torn {
    /// The first cut seq.
    pub seq: u64,
    /// Why its row is not a committed record.
    pub reason: String,
    /// How many rows are cut (from `seq` on).
    pub rows: u64,
}

/// The SQLite session store rooted at one directory.
#[derive(Debug)]
pub struct SqliteStore {
    root: PathBuf,
    path: PathBuf,
    conn: Mutex<Option<Connection>>,
    /// Sessions whose stored rows this instance has validated (so appends trust `MAX(seq)`).
    checked: Mutex<HashSet<String>>,
    locks: Locks,
    #[cfg(any(test, feature = "fail-points"))]
    fail_next: std::sync::atomic::AtomicBool,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl SqliteStore {
    /// A store on `root` (directory and database created on first use).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        SqliteStore {
            path: root.join(DB_FILE),
            root,
            conn: Mutex::new(None),
            checked: Mutex::new(HashSet::new()),
            locks: Locks::default(),
            #[cfg(any(test, feature = "fail-points"))]
            fail_next: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The database file.
    pub fn db_path(&self) -> &Path {
        &self.path
    }

    /// Test-only: the next append fails after inserting part of its batch.
    #[cfg(any(test, feature = "fail-points"))]
    pub fn fail_next_write(&self) {
        self.fail_next
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    fn fail_point(&self) -> Result<(), SqliteError> {
        #[cfg(any(test, feature = "fail-points"))]
        if self
            .fail_next
            .swap(false, std::sync::atomic::Ordering::SeqCst)
        {
            return Err(SqliteError::io(
                "write",
                &self.path,
                "injected write failure (fail point)",
            ));
        }
        Ok(())
    }

    /// Runs `f` on the open, validated connection. With `create: false` a missing database is
    /// `Ok(None)` and nothing is created.
    fn with_conn<T>(
        &self,
        create: bool,
        f: impl FnOnce(&mut Connection) -> Result<T, SqliteError>,
    ) -> Result<Option<T>, SqliteError> {
        let mut slot = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            if !create && !self.path.exists() {
                return Ok(None);
            }
            *slot = Some(crate::schema::open(&self.root, &self.path)?);
        }
        match slot.as_mut() {
            Some(conn) => f(conn).map(Some),
            None => Ok(None),
        }
    }

    fn unsupported(&self, id: &str, version: i64) -> SqliteError {
        KitError::Unsupported {
            path: self.path.clone(),
            found: format!("{version} (session '{id}')"),
            expected: FORMAT_VERSION,
        }
        .into()
    }

    /// Appends one batch in one transaction; returns the next seq.
    ///
    /// # Errors
    /// `SESSION_NOT_FOUND`/`EXISTS` for a missing or superfluous header, `SESSION_SEQ`,
    /// `SESSION_IO` (rolled back), `SESSION_UNSUPPORTED`, `SESSION_CORRUPT`.
    pub fn append(&self, a: AppendArgs) -> Result<u64, SqliteError> {
        let path = &self.path;
        let id = a.session_id.as_str();
        let appended = self.with_conn(true, |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(|e| SqliteError::io("begin a transaction on", path, e))?;
            let next = match (&a.header, rows::version(&tx, path, id)?) {
                (Some(_), Some(_)) => return Err(SqliteError::Exists { id: id.to_owned(), path: path.clone() }),
                (None, None) => return Err(SqliteError::NotFound { id: id.to_owned(), path: path.clone() }),
                (Some(h), None) => {
                    rows::insert_header(&tx, path, h, now_ms())?;
                    0
                }
                (None, Some(v)) if v != i64::from(FORMAT_VERSION) => return Err(self.unsupported(id, v)),
                (None, Some(_)) => {
                    let mut checked = self.checked.lock().unwrap_or_else(|p| p.into_inner());
                    if !checked.contains(id) {
                        if let Some((seq, reason)) = rows::scan(&tx, path, id, true)?.torn {
                            return Err(SqliteError::Corrupt {
                                path: path.clone(),
                                id: id.to_owned(),
                                seq,
                                detail: format!("{reason}; load with repair to cut the torn tail before appending"),
                            });
                        }
                        checked.insert(id.to_owned());
                    }
                    let next: i64 = tx
                        .query_row("SELECT COALESCE(MAX(seq) + 1, 0) FROM events WHERE session_id = ?1", [id], |r| r.get(0))
                        .map_err(|e| SqliteError::io("read", path, e))?;
                    u64::try_from(next).unwrap_or(0)
                }
            };
            if a.expected_next_seq != next {
                return Err(SqliteError::seq(format!(
                    "session '{id}': stored next seq is {next}, the batch expects {}",
                    a.expected_next_seq
                )));
            }
            for (i, e) in a.events.iter().enumerate() {
                if i == a.events.len() / 2 {
                    self.fail_point()?;
                }
                rows::insert_event(&tx, path, id, e)?;
            }
            tx.execute("UPDATE sessions SET updated_at = ?1 WHERE id = ?2", rusqlite::params![now_ms(), id])
                .map_err(|e| SqliteError::io("write", path, e))?;
            tx.commit().map_err(|e| SqliteError::io("commit to", path, e))?;
            Ok(next + a.events.len() as u64)
        })?;
        appended.ok_or_else(|| SqliteError::NotFound {
            id: id.to_owned(),
            path: path.clone(),
        })
    }

    /// Loads every committed event; a torn tail is reported and, with `repair`, deleted in one
    /// transaction.
    ///
    /// # Errors
    /// `SESSION_NOT_FOUND`, `SESSION_UNSUPPORTED`, `SESSION_CORRUPT`, `SESSION_IO`.
    pub fn load(&self, id: &str, repair: bool, format: LoadFormat) -> Result<Loaded, SqliteError> {
        let path = &self.path;
        let loaded = self.with_conn(false, |conn| {
            let behavior = if repair {
                TransactionBehavior::Immediate
            } else {
                TransactionBehavior::Deferred
            };
            let tx = conn
                .transaction_with_behavior(behavior)
                .map_err(|e| SqliteError::io("begin a transaction on", path, e))?;
            match rows::version(&tx, path, id)? {
                None => {
                    return Err(SqliteError::NotFound {
                        id: id.to_owned(),
                        path: path.clone(),
                    });
                }
                Some(v) if v != i64::from(FORMAT_VERSION) => return Err(self.unsupported(id, v)),
                Some(_) => {}
            }
            let header = rows::header(&tx, path, id)?.ok_or_else(|| SqliteError::NotFound {
                id: id.to_owned(),
                path: path.clone(),
            })?;
            let scan = rows::scan(&tx, path, id, format.lines())?;
            let torn = match scan.torn {
                Some((seq, reason)) => {
                    let cut = i64::try_from(seq).unwrap_or(i64::MAX);
                    let rows = if repair {
                        tx.execute(
                            "DELETE FROM events WHERE session_id = ?1 AND seq >= ?2",
                            rusqlite::params![id, cut],
                        )
                        .map_err(|e| SqliteError::io("cut the torn tail in", path, e))?
                    } else {
                        tx.query_row(
                            "SELECT count(*) FROM events WHERE session_id = ?1 AND seq >= ?2",
                            rusqlite::params![id, cut],
                            |r| r.get::<_, i64>(0),
                        )
                        .map(|n| usize::try_from(n).unwrap_or(0))
                        .map_err(|e| SqliteError::io("read", path, e))?
                    };
                    Some(Torn {
                        seq,
                        reason,
                        rows: rows as u64,
                    })
                }
                None => None,
            };
            tx.commit()
                .map_err(|e| SqliteError::io("commit to", path, e))?;
            let mut checked = self.checked.lock().unwrap_or_else(|p| p.into_inner());
            if torn.is_none() || repair {
                checked.insert(id.to_owned());
            } else {
                checked.remove(id);
            }
            Ok(Loaded {
                header,
                events: scan.events,
                truncated: torn,
            })
        })?;
        loaded.ok_or_else(|| SqliteError::NotFound {
            id: id.to_owned(),
            path: path.clone(),
        })
    }

    /// `{sessions: [header + {events, updated_at}], unreadable: [{session_id, path, code,
    /// message}]}`, sorted by id (`path` is the database).
    ///
    /// # Errors
    /// `SESSION_UNSUPPORTED` for a foreign database, `SESSION_IO`.
    pub fn list(&self) -> Result<StoredListing, SqliteError> {
        let path = &self.path;
        let listed = self.with_conn(false, |conn| {
            let mut stmt = conn
                .prepare(
                    "SELECT id, version, created_at, cwd, parent_session, seed_length, origin, delegation_depth,
                            parent_call_id, updated_at, (SELECT count(*) FROM events e WHERE e.session_id = s.id)
                     FROM sessions s ORDER BY id",
                )
                .map_err(|e| SqliteError::io("read", path, e))?;
            let mut rows = stmt.query([]).map_err(|e| SqliteError::io("read", path, e))?;
            let mut sessions = Vec::new();
            let mut unreadable = Vec::new();
            while let Some(row) = rows.next().map_err(|e| SqliteError::io("read", path, e))? {
                let read = |row: &rusqlite::Row<'_>| -> rusqlite::Result<(SessionHeader, i64, i64)> {
                    Ok((rows::header_from(row)?, row.get(9)?, row.get(10)?))
                };
                let (header, updated_at, count) = read(row).map_err(|e| SqliteError::io("read", path, e))?;
                if header.version != FORMAT_VERSION {
                    let e = self.unsupported(&header.id, i64::from(header.version));
                    unreadable.push(StoredUnreadable {
                        session_id: Some(header.id.clone()),
                        path: path.to_string_lossy().into_owned(),
                        code: e.code().code().to_owned(),
                        message: e.to_string(),
                    });
                    continue;
                }
                sessions.push(ListedSession {
                    header,
                    events: u64::try_from(count).unwrap_or_default(),
                    updated_at: u64::try_from(updated_at).unwrap_or_default(),
                    live: false,
                });
            }
            Ok(StoredListing { sessions, unreadable })
        })?;
        Ok(listed.unwrap_or_default())
    }
}

/// The `keel.session-store` contract over this store (run on the plugin's thread).
impl Backend for SqliteStore {
    fn append(&self, request: AppendBatch) -> SdkResult<BatchStored> {
        let a = args::append(request, |_| self.path.clone()).map_err(SqliteError::from)?;
        Ok(BatchStored {
            next_seq: SqliteStore::append(self, a)?,
        })
    }

    fn load(&self, request: LoadStored) -> SdkResult<StoredLog> {
        let a = args::load(request).map_err(SqliteError::from)?;
        let loaded = SqliteStore::load(self, &a.session_id, a.repair, a.format)?;
        let truncated = loaded.truncated.map(|t| TornTail {
            seq: t.seq,
            reason: t.reason,
            path: self.path.to_string_lossy().into_owned(),
            line: None,
            bytes: None,
            rows: Some(t.rows),
        });
        let mut answer = StoredLog {
            header: loaded.header,
            events: None,
            events_jsonl: None,
            events_file: None,
            truncated,
        };
        match loaded.events {
            rows::Events::Values(events) => {
                let events = serde_json::from_value(serde_json::Value::Array(events))
                    .map_err(|e| SqliteError::invalid(format!("stored event: {e}")))?;
                answer.events = Some(events);
            }
            rows::Events::Lines { text, .. } => answer.events_jsonl = Some(text),
        }
        Ok(answer)
    }

    fn list(&self) -> SdkResult<StoredListing> {
        Ok(SqliteStore::list(self)?)
    }

    fn claim(&self, request: SessionRef) -> SdkResult<()> {
        let id = args::session_id(request).map_err(SqliteError::from)?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.root)
            .map_err(|e| SqliteError::io("create directory", &self.root, e))?;
        self.locks
            .claim(&self.root, &id)
            .map_err(SqliteError::from)?;
        Ok(())
    }

    fn release(&self, request: SessionRef) -> SdkResult<()> {
        let id = args::session_id(request).map_err(SqliteError::from)?;
        self.locks.release(&id);
        Ok(())
    }
}
