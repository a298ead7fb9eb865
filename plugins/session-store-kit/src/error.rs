//! [`KitError`]: the failures the shared modules produce. They exist so the kit needs no
//! backend's error type; each backend converts them (`From<KitError>`) into its own variants of
//! the same name, which own the final message and wire code.

use std::path::PathBuf;

/// Why a shared step failed.
#[derive(Debug, thiserror::Error)]
pub enum KitError {
    /// The request is malformed (bad id, missing field, header of another session).
    #[error("invalid request: {0}")]
    Invalid(String),
    /// A header of another format version (SES-09): not corruption.
    #[error("{}: unsupported session format version {found} (this keel reads version {expected})", path.display())]
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
        /// What was being done (`create lock file`, `flock`).
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

impl KitError {
    /// An I/O failure while doing `action` on `path`.
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        KitError::Io {
            action,
            path: path.into(),
            source,
        }
    }
}
