//! The command seam: `keel` subcommands whose work belongs to a plugin (`keel sessions …`,
//! `keel fork …`, `keel secrets …`), and the grammar a plugin declares for them.
//!
//! A plugin describes each command it adds in its manifest ([`CommandSpec`], through
//! `Manifest::command`): name, help, arguments, subcommands. The `keel` binary builds its
//! command line from the specs of the assembled profile, so `keel --help` lists what the
//! profile offers and a profile without the plugin has no such command; the kernel never knows
//! a command's grammar or what it does. A driver declares the options of `keel run` / `keel
//! resume` the same way (`Manifest::run_option`, [`ArgSpec`]); the binary forwards their
//! values in [`DriverInvocation::options`](super::driver::DriverInvocation::options).
//!
//! Every command has the one contract shape [`Command`] (a single `run` method), served under
//! its own service name ([`service_name`]). The arguments arrive as the JSON object
//! [`CommandInvocation::args`]: each argument under its id, and a chosen subcommand as
//! `"action": NAME` with its own arguments beside it; the provider reads them into its own
//! typed struct with [`CommandInvocation::parse_args`].

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

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

/// What the `keel` binary passes to `run`. On the wire: `{command, args, cwd, profile}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandInvocation {
    /// The command's name (`sessions`).
    pub command: String,
    /// Its parsed arguments, as [`ArgSpec`]s and subcommands name them.
    #[serde(default)]
    pub args: serde_json::Map<String, serde_json::Value>,
    /// Working directory (absolute).
    pub cwd: String,
    /// Profile name.
    pub profile: String,
    /// Whether the process's stdin, stdout and stderr were terminals when keel started (the
    /// kernel's output guard puts pipes in place of stdout and stderr, so a command's own check
    /// would always say no). `None` from a kernel that does not tell. An interactive command
    /// (`keel chat`) reads it to choose between drawing on the terminal and plain lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminal: Option<Terminal>,
}

/// Which standard streams were terminals ([`CommandInvocation::terminal`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Terminal {
    /// Descriptor 0.
    pub stdin: bool,
    /// Descriptor 1 (before the output guard).
    pub stdout: bool,
    /// Descriptor 2 (before the output guard).
    pub stderr: bool,
}

impl CommandInvocation {
    /// The arguments read into the provider's own type (e.g. an enum tagged `action`).
    ///
    /// # Errors
    /// When the arguments do not have that shape (a binary older or newer than the grammar).
    pub fn parse_args<A: DeserializeOwned>(&self) -> Result<A, serde_json::Error> {
        A::deserialize(serde_json::Value::Object(self.args.clone()))
    }
}

/// What the command returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandOutcome {
    /// Process exit code.
    pub exit_code: i32,
}

/// One command (or subcommand) of `keel`, as a plugin declares it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandSpec {
    /// The word on the command line (`sessions`, `list`).
    pub name: String,
    /// One-line help (first line) and more (the rest), as `keel NAME --help` prints it.
    pub about: String,
    /// Its arguments, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<ArgSpec>,
    /// Its subcommands; when there are any, one must be given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subcommands: Vec<CommandSpec>,
    /// Run this command when `keel` is given no command at all and stdin and stdout are
    /// terminals (`keel` alone opens the interactive driver's `chat`). The kernel knows no
    /// command by name: the first command of the profile, in row order, that declares it wins;
    /// without one, bare `keel` prints the help as before. Top-level commands only.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub on_bare_terminal: bool,
}

impl CommandSpec {
    /// A command with no arguments yet.
    pub fn new(name: &str, about: &str) -> Self {
        CommandSpec {
            name: name.to_owned(),
            about: about.to_owned(),
            args: Vec::new(),
            subcommands: Vec::new(),
            on_bare_terminal: false,
        }
    }

    /// Makes this the command bare `keel` runs on a terminal ([`CommandSpec::on_bare_terminal`]).
    #[must_use]
    pub fn on_bare_terminal(mut self) -> Self {
        self.on_bare_terminal = true;
        self
    }

    /// Adds an argument.
    #[must_use]
    pub fn arg(mut self, arg: ArgSpec) -> Self {
        self.args.push(arg);
        self
    }

    /// Adds a subcommand (its name goes to the arguments as `"action"`).
    #[must_use]
    pub fn subcommand(mut self, sub: CommandSpec) -> Self {
        self.subcommands.push(sub);
        self
    }
}

/// How an argument appears on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ArgKind {
    /// A positional value.
    Positional,
    /// `--LONG` alone: `true` when given, `false` when not.
    Flag,
    /// `--LONG VALUE`: absent unless given (or defaulted).
    Option,
}

/// The type of an argument's value in [`CommandInvocation::args`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ValueType {
    /// A JSON string.
    #[default]
    String,
    /// A JSON number, parsed as a non-negative integer (`u64`).
    Count,
}

/// One argument of a [`CommandSpec`] or one option of `keel run` ([`ArgKind`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArgSpec {
    /// The key in the arguments object (`session_id`); an option's or flag's long name is the
    /// id with `_` spelled `-` (`--max-turns`).
    pub id: String,
    /// Help text.
    pub help: String,
    /// Positional, flag or option.
    pub kind: ArgKind,
    /// The value's name in help (`SEQ`); the id in capitals when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_name: Option<String>,
    /// The only values accepted (empty: any); help lists them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// The value's JSON type.
    #[serde(default)]
    pub value_type: ValueType,
    /// A positional or option that must be given.
    #[serde(default)]
    pub required: bool,
    /// The value used when the option is not given (help shows it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}

impl ArgSpec {
    fn new(id: &str, help: &str, kind: ArgKind) -> Self {
        ArgSpec {
            id: id.to_owned(),
            help: help.to_owned(),
            kind,
            value_name: None,
            values: Vec::new(),
            value_type: ValueType::String,
            required: false,
            default: None,
        }
    }

    /// A positional value (optional until [`ArgSpec::required`]).
    pub fn positional(id: &str, help: &str) -> Self {
        Self::new(id, help, ArgKind::Positional)
    }

    /// A `--flag`.
    pub fn flag(id: &str, help: &str) -> Self {
        Self::new(id, help, ArgKind::Flag)
    }

    /// A `--option VALUE`.
    pub fn option(id: &str, help: &str) -> Self {
        Self::new(id, help, ArgKind::Option)
    }

    /// Must be given.
    #[must_use]
    pub fn required(mut self) -> Self {
        self.required = true;
        self
    }

    /// The value's name in help.
    #[must_use]
    pub fn value_name(mut self, name: &str) -> Self {
        self.value_name = Some(name.to_owned());
        self
    }

    /// Only these values are accepted.
    #[must_use]
    pub fn values<S: AsRef<str>>(mut self, values: &[S]) -> Self {
        self.values = values.iter().map(|v| v.as_ref().to_owned()).collect();
        self
    }

    /// The value is a non-negative integer.
    #[must_use]
    pub fn count(mut self) -> Self {
        self.value_type = ValueType::Count;
        self
    }

    /// The value when the option is not given.
    #[must_use]
    pub fn default_value(mut self, value: &str) -> Self {
        self.default = Some(value.to_owned());
        self
    }

    /// The `--long` spelling of a flag or option.
    pub fn long(&self) -> String {
        self.id.replace('_', "-")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The wire keeps the shape of the JSON seam it replaced: `{command, args, cwd, profile}`,
    /// and a provider reads the arguments into its own type.
    #[test]
    fn an_invocation_keeps_its_wire_shape() {
        #[derive(Debug, PartialEq, Deserialize)]
        #[serde(tag = "action", rename_all = "kebab-case")]
        enum Sessions {
            Show { session_id: String, json: bool },
        }
        let wire = json!({"command": "sessions", "args": {"action": "show", "session_id": "s1", "json": true},
                          "cwd": "/w", "profile": "default"});
        let inv: CommandInvocation = serde_json::from_value(wire.clone()).unwrap();
        assert_eq!(inv.command, "sessions");
        assert_eq!(serde_json::to_value(&inv).unwrap(), wire);
        assert_eq!(
            inv.parse_args::<Sessions>().unwrap(),
            Sessions::Show {
                session_id: "s1".into(),
                json: true
            }
        );
        assert_eq!(service_name(&inv.command), "keel.command.sessions");
    }

    /// A spec round-trips through the manifest's JSON, defaults left out.
    #[test]
    fn a_spec_round_trips_through_json() {
        let spec = CommandSpec::new("fork", "Fork a session.")
            .arg(ArgSpec::positional("session_id", "Session to fork.").required())
            .arg(ArgSpec::option("at", "Boundary.").value_name("SEQ").count());
        let wire = serde_json::to_value(&spec).unwrap();
        assert_eq!(wire["args"][1]["value_type"], "count");
        assert!(wire.get("subcommands").is_none());
        assert_eq!(serde_json::from_value::<CommandSpec>(wire).unwrap(), spec);
        assert_eq!(ArgSpec::flag("max_turns", "").long(), "max-turns");
    }
}
