//! Typed failures of the SQLite store and their mapping to the `keel.session-store` wire codes
//! (`SessionCode` in `keel-plugin-api`). Failures about stored data name the database file, the
//! session and the seq.

use std::path::PathBuf;

use keel_plugin_api::sdk::Error;
use keel_plugin_api::services::session::SessionCode;
use keel_session_store_kit::KitError;

/// Why a store call failed.
#[derive(Debug, thiserror::Error)]
pub enum SqliteError {
    /// The request is malformed (bad id, missing field, header of another session).
    #[error("invalid request: {0}")]
    Invalid(String),
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
    /// Another format version of a session header (SES-09): not corruption.
    #[error("{}: unsupported session format version {found} (this keel reads version {expected}); use a keel that matches it, it is not converted", path.display())]
    Unsupported {
        /// The database (and session, in `found`'s context).
        path: PathBuf,
        /// The version found.
        found: String,
        /// [`keel_plugin_api::services::session::FORMAT_VERSION`].
        expected: u32,
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
    /// Another writer holds the session.
    #[error("session '{id}' is claimed by another live writer (lock {})", path.display())]
    Locked {
        /// The session id.
        id: String,
        /// The lock file.
        path: PathBuf,
    },
    /// The batch does not continue the stored log.
    #[error("{0}")]
    Seq(String),
    /// The storage failed; nothing of the batch is stored.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl SqliteError {
    /// The wire code of this failure.
    pub fn code(&self) -> SessionCode {
        match self {
            SqliteError::Invalid(_) => SessionCode::Invalid,
            SqliteError::NotFound { .. } => SessionCode::NotFound,
            SqliteError::Exists { .. } => SessionCode::Exists,
            SqliteError::Unsupported { .. } | SqliteError::ForeignDatabase { .. } => {
                SessionCode::Unsupported
            }
            SqliteError::Corrupt { .. } => SessionCode::Corrupt,
            SqliteError::Locked { .. } => SessionCode::Locked,
            SqliteError::Seq(_) => SessionCode::Seq,
            SqliteError::Io { .. } => SessionCode::Io,
        }
    }

    /// A storage failure while doing `action` on `path`.
    pub fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        SqliteError::Io {
            action,
            path: path.into(),
            source: source.into(),
        }
    }
}

/// The shared modules' failures become the variants of the same name, so codes and messages
/// are this backend's.
impl From<KitError> for SqliteError {
    fn from(e: KitError) -> Self {
        match e {
            KitError::Invalid(detail) => SqliteError::Invalid(detail),
            KitError::Unsupported {
                path,
                found,
                expected,
            } => SqliteError::Unsupported {
                path,
                found,
                expected,
            },
            KitError::Seq(detail) => SqliteError::Seq(detail),
            KitError::Locked { id, path } => SqliteError::Locked { id, path },
            KitError::Io {
                action,
                path,
                source,
            } => SqliteError::io(action, path, source),
        }
    }
}

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

    fn mapped(e: KitError) -> (&'static str, String) {
        let e = SqliteError::from(e);
        (e.code().code(), e.to_string())
    }

    #[test]
    fn kit_failures_keep_this_backends_codes() {
        let io = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let codes = [
            mapped(KitError::Invalid("x".into())).0,
            mapped(KitError::Seq("x".into())).0,
            mapped(KitError::Locked {
                id: "a".into(),
                path: "/r/a.lock".into(),
            })
            .0,
            mapped(KitError::io("flock", "/r/a.lock", io)).0,
            mapped(KitError::Unsupported {
                path: "/r/sessions.sqlite3".into(),
                found: "9".into(),
                expected: 1,
            })
            .0,
        ];
        assert_eq!(
            codes,
            [
                "SESSION_INVALID",
                "SESSION_SEQ",
                "SESSION_LOCKED",
                "SESSION_IO",
                "SESSION_UNSUPPORTED"
            ]
        );
    }

    #[test]
    fn kit_failures_keep_this_backends_messages() {
        assert_eq!(
            mapped(KitError::Invalid("bad id".into())).1,
            "invalid request: bad id"
        );
        assert_eq!(mapped(KitError::Seq("gap".into())).1, "gap");
        assert_eq!(
            mapped(KitError::Locked {
                id: "a".into(),
                path: "/r/a.lock".into()
            })
            .1,
            "session 'a' is claimed by another live writer (lock /r/a.lock)"
        );
        let io = std::io::Error::other("disk on fire");
        assert_eq!(
            mapped(KitError::io("flock", "/r/a.lock", io)).1,
            "cannot flock /r/a.lock: disk on fire"
        );
        assert_eq!(
            mapped(KitError::Unsupported {
                path: "/r/sessions.sqlite3".into(),
                found: "9".into(),
                expected: 1
            })
            .1,
            "/r/sessions.sqlite3: unsupported session format version 9 (this keel reads version 1); use a keel that matches it, it is not converted"
        );
    }
}
