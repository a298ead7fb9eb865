//! Typed failures of the SQLite store and their mapping to the `keel.session-store` wire codes
//! (`SessionCode` in `keel-plugin-api`). Failures about stored data name the database file, the
//! session and the seq.

use std::path::PathBuf;

use keel_plugin_api::sdk::Error;
use keel_plugin_api::services::session::SessionCode;
use keel_session_store_kit::{KitError, SharedFailures};

/// Why a store call failed.
#[derive(Debug, thiserror::Error)]
pub enum SqliteError {
    /// A failure every backend shares (invalid request, unsupported version, seq, locked,
    /// storage): the kit owns its message and its code.
    #[error(transparent)]
    Kit(#[from] KitError),
    /// No stored session with this id.
    #[error("session '{id}' not found in {}", path.display())]
    NotFound {
        /// The session id.
        id: String,
        /// The database.
        path: PathBuf,
    },
    /// A header was sent for a session that is already stored.
    #[error("session '{id}' already exists in {}; only the first append carries a header", path.display())]
    Exists {
        /// The session id.
        id: String,
        /// The database.
        path: PathBuf,
    },
    /// The database belongs to another application or schema version (SES-10).
    #[error("{}: {detail}; refusing to open it (keel never migrates a session database)", path.display())]
    ForeignDatabase {
        /// The database.
        path: PathBuf,
        /// What was found and what was expected.
        detail: String,
    },
    /// A defect at or before the last committed `turn/end`.
    #[error("{}: session '{id}', seq {seq}: corrupt session log: {detail}", path.display())]
    Corrupt {
        /// The database.
        path: PathBuf,
        /// The session.
        id: String,
        /// The first defective seq.
        seq: u64,
        /// What is wrong.
        detail: String,
    },
}

impl SqliteError {
    /// The wire code of this failure.
    pub fn code(&self) -> SessionCode {
        match self {
            SqliteError::Kit(e) => e.code(),
            SqliteError::NotFound { .. } => SessionCode::NotFound,
            SqliteError::Exists { .. } => SessionCode::Exists,
            SqliteError::ForeignDatabase { .. } => SessionCode::Unsupported,
            SqliteError::Corrupt { .. } => SessionCode::Corrupt,
        }
    }
}

impl SharedFailures for SqliteError {}

/// A failed call as it crosses the plugin boundary: the SDK error (typed code and message).
pub type StoreFailure = Error;

impl From<SqliteError> for Error {
    fn from(e: SqliteError) -> Self {
        Error::coded(e.code(), e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use keel_session_store_kit::KitError;

    use super::SqliteError;

    // The kit owns the shared failures' codes and messages (its own tests pin them); this
    // backend passes them through unchanged.
    #[test]
    fn kit_failures_pass_through_with_their_code_and_message() {
        let failures = || {
            [
                KitError::Invalid("bad id".into()),
                KitError::Seq("gap".into()),
                KitError::Locked {
                    id: "a".into(),
                    path: "/r/a.lock".into(),
                },
                KitError::io("flock", "/r/a.lock", std::io::Error::other("disk on fire")),
                KitError::Unsupported {
                    path: "/r/sessions.sqlite3".into(),
                    found: "9".into(),
                    expected: 1,
                },
            ]
        };
        for (kit, mine) in failures()
            .into_iter()
            .zip(failures().map(SqliteError::from))
        {
            assert_eq!(mine.code(), kit.code());
            assert_eq!(mine.to_string(), kit.to_string());
        }
    }
}
