//! The command seam: CLI subcommands whose work belongs to a plugin (`keel sessions …`,
//! `keel fork …`, `keel secrets …`). The kernel parses the command line of ARCHITECTURE §11
//! into a typed [`CommandArgs`], assembles the profile, and hands the invocation to the row
//! providing `keel.command.<name>`; the plugin prints its own output and returns the exit code.
//!
//! Every command has the one contract shape [`Command`] (a single `run` method), served under
//! its own service name ([`service_name`]): the kernel knows each command's grammar, never
//! what it does, and finds its provider by name. The per-command markers
//! ([`SessionsCommand`], [`ForkCommand`], [`SecretsCommand`]) are what a provider declares in
//! its manifest and serves with `ctx.serve_named::<Command, _>(SessionsCommand::NAME, …)`.

use serde::{Deserialize, Serialize};

use crate::sdk::{ContractHandle, Service};

crate::contract! {
    /// The shape of every `keel.command.<name>` service (served under that name, never under
    /// `keel.command` itself).
    pub contract Command = "keel.command", version 1;
    provider CommandProvider;
    client CommandClient;
    /// Runs the command: the provider prints through the kernel's output redactions and
    /// answers the exit code. An invocation of another command is `INVALID_ARGUMENTS`.
    fn run(CommandInvocation) -> CommandOutcome;
}

/// Service name of the provider of command `name` (e.g. `keel.command.sessions`).
pub fn service_name(name: &str) -> String {
    format!("keel.command.{name}")
}

macro_rules! command_marker {
    ($(#[doc = $doc:literal])* $marker:ident = $name:literal) => {
        $(#[doc = $doc])*
        #[derive(Debug, Clone, Copy)]
        pub struct $marker;

        impl Service for $marker {
            const NAME: &'static str = $name;
            type Handle = ContractHandle;
        }
    };
}

command_marker! {
    /// `keel.command.sessions`: `keel sessions list [--json] | show ID [--json]`.
    SessionsCommand = "keel.command.sessions"
}
command_marker! {
    /// `keel.command.fork`: `keel fork ID [--at SEQ]`.
    ForkCommand = "keel.command.fork"
}
command_marker! {
    /// `keel.command.secrets`: `keel secrets set NAME | list [--json] | rm NAME` (the
    /// provider reads the value of `set` from stdin).
    SecretsCommand = "keel.command.secrets"
}

/// What the kernel passes to `run`. On the wire: `{command, args, cwd, profile}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandInvocation {
    /// The command and its parsed arguments.
    #[serde(flatten)]
    pub command: CommandArgs,
    /// Working directory (absolute).
    pub cwd: String,
    /// Profile name.
    pub profile: String,
}

/// A command with its parsed arguments: `{"command": NAME, "args": {…}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "command", content = "args", rename_all = "kebab-case")]
pub enum CommandArgs {
    /// `keel sessions …`.
    Sessions(SessionsArgs),
    /// `keel fork …`.
    Fork(ForkArgs),
    /// `keel secrets …`.
    Secrets(SecretsArgs),
}

impl CommandArgs {
    /// The command's name (`sessions`, `fork`, `secrets`).
    pub const fn name(&self) -> &'static str {
        match self {
            CommandArgs::Sessions(_) => "sessions",
            CommandArgs::Fork(_) => "fork",
            CommandArgs::Secrets(_) => "secrets",
        }
    }
}

/// `keel sessions …`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum SessionsArgs {
    /// `keel sessions list [--json]`.
    List {
        /// JSON output.
        #[serde(default)]
        json: bool,
    },
    /// `keel sessions show ID [--json]`.
    Show {
        /// Session id.
        session_id: String,
        /// JSON output.
        #[serde(default)]
        json: bool,
    },
}

/// `keel fork ID [--at SEQ]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkArgs {
    /// The session to fork.
    pub session_id: String,
    /// Inclusive seq boundary (`None`: the last event).
    #[serde(default)]
    pub at: Option<u64>,
}

/// `keel secrets …`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum SecretsArgs {
    /// `keel secrets set NAME` (the value comes from stdin).
    Set {
        /// Secret name.
        name: String,
    },
    /// `keel secrets list [--json]`.
    List {
        /// JSON output.
        #[serde(default)]
        json: bool,
    },
    /// `keel secrets rm NAME`.
    Rm {
        /// Secret name.
        name: String,
    },
}

/// What the command returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandOutcome {
    /// Process exit code.
    pub exit_code: i32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The wire keeps the shape of the JSON seam it replaced: `{command, args, cwd, profile}`.
    #[test]
    fn an_invocation_keeps_its_wire_shape() {
        let inv = CommandInvocation {
            command: CommandArgs::Sessions(SessionsArgs::Show {
                session_id: "s1".into(),
                json: true,
            }),
            cwd: "/w".into(),
            profile: "default".into(),
        };
        let wire = serde_json::to_value(&inv).unwrap();
        assert_eq!(
            wire,
            json!({"command": "sessions", "args": {"action": "show", "session_id": "s1", "json": true},
                   "cwd": "/w", "profile": "default"})
        );
        assert_eq!(
            serde_json::from_value::<CommandInvocation>(wire).unwrap(),
            inv
        );
        let fork: CommandInvocation = serde_json::from_value(
            json!({"command": "fork", "args": {"session_id": "s1"}, "cwd": "/", "profile": "p"}),
        )
        .unwrap();
        assert_eq!(
            fork.command,
            CommandArgs::Fork(ForkArgs {
                session_id: "s1".into(),
                at: None
            })
        );
        assert_eq!(fork.command.name(), "fork");
        assert_eq!(service_name(fork.command.name()), ForkCommand::NAME);
    }
}
