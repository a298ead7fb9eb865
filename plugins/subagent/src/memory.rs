//! Two-level memory of resident children (MEM-07) and the residual store of their teardown
//! (SUB-02), both SQLite files under the `subagent` row's data directory:
//!
//! - `main/<parent>.db`: the parent session's long-lived memory. A child reads it through a
//!   handle opened **read-only at the storage layer** (`SQLITE_OPEN_READ_ONLY` and
//!   `PRAGMA query_only=1`), so no code path of the child can write it; only the parent's
//!   `resident_promote` opens it read-write ([`MemoryRoot::promote`]).
//! - `temp/<pid>/<child>.db`: one child's scratch memory, created with the child and deleted
//!   by the registry's one `cleanup` ([`ChildMemory::remove`]). A child's handles name only
//!   its own temp file, so children cannot see each other's temp.
//! - `residual/<parent>.db`: inputs a stopped child had not run, kept or parked under the
//!   child's name until a later `resident_start` re-queues them.
//!
//! Every open handle is counted ([`MemoryRoot::open_handles`]) so the no-residue test (SUB-04)
//! can check that create/destroy cycles return to baseline.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_plugin_api::prelude::*;
use keel_plugin_api::services::resident::ResidentCode;
use rusqlite::{Connection, OpenFlags, params};

pub mod residual;
pub mod sweep;

pub use residual::Residuals;

/// How long a handle waits for another handle's lock (the parent promoting while a child
/// reads main).
const BUSY: Duration = Duration::from_secs(5);

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS memory (
    key TEXT PRIMARY KEY NOT NULL,
    text TEXT NOT NULL,
    updated_ms INTEGER NOT NULL
)";

/// Which level a record was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// The child's own scratch memory.
    Temp,
    /// The parent's memory (read-only to the child).
    Main,
}

/// One memory record.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Record {
    /// Its key.
    pub key: String,
    /// Its text.
    pub text: String,
    /// Where it was read from.
    pub level: Level,
}

/// The root of the row's stores; one per row activation.
#[derive(Debug)]
pub struct MemoryRoot {
    dir: PathBuf,
    open: Arc<AtomicUsize>,
}

/// A connection counted in [`MemoryRoot::open_handles`] while it lives.
#[derive(Debug)]
struct Counted {
    conn: Connection,
    open: Arc<AtomicUsize>,
}

impl Counted {
    fn new(conn: Connection, open: &Arc<AtomicUsize>) -> Self {
        open.fetch_add(1, Ordering::SeqCst);
        Counted {
            conn,
            open: Arc::clone(open),
        }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A store error naming the file.
pub(crate) fn store_error(path: &Path, what: &str, e: &dyn std::fmt::Display) -> Error {
    Error::coded(
        ResidentCode::Store,
        format!("subagent: {what} {}: {e}", path.display()),
    )
}

/// A file-name-safe form of a session id: `[A-Za-z0-9_-]` kept, every other byte `%XX`, so
/// distinct ids never share a file and no id can name a path outside the directory.
pub fn file_stem(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn open_rw(path: &Path) -> Result<Connection> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| store_error(dir, "cannot create", &e))?;
    }
    let conn = Connection::open(path).map_err(|e| store_error(path, "cannot open", &e))?;
    conn.busy_timeout(BUSY)
        .and_then(|()| conn.execute_batch(SCHEMA))
        .map_err(|e| store_error(path, "cannot prepare", &e))?;
    Ok(conn)
}

/// Opens `path` read-only at the storage layer (MEM-07): the file is opened without write
/// permission and the connection refuses every statement that would change it.
fn open_read_only(path: &Path) -> Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| store_error(path, "cannot open read-only", &e))?;
    conn.busy_timeout(BUSY)
        .and_then(|()| conn.pragma_update(None, "query_only", true))
        .map_err(|e| store_error(path, "cannot make read-only", &e))?;
    Ok(conn)
}

fn select(conn: &Connection, path: &Path, query: Option<&str>) -> Result<Vec<(String, String)>> {
    let pattern = query.map(|q| format!("%{}%", q.to_lowercase()));
    let mut stmt = conn
        .prepare(
            "SELECT key, text FROM memory WHERE ?1 IS NULL \
             OR lower(key) LIKE ?1 OR lower(text) LIKE ?1 ORDER BY key",
        )
        .map_err(|e| store_error(path, "cannot read", &e))?;
    let rows = stmt
        .query_map(params![pattern], |r| Ok((r.get(0)?, r.get(1)?)))
        .and_then(Iterator::collect)
        .map_err(|e| store_error(path, "cannot read", &e))?;
    Ok(rows)
}

impl MemoryRoot {
    /// The stores under `dir` (the row's data directory).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        MemoryRoot {
            dir: dir.into(),
            open: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// SQLite handles open right now (children's temp and main handles).
    pub fn open_handles(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }

    /// The main store of `parent`.
    pub fn main_path(&self, parent: &str) -> PathBuf {
        self.dir
            .join("main")
            .join(format!("{}.db", file_stem(parent)))
    }

    /// This process's directory of temp stores.
    pub fn temp_dir(&self) -> PathBuf {
        self.dir.join("temp").join(std::process::id().to_string())
    }

    /// Removes the temp stores of processes that died without their cleanup (a SIGKILL):
    /// every `temp/<pid>` whose process is gone ([`sweep::sweep_dead`]). Answers what it removed.
    pub fn sweep_dead_temp(&self) -> Vec<PathBuf> {
        sweep::sweep_dead(&self.dir.join("temp"))
    }

    /// The residual store of `parent`'s children.
    pub fn residuals(&self, parent: &str) -> Residuals {
        Residuals::new(
            self.dir
                .join("residual")
                .join(format!("{}.db", file_stem(parent))),
        )
    }

    /// Opens a new child's memory: creates `parent`'s main store when it does not exist yet
    /// (so it can be opened read-only), a fresh temp store for `child`, and the child's
    /// read-only handle on main.
    ///
    /// # Errors
    /// `RESIDENT_STORE` naming the file that could not be created or opened.
    pub fn open_child(&self, parent: &str, child: &str) -> Result<ChildMemory> {
        let main_path = self.main_path(parent);
        if !main_path.exists() {
            drop(open_rw(&main_path)?);
        }
        let temp_path = self.temp_dir().join(format!("{}.db", file_stem(child)));
        remove_files(&temp_path);
        let temp = open_rw(&temp_path)?;
        let main = match open_read_only(&main_path) {
            Ok(m) => m,
            Err(e) => {
                drop(temp);
                remove_files(&temp_path);
                return Err(e);
            }
        };
        Ok(ChildMemory {
            temp: Mutex::new(Some(Counted::new(temp, &self.open))),
            main: Mutex::new(Some(Counted::new(main, &self.open))),
            temp_path,
            main_path,
        })
    }

    /// Copies the records `keys` of `child`'s temp memory into `parent`'s main store, in one
    /// transaction (all or nothing). The only writer of main.
    ///
    /// # Errors
    /// `RESIDENT_NO_KEY` naming the keys temp does not hold (nothing is written);
    /// `RESIDENT_STORE`.
    pub fn promote(&self, parent: &str, child: &ChildMemory, keys: &[String]) -> Result<usize> {
        let records = child.temp_records(keys)?;
        let missing: Vec<&str> = keys
            .iter()
            .filter(|k| !records.iter().any(|(key, _)| key == *k))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            return Err(Error::coded(
                ResidentCode::NoSuchKey,
                format!(
                    "resident_promote: the child's temp memory has no key {missing:?}; nothing was promoted"
                ),
            ));
        }
        let path = self.main_path(parent);
        let mut conn = open_rw(&path)?;
        let tx = conn
            .transaction()
            .map_err(|e| store_error(&path, "cannot write", &e))?;
        for (key, text) in &records {
            tx.execute(
                "INSERT INTO memory (key, text, updated_ms) VALUES (?1, ?2, ?3) \
                 ON CONFLICT(key) DO UPDATE SET text = excluded.text, updated_ms = excluded.updated_ms",
                params![key, text, now_ms()],
            )
            .map_err(|e| store_error(&path, "cannot write", &e))?;
        }
        tx.commit()
            .map_err(|e| store_error(&path, "cannot write", &e))?;
        Ok(records.len())
    }
}

/// One child's handles: its temp store (read-write) and its parent's main store (read-only).
#[derive(Debug)]
pub struct ChildMemory {
    temp: Mutex<Option<Counted>>,
    main: Mutex<Option<Counted>>,
    temp_path: PathBuf,
    main_path: PathBuf,
}

impl ChildMemory {
    /// The temp store's file.
    pub fn temp_path(&self) -> &Path {
        &self.temp_path
    }

    fn with<T>(
        slot: &Mutex<Option<Counted>>,
        path: &Path,
        f: impl FnOnce(&Connection) -> Result<T>,
    ) -> Result<T> {
        let guard = slot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match guard.as_ref() {
            Some(c) => f(&c.conn),
            None => Err(store_error(path, "closed:", &"the child was stopped")),
        }
    }

    /// Writes `key` in temp (the only level a child writes).
    ///
    /// # Errors
    /// `RESIDENT_STORE`.
    pub fn write(&self, key: &str, text: &str) -> Result<()> {
        let path = &self.temp_path;
        Self::with(&self.temp, path, |c| {
            c.execute(
                "INSERT INTO memory (key, text, updated_ms) VALUES (?1, ?2, ?3) \
                 ON CONFLICT(key) DO UPDATE SET text = excluded.text, updated_ms = excluded.updated_ms",
                params![key, text, now_ms()],
            )
            .map(drop)
            .map_err(|e| store_error(path, "cannot write", &e))
        })
    }

    /// Writes `key` through the child's handle on main. Always refused by SQLite (the handle
    /// is read-only); kept so a test can show it structurally.
    ///
    /// # Errors
    /// Always: `RESIDENT_STORE` with SQLite's refusal.
    pub fn write_main(&self, key: &str, text: &str) -> Result<()> {
        let path = &self.main_path;
        Self::with(&self.main, path, |c| {
            c.execute(
                "INSERT INTO memory (key, text, updated_ms) VALUES (?1, ?2, ?3)",
                params![key, text, now_ms()],
            )
            .map(drop)
            .map_err(|e| store_error(path, "cannot write", &e))
        })
    }

    /// temp ∪ main, temp shadowing main on the same key; `query` keeps the records whose key
    /// or text contains it (case-insensitive).
    ///
    /// # Errors
    /// `RESIDENT_STORE`.
    pub fn read(&self, query: Option<&str>) -> Result<Vec<Record>> {
        let temp = Self::with(&self.temp, &self.temp_path, |c| {
            select(c, &self.temp_path, query)
        })?;
        let main = Self::with(&self.main, &self.main_path, |c| {
            select(c, &self.main_path, query)
        })?;
        let mut out: Vec<Record> = temp
            .into_iter()
            .map(|(key, text)| Record {
                key,
                text,
                level: Level::Temp,
            })
            .collect();
        for (key, text) in main {
            if !out.iter().any(|r| r.level == Level::Temp && r.key == key) {
                out.push(Record {
                    key,
                    text,
                    level: Level::Main,
                });
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    /// The temp records named `keys` (all of temp when `keys` is empty).
    ///
    /// # Errors
    /// `RESIDENT_STORE`.
    pub fn temp_records(&self, keys: &[String]) -> Result<Vec<(String, String)>> {
        let path = &self.temp_path;
        let all = Self::with(&self.temp, path, |c| select(c, path, None))?;
        Ok(all
            .into_iter()
            .filter(|(k, _)| keys.is_empty() || keys.contains(k))
            .collect())
    }

    /// Closes both handles and deletes the temp store (the registry's `cleanup`, SUB-04).
    /// Idempotent.
    pub fn remove(&self) {
        for slot in [&self.temp, &self.main] {
            slot.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take();
        }
        remove_files(&self.temp_path);
        if let Some(dir) = self.temp_path.parent() {
            // Only when empty: other children of this process may still have theirs.
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Deletes a SQLite file and its side files.
fn remove_files(path: &Path) {
    let _ = std::fs::remove_file(path);
    for side in ["-journal", "-wal", "-shm"] {
        let mut p = path.as_os_str().to_owned();
        p.push(side);
        let _ = std::fs::remove_file(PathBuf::from(p));
    }
}

#[cfg(test)]
#[path = "memory_tests.rs"]
mod tests;
