//! Running the shell under the sandbox (SBX-04…09, B10): when a `keel.sandbox` provider is
//! loaded, the tool asks it to `confine` `[shell, -c, command]` and spawns exactly the argv it
//! answers. A refusal (`SANDBOX_UNAVAILABLE`) means nothing runs. After the run the answer's
//! rule tells a runner failure from the child's own non-zero exit (SBX-09), and the answer's
//! denial signatures add the shared `[sandbox: …]` marker to the result.
//!
//! The [`Confiner`] seam keeps the tool body plain Rust: the plugin passes one that calls the
//! service (through the typed [`SandboxClient`]), tests pass one built by hand.

use keel_plugin_api::sdk::Error;
use keel_plugin_api::services::sandbox::{ConfineRequest, Confined, SandboxClient};
use std::ffi::OsString;

/// Turns a command's argv into the argv to spawn.
pub trait Confiner: Send + Sync {
    /// The confined argv for `request.argv` (the session's working directory, the mode the
    /// call asks for, the call itself for an escalation grant).
    ///
    /// # Errors
    /// The sandbox's refusal (`SANDBOX_UNAVAILABLE`, `ESCALATION_NOT_APPROVED`, …): nothing
    /// may run.
    fn confine(&self, request: ConfineRequest) -> Result<Confined, Error>;
}

/// A confiner backed by the `keel.sandbox` service. Called from the tool's worker thread, so
/// it blocks on the call (the sandbox's `confine` does no I/O and never waits on the kernel).
pub struct SandboxService(pub SandboxClient);

impl Confiner for SandboxService {
    fn confine(&self, request: ConfineRequest) -> Result<Confined, Error> {
        futures::executor::block_on(self.0.confine(request))
    }
}

/// The shell a confined command runs with: `bash` when the child's `PATH` has it, else
/// `/bin/sh` (the unconfined path tries the same two in the same order).
pub fn pick_shell(env: &[(OsString, OsString)]) -> &'static str {
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let has_bash = std::env::split_paths(&path).any(|dir| dir.join("bash").is_file());
    if has_bash { "bash" } else { "/bin/sh" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bash_is_preferred_when_on_path() {
        let with = vec![("PATH".into(), "/usr/bin:/bin".into())];
        assert_eq!(pick_shell(&with), "bash");
        let without = vec![("PATH".into(), "/nonexistent".into())];
        assert_eq!(pick_shell(&without), "/bin/sh");
        assert_eq!(pick_shell(&[]), "/bin/sh");
    }
}
