//! The SDK's error type: a stable code plus a message, the only shape that crosses the ABI.
//!
//! Codes are SCREAMING_SNAKE strings on the wire, each a variant of a catalog in
//! [`crate::codes`] (`PANIC`, `TIMEOUT`, `INACTIVE_FIBER`, `UNDECLARED_SERVICE`, …); an error
//! is built from a variant ([`Error::coded`]) and compared with [`Error::is`]. Keeping the error this
//! small means no plugin error type ever needs a stable layout.

use crate::abi::{AbiResult, PluginError};
use crate::codes::{ContractCode, ErrorCode};
use abi_stable::std_types::RResult;

/// An error with a stable code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct Error {
    /// Stable machine-readable code.
    pub code: String,
    /// One-line human-readable message.
    pub message: String,
}

/// Result alias used throughout the SDK.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Builds an error from a typed code (`crate::codes`).
    pub fn coded(code: impl ErrorCode, message: impl Into<String>) -> Self {
        Error {
            code: code.as_str().to_owned(),
            message: message.into(),
        }
    }

    /// Whether this error carries `code`.
    pub fn is(&self, code: impl ErrorCode) -> bool {
        self.code == code.as_str()
    }

    /// The typed code, when the error's code belongs to the set `C`.
    pub fn code_as<C: ErrorCode>(&self) -> Option<C> {
        C::parse(&self.code)
    }

    /// Rebuilds an error whose code was *received* — decoded from the ABI, a log line, a
    /// child's output — so its spelling is whatever the sender wrote. This never creates a
    /// code: errors keel's own code returns are built with [`Error::coded`] from a catalog
    /// variant (`cargo xtask tidy` fails on a free-string code literal).
    pub fn received(code: impl Into<String>, message: impl Into<String>) -> Self {
        Error {
            code: code.into(),
            message: message.into(),
        }
    }

    /// A plugin-specific failure with code `PLUGIN`.
    pub fn msg(message: impl Into<String>) -> Self {
        Error::coded(ContractCode::Plugin, message)
    }

    /// Converts to the ABI shape.
    pub fn into_abi(self) -> PluginError {
        PluginError::received(&self.code, self.message)
    }
}

impl From<PluginError> for Error {
    fn from(e: PluginError) -> Self {
        Error {
            code: e.code.into_string(),
            message: e.message.into_string(),
        }
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Error::coded(ContractCode::InvalidJson, e.to_string())
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::coded(ContractCode::Io, e.to_string())
    }
}

/// `AbiResult<T>` → `Result<T>`.
pub(crate) fn from_abi<T>(r: AbiResult<T>) -> Result<T> {
    match r {
        RResult::ROk(v) => Ok(v),
        RResult::RErr(e) => Err(e.into()),
    }
}

/// `Result<T>` → `AbiResult<T>`.
pub(crate) fn to_abi<T>(r: Result<T>) -> AbiResult<T> {
    match r {
        Ok(v) => RResult::ROk(v),
        Err(e) => RResult::RErr(e.into_abi()),
    }
}
