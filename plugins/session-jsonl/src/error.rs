//! Typed failures of the JSONL store and their mapping to the `keel.session-store` wire codes
//! (`SessionCode` in `keel-plugin-api`). Every variant that concerns stored data names the file,
//! and the line when there is one.

use std::path::PathBuf;

use keel_plugin_api::sdk::Error;
use keel_plugin_api::services::session::SessionCode;
use keel_session_store_kit::KitError;

/// Why a store call failed.
#[derive(Debug, thiserror::Error)]
pub enum JsonlError {
    /// The request is malformed (bad id, missing field, header of another session).
    #[error("invalid request: {0}")]
    Invalid(String),
    /// No stored session with this id.
    #[error("session '{id}' not found ({})", path.display())]
    NotFound {
        /// The session id.
        id: String,
        /// Where it would be.
        path: PathBuf,
    },
    /// A header was sent for a session that is already stored.
    #[error("session '{id}' already exists ({}); only the first append carries a header", path.display())]
    Exists {
        /// The session id.
        id: String,
        /// Its file.
        path: PathBuf,
    },
    /// Another format version (SES-09): not corruption.
    #[error("{}: unsupported session format version {found} (this keel reads version {expected}); use a keel that matches the file, it is not converted", path.display())]
    Unsupported {
        /// The file (or request) with the foreign version.
        path: PathBuf,
        /// The version found, as written.
        found: String,
        /// [`keel_plugin_api::services::session::FORMAT_VERSION`].
        expected: u32,
    },
    /// A defect at or before the last committed `turn/end`, or one followed by valid lines.
    #[error("{}:{line}: corrupt session log: {detail}", path.display())]
    Corrupt {
        /// The session file.
        path: PathBuf,
        /// 1-based line number (the header is line 1).
        line: usize,
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
        /// What was being done (`create`, `write`, `fsync`, …).
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

impl JsonlError {
    /// The wire code of this failure.
    pub fn code(&self) -> SessionCode {
        match self {
            JsonlError::Invalid(_) => SessionCode::Invalid,
            JsonlError::NotFound { .. } => SessionCode::NotFound,
            JsonlError::Exists { .. } => SessionCode::Exists,
            JsonlError::Unsupported { .. } => SessionCode::Unsupported,
            JsonlError::Corrupt { .. } => SessionCode::Corrupt,
            JsonlError::Locked { .. } => SessionCode::Locked,
            JsonlError::Seq(_) => SessionCode::Seq,
            JsonlError::Io { .. } => SessionCode::Io,
        }
    }

    /// An I/O failure while doing `action` on `path`.
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        JsonlError::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

/// The shared modules' failures become the variants of the same name, so codes and messages
/// are this backend's.
impl From<KitError> for JsonlError {
    fn from(e: KitError) -> Self {
        match e {
            KitError::Invalid(detail) => JsonlError::Invalid(detail),
            KitError::Unsupported {
                path,
                found,
                expected,
            } => JsonlError::Unsupported {
                path,
                found,
                expected,
            },
            KitError::Seq(detail) => JsonlError::Seq(detail),
            KitError::Locked { id, path } => JsonlError::Locked { id, path },
            KitError::Io {
                action,
                path,
                source,
            } => JsonlError::io(action, path, source),
        }
    }
}

/// A failed call as it crosses the plugin boundary: the SDK error (typed code and message).
pub type StoreFailure = Error;

impl From<JsonlError> for Error {
    fn from(e: JsonlError) -> Self {
        Error::coded(e.code(), e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use keel_session_store_kit::KitError;

    use super::JsonlError;

    fn mapped(e: KitError) -> (&'static str, String) {
        let e = JsonlError::from(e);
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
                path: "/r/a.jsonl".into(),
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
                path: "/r/a.jsonl".into(),
                found: "9".into(),
                expected: 1
            })
            .1,
            "/r/a.jsonl: unsupported session format version 9 (this keel reads version 1); use a keel that matches the file, it is not converted"
        );
    }
}
