//! [`KitError`]: the failures every session backend shares, with their one message and wire
//! code ([`KitError::code`]). The shared modules return them, and each backend's own error type
//! carries them as one transparent variant beside its own (not found, corrupt, …), so the
//! mapping to `SessionCode` is written once, here (issue 24 item 5).

use std::path::PathBuf;

use keel_plugin_api::services::session::SessionCode;

/// Why a shared step failed.
#[derive(Debug, thiserror::Error)]
pub enum KitError {
    /// The request is malformed (bad id, missing field, header of another session).
    #[error("invalid request: {0}")]
    Invalid(String),
    /// A header of another format version (SES-09): not corruption.
    #[error("{}: unsupported session format version {found} (this keel reads version {expected}); use a keel that matches it, it is not converted", path.display())]
    Unsupported {
        /// The backend's file for the session (named in the message).
        path: PathBuf,
        /// The version found, as written.
        found: String,
        /// [`keel_plugin_api::services::session::FORMAT_VERSION`].
        expected: u32,
    },
    /// The batch is not contiguous or does not start at `expected_next_seq`.
    #[error("{0}")]
    Seq(String),
    /// Another writer holds the session.
    #[error("session '{id}' is claimed by another live writer (lock {})", path.display())]
    Locked {
        /// The session id.
        id: String,
        /// The lock file.
        path: PathBuf,
    },
    /// The storage failed.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// What was being done (`create lock file`, `flock`, `write`).
        action: &'static str,
        /// The file, directory or database.
        path: PathBuf,
        /// The OS (or database) error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl KitError {
    /// A storage failure while doing `action` on `path`.
    pub fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        KitError::Io {
            action,
            path: path.into(),
            source: source.into(),
        }
    }

    /// The wire code of this failure, the same for every backend.
    pub fn code(&self) -> SessionCode {
        match self {
            KitError::Invalid(_) => SessionCode::Invalid,
            KitError::Unsupported { .. } => SessionCode::Unsupported,
            KitError::Seq(_) => SessionCode::Seq,
            KitError::Locked { .. } => SessionCode::Locked,
            KitError::Io { .. } => SessionCode::Io,
        }
    }
}

/// The shared failures built as a backend's own error type: a backend whose error wraps
/// [`KitError`] (`Kit(#[from] KitError)`) writes `impl SharedFailures for MyError {}` and
/// gets these constructors, written once here instead of in each backend.
pub trait SharedFailures: From<KitError> {
    /// A storage failure while doing `action` on `path`.
    fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        KitError::io(action, path, source).into()
    }

    /// A malformed request.
    fn invalid(detail: String) -> Self {
        KitError::Invalid(detail).into()
    }

    /// A batch that does not continue the stored log.
    fn seq(detail: String) -> Self {
        KitError::Seq(detail).into()
    }
}

#[cfg(test)]
mod tests {
    use super::KitError;

    fn failures() -> [KitError; 5] {
        [
            KitError::Invalid("bad id".into()),
            KitError::Seq("gap".into()),
            KitError::Locked {
                id: "a".into(),
                path: "/r/a.lock".into(),
            },
            KitError::io("flock", "/r/a.lock", std::io::Error::other("disk on fire")),
            KitError::Unsupported {
                path: "/r/a.jsonl".into(),
                found: "9".into(),
                expected: 1,
            },
        ]
    }

    // One mapping for every backend (issue 24 item 5): each shared failure's wire code.
    #[test]
    fn each_shared_failure_has_its_session_code() {
        let codes = failures().map(|e| e.code().code());
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

    // And its message, which names the file where there is one.
    #[test]
    fn each_shared_failure_says_what_and_where() {
        let messages = failures().map(|e| e.to_string());
        assert_eq!(
            messages,
            [
                "invalid request: bad id",
                "gap",
                "session 'a' is claimed by another live writer (lock /r/a.lock)",
                "cannot flock /r/a.lock: disk on fire",
                "/r/a.jsonl: unsupported session format version 9 (this keel reads version 1); use a keel that matches it, it is not converted",
            ]
        );
    }
}
