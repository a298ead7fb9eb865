//! The firewall's typed errors. Messages name secrets (names, aliases) and paths, never a
//! secret value: every constructor here takes only such data.

use keel_plugin_api::sdk::Error as SdkError;

/// A firewall failure with a stable code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("[{code}] {message}")]
pub struct FirewallError {
    /// Stable code (`SECRET_*`, `SECRETS_*`, `FIREWALL_*`).
    pub code: &'static str,
    /// Human-readable explanation (never a secret value).
    pub message: String,
}

impl FirewallError {
    /// A failure with `code`.
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        FirewallError {
            code,
            message: message.into(),
        }
    }

    /// `SECRETS_IO`: reading or writing the store failed.
    pub fn io(what: &str, e: &std::io::Error) -> Self {
        Self::new(codes::SECRETS_IO, format!("{what}: {e}"))
    }
}

impl From<FirewallError> for SdkError {
    fn from(e: FirewallError) -> Self {
        SdkError::new(e.code, e.message)
    }
}

/// The codes.
pub mod codes {
    /// A name outside `[A-Za-z0-9_]{1,64}`.
    pub const SECRET_NAME_INVALID: &str = "SECRET_NAME_INVALID";
    /// `set` read an empty value.
    pub const SECRET_EMPTY: &str = "SECRET_EMPTY";
    /// The value on stdin is not UTF-8.
    pub const SECRET_NOT_UTF8: &str = "SECRET_NOT_UTF8";
    /// `rm` of a name that is not stored.
    pub const SECRET_NOT_FOUND: &str = "SECRET_NOT_FOUND";
    /// File-system failure on the store.
    pub const SECRETS_IO: &str = "SECRETS_IO";
    /// The store or the master key is unreadable or does not authenticate.
    pub const SECRETS_CORRUPT: &str = "SECRETS_CORRUPT";
    /// The master key is sealed with a passphrase that is missing or wrong.
    pub const SECRETS_LOCKED: &str = "SECRETS_LOCKED";
    /// An alias stands where its value cannot reach (the body of a quoted heredoc in a
    /// `shell` command): the call did not run.
    pub const SECRET_UNFILLABLE: &str = "SECRET_UNFILLABLE";
    /// Bad arguments to a service method or command.
    pub const FIREWALL_ARGS: &str = "FIREWALL_ARGS";
    /// A bad pattern in the row config.
    pub const FIREWALL_CONFIG: &str = "FIREWALL_CONFIG";
}
