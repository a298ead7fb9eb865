//! The firewall's facts API (requirements SEC-04, SEC-06; ARCHITECTURE §9). Callers supply
//! only facts — a tool name, a path and its access, a host, a text — never a policy and never
//! a "trust me" flag; the firewall owns its policy and decides.
//!
//! One method hands the firewall data rather than asking it: [`RegisterCredential`], by which
//! the `credentials` row reports every value it resolves (issue 10 item 2), so the firewall
//! scrubs it like a secret from everything bound for the model, a log, a session or the
//! terminal. A registered credential is scrub-only: it has no alias, is never filled into a
//! tool argument and is never written to the secrets store.

use serde::{Deserialize, Serialize};

crate::contract! {
    /// The firewall's facts API and credential registration (`firewall` plugin).
    pub contract Firewall = "keel.firewall", version 1;
    provider FirewallProvider;
    client FirewallClient;
    /// Whether the tool may be called at all (`deny_tools`).
    fn check_tool(CheckTool) -> Verdict;
    /// Whether the path may be used for the access (`deny_paths`, `deny_write_paths`).
    fn check_path(CheckPath) -> Verdict;
    /// Whether the host may be reached (`allow_hosts`).
    fn check_network(CheckNetwork) -> Verdict;
    /// The aliases of the secrets (and markers of the credentials) found in the text.
    fn scan_content(ScanContent) -> Findings;
    /// Hands the firewall a credential value keel resolved, to scrub like a secret.
    /// `SECRETS_CORRUPT` when the scrubber cannot be built.
    fn register_credential(RegisterCredential) -> Registered;
}

/// `check_tool`'s request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckTool {
    /// Tool name.
    pub name: String,
}

/// How a path is about to be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PathAccess {
    /// Read or list.
    Read,
    /// Create, modify or delete (or run a command there).
    Write,
}

/// `check_path`'s request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckPath {
    /// An absolute path (callers resolve relative ones against their working root).
    pub path: String,
    /// The intended access.
    pub access: PathAccess,
}

/// `check_network`'s request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckNetwork {
    /// Host name or address, without scheme or port.
    pub host: String,
}

/// `scan_content`'s request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScanContent {
    /// The text to scan for secret values (and their simple encodings).
    pub text: String,
}

/// The answer of the `check_*` methods.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// The action may go ahead.
    pub allowed: bool,
    /// Why not (present when denied).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The answer of `scan_content`: the aliases (`sec_NAME`) of the secrets found, and the
/// [`credential_marker`]s of the registered credentials found, never values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Findings {
    /// Aliases and markers, sorted, each once.
    pub findings: Vec<String>,
}

/// `register_credential`'s request: a credential value keel resolved (an adapter key). The
/// firewall scrubs it, and every encoded form it scrubs for secrets, from tool results,
/// model-bound requests, session events and the kernel's output redactions, replacing it with
/// `[credential REF]`. Registering the same pair again is a no-op; a new value for a
/// reference is added (the old one stays scrubbed). `Debug` never shows the value.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegisterCredential {
    /// The reference the value was resolved for (`OPENAI_API_KEY`).
    #[serde(rename = "ref")]
    pub reference: String,
    /// The value.
    pub value: String,
}

impl std::fmt::Debug for RegisterCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegisterCredential")
            .field("reference", &self.reference)
            .field("value", &"<redacted>")
            .finish()
    }
}

/// The answer of `register_credential`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registered {
    /// The pair was new (false: the firewall already scrubbed it).
    pub added: bool,
}

/// The text a registered credential's value (and each encoded form) becomes: `[credential
/// REF]`. No alias form, so the firewall's fill never turns it back into the value.
pub fn credential_marker(reference: &str) -> String {
    format!("[credential {reference}]")
}

crate::error_codes! {
    /// The secret firewall (`firewall` plugin): the encrypted store, alias fill, `keel
    /// secrets`, and its row config. Messages name secrets and paths, never a value.
    pub enum SecretsCode in "secrets" {
        /// A secret name outside `[A-Za-z0-9_]{1,64}`.
        NameInvalid = "SECRET_NAME_INVALID", by "`keel secrets set`/`rm`, the store", retry Changed;
        /// `keel secrets set` read an empty value.
        Empty = "SECRET_EMPTY", by "`keel secrets set`", retry Changed;
        /// `keel secrets set` read a value too short (under 8 bytes) or too common (`none`,
        /// `dummy`, `changeme`, …) to be a secret: scrubbing it would rewrite every word that
        /// contains it.
        Weak = "SECRET_WEAK", by "`keel secrets set`", retry Changed;
        /// The value on stdin is not UTF-8.
        NotUtf8 = "SECRET_NOT_UTF8", by "`keel secrets set`", retry Changed;
        /// `keel secrets rm` of a name that is not stored.
        NotFound = "SECRET_NOT_FOUND", by "`keel secrets rm`", retry Changed;
        /// An alias stands where its value cannot reach (the body of a quoted heredoc in a
        /// `shell` command): the call did not run.
        Unfillable = "SECRET_UNFILLABLE", by "the firewall's `tools/execute` fill (a tool result)", retry Changed;
        /// A file-system failure on the secrets store.
        Io = "SECRETS_IO", by "the firewall's store, `keel secrets`", retry Later;
        /// The store or the master key is unreadable or does not authenticate (also: the
        /// scrubber cannot be built, `register_credential`).
        Corrupt = "SECRETS_CORRUPT", by "the firewall's store; `keel.firewall` `register_credential`", retry Never;
        /// The master key is sealed with a passphrase that is missing or wrong.
        Locked = "SECRETS_LOCKED", by "the firewall's store (activation, `keel secrets`)", retry Changed;
        /// A bad pattern in the firewall's row config.
        Config = "FIREWALL_CONFIG", by "the `firewall` row's activation", retry Never;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registration_never_shows_its_value() {
        let r = RegisterCredential {
            reference: "OPENAI_API_KEY".into(),
            value: "sk-live-1".into(),
        };
        assert!(!format!("{r:?}").contains("sk-live-1"));
        let wire = serde_json::to_value(&r).unwrap();
        assert_eq!(
            wire,
            serde_json::json!({"ref": "OPENAI_API_KEY", "value": "sk-live-1"})
        );
        assert_eq!(
            credential_marker("OPENAI_API_KEY"),
            "[credential OPENAI_API_KEY]"
        );
    }
}
