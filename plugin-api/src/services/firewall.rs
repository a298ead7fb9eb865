//! The firewall's facts API (requirements SEC-04, SEC-06; ARCHITECTURE §9). Callers supply
//! only facts — a tool name, a path and its access, a host, a text — never a policy and never
//! a "trust me" flag; the firewall owns its policy and decides.

use serde::{Deserialize, Serialize};

use crate::sdk::{CallHandle, Service};

/// The `keel.firewall` service. Methods:
/// - `"check_tool"`: [`CheckTool`] → [`Verdict`];
/// - `"check_path"`: [`CheckPath`] → [`Verdict`];
/// - `"check_network"`: [`CheckNetwork`] → [`Verdict`];
/// - `"scan_content"`: [`ScanContent`] → [`Findings`].
#[derive(Debug, Clone, Copy)]
pub struct Firewall;

impl Service for Firewall {
    const NAME: &'static str = "keel.firewall";
    type Handle = CallHandle;
}

/// Method `check_tool`.
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

/// Method `check_path`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckPath {
    /// An absolute path (callers resolve relative ones against their working root).
    pub path: String,
    /// The intended access.
    pub access: PathAccess,
}

/// Method `check_network`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckNetwork {
    /// Host name or address, without scheme or port.
    pub host: String,
}

/// Method `scan_content`.
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

/// The answer of `scan_content`: the aliases (`sec_NAME`) of the secrets found, never values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Findings {
    /// Aliases, sorted, each once.
    pub findings: Vec<String>,
}
