//! SQLite-specific behaviour beyond the shared contract: refuse-don't-migrate (SES-10) for a
//! foreign application id, another schema version, an unversioned non-empty database and a
//! file that is not SQLite, each with the file untouched; the stamp and WAL mode of a fresh
//! database; private modes of the directory, database and sidecars; B4's torn-tail rule.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::panic,
    reason = "tests fail loudly by design"
)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use keel_plugin_api::services::session::{AppendBatch, LoadFormat, LoadStored, SessionRef};
use keel_plugin_session_sqlite::schema::{APPLICATION_ID, SCHEMA_VERSION};
use keel_plugin_session_sqlite::{DB_FILE, SqliteStore, StoreFailure};
use keel_session_contract::fixtures::{header, open_turn, turn};
use keel_session_store_kit::Backend;
use rusqlite::Connection;
use serde_json::{Value, json};

fn append(
    s: &SqliteStore,
    id: &str,
    hdr: bool,
    events: &[Value],
    at: u64,
) -> Result<Value, StoreFailure> {
    let batch = AppendBatch {
        session_id: id.to_owned(),
        header: hdr.then(|| serde_json::from_value(header(id)).unwrap()),
        events: serde_json::from_value(json!(events)).unwrap(),
        expected_next_seq: at,
    };
    Backend::append(s, batch).map(|a| json!(a))
}

fn load(s: &SqliteStore, id: &str, repair: bool) -> Result<Value, StoreFailure> {
    let request = LoadStored {
        session_id: id.to_owned(),
        repair,
        format: LoadFormat::Events,
    };
    Backend::load(s, request).map(|l| json!(l))
}

fn list(s: &SqliteStore) -> Result<Value, StoreFailure> {
    Backend::list(s).map(|l| json!(l))
}

fn pragma(conn: &Connection, name: &str) -> i64 {
    conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
        .unwrap()
}

/// Every call on a store over `root` is refused as unsupported, naming the file and `needles`,
/// and the file's bytes do not change.
fn assert_refused(root: &Path, needles: &[&str]) {
    let db = root.join(DB_FILE);
    let before = std::fs::read(&db).unwrap();
    let s = SqliteStore::new(root);
    let calls = [
        append(&s, "s1", true, &turn(0), 0),
        load(&s, "s1", true),
        list(&s),
    ];
    for result in calls {
        let f = result.unwrap_err();
        assert_eq!(f.code, "SESSION_UNSUPPORTED", "{}", f.message);
        assert!(
            f.message.contains(&db.display().to_string()),
            "{}",
            f.message
        );
        for n in needles {
            assert!(f.message.contains(n), "{n:?} not in {}", f.message);
        }
    }
    drop(s);
    assert_eq!(
        std::fs::read(&db).unwrap(),
        before,
        "a refused database was modified"
    );
    let names: Vec<String> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(!names.iter().any(|n| n.ends_with("-wal")), "{names:?}");
}

#[test]
fn ses10_a_database_of_another_application_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let conn = Connection::open(dir.path().join(DB_FILE)).unwrap();
    conn.execute_batch("PRAGMA application_id = 305419896; CREATE TABLE notes (x TEXT);")
        .unwrap();
    drop(conn);
    assert_refused(dir.path(), &["0x12345678", "0x4B45454C"]);
}

#[test]
fn ses10_another_schema_version_is_refused_not_migrated() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = SqliteStore::new(dir.path());
        append(&s, "s1", true, &turn(0), 0).unwrap();
    }
    let conn = Connection::open(dir.path().join(DB_FILE)).unwrap();
    // Version 1 (before issue 16's `parent_call_id` column) and a future version 3.
    conn.execute_batch("PRAGMA user_version = 1;").unwrap();
    drop(conn);
    assert_refused(dir.path(), &["user_version 1", "user_version 2"]);
    let conn = Connection::open(dir.path().join(DB_FILE)).unwrap();
    conn.execute_batch("PRAGMA user_version = 3;").unwrap();
    drop(conn);
    assert_refused(dir.path(), &["user_version 3", "user_version 2"]);
}

#[test]
fn ses10_an_unversioned_non_empty_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let conn = Connection::open(dir.path().join(DB_FILE)).unwrap();
    conn.execute_batch("CREATE TABLE sessions (id TEXT);")
        .unwrap();
    drop(conn);
    assert_refused(dir.path(), &["unversioned"]);
}

#[test]
fn a_file_that_is_not_sqlite_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(DB_FILE), vec![b'x'; 4096]).unwrap();
    assert_refused(dir.path(), &["not an SQLite database"]);
}

#[test]
fn a_fresh_database_is_stamped_strict_and_in_wal_mode() {
    let dir = tempfile::tempdir().unwrap();
    let s = SqliteStore::new(dir.path());
    assert_eq!(list(&s).unwrap()["sessions"], json!([]));
    assert!(
        !dir.path().join(DB_FILE).exists(),
        "list created the database"
    );
    append(&s, "s1", true, &turn(0), 0).unwrap();
    let conn = Connection::open(dir.path().join(DB_FILE)).unwrap();
    assert_eq!(pragma(&conn, "application_id"), i64::from(APPLICATION_ID));
    assert_eq!(pragma(&conn, "user_version"), i64::from(SCHEMA_VERSION));
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let strict: i64 = conn
        .query_row("SELECT count(*) FROM pragma_table_list WHERE name IN ('sessions', 'events') AND strict = 1", [], |r| r.get(0))
        .unwrap();
    assert_eq!(strict, 2);
}

#[test]
fn directory_database_and_sidecars_are_private() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("home/sessions");
    let s = SqliteStore::new(&root);
    append(&s, "s1", true, &turn(0), 0).unwrap();
    Backend::claim(&s, SessionRef::new("s1")).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&root), 0o700);
    assert_eq!(mode(&dir.path().join("home")), 0o700);
    for name in [
        DB_FILE.to_owned(),
        format!("{DB_FILE}-wal"),
        format!("{DB_FILE}-shm"),
        "s1.lock".to_owned(),
    ] {
        assert_eq!(mode(&root.join(&name)), 0o600, "{name}");
    }
}

#[test]
fn a_batch_is_one_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let s = SqliteStore::new(dir.path());
    append(&s, "s1", true, &turn(0), 0).unwrap();
    s.fail_next_write();
    assert_eq!(
        append(&s, "s1", false, &turn(8), 8).unwrap_err().code,
        "SESSION_IO"
    );
    let conn = Connection::open(dir.path().join(DB_FILE)).unwrap();
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM events", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 8);
}

#[test]
fn a_gap_after_the_last_turn_end_is_a_torn_tail_cut_in_one_transaction() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = SqliteStore::new(dir.path());
        append(&s, "s1", true, &turn(0), 0).unwrap();
        let mut tail = open_turn(8);
        tail.extend(open_turn(10));
        append(&s, "s1", false, &tail, 8).unwrap();
    }
    let conn = Connection::open(dir.path().join(DB_FILE)).unwrap();
    conn.execute("DELETE FROM events WHERE seq = 9", [])
        .unwrap();
    drop(conn);
    let s = SqliteStore::new(dir.path());
    let answer = load(&s, "s1", true).unwrap();
    assert_eq!(answer["events"].as_array().unwrap().len(), 9);
    assert_eq!(answer["truncated"]["seq"], 9, "{answer}");
    let conn = Connection::open(dir.path().join(DB_FILE)).unwrap();
    let max: i64 = conn
        .query_row("SELECT max(seq) FROM events", [], |r| r.get(0))
        .unwrap();
    assert_eq!(max, 8);
    append(&s, "s1", false, &open_turn(9), 9).unwrap();
}

#[test]
fn a_corrupt_message_names_the_database_session_and_seq() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = SqliteStore::new(dir.path());
        append(&s, "s1", true, &turn(0), 0).unwrap();
        append(&s, "s1", false, &turn(8), 8).unwrap();
    }
    let conn = Connection::open(dir.path().join(DB_FILE)).unwrap();
    conn.execute(
        "UPDATE events SET surface_op = '{\"op\":\"shuffle\"}' WHERE seq = 4",
        [],
    )
    .unwrap();
    drop(conn);
    let f = load(&SqliteStore::new(dir.path()), "s1", true).unwrap_err();
    assert_eq!(f.code, "SESSION_CORRUPT");
    assert!(
        f.message.contains(DB_FILE) && f.message.contains("'s1'") && f.message.contains("seq 4"),
        "{}",
        f.message
    );
}
