//! The credentials seam (ARCHITECTURE §9, requirements B13, SEC-07…SEC-11): config holds
//! *references* (environment-variable-style names, `[A-Z_][A-Z0-9_]*`); this service owns the
//! values.
//!
//! `keel.credentials` (provided by the `credentials` plugin) is a JSON request/response service
//! ([`CallHandle`]). A value is looked up in layers, first non-empty wins:
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
//! Methods:
//! - `"resolve"`: `{ref, cwd?}` → `{value: string|null, source: Source|null}`. The only method
//!   that returns a value; for adapters building a wire header, nobody else.
//! - `"describe"`: `{ref, cwd?}` → `{configured: bool, source: Source|null, writable: bool}`.
//!   Never the value (SEC-11). `writable` is false when the process environment shadows the
//!   reference (a `set` would be rejected).
//! - `"set"`: `{ref, value}` → `{}`. Writes `credentials.toml`: re-reads it under a
//!   cross-process lock, patches only that key, writes a temp file, fsyncs, renames, mode 0600.
//!   An empty `value` is refused (`INVALID_VALUE`; use `remove`).
//! - `"remove"`: `{ref}` → `{}`. Removes the key from `credentials.toml` (absent is fine).
//! - `"list"`: `{}` → `{refs: [{ref, source}]}`: the names defined in the file and `.env` layers
//!   (sorted, each with its winning source, environment-shadowed ones as `"env"`), never values.
//!
//! Error codes (see the constants below): [`INVALID_REFERENCE`], [`CREDENTIAL_SHADOWED`],
//! [`CREDENTIALS_FILE`], [`CREDENTIALS_IO`], [`CREDENTIAL_UNGUARDED`], and `INVALID_ARGS` /
//! `UNKNOWN_METHOD` / `INVALID_VALUE` for malformed calls.

use serde::{Deserialize, Serialize};

use crate::sdk::{CallHandle, Service};

/// The `credentials` plugin's service: see the module docs for its methods.
#[derive(Debug, Clone, Copy)]
pub struct Credentials;

impl Service for Credentials {
    const NAME: &'static str = "keel.credentials";
    type Handle = CallHandle;
}

/// `ref` is not a valid reference name (`[A-Z_][A-Z0-9_]*`). The message names the reference.
pub const INVALID_REFERENCE: &str = "INVALID_REFERENCE";
/// `set`/`remove` of a reference the process environment defines: the file entry would never
/// win, so the write is refused (SEC-08). `describe` reports `writable: false` in advance.
pub const CREDENTIAL_SHADOWED: &str = "CREDENTIAL_SHADOWED";
/// A credentials file (`credentials.toml` or a `.env`) exists but is unreadable or malformed;
/// the message names the file and, for syntax errors, the line. Never quotes a value.
pub const CREDENTIALS_FILE: &str = "CREDENTIALS_FILE";
/// Writing `credentials.toml` (lock, temp file, fsync, rename, permissions) failed; the message
/// names the path and the OS error.
pub const CREDENTIALS_IO: &str = "CREDENTIALS_IO";
/// `resolve` found a value but the loaded firewall could not register it for scrubbing, so
/// the value was withheld; the message names the reference and the firewall's error.
pub const CREDENTIAL_UNGUARDED: &str = "CREDENTIAL_UNGUARDED";

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

/// Whether `name` is a valid reference: `[A-Z_][A-Z0-9_]*`.
pub fn is_valid_reference(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b'A'..=b'Z' | b'_'))
        && bytes.all(|b| matches!(b, b'A'..=b'Z' | b'0'..=b'9' | b'_'))
}

/// Name fragments that mark an environment variable as a credential (any case): KEY, SECRET,
/// TOKEN, PASSWORD. One rule for everyone who must treat such variables as credentials: the
/// `credentials` row takes them out of keel's own environment at activation (holding their
/// values for the env layer), and `shell` never passes them to a child (SBX-03).
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
