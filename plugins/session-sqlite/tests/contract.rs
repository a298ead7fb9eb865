//! Runs the shared `keel.session-store` contract suite (SES-08) against [`SqliteStore`], with
//! the physical damage applied through a separate SQLite connection.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::panic,
    reason = "tests fail loudly by design"
)]

use std::path::{Path, PathBuf};

use keel_plugin_session_sqlite::{DB_FILE, SqliteStore};
use keel_session_contract::{Backend, ContractStore, Damage, Served, contract_tests};
use rusqlite::{Connection, params};

struct Sqlite;

impl Backend for Sqlite {
    fn open(&self, root: &Path) -> Box<dyn ContractStore> {
        Box::new(Served::new(
            "session-sqlite",
            SqliteStore::new(root),
            SqliteStore::fail_next_write,
        ))
    }

    /// The database and a non-empty WAL (where committed but uncheckpointed changes live).
    fn data_files(&self, root: &Path) -> Vec<PathBuf> {
        let db = root.join(DB_FILE);
        let wal = root.join(format!("{DB_FILE}-wal"));
        let mut files = Vec::new();
        if db.exists() {
            files.push(db);
        }
        if std::fs::metadata(&wal).is_ok_and(|m| m.len() > 0) {
            files.push(wal);
        }
        files
    }

    fn stored_sessions(&self, root: &Path) -> Vec<String> {
        let db = root.join(DB_FILE);
        if !db.exists() {
            return Vec::new();
        }
        let conn = Connection::open(&db).unwrap();
        let mut stmt = conn.prepare("SELECT id FROM sessions ORDER BY id").unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    fn damage(&self, root: &Path, id: &str, damage: Damage) {
        let conn = Connection::open(root.join(DB_FILE)).unwrap();
        let changed = match damage {
            Damage::TornTail => conn.execute(
                "INSERT INTO events (session_id, seq, type, time, data, surface_op)
                 SELECT ?1, MAX(seq) + 1, 'assistant/message', 1, '{\"text\":\"tor', '\"append\"'
                 FROM events WHERE session_id = ?1",
                [id],
            ),
            Damage::Garble { seq } => conn.execute(
                "UPDATE events SET data = '#not json#' WHERE session_id = ?1 AND seq = ?2",
                params![id, seq as i64],
            ),
            Damage::DropRecord { seq } => conn.execute(
                "DELETE FROM events WHERE session_id = ?1 AND seq = ?2",
                params![id, seq as i64],
            ),
            Damage::HeaderVersion(v) => conn.execute(
                "UPDATE sessions SET version = ?2 WHERE id = ?1",
                params![id, i64::from(v)],
            ),
        };
        assert_eq!(changed.unwrap(), 1, "{damage:?}");
    }
}

contract_tests!(Sqlite);
