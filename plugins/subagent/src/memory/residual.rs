//! The residual store (SUB-02, ARCHITECTURE §13 T-4): inputs a resident child had not run when
//! it was stopped with `keep` or `park`, saved under the parent session and the child's name.
//! `keep` goes back on the next activation's queue by itself; `park` waits for an explicit
//! `resident_start{resume_parked: true}`. An item leaves the store only when it was re-queued,
//! so nothing is lost between two activations.

use std::path::PathBuf;

use keel_plugin_api::prelude::*;
use keel_plugin_api::services::agent::{InterruptLevel, PendingInput};
use rusqlite::{Connection, params};

use super::{BUSY, store_error};

/// Where a saved input waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Saved {
    /// Re-queued by the next `resident_start` of the name.
    Keep,
    /// Re-queued only on request (`resume_parked`).
    Park,
}

impl Saved {
    fn as_str(self) -> &'static str {
        match self {
            Saved::Keep => "keep",
            Saved::Park => "park",
        }
    }
}

/// One parent session's residual store (`residual/<parent>.db`), opened per operation.
#[derive(Debug)]
pub struct Residuals {
    path: PathBuf,
}

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS residual (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    state TEXT NOT NULL,
    message_id TEXT NOT NULL,
    content TEXT NOT NULL,
    level INTEGER NOT NULL
)";

fn level_code(level: Option<InterruptLevel>) -> i64 {
    level.map_or(0, |l| i64::from(u8::from(l)))
}

fn level_of(code: i64) -> Option<InterruptLevel> {
    u8::try_from(code)
        .ok()
        .and_then(|c| InterruptLevel::try_from(c).ok())
}

impl Residuals {
    pub(super) fn new(path: PathBuf) -> Self {
        Residuals { path }
    }

    /// The store's file.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    fn open(&self) -> Result<Connection> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| store_error(dir, "cannot create", &e))?;
        }
        let conn =
            Connection::open(&self.path).map_err(|e| store_error(&self.path, "cannot open", &e))?;
        conn.busy_timeout(BUSY)
            .and_then(|()| conn.execute_batch(SCHEMA))
            .map_err(|e| store_error(&self.path, "cannot prepare", &e))?;
        Ok(conn)
    }

    /// Saves `inputs` of child `name` as `state`, in order, in one transaction.
    ///
    /// # Errors
    /// `RESIDENT_STORE` naming the file.
    pub fn save(&self, name: &str, state: Saved, inputs: &[PendingInput]) -> Result<()> {
        if inputs.is_empty() {
            return Ok(());
        }
        let mut conn = self.open()?;
        let tx = conn
            .transaction()
            .map_err(|e| store_error(&self.path, "cannot write", &e))?;
        for i in inputs {
            tx.execute(
                "INSERT INTO residual (name, state, message_id, content, level) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![name, state.as_str(), i.id, i.content, level_code(i.level)],
            )
            .map_err(|e| store_error(&self.path, "cannot write", &e))?;
        }
        tx.commit()
            .map_err(|e| store_error(&self.path, "cannot write", &e))
    }

    /// The saved inputs of `name` in `states`, oldest first, with their row ids.
    ///
    /// # Errors
    /// `RESIDENT_STORE` naming the file.
    pub fn list(&self, name: &str, states: &[Saved]) -> Result<Vec<(i64, Saved, PendingInput)>> {
        if !self.path.exists() {
            return Ok(Vec::new());
        }
        let conn = self.open()?;
        let mut stmt = conn
            .prepare(
                "SELECT seq, state, message_id, content, level FROM residual \
                 WHERE name = ?1 ORDER BY seq",
            )
            .map_err(|e| store_error(&self.path, "cannot read", &e))?;
        let rows: Vec<(i64, String, String, String, i64)> = stmt
            .query_map(params![name], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })
            .and_then(Iterator::collect)
            .map_err(|e| store_error(&self.path, "cannot read", &e))?;
        Ok(rows
            .into_iter()
            .filter_map(|(seq, state, id, content, level)| {
                let state = match state.as_str() {
                    "keep" => Saved::Keep,
                    "park" => Saved::Park,
                    _ => return None,
                };
                states.contains(&state).then(|| {
                    (
                        seq,
                        state,
                        PendingInput {
                            id,
                            content,
                            level: level_of(level),
                            suspended: false,
                        },
                    )
                })
            })
            .collect())
    }

    /// Forgets one saved input (after it was re-queued).
    ///
    /// # Errors
    /// `RESIDENT_STORE` naming the file.
    pub fn forget(&self, seq: i64) -> Result<()> {
        let conn = self.open()?;
        conn.execute("DELETE FROM residual WHERE seq = ?1", params![seq])
            .map(drop)
            .map_err(|e| store_error(&self.path, "cannot write", &e))
    }
}
