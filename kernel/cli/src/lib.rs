//! The `keel` command line (ARCHITECTURE §11, a public contract).
//!
//! This layer parses arguments, resolves the profile, assembles it and either reports
//! (`config dump`, `plugins list`, `lock`, `doctor`) or hands control to the driver (`run`,
//! `resume`). Every error before the driver runs exits 2 with one line naming the culprit.

#![allow(
    clippy::result_large_err,
    reason = "kernel errors end the process (exit 2); their size never matters on a hot path"
)]

pub mod boot;
mod doctor;
mod grammar;
pub mod hardening;
mod inspect;
mod layout;
pub mod log_lines;
mod prescan;
mod run;
mod trust;

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, CommandFactory as _, FromArgMatches as _, Parser, Subcommand};

use keel_config::{ConfigSources, ResolvedProfile, resolve_profile};
use keel_kernel::error::{KernelError, Result};
use keel_kernel::paths::Paths;

/// keel: a plugin-host microkernel for LLM agents.
#[derive(Debug, Parser)]
#[command(name = "keel", version, propagate_version = true)]
pub struct Cli {
    /// The profile options may also come before the command (`keel --profile P --help` lists
    /// what profile P offers); a command's own options win.
    #[command(flatten)]
    profile: ProfileArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a task with the profile's driver.
    #[command(display_order = 0)]
    Run(RunArgs),
    /// Resume a session with the profile's driver.
    #[command(display_order = 1)]
    Resume {
        /// Session id.
        session_id: String,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Inspect the assembled configuration.
    #[command(display_order = 2)]
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Inspect plugins.
    #[command(display_order = 3)]
    Plugins {
        #[command(subcommand)]
        command: PluginsCommand,
    },
    /// Trust DIR's project layer (DIR/.keel/config.toml) as it is now, so it may change
    /// security-relevant settings (the rows' guarded keys, endpoints, rows), and the project
    /// files the profile's plugins declare (`trusts_project_files`).
    #[command(display_order = 100)]
    Trust {
        /// Project directory (default: the current directory).
        dir: Option<PathBuf>,
        /// Forget the record instead.
        #[arg(long)]
        revoke: bool,
    },
    /// Record plugin digests and the assembly graph in keel.lock beside the binary.
    #[command(display_order = 101)]
    Lock(ProfileArgs),
    /// Check the ABI, the lock, the search path, and what the profile's plugins check.
    #[command(display_order = 102)]
    Doctor(ProfileArgs),
}

/// The kernel's own commands; any other word is a plugin's command.
const KERNEL_COMMANDS: &[&str] = &[
    "run", "resume", "config", "plugins", "trust", "lock", "doctor", "help",
];

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
#[derive(Debug, Clone, Default, Args)]
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
    /// Apply a patch layer: a NAME from profiles/patches/ in the config roots or $KEEL_HOME,
    /// or a FILE path (repeatable, in order).
    #[arg(long = "patch", value_name = "NAME|FILE")]
    patches: Vec<PathBuf>,
    /// Let the project layer change security-relevant settings without a `keel trust` record
    /// (for CI, where the checkout is the trusted input).
    #[arg(long)]
    trust_project: bool,
}

/// `keel run` / `keel resume`: the prompt and the profile; the driver of the profile adds its
/// own options (`--output-format`, `--max-turns`, …) to this grammar.
#[derive(Debug, Clone, Args)]
struct RunArgs {
    /// The task, or `-` to read it from stdin.
    prompt: Option<String>,
    #[command(flatten)]
    profile: ProfileArgs,
}

/// The profile used when `--profile` is not given.
const DEFAULT_PROFILE: &str = "default";

impl ProfileArgs {
    /// These options over `top` (the ones given before the command): a given value wins,
    /// repeatable ones keep `top`'s first.
    fn under(self, top: &ProfileArgs) -> ProfileArgs {
        ProfileArgs {
            profile: self.profile.or_else(|| top.profile.clone()),
            dir: self.dir.or_else(|| top.dir.clone()),
            overrides: top
                .overrides
                .iter()
                .cloned()
                .chain(self.overrides)
                .collect(),
            patches: top.patches.iter().cloned().chain(self.patches).collect(),
            trust_project: self.trust_project || top.trust_project,
        }
    }

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

/// Parses `argv`, runs the command and returns the process exit code.
///
/// The grammar depends on the profile: `run`/`resume` take the driver's options and any word
/// that is not a kernel command is a plugin's command. So for those (and for the top-level
/// help, which lists the profile's commands) the profile named by the profile options is
/// assembled first — once: the hand-off reuses it. The kernel's other commands parse without it.
pub fn execute(mut argv: Vec<OsString>) -> i32 {
    let paths = layout::discover();
    let (scanned, word) = prescan::profile_args(&argv);
    let word = word.as_deref();
    let asking_help = word.is_none_or(|w| w == "help")
        || argv
            .iter()
            .skip(1)
            .take_while(|a| *a != "--")
            .any(|a| ["-h", "--help", "-V", "--version"].iter().any(|h| a == h));
    // The top-level help lists the profile's commands; `--version` needs no profile.
    let top_help = argv.len() == 1
        || argv
            .iter()
            .skip(1)
            .take_while(|a| *a != "--")
            .any(|a| a == "-h" || a == "--help");
    // `keel` with no command (profile options only) on a terminal: the profile may name the
    // command to run ([`bare_command`]).
    let bare = word.is_none()
        && !argv
            .iter()
            .skip(1)
            .any(|a| ["-h", "--help", "-V", "--version"].iter().any(|h| a == h))
        && {
            let terminal = run::terminal();
            terminal.stdin && terminal.stdout
        };
    let needs_profile = word.map_or(top_help || bare, |w| {
        matches!(w, "run" | "resume" | "help") || !KERNEL_COMMANDS.contains(&w)
    });
    let mut profile = None;
    if needs_profile {
        match scanned.enter_dir().and_then(|()| {
            run::assemble_profile(&paths, &scanned, scanned.name(), scanned.explicit())
        }) {
            Ok(assembled) => profile = Some((scanned, assembled)),
            Err(e) if asking_help => {
                keel_output_guard::redact::eprintln(format_args!(
                    "keel: profile '{}' could not be assembled, so its commands and run options are not listed: {e}",
                    scanned.name()
                ));
            }
            Err(e) => return report(&e),
        }
    }
    if bare && let Some(name) = profile.as_ref().and_then(|(_, a)| bare_command(a)) {
        argv.insert(1.min(argv.len()), OsString::from(name));
    }
    if let (Some(w), Some((_, assembled))) = (word, &profile)
        && !KERNEL_COMMANDS.contains(&w)
        && assembled.command(w).is_none()
    {
        return report(&run::no_command(assembled.name(), w));
    }
    let grammar = grammar_for(profile.as_ref().map(|(_, a)| a));
    let matches = match grammar.try_get_matches_from(&argv) {
        Ok(m) => m,
        // `--help`, `--version` and usage errors: clap prints and picks the code (0 or 2).
        Err(e) => {
            let _ = e.print();
            return e.exit_code();
        }
    };
    match dispatch(&paths, &matches, profile) {
        Ok(code) => code,
        Err(e) => report(&e),
    }
}

/// The command bare `keel` on a terminal runs: the profile's `on_bare_terminal` command (the
/// kernel knows no command by name), else none (the help, as before).
fn bare_command(assembled: &run::Assembled) -> Option<String> {
    assembled.bare_terminal_command().map(|c| c.name.clone())
}

/// The whole grammar: the kernel's commands, and with an assembled profile its plugins'
/// commands and its driver's run options.
fn grammar_for(assembled: Option<&run::Assembled>) -> clap::Command {
    let mut cmd = Cli::command();
    let Some(assembled) = assembled else {
        return cmd;
    };
    for (i, spec) in assembled.commands().enumerate() {
        cmd = cmd.subcommand(grammar::command(spec, grammar::PLUGIN_ORDER + i));
    }
    for name in ["run", "resume"] {
        cmd = cmd.mut_subcommand(name, |mut sub| {
            for option in assembled.run_options() {
                sub = sub.arg(grammar::arg(option));
            }
            sub
        });
    }
    cmd
}

/// Runs the parsed command.
fn dispatch(
    paths: &Paths,
    matches: &clap::ArgMatches,
    profile: Option<(ProfileArgs, run::Assembled)>,
) -> Result<i32> {
    let Some((name, sub)) = matches.subcommand() else {
        return Ok(0);
    };
    if let Some((scanned, assembled)) = profile {
        if let Some(spec) = assembled.command(name).cloned() {
            let (args, _) = grammar::invocation_args(&spec, sub);
            return run::command(paths, &scanned, assembled, &spec.name, args);
        }
        let options = grammar::values(assembled.run_options(), sub);
        let cli = Cli::from_arg_matches(matches).map_err(usage)?;
        return match cli.command {
            Command::Run(_) => run::run(paths, &scanned, assembled, "run", None, options, sub),
            Command::Resume { session_id, .. } => run::run(
                paths,
                &scanned,
                assembled,
                "resume",
                Some(session_id),
                options,
                sub,
            ),
            _ => Err(usage("a profile was assembled for a kernel command")),
        };
    }
    let cli = Cli::from_arg_matches(matches).map_err(usage)?;
    let top = cli.profile;
    let under = |own: ProfileArgs| own.under(&top);
    match cli.command {
        Command::Config {
            command:
                ConfigCommand::Dump {
                    profile,
                    explain,
                    json,
                },
        } => inspect::config_dump(paths, &under(profile), explain, json),
        Command::Plugins {
            command: PluginsCommand::List { profile, json },
        } => inspect::plugins_list(paths, &under(profile), json),
        Command::Trust { dir, revoke } => trust::trust(
            paths,
            &under(ProfileArgs::default()),
            dir.as_deref(),
            revoke,
        ),
        Command::Lock(profile) => inspect::lock(paths, &under(profile)),
        Command::Doctor(profile) => doctor::doctor(paths, &under(profile)),
        Command::Run(_) | Command::Resume { .. } => {
            Err(usage("`keel run` needs its profile assembled first"))
        }
    }
}

/// An internal parse failure (the grammar and the matches disagree): never expected.
fn usage(e: impl std::fmt::Display) -> KernelError {
    KernelError::Activation(format!("cannot read the command line: {e}"))
}

/// Prints a kernel error as its one line and answers exit code 2.
fn report(e: &KernelError) -> i32 {
    keel_output_guard::redact::eprintln(format_args!("keel: error[{}]: {e}", e.code()));
    2
}
