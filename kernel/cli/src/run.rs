//! `keel run` / `keel resume` and the plugin commands (`keel sessions`, `keel fork`): assemble,
//! start, hand the parsed command line to the seam's row, shut down.
//!
//! The kernel knows these commands only as grammar (ARCHITECTURE §11 is a CLI contract); what
//! they do belongs to the row providing `keel.driver` or `keel.command.<name>`. The kernel
//! owns the process's stop signals while they run ([`stop`]).

mod recorded;
mod stop;
mod taint_watch;

use keel_kernel::loader::PluginLibrary;
use keel_plugin_api::host::KernelCode;
use keel_plugin_api::sdk::Service;
use keel_plugin_api::services::command::{
    ArgSpec, CommandInvocation, CommandSpec, Terminal, service_name,
};
use keel_plugin_api::services::driver::{
    Driver, DriverInterrupt, DriverInvocation, DriverOutcome, ProfileIdentity, Relaunch,
};

use super::{ProfileArgs, boot, grammar};
use keel_config::{KernelSettings, config_digest, names_a_file};
use keel_kernel::assemble::{Assembly, assemble};
use keel_kernel::error::{KernelError, Result};
use keel_kernel::paths::Paths;
use keel_kernel::runtime::Kernel;

/// Which seam gets control.
enum Seam {
    Driver(DriverInvocation),
    Command(CommandInvocation),
}

/// The profile a hand-off runs under.
struct Chosen<'a> {
    /// The resolved profile's name.
    name: &'a str,
    /// How to select it again, and its config digest.
    identity: ProfileIdentity,
    /// `--profile` was given (and this is not a relaunch).
    explicit: bool,
}

/// `keel run` / `keel resume` on an assembled profile: `options` are the driver's declared
/// options as parsed, `matches` the command's own (prompt and profile options).
pub(super) fn run(
    paths: &Paths,
    profile_args: &ProfileArgs,
    first: Assembled,
    command: &str,
    session_id: Option<String>,
    options: serde_json::Map<String, serde_json::Value>,
    matches: &clap::ArgMatches,
) -> Result<i32> {
    boot::at("command line parsed");
    let prompt = matches.get_one::<String>("prompt").cloned();
    let invocation = |profile: &Chosen<'_>, cwd: String| {
        Seam::Driver(DriverInvocation {
            command: command.to_owned(),
            session_id: session_id.clone(),
            prompt: prompt.clone(),
            cwd,
            profile: profile.name.to_owned(),
            profile_identity: Some(profile.identity.clone()),
            profile_explicit: profile.explicit,
            options: options.clone(),
            stderr_is_terminal: Some(keel_output_guard::is_terminal(
                keel_output_guard::Stream::Stderr,
            )),
        })
    };
    // Issue 23 item 6: what this run changed in the project's trust-relevant files is tainted.
    let workspace = std::env::current_dir().unwrap_or_default();
    let declared = taint_watch::declared_files(&first.assembly, &workspace);
    let mut watched = taint_watch::patch_files(&first.assembly.profile);
    watched.extend(declared.iter().cloned());
    let t = std::time::Instant::now();
    let before = keel_config::taint::snapshot(&workspace, &watched);
    boot::phase("trust-relevant files snapshotted", t.elapsed());
    let result = hand_off(paths, profile_args, first, invocation);
    let by = taint_watch::run_name(session_id.as_deref());
    taint_watch::record(paths, &workspace, &watched, &declared, &before, &by);
    result
}

/// A plugin command (`keel sessions`, `keel fork`, any `keel NAME` a plugin declares) with its
/// parsed arguments.
pub(super) fn command(
    paths: &Paths,
    profile_args: &ProfileArgs,
    first: Assembled,
    name: &str,
    args: serde_json::Map<String, serde_json::Value>,
) -> Result<i32> {
    hand_off(
        paths,
        profile_args,
        first,
        |profile: &Chosen<'_>, cwd: String| {
            Seam::Command(CommandInvocation {
                command: name.to_owned(),
                args: args.clone(),
                cwd,
                profile: profile.name.to_owned(),
                terminal: Some(terminal()),
            })
        },
    )
}

/// Which standard streams were terminals when keel started (the output guard's pipes hide it
/// from the plugins).
pub(super) fn terminal() -> Terminal {
    use keel_output_guard::{Stream, is_terminal};
    use std::io::IsTerminal as _;
    Terminal {
        stdin: std::io::stdin().is_terminal(),
        stdout: is_terminal(Stream::Stdout),
        stderr: is_terminal(Stream::Stderr),
    }
}

/// A profile resolved and assembled (libraries open, graph checked), nothing started: what
/// the command line's grammar is built from, then what the hand-off runs.
pub(super) struct Assembled {
    name: String,
    settings: KernelSettings,
    assembly: Assembly,
    identity: ProfileIdentity,
    explicit: bool,
}

impl Assembled {
    /// The profile's name.
    pub(super) fn name(&self) -> &str {
        &self.name
    }

    /// The commands the profile's plugins add, in row order.
    pub(super) fn commands(&self) -> impl Iterator<Item = &CommandSpec> {
        self.libraries().flat_map(|l| l.manifest.commands.iter())
    }

    /// The command bare `keel` runs on a terminal: the first, in row order, that asks for it.
    pub(super) fn bare_terminal_command(&self) -> Option<&CommandSpec> {
        self.commands().find(|c| c.on_bare_terminal)
    }

    /// The command named `name`, if a plugin of the profile adds it.
    pub(super) fn command(&self, name: &str) -> Option<&CommandSpec> {
        self.commands().find(|c| c.name == name)
    }

    /// The options the profile's driver adds to `keel run` / `keel resume`.
    pub(super) fn run_options(&self) -> &[ArgSpec] {
        let driver = <Driver as Service>::NAME;
        self.libraries()
            .find(|l| l.manifest.provides.iter().any(|p| p.name == driver))
            .map_or(&[], |l| l.manifest.run_options.as_slice())
    }

    /// Refuses a declared command or run option that would clash with the kernel's grammar or
    /// with another declaration, naming the plugin.
    fn check_grammar(&self) -> Result<()> {
        let refuse = |plugin: &str, reason: String| KernelError::Manifest {
            plugin: plugin.to_owned(),
            reason,
        };
        let mut taken: Vec<&str> = super::KERNEL_COMMANDS.to_vec();
        for library in self.libraries() {
            for spec in &library.manifest.commands {
                grammar::check_command(spec, &taken).map_err(|e| refuse(&library.name, e))?;
                taken.push(&spec.name);
            }
            grammar::check_args(&library.manifest.run_options, &["session_id"])
                .map_err(|e| refuse(&library.name, format!("run options: {e}")))?;
        }
        Ok(())
    }

    /// Each row's library once, in row order.
    fn libraries(&self) -> impl Iterator<Item = &PluginLibrary> {
        let mut seen = std::collections::BTreeSet::new();
        self.assembly
            .profile
            .rows
            .iter()
            .filter(move |r| seen.insert(r.plugin.as_str()))
            .filter_map(|r| self.assembly.libraries.get(&r.plugin).map(|l| &**l))
    }
}

/// A profile assembled, with the seam that takes control.
struct Prepared {
    name: String,
    /// How `--profile` selects it ([`ProfileIdentity::name`]).
    identity_name: String,
    settings: KernelSettings,
    assembly: Assembly,
    seam: Seam,
}

/// Resolves and assembles `spec` (what `--profile` takes) with the other layers of
/// `profile_args`, in the current directory (`-C` already applied).
pub(super) fn assemble_profile(
    paths: &Paths,
    profile_args: &ProfileArgs,
    spec: &str,
    explicit: bool,
) -> Result<Assembled> {
    let t = std::time::Instant::now();
    let profile = profile_args.resolve_as(paths, spec)?;
    boot::phase("profile resolved (layers, bundles, patches)", t.elapsed());
    let settings = profile.kernel;
    let name = profile.name.clone();
    let identity = ProfileIdentity {
        name: if names_a_file(spec) {
            std::fs::canonicalize(&profile.path)
                .unwrap_or_else(|_| profile.path.clone())
                .display()
                .to_string()
        } else {
            spec.to_owned()
        },
        digest: config_digest(&profile),
        overrides: recorded::overrides(profile_args),
        patches: recorded::patches(&profile),
    };
    let t = std::time::Instant::now();
    let assembly = assemble(paths, profile, true)?;
    assembled_phase(&assembly, t.elapsed());
    if let keel_kernel::assemble::LockState::Unlocked(why) = &assembly.lock {
        tracing::debug!(target: "keel::kernel", "running unlocked: {why}");
    }
    let assembled = Assembled {
        name,
        settings,
        assembly,
        identity,
        explicit,
    };
    assembled.check_grammar()?;
    Ok(assembled)
}

/// Logs the assembly's phase: every library located and digested, the lock checked, each
/// library opened (ABI, layouts, manifest), the graph planned. The digest code is being moved
/// into its own crate (issue 25 item 2), so the split between digests and opening is not
/// timed here; the line names what was read.
fn assembled_phase(assembly: &Assembly, took: std::time::Duration) {
    if !tracing::enabled!(target: boot::TARGET, tracing::Level::DEBUG) {
        return;
    }
    let bytes: u64 = assembly
        .located
        .iter()
        .filter_map(|l| std::fs::metadata(&l.path).ok())
        .map(|m| m.len())
        .sum();
    tracing::debug!(
        target: boot::TARGET,
        at_us = boot::since_exec_us(),
        took_us = boot::micros(took),
        libraries = assembly.located.len(),
        mib = bytes / (1 << 20),
        idle = assembly.idle.len(),
        "libraries digested, lock checked, manifests read, graph planned, starting rows' libraries opened"
    );
}

/// Builds the hand-off for an assembled profile; refuses before anything starts when no row
/// can take it.
fn prepare(
    assembled: Assembled,
    invocation: &impl Fn(&Chosen<'_>, String) -> Seam,
) -> Result<Prepared> {
    let cwd = std::env::current_dir()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let chosen = Chosen {
        name: &assembled.name,
        identity: assembled.identity.clone(),
        explicit: assembled.explicit,
    };
    let seam = invocation(&chosen, cwd);
    check_seam(&assembled.assembly, &assembled.name, &seam)?;
    Ok(Prepared {
        identity_name: assembled.identity.name.clone(),
        name: assembled.name,
        settings: assembled.settings,
        assembly: assembled.assembly,
        seam,
    })
}

/// Runs the hand-off under `--profile` (or the default) and returns the exit code.
///
/// Issue 11 item 7: a driver may answer with a [`Relaunch`] (a resumed session's own profile,
/// asked before it did anything). The kernel honours one per process and only when `--profile`
/// was not given: it shuts every row down, assembles that profile (with the same `-C`, user and
/// project layers, `--patch` and `-c`) and runs the driver again with the same command line; a
/// second request is an error, never a loop.
fn hand_off(
    paths: &Paths,
    profile_args: &ProfileArgs,
    first: Assembled,
    invocation: impl Fn(&Chosen<'_>, String) -> Seam,
) -> Result<i32> {
    let started = std::time::Instant::now();
    let first = prepare(first, &invocation)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("keel-kernel")
        .enable_all()
        .build()
        .map_err(|e| KernelError::Activation(format!("cannot start the kernel runtime: {e}")))?;
    boot::phase("kernel runtime built", started.elapsed());
    let handle = runtime.handle().clone();
    let keel_home = paths.keel_home.clone();
    runtime.block_on(async move {
        let mut signals = None;
        let mut prepared = first;
        let mut relaunched = false;
        loop {
            let kernel = Kernel::new(
                handle.clone(),
                prepared.settings,
                keel_home.clone(),
                prepared.assembly.row_specs(),
            )?;
            let (code, relaunch) = run_once(&kernel, &prepared, started, &mut signals).await;
            kernel.shutdown().await;
            let relaunch = match (relaunch, &prepared.seam) {
                (Some(r), Seam::Driver(_)) => r,
                _ => return code.or_else(report_driver_error),
            };
            // A stop signal that came while the rows shut down wins over the relaunch.
            if let Some(first) = signals.as_mut().and_then(stop::StopSignals::try_recv) {
                keel_output_guard::redact::eprintln(format_args!("keel: interrupted ({})", first.name));
                return Ok(first.exit_code());
            }
            // Issue 23 item 3: re-applying a session's recorded layers to the profile that
            // `--profile` chose is no change of profile, so `--profile` does not refuse it.
            let same_profile = relaunch.profile == prepared.identity_name;
            if relaunched || (profile_args.explicit() && !same_profile) {
                return Err(KernelError::Driver {
                    row: "keel.driver".to_owned(),
                    code: KernelCode::RelaunchRefused.code().to_owned(),
                    message: format!(
                        "the driver asked to run under profile '{}' ({}), but {}",
                        relaunch.profile,
                        relaunch.reason,
                        if relaunched {
                            "keel relaunches once"
                        } else {
                            "--profile chose the profile"
                        }
                    ),
                })
                .or_else(report_driver_error);
            }
            relaunched = true;
            tracing::info!(target: "keel::kernel", from = %prepared.name, to = %relaunch.profile, reason = %relaunch.reason, "running the driver again under another profile");
            let explicit = profile_args.explicit() && same_profile;
            // A recorded patch that changed stops the resume with its own error.
            let args = recorded::apply(profile_args, &relaunch)?;
            prepared = assemble_profile(paths, &args, &relaunch.profile, explicit)
                .and_then(|assembled| prepare(assembled, &invocation))
                .map_err(|e| KernelError::Relaunch {
                    profile: relaunch.profile.clone(),
                    reason: relaunch.reason.clone(),
                    source: Box::new(e),
                })?;
        }
    })
}

/// A driver's failure is reported here and exits 1; other errors go to `main` (exit 2).
fn report_driver_error(e: KernelError) -> Result<i32> {
    match e {
        e @ KernelError::Driver { .. } => {
            keel_output_guard::redact::eprintln(format_args!("keel: error[{}]: {e}", e.code()));
            Ok(1)
        }
        e => Err(e),
    }
}

/// Starts `kernel`, runs the hand-off under the stop signals (installed on first use, kept for
/// the rest of the process) and returns its exit code and any relaunch the driver asked for.
/// The caller shuts the kernel down.
async fn run_once(
    kernel: &Kernel,
    prepared: &Prepared,
    started: std::time::Instant,
    signals: &mut Option<stop::StopSignals>,
) -> (Result<i32>, Option<Relaunch>) {
    let t = std::time::Instant::now();
    if let Err(e) = kernel.start().await {
        return (Err(e), None);
    }
    boot::phase("rows activated", t.elapsed());
    // Issue 25 item 1: `boot_us` is exec → ready (what a user waits for: exec, profile,
    // digests, loading, checks, activation); `activation_us` what `boot_us` was before, from
    // the hand-off (after assembly) → ready.
    tracing::info!(
        target: "keel::kernel",
        rows = kernel.status().len(),
        boot_us = boot::since_exec_us(),
        activation_us = boot::micros(started.elapsed()),
        "kernel ready"
    );
    let seam = &prepared.seam;
    let work = async {
        boot::at("driver started");
        match seam {
            Seam::Driver(d) => kernel.run_driver(&prepared.name, d).await,
            Seam::Command(c) => kernel
                .hand_off(c)
                .await
                .and_then(|o| o.ok_or_else(|| no_command(&prepared.name, &c.command)))
                .map(|code| DriverOutcome {
                    exit_code: code,
                    relaunch: None,
                }),
        }
    };
    tokio::pin!(work);
    if signals.is_none() {
        match stop::StopSignals::install() {
            Ok(s) => *signals = Some(s),
            Err(e) => {
                tracing::warn!(target: "keel::kernel", "no handler for SIGINT, SIGTERM, SIGHUP: {e}");
            }
        }
    }
    let outcome = match signals {
        None => work.await,
        Some(signals) => tokio::select! {
            r = &mut work => r,
            first = signals.recv() => {
                // §11: the driver owns the clean stop (abort the turn, flush, close); the
                // kernel prints once, waits its grace, and picks the exit code.
                let interrupt = async {
                    let Seam::Driver(_) = seam else {
                        return false;
                    };
                    let asked = DriverInterrupt {
                        signal: first.name.to_owned(),
                        exit_code: first.exit_code(),
                    };
                    kernel.interrupt_driver(&asked).await
                };
                let code = stop::stop(first, &mut work, interrupt, signals).await;
                Ok(DriverOutcome { exit_code: code, relaunch: None })
            }
        },
    };
    match outcome {
        Ok(o) => (Ok(o.exit_code), o.relaunch),
        Err(e) => (Err(e), None),
    }
}

/// `keel COMMAND` on a profile none of whose plugins adds it.
pub(super) fn no_command(profile: &str, command: &str) -> KernelError {
    KernelError::NoCommand {
        profile: profile.to_owned(),
        command: command.to_owned(),
        service: service_name(command),
    }
}

/// Refuses before anything starts when no row can take the hand-off.
fn check_seam(assembly: &Assembly, profile: &str, seam: &Seam) -> Result<()> {
    match seam {
        Seam::Driver(_) if !assembly.has_driver() => Err(KernelError::NoDriver {
            profile: profile.to_owned(),
        }),
        Seam::Command(c) if !assembly.provides(&service_name(&c.command)) => {
            Err(no_command(profile, &c.command))
        }
        _ => Ok(()),
    }
}
