//! The firewall's typed errors. Messages name secrets (names, aliases) and paths, never a
//! secret value: every constructor here takes only such data.

use keel_plugin_api::sdk::Error as SdkError;
use keel_plugin_api::services::firewall::SecretsCode;

/// A firewall failure with a stable code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("[{code}] {message}")]
pub struct FirewallError {
    /// Stable code.
    pub code: SecretsCode,
    /// Human-readable explanation (never a secret value).
    pub message: String,
}

impl FirewallError {
    /// A failure with `code`.
    pub fn new(code: SecretsCode, message: impl Into<String>) -> Self {
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
        SdkError::coded(e.code, e.message)
    }
}

/// The codes, by their wire spelling ([`SecretsCode`]).
pub mod codes {
    use keel_plugin_api::services::firewall::SecretsCode;

    /// A name outside `[A-Za-z0-9_]{1,64}`.
    pub const SECRET_NAME_INVALID: SecretsCode = SecretsCode::NameInvalid;
    /// `set` read an empty value.
    pub const SECRET_EMPTY: SecretsCode = SecretsCode::Empty;
    /// `set` read a value too short or too common to be a secret.
    pub const SECRET_WEAK: SecretsCode = SecretsCode::Weak;
    /// The value on stdin is not UTF-8.
    pub const SECRET_NOT_UTF8: SecretsCode = SecretsCode::NotUtf8;
    /// `rm` of a name that is not stored.
    pub const SECRET_NOT_FOUND: SecretsCode = SecretsCode::NotFound;
    /// File-system failure on the store.
    pub const SECRETS_IO: SecretsCode = SecretsCode::Io;
    /// The store or the master key is unreadable or does not authenticate.
    pub const SECRETS_CORRUPT: SecretsCode = SecretsCode::Corrupt;
    /// The master key is sealed with a passphrase that is missing or wrong.
    pub const SECRETS_LOCKED: SecretsCode = SecretsCode::Locked;
    /// An alias stands where its value cannot reach: the call did not run.
    pub const SECRET_UNFILLABLE: SecretsCode = SecretsCode::Unfillable;
    /// A bad pattern in the row config.
    pub const FIREWALL_CONFIG: SecretsCode = SecretsCode::Config;
}
