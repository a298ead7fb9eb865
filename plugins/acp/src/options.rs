//! `keel acp`'s command line: the run options that make sense for a server (ARCHITECTURE §11,
//! "same options as run": `--sandbox`, `--approval`, `--max-turns`; the profile options
//! `--profile`, `-C`, `-c`, `--patch` are the kernel's, on every command). The output and input
//! formats of `keel run` have no meaning here: the wire is ACP.

use keel_plugin_api::services::approval::ApprovalMode;
use keel_plugin_api::services::command::{ArgSpec, CommandSpec};
use keel_plugin_api::services::sandbox::SandboxMode;
use serde::Deserialize;

/// The command's name.
pub const COMMAND: &str = "acp";

/// The `keel acp` grammar.
pub fn spec() -> CommandSpec {
    CommandSpec::new(
        COMMAND,
        "Serve the Agent Client Protocol on stdin/stdout (for editors).\n\nEach editor session is a keel session: the same log, firewall, sandbox and hooks as `keel run`. See docs/acp.md.",
    )
    .arg(
        ArgSpec::option("sandbox", "Sandbox mode.")
            .values(&SandboxMode::ALL.map(SandboxMode::as_str)),
    )
    .arg(
        ArgSpec::option("approval", "Approval policy.")
            .values(&ApprovalMode::ALL.map(ApprovalMode::as_str)),
    )
    .arg(
        ArgSpec::option("max_turns", "Stop each prompt after N turns.")
            .value_name("N")
            .count(),
    )
}

/// The options, as the invocation carries them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Options {
    /// `--sandbox`.
    #[serde(default)]
    pub sandbox: Option<String>,
    /// `--approval`.
    #[serde(default)]
    pub approval: Option<String>,
    /// `--max-turns`.
    #[serde(default)]
    pub max_turns: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_invocation_reads_into_options() {
        let o: Options =
            serde_json::from_value(json!({"approval": "ask", "max_turns": 3})).unwrap();
        assert_eq!(o.approval.as_deref(), Some("ask"));
        assert_eq!(o.max_turns, Some(3));
        assert!(serde_json::from_value::<Options>(json!({"output_format": "json"})).is_err());
    }
}
