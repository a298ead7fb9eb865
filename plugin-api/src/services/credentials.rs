//! The credentials seam (ARCHITECTURE §9, requirements B13, SEC-07…SEC-11): config holds
//! *references* (environment-variable-style names, `[A-Z_][A-Z0-9_]*`); this service owns the
//! values.
//!
//! `keel.credentials` (provided by the `credentials` plugin) is the typed contract
//! [`Credentials`]. A value is looked up in layers, first non-empty wins:
//!
//! 1. the inherited process environment (`"env"`, read-only, always wins);
//! 2. `$KEEL_HOME/credentials.toml` (`"file"`, managed and writable, mode 0600, a strict table
//!    of `REF = "string"`);
//! 3. `.env` in the working directory (`"dotenv-cwd"`: the `cwd` argument, else the process's
//!    current directory);
//! 4. `$KEEL_HOME/.env` (`"dotenv-home"`).
//!
//! An empty value counts as absent in every layer. Values are read per call and never cached,
//! so a rotated value applies to the next operation; they are never put into the process
//! environment or a child's (SEC-09).
//!
//! The environment layer is the exception that proves it: the environment keel inherited
//! cannot change from outside, so the row takes each credential out of it — every
//! [`is_credential_like`] reference at activation, any other reference when it is first
//! resolved from there — and answers from its own memory for the rest of the process. The
//! variable is then gone from `/proc/<pid>/environ` and from every child keel starts (issue 10
//! item 4).
//!
//! Every value `resolve` hands out is first registered with `keel.firewall` (when that row is
//! loaded) as a scrub-only credential
//! ([`RegisterCredential`](super::firewall::RegisterCredential)); if the firewall refuses, the
//! value is not handed out (`CREDENTIAL_UNGUARDED`).
//!
//! The methods are documented on [`CredentialsProvider`]; the error codes are the
//! [`CredentialCode`]s (a malformed request is the SDK's `INVALID_ARGUMENTS`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

crate::contract! {
    /// The `credentials` plugin's service: see the module docs for the layers.
    pub contract Credentials = "keel.credentials", version 1;
    provider CredentialsProvider;
    client CredentialsClient;
    /// The value of a reference and its layer (both `None` when absent). The only method that
    /// returns a value; for adapters building a wire header, nobody else. The value is
    /// registered with `keel.firewall` first (`CREDENTIAL_UNGUARDED` when it cannot be).
    fn resolve(CredentialRef) -> Resolved;
    /// Whether a reference is configured, where, and whether `set` would be accepted. Never
    /// the value (SEC-11). `writable` is false when the process environment shadows it.
    fn describe(CredentialRef) -> Description;
    /// Writes `credentials.toml`: re-reads it under a cross-process lock, patches only that
    /// key, writes a temp file, fsyncs, renames, mode 0600. An empty value is refused
    /// (`INVALID_VALUE`; use `remove`).
    fn set(SetCredential) -> ();
    /// Removes the key from `credentials.toml` (absent is fine).
    fn remove(RemoveCredential) -> ();
    /// The names defined in the file and `.env` layers (sorted, each with its winning source,
    /// environment-shadowed ones as `env`), never values.
    fn list(ListCredentials) -> Listed;
    /// The references this process holds (taken out of its environment) or has resolved from
    /// any layer, sorted: names a child process must never inherit from keel's environment,
    /// whatever they look like (issue 23 item 1). Never values.
    fn held(HeldRequest) -> Held;
}

/// `held`'s request (no arguments).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeldRequest {}

/// `held`'s answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    /// The references, sorted.
    pub refs: Vec<String>,
}

/// `resolve`'s and `describe`'s request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredentialRef {
    /// The reference (`OPENAI_API_KEY`).
    #[serde(rename = "ref")]
    pub reference: String,
    /// Working directory of the `.env` layer (`None`: the process's current directory).
    #[serde(default)]
    pub cwd: Option<PathBuf>,
}

/// `resolve`'s answer. `Debug` never shows the value.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolved {
    /// The value (`None` when absent in every layer).
    pub value: Option<String>,
    /// The winning layer.
    pub source: Option<Source>,
}

impl std::fmt::Debug for Resolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolved")
            .field("value", &self.value.as_ref().map(|_| "<redacted>"))
            .field("source", &self.source)
            .finish()
    }
}

/// `set`'s request. `Debug` never shows the value.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetCredential {
    /// The reference.
    #[serde(rename = "ref")]
    pub reference: String,
    /// The value (non-empty).
    pub value: String,
}

impl std::fmt::Debug for SetCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SetCredential")
            .field("reference", &self.reference)
            .field("value", &"<redacted>")
            .finish()
    }
}

/// `remove`'s request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoveCredential {
    /// The reference.
    #[serde(rename = "ref")]
    pub reference: String,
}

/// `list`'s request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListCredentials {
    /// Working directory of the `.env` layer.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
}

/// `list`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listed {
    /// The defined references, sorted.
    pub refs: Vec<ListedRef>,
}

/// One reference `list` names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListedRef {
    /// The reference.
    #[serde(rename = "ref")]
    pub reference: String,
    /// Its winning layer.
    pub source: Source,
}

crate::error_codes! {
    /// Credentials (`credentials` plugin, and the adapters that need one).
    pub enum CredentialCode in "credentials" {
        /// `ref` is not a valid reference name (`[A-Z_][A-Z0-9_]*`). The message names it.
        InvalidReference = "INVALID_REFERENCE", by "`keel.credentials`", retry Changed;
        /// `set` of an empty value (use `remove`).
        InvalidValue = "INVALID_VALUE", by "`keel.credentials` `set`", retry Changed;
        /// `set`/`remove` of a reference the process environment defines: the file entry
        /// would never win, so the write is refused (SEC-08). `describe` reports `writable:
        /// false` in advance.
        Shadowed = "CREDENTIAL_SHADOWED", by "`keel.credentials` `set`/`remove`", retry Never;
        /// A credentials file (`credentials.toml` or a `.env`) exists but is unreadable or
        /// malformed; the message names the file and, for syntax errors, the line. Never
        /// quotes a value.
        File = "CREDENTIALS_FILE", by "`keel.credentials`", retry Changed;
        /// Writing `credentials.toml` (lock, temp file, fsync, rename, permissions) failed;
        /// the message names the path and the OS error.
        Io = "CREDENTIALS_IO", by "`keel.credentials` `set`/`remove`", retry Later;
        /// `resolve` found a value but the loaded firewall could not register it for
        /// scrubbing, so the value was withheld; the message names the reference and the
        /// firewall's error.
        Unguarded = "CREDENTIAL_UNGUARDED", by "`keel.credentials` `resolve`", retry Never;
        /// The credential an adapter row names (`api_key_ref`) is set in no layer; the
        /// message names every place it may be set, never a value.
        Missing = "CREDENTIAL_MISSING", by "LLM adapters (`check`, a request); `keel.agent` `create`", retry Changed;
    }
}

/// Which layer a value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// The inherited process environment.
    Env,
    /// `$KEEL_HOME/credentials.toml`.
    File,
    /// `.env` in the working directory.
    DotenvCwd,
    /// `$KEEL_HOME/.env`.
    DotenvHome,
}

/// The value of `reference` for one operation (LLM-05: never cached, so a rotated value
/// applies next time): through `keel.credentials` when a credentials row is loaded (`service`,
/// fetched by the caller for this very operation), else the process environment. `None` when
/// unset or empty everywhere. The one lookup every holder of references shares (the model
/// adapters' `api_key_ref`, `mcp`'s `${credential:NAME}`).
///
/// # Errors
/// The credentials service's own error (its messages name files and lines, never values).
pub async fn resolve_value(
    service: Option<CredentialsClient>,
    reference: &str,
    cwd: Option<&std::path::Path>,
) -> crate::sdk::Result<Option<String>> {
    let Some(service) = service else {
        return Ok(std::env::var(reference).ok().filter(|v| !v.is_empty()));
    };
    let answer = service
        .resolve(CredentialRef {
            reference: reference.to_owned(),
            cwd: cwd.map(std::path::Path::to_path_buf),
        })
        .await?;
    Ok(answer.value.filter(|v| !v.is_empty()))
}

/// `text` with every occurrence of a credential's `value` replaced by `[redacted]` (providers
/// echo what they received in error bodies). Values under 4 bytes are left alone: replacing
/// them would mangle ordinary text and hide nothing.
pub fn redact(text: &str, value: &str) -> String {
    if value.len() < 4 {
        return text.to_owned();
    }
    text.replace(value, "[redacted]")
}

/// Whether `name` is a valid reference: `[A-Z_][A-Z0-9_]*`.
pub fn is_valid_reference(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b'A'..=b'Z' | b'_'))
        && bytes.all(|b| matches!(b, b'A'..=b'Z' | b'0'..=b'9' | b'_'))
}

/// Name fragments that mark an environment variable as a credential (any case): KEY, SECRET,
/// TOKEN, PASSWORD. One rule for everyone who must treat such variables as credentials: the
/// `credentials` row takes them out of keel's own environment at activation (holding their
/// values for the env layer), and no child inherits them from keel
/// ([`child_env`](super::child_env), SBX-03).
pub const CREDENTIAL_MARKERS: [&str; 4] = ["KEY", "SECRET", "TOKEN", "PASSWORD"];

/// Whether an environment variable named `name` looks like a credential
/// ([`CREDENTIAL_MARKERS`], any case).
pub fn is_credential_like(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    CREDENTIAL_MARKERS.iter().any(|m| upper.contains(m))
}

/// `describe`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Description {
    /// A non-empty value exists in some layer.
    pub configured: bool,
    /// The winning layer, if configured.
    pub source: Option<Source>,
    /// `set` would be accepted (the environment does not shadow the reference).
    pub writable: bool,
}
