//! The `keel` command line (ARCHITECTURE §11, a public contract).
//!
//! This layer parses arguments, resolves the profile, assembles it and either reports
//! (`config dump`, `plugins list`, `lock`, `doctor`) or hands control to the driver (`run`,
//! `resume`). Every error before the driver runs exits 2 with one line naming the culprit.

#![allow(
    clippy::result_large_err,
    reason = "kernel errors end the process (exit 2); their size never matters on a hot path"
)]

mod doctor;
pub mod hardening;
mod inspect;
mod run;
mod trust;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use keel_plugin_api::services::command::{CommandArgs, ForkArgs, SecretsArgs, SessionsArgs};

use keel_config::{ConfigSources, ResolvedProfile, resolve_profile};
use keel_kernel::error::Result;
use keel_kernel::paths::Paths;

/// keel: a plugin-host microkernel for LLM agents.
#[derive(Debug, Parser)]
#[command(name = "keel", version, about, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a task with the profile's driver.
    Run(RunArgs),
    /// Resume a session with the profile's driver.
    Resume {
        /// Session id.
        session_id: String,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Inspect the assembled configuration.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Inspect plugins.
    Plugins {
        #[command(subcommand)]
        command: PluginsCommand,
    },
    /// Inspect stored sessions (handled by the profile's session plugin).
    Sessions {
        #[command(subcommand)]
        command: SessionsCommand,
    },
    /// Fork a session at a closed prefix (handled by the profile's session plugin).
    Fork {
        /// Session to fork.
        session_id: String,
        /// Inclusive seq boundary (default: the last event).
        #[arg(long, value_name = "SEQ")]
        at: Option<u64>,
        #[command(flatten)]
        profile: ProfileArgs,
    },
    /// Manage secrets (handled by the profile's firewall plugin): the value of `set` is read
    /// from stdin, `list` shows names only.
    Secrets {
        #[command(subcommand)]
        command: SecretsCommand,
    },
    /// Trust DIR's project layer (DIR/.keel/config.toml) as it is now, so it may change
    /// security-relevant settings (sandbox, firewall, approval, credentials, endpoints, rows).
    Trust {
        /// Project directory (default: the current directory).
        dir: Option<PathBuf>,
        /// Forget the record instead.
        #[arg(long)]
        revoke: bool,
    },
    /// Record plugin digests and the assembly graph in keel.lock beside the binary.
    Lock(ProfileArgs),
    /// Check the ABI, the lock, the search path and the sandbox.
    Doctor(ProfileArgs),
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Print the final row tree.
    Dump {
        #[command(flatten)]
        profile: ProfileArgs,
        /// Annotate rows and keys with the layer and file that set them.
        #[arg(long)]
        explain: bool,
        /// JSON instead of TOML.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
enum SessionsCommand {
    /// Sessions under $KEEL_HOME, newest first.
    List {
        #[command(flatten)]
        profile: ProfileArgs,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// One session's events (a crashed session is recovered on read, and says so).
    Show {
        /// Session id.
        session_id: String,
        #[command(flatten)]
        profile: ProfileArgs,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
enum SecretsCommand {
    /// Store a secret; its value is read from stdin (never from the command line).
    Set {
        /// Secret name (the model sees the alias `sec_<name>`).
        name: String,
        #[command(flatten)]
        profile: ProfileArgs,
    },
    /// Secret names and aliases, never values.
    List {
        #[command(flatten)]
        profile: ProfileArgs,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Delete a secret.
    Rm {
        /// Secret name.
        name: String,
        #[command(flatten)]
        profile: ProfileArgs,
    },
}

#[derive(Debug, Subcommand)]
enum PluginsCommand {
    /// Rows, libraries, versions, digests, layers.
    List {
        #[command(flatten)]
        profile: ProfileArgs,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
}

/// Options shared by every command that assembles a profile.
#[derive(Debug, Clone, Args)]
pub struct ProfileArgs {
    /// Profile name (looked up in profiles/) or path to a profile file [default: default;
    /// `keel resume` defaults to the profile the session was created with].
    #[arg(long)]
    profile: Option<String>,
    /// Working directory (the project layer is DIR/.keel/config.toml).
    #[arg(short = 'C', value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Set one key of one row: ROW.KEY=VALUE (VALUE is TOML, else a string).
    #[arg(short = 'c', value_name = "ROW.KEY=VALUE")]
    overrides: Vec<String>,
    /// Apply a patch layer file (repeatable, in order).
    #[arg(long = "patch", value_name = "FILE")]
    patches: Vec<PathBuf>,
    /// Let the project layer change security-relevant settings without a `keel trust` record
    /// (for CI, where the checkout is the trusted input).
    #[arg(long)]
    trust_project: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
enum OutputFormat {
    Text,
    Json,
    StreamJson,
}

#[derive(Debug, Clone, Copy, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
enum SandboxMode {
    ReadOnly,
    WorkspaceWrite,
    DangerFullAccess,
}

#[derive(Debug, Clone, Copy, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
enum ApprovalMode {
    Never,
    Ask,
}

#[derive(Debug, Clone, Args)]
struct RunArgs {
    /// The task, or `-` to read it from stdin.
    prompt: Option<String>,
    #[command(flatten)]
    profile: ProfileArgs,
    /// Output format on stdout.
    #[arg(long, value_enum, default_value = "text")]
    output_format: OutputFormat,
    /// Do not persist the session.
    #[arg(long)]
    ephemeral: bool,
    /// Stop after N turns.
    #[arg(long, value_name = "N")]
    max_turns: Option<u32>,
    /// Sandbox mode.
    #[arg(long, value_enum)]
    sandbox: Option<SandboxMode>,
    /// Approval policy.
    #[arg(long, value_enum)]
    approval: Option<ApprovalMode>,
}

/// The profile used when `--profile` is not given.
const DEFAULT_PROFILE: &str = "default";

impl ProfileArgs {
    /// The profile `--profile` names, or [`DEFAULT_PROFILE`].
    fn name(&self) -> &str {
        self.profile.as_deref().unwrap_or(DEFAULT_PROFILE)
    }

    /// Whether `--profile` was given.
    fn explicit(&self) -> bool {
        self.profile.is_some()
    }

    /// Applies `-C` and resolves the profile through every layer.
    fn resolve(&self, paths: &Paths) -> Result<ResolvedProfile> {
        self.enter_dir()?;
        self.resolve_as(paths, self.name())
    }

    /// Applies `-C` (once per process: a relative DIR is relative to where keel started).
    fn enter_dir(&self) -> Result<()> {
        if let Some(dir) = &self.dir {
            std::env::set_current_dir(dir).map_err(|e| keel_kernel::error::KernelError::Io {
                path: dir.clone(),
                reason: format!("cannot change directory: {e}"),
            })?;
        }
        Ok(())
    }

    /// Resolves `profile` (instead of `--profile`) with every other layer of these options,
    /// in the current directory ([`ProfileArgs::enter_dir`] already applied).
    fn resolve_as(&self, paths: &Paths, profile: &str) -> Result<ResolvedProfile> {
        let cwd = std::env::current_dir().ok();
        let sources = ConfigSources {
            roots: paths.config_roots.clone(),
            keel_home: Some(paths.keel_home.clone()),
            project_dir: cwd,
            patches: self.patches.clone(),
            overrides: self.overrides.clone(),
            trust_project: self.trust_project,
        };
        let profile = resolve_profile(profile, &sources)?;
        for w in &profile.warnings {
            keel_output_guard::redact::eprintln(format_args!("keel: {w}"));
        }
        Ok(profile)
    }
}

/// Runs the parsed command and returns the process exit code.
pub fn execute(cli: Cli) -> i32 {
    let paths = Paths::discover();
    let result = match cli.command {
        Command::Run(args) => run::run(&paths, "run", None, args),
        Command::Resume { session_id, run } => run::run(&paths, "resume", Some(session_id), run),
        Command::Config {
            command:
                ConfigCommand::Dump {
                    profile,
                    explain,
                    json,
                },
        } => inspect::config_dump(&paths, &profile, explain, json),
        Command::Plugins {
            command: PluginsCommand::List { profile, json },
        } => inspect::plugins_list(&paths, &profile, json),
        Command::Sessions {
            command: SessionsCommand::List { profile, json },
        } => run::command(
            &paths,
            CommandArgs::Sessions(SessionsArgs::List { json }),
            &profile,
        ),
        Command::Sessions {
            command:
                SessionsCommand::Show {
                    session_id,
                    profile,
                    json,
                },
        } => run::command(
            &paths,
            CommandArgs::Sessions(SessionsArgs::Show { session_id, json }),
            &profile,
        ),
        Command::Fork {
            session_id,
            at,
            profile,
        } => run::command(
            &paths,
            CommandArgs::Fork(ForkArgs { session_id, at }),
            &profile,
        ),
        Command::Secrets { command } => {
            let (args, profile) = match command {
                SecretsCommand::Set { name, profile } => (SecretsArgs::Set { name }, profile),
                SecretsCommand::List { profile, json } => (SecretsArgs::List { json }, profile),
                SecretsCommand::Rm { name, profile } => (SecretsArgs::Rm { name }, profile),
            };
            run::command(&paths, CommandArgs::Secrets(args), &profile)
        }
        Command::Trust { dir, revoke } => trust::trust(&paths, dir.as_deref(), revoke),
        Command::Lock(profile) => inspect::lock(&paths, &profile),
        Command::Doctor(profile) => doctor::doctor(&paths, &profile),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            keel_output_guard::redact::eprintln(format_args!("keel: error[{}]: {e}", e.code()));
            2
        }
    }
}
