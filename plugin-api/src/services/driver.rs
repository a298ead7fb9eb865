//! The driver seam: `keel run` / `keel resume` assemble the profile and hand the parsed command
//! line to the one row that provides `keel.driver` (headless, acp, …).

use serde::{Deserialize, Serialize};

use crate::sdk::{CallHandle, Service};

/// The driver service. Methods, with JSON shapes:
///
/// - `"run"`: [`DriverInvocation`] → [`DriverOutcome`].
/// - `"interrupt"`: [`DriverInterrupt`] → `{}`. The kernel owns the process's signals: on
///   SIGINT, SIGTERM or SIGHUP it prints `keel: interrupted (SIG…)` and calls this, and the run
///   in flight (or the next one, if none has started yet) stops cleanly — abort the turn, wait
///   for it to close, flush and close the session — and returns `exit_code`. The kernel waits
///   a grace period for `run` to return (a second signal cuts it short), then tears the rows
///   down and exits with `exit_code` either way. A driver without the method answers
///   `UNKNOWN_METHOD` and gets the same grace.
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
    /// 0 completed, 1 other turn end, 2 usage/config, 128 + n stopped by signal n (130 SIGINT,
    /// 143 SIGTERM, 129 SIGHUP).
    pub exit_code: i32,
}

/// What the kernel passes to `"interrupt"`: the signal that asks the run to stop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriverInterrupt {
    /// `SIGINT`, `SIGTERM` or `SIGHUP`.
    pub signal: String,
    /// What `run` returns once it stopped: 128 + the signal's number.
    pub exit_code: i32,
}
