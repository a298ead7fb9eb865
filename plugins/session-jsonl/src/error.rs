//! Typed failures of the JSONL store and their mapping to the `keel.session-store` wire codes
//! (`SessionCode` in `keel-plugin-api`). Every variant that concerns stored data names the file,
//! and the line when there is one.

use std::path::PathBuf;

use keel_plugin_api::sdk::Error;
use keel_plugin_api::services::session::SessionCode;
use keel_session_store_kit::{KitError, SharedFailures};

/// Why a store call failed.
#[derive(Debug, thiserror::Error)]
pub enum JsonlError {
    /// A failure every backend shares (invalid request, unsupported version, seq, locked,
    /// storage): the kit owns its message and its code.
    #[error(transparent)]
    Kit(#[from] KitError),
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
}

impl JsonlError {
    /// The wire code of this failure.
    pub fn code(&self) -> SessionCode {
        match self {
            JsonlError::Kit(e) => e.code(),
            JsonlError::NotFound { .. } => SessionCode::NotFound,
            JsonlError::Exists { .. } => SessionCode::Exists,
            JsonlError::Corrupt { .. } => SessionCode::Corrupt,
        }
    }
}

impl SharedFailures for JsonlError {}

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
                    path: "/r/a.jsonl".into(),
                    found: "9".into(),
                    expected: 1,
                },
            ]
        };
        for (kit, mine) in failures().into_iter().zip(failures().map(JsonlError::from)) {
            assert_eq!(mine.code(), kit.code());
            assert_eq!(mine.to_string(), kit.to_string());
        }
    }
}
