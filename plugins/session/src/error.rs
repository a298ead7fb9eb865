//! The session plugin's one error type: a [`StoreError`] code (or a foreign code passed through
//! from a backend) plus a one-line message.
//!
//! Every failure of the log, the writer, recovery and fork is one of the codes of the session
//! seam (`SESSION_INVALID`, `SESSION_UNSUPPORTED`, …), so callers across the ABI can match on
//! the code alone; the message names the rule and the seq when there is one.

use keel_plugin_api::services::session::{SessionCode, StoreError};

/// The code of a [`SessionError`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorCode {
    /// One of the session seam's codes.
    Store(StoreError),
    /// A code this plugin does not own (e.g. a backend's `PANIC` or `TIMEOUT`), kept verbatim.
    Other(String),
}

/// A session failure: a stable code and a one-line message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionError {
    /// The stable code.
    pub code: ErrorCode,
    /// One line, naming the rule and the seq where there is one.
    pub message: String,
}

/// Result alias of the session core.
pub type Result<T, E = SessionError> = std::result::Result<T, E>;

impl SessionError {
    /// An error with a seam code.
    pub fn new(kind: StoreError, message: impl Into<String>) -> Self {
        SessionError {
            code: ErrorCode::Store(kind),
            message: message.into(),
        }
    }

    /// An error from a wire code: seam codes become [`ErrorCode::Store`], others are kept.
    pub fn from_code(code: &str, message: impl Into<String>) -> Self {
        let code = SessionCode::ALL
            .iter()
            .find(|k| k.code() == code)
            .map_or_else(
                || ErrorCode::Other(code.to_owned()),
                |k| ErrorCode::Store(*k),
            );
        SessionError {
            code,
            message: message.into(),
        }
    }

    /// `SESSION_INVALID`.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StoreError::Invalid, message)
    }

    /// `SESSION_INVALID` attributed to one rule and one seq (B15: "attributed errors").
    pub fn rule(seq: u64, kind: &str, rule: &str, message: impl std::fmt::Display) -> Self {
        Self::invalid(format!("seq {seq} ({kind}) breaks rule {rule}: {message}"))
    }

    /// `SESSION_UNSUPPORTED`.
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(StoreError::Unsupported, message)
    }

    /// `SESSION_CORRUPT`.
    pub fn corrupt(message: impl Into<String>) -> Self {
        Self::new(StoreError::Corrupt, message)
    }

    /// `SESSION_NOT_FOUND`.
    pub fn not_found(id: &str) -> Self {
        Self::new(StoreError::NotFound, format!("no session '{id}'"))
    }

    /// `SESSION_OPEN_TURN`.
    pub fn open_turn(message: impl Into<String>) -> Self {
        Self::new(StoreError::OpenTurn, message)
    }

    /// The wire code.
    pub fn code(&self) -> &str {
        match &self.code {
            ErrorCode::Store(k) => k.code(),
            ErrorCode::Other(c) => c,
        }
    }

    /// Whether this error has seam code `kind`.
    pub fn is(&self, kind: StoreError) -> bool {
        self.code == ErrorCode::Store(kind)
    }
}

impl std::fmt::Display for SessionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code(), self.message)
    }
}

impl std::error::Error for SessionError {}

/// Across the ABI: a seam code stays typed, a foreign one is passed on verbatim.
impl From<SessionError> for keel_plugin_api::sdk::Error {
    fn from(e: SessionError) -> Self {
        match e.code {
            ErrorCode::Store(code) => keel_plugin_api::sdk::Error::coded(code, e.message),
            ErrorCode::Other(code) => keel_plugin_api::sdk::Error::received(code, e.message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_foreign_codes_are_kept() {
        for k in SessionCode::ALL {
            assert!(SessionError::from_code(k.code(), "m").is(*k));
        }
        let e = SessionError::from_code("PANIC", "boom");
        assert_eq!(e.code(), "PANIC");
        assert_eq!(e.to_string(), "PANIC: boom");
    }
}
