//! The driver seam: `keel run` / `keel resume` assemble the profile and hand the parsed command
//! line to the one row that provides `keel.driver` (headless, acp, …).

use serde::{Deserialize, Serialize};

use crate::sdk::{CallHandle, Service};

/// The driver service. Method `"run"` takes a [`DriverInvocation`] and returns [`DriverOutcome`].
#[derive(Debug, Clone, Copy)]
pub struct Driver;

impl Service for Driver {
    const NAME: &'static str = "keel.driver";
    type Handle = CallHandle;
}

/// What the kernel passes to the driver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriverInvocation {
    /// `run` or `resume`.
    pub command: String,
    /// Session id for `resume`.
    #[serde(default)]
    pub session_id: Option<String>,
    /// The prompt (`-` already resolved to stdin by the driver if it chooses to).
    #[serde(default)]
    pub prompt: Option<String>,
    /// Working directory (absolute, after `-C`).
    pub cwd: String,
    /// Profile name.
    pub profile: String,
    /// Remaining options (`output_format`, `ephemeral`, `max_turns`, `sandbox`, `approval`).
    #[serde(default)]
    pub options: serde_json::Value,
    /// Whether the process's stderr is a terminal. The kernel's output guard puts a pipe in
    /// place of the real descriptor (SEC-03), so a driver's own check would always say no;
    /// `None` from a kernel that does not tell, and the driver checks for itself.
    #[serde(default)]
    pub stderr_is_terminal: Option<bool>,
}

/// What the driver returns: the process exit code (ARCHITECTURE §11).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriverOutcome {
    /// 0 completed, 1 other turn end, 2 usage/config, 130 interrupted.
    pub exit_code: i32,
}
