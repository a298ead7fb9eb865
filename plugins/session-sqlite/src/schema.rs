//! Opening `<root>/sessions.sqlite3`: refuse-don't-migrate (SES-10). A database is used only
//! when it is keel's (`application_id` 0x4B45454C, "KEEL") at exactly [`SCHEMA_VERSION`]; a
//! fresh one (no application id, no user version, no user objects) is initialised in one
//! transaction; anything else is refused as `SESSION_UNSUPPORTED`, naming the file and both
//! values. New directories are 0700, the database 0600 (SQLite gives its `-wal`/`-shm`
//! sidecars the database's mode). WAL journal, `synchronous = FULL`: a commit is durable.

use keel_session_store_kit::SharedFailures as _;
use std::fs::{DirBuilder, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, TransactionBehavior};

use crate::error::SqliteError;

/// `PRAGMA application_id`: "KEEL".
pub const APPLICATION_ID: i32 = 0x4B45_454C;

/// `PRAGMA user_version`: this backend's schema version. Any other is refused. Version 2
/// (issue 16) added `sessions.parent_call_id`, a subagent's lineage; a version-1 database is
/// refused, never altered.
pub const SCHEMA_VERSION: i32 = 2;

const SCHEMA: &str = "
CREATE TABLE sessions (
    id               TEXT PRIMARY KEY NOT NULL,
    version          INTEGER NOT NULL,
    created_at       INTEGER NOT NULL,
    cwd              TEXT NOT NULL,
    parent_session   TEXT,
    seed_length      INTEGER,
    parent_call_id   TEXT,
    origin           TEXT,
    delegation_depth INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
) STRICT;
CREATE TABLE events (
    session_id        TEXT NOT NULL REFERENCES sessions(id),
    seq               INTEGER NOT NULL,
    type              TEXT NOT NULL,
    time              INTEGER NOT NULL,
    data              TEXT NOT NULL,
    source_event_seqs TEXT,
    surface_op        TEXT,
    ignorable         INTEGER,
    PRIMARY KEY (session_id, seq)
) STRICT, WITHOUT ROWID;
";

fn db_err(action: &'static str, path: &Path, e: rusqlite::Error) -> SqliteError {
    if e.sqlite_error_code() == Some(ErrorCode::NotADatabase) {
        return SqliteError::ForeignDatabase {
            path: path.to_owned(),
            detail: "not an SQLite database".into(),
        };
    }
    SqliteError::io(action, path, e)
}

/// What identifies a database.
struct Stamp {
    application_id: i32,
    user_version: i32,
    objects: i64,
}

fn stamp(conn: &Connection, path: &Path) -> Result<Stamp, SqliteError> {
    let read = |sql: &str| conn.query_row(sql, [], |r| r.get::<_, i64>(0));
    let application_id = read("PRAGMA application_id").map_err(|e| db_err("read", path, e))?;
    let user_version = read("PRAGMA user_version").map_err(|e| db_err("read", path, e))?;
    let objects = read("SELECT count(*) FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%'")
        .map_err(|e| db_err("read", path, e))?;
    Ok(Stamp {
        application_id: application_id as i32,
        user_version: user_version as i32,
        objects,
    })
}

/// `Ok(true)`: ours; `Ok(false)`: fresh; `Err`: refused.
fn check(s: &Stamp, path: &Path) -> Result<bool, SqliteError> {
    if s.application_id == APPLICATION_ID && s.user_version == SCHEMA_VERSION {
        return Ok(true);
    }
    if s.application_id == 0 && s.user_version == 0 && s.objects == 0 {
        return Ok(false);
    }
    let detail = if s.application_id == 0 && s.user_version == 0 {
        format!(
            "unversioned database with {} objects (application_id 0, user_version 0)",
            s.objects
        )
    } else {
        format!(
            "application_id {:#010X} and user_version {} found; keel's session database has application_id {APPLICATION_ID:#010X} ('KEEL') and user_version {SCHEMA_VERSION}",
            s.application_id, s.user_version
        )
    };
    Err(SqliteError::ForeignDatabase {
        path: path.to_owned(),
        detail,
    })
}

/// Opens (creating if needed) and validates the database of `root`.
pub fn open(root: &Path, path: &Path) -> Result<Connection, SqliteError> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(root)
        .map_err(|e| SqliteError::io("create directory", root, e))?;
    match OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(SqliteError::io("create", path, e)),
    }
    let mut conn = Connection::open(path).map_err(|e| db_err("open", path, e))?;
    conn.busy_timeout(Duration::from_secs(1))
        .map_err(|e| db_err("configure", path, e))?;
    if !check(&stamp(&conn, path)?, path)? {
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| db_err("initialise", path, e))?;
        // Another process may have initialised it meanwhile.
        if !check(&stamp(&tx, path)?, path)? {
            tx.execute_batch(SCHEMA)
                .map_err(|e| db_err("initialise", path, e))?;
            tx.execute_batch(&format!(
                "PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {SCHEMA_VERSION};"
            ))
            .map_err(|e| db_err("initialise", path, e))?;
        }
        tx.commit().map_err(|e| db_err("initialise", path, e))?;
    }
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .map_err(|e| db_err("enable WAL on", path, e))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(SqliteError::io(
            "enable WAL on",
            path,
            format!("journal_mode is {mode}"),
        ));
    }
    conn.pragma_update(None, "synchronous", "FULL")
        .and_then(|()| conn.pragma_update(None, "foreign_keys", "ON"))
        .map_err(|e| db_err("configure", path, e))?;
    Ok(conn)
}
