//! The command seam: CLI subcommands whose work belongs to a plugin (`keel sessions …`,
//! `keel fork …`, later `keel secrets …`). The kernel parses the command line of ARCHITECTURE
//! §11, assembles the profile, and hands the parsed arguments to the row providing
//! `keel.command.<name>`; the plugin prints its own output and returns the exit code.

use serde::{Deserialize, Serialize};

/// Service name of the provider of command `name` (e.g. `keel.command.sessions`).
pub fn service_name(name: &str) -> String {
    format!("keel.command.{name}")
}

/// The `keel.command.sessions` service.
#[derive(Debug, Clone, Copy)]
pub struct SessionsCommand;

impl crate::sdk::Service for SessionsCommand {
    const NAME: &'static str = "keel.command.sessions";
    type Handle = crate::sdk::CallHandle;
}

/// The `keel.command.fork` service.
#[derive(Debug, Clone, Copy)]
pub struct ForkCommand;

impl crate::sdk::Service for ForkCommand {
    const NAME: &'static str = "keel.command.fork";
    type Handle = crate::sdk::CallHandle;
}

/// The `keel.command.secrets` service (`keel secrets set NAME | list [--json] | rm NAME`): args
/// `{"action":"set","name":…}` (the provider reads the value from stdin), `{"action":"list",
/// "json":bool}`, `{"action":"rm","name":…}`.
#[derive(Debug, Clone, Copy)]
pub struct SecretsCommand;

impl crate::sdk::Service for SecretsCommand {
    const NAME: &'static str = "keel.command.secrets";
    type Handle = crate::sdk::CallHandle;
}

/// What the kernel passes to method `"run"` of a command service.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandInvocation {
    /// Command name (`sessions`, `fork`).
    pub command: String,
    /// Parsed arguments, e.g. `{"action":"list","json":true}` or
    /// `{"session_id":"…","at":12}`.
    pub args: serde_json::Value,
    /// Working directory (absolute).
    pub cwd: String,
    /// Profile name.
    pub profile: String,
}

impl CommandInvocation {
    /// The invocation a command service's `method` call carries: only `"run"` exists
    /// (`UNKNOWN_METHOD` otherwise), and `args` must be an invocation (`INVALID_JSON`).
    ///
    /// # Errors
    /// As above.
    pub fn from_call(method: &str, args: serde_json::Value) -> crate::sdk::Result<Self> {
        if method != "run" {
            return Err(crate::sdk::Error::new(
                "UNKNOWN_METHOD",
                format!("command service has no method '{method}'"),
            ));
        }
        Ok(serde_json::from_value(args)?)
    }
}

/// What the command returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandOutcome {
    /// Process exit code.
    pub exit_code: i32,
}
