//! `keel run` / `keel resume` and the plugin commands (`keel sessions`, `keel fork`): assemble,
//! start, hand the parsed command line to the seam's row, shut down.
//!
//! The kernel knows these commands only as grammar (ARCHITECTURE §11 is a CLI contract); what
//! they do belongs to the row providing `keel.driver` or `keel.command.<name>`. The kernel
//! owns the process's stop signals while they run ([`stop`]).

mod stop;

use keel_plugin_api::services::command::{CommandInvocation, service_name};
use keel_plugin_api::services::driver::{DriverInterrupt, DriverInvocation};

use super::{ProfileArgs, RunArgs};
use crate::assemble::{Assembly, assemble};
use crate::error::{KernelError, Result};
use crate::paths::Paths;
use crate::runtime::Kernel;

/// Which seam gets control.
enum Seam {
    Driver(DriverInvocation),
    Command(CommandInvocation),
}

pub(super) fn run(
    paths: &Paths,
    command: &str,
    session_id: Option<String>,
    args: RunArgs,
) -> Result<i32> {
    let invocation = |profile: &str, cwd: String| {
        Seam::Driver(DriverInvocation {
            command: command.to_owned(),
            session_id: session_id.clone(),
            prompt: args.prompt.clone(),
            cwd,
            profile: profile.to_owned(),
            options: serde_json::json!({
                "output_format": args.output_format,
                "ephemeral": args.ephemeral,
                "max_turns": args.max_turns,
                "sandbox": args.sandbox,
                "approval": args.approval,
            }),
            stderr_is_terminal: Some(crate::output_guard::is_terminal(
                crate::output_guard::Stream::Stderr,
            )),
        })
    };
    hand_off(paths, &args.profile, invocation)
}

/// A plugin command: `name` is `sessions` or `fork`; `args` the parsed arguments.
pub(super) fn command(
    paths: &Paths,
    name: &str,
    args: serde_json::Value,
    profile: &ProfileArgs,
) -> Result<i32> {
    hand_off(paths, profile, |profile: &str, cwd: String| {
        Seam::Command(CommandInvocation {
            command: name.to_owned(),
            args: args.clone(),
            cwd,
            profile: profile.to_owned(),
        })
    })
}

fn hand_off(
    paths: &Paths,
    profile_args: &ProfileArgs,
    invocation: impl FnOnce(&str, String) -> Seam,
) -> Result<i32> {
    let started = std::time::Instant::now();
    let profile = profile_args.resolve(paths)?;
    let settings = profile.kernel;
    let name = profile.name.clone();
    let assembly = assemble(paths, profile, true)?;
    if let crate::assemble::LockState::Unlocked(why) = &assembly.lock {
        tracing::debug!(target: "keel::kernel", "running unlocked: {why}");
    }
    let cwd = std::env::current_dir()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let seam = invocation(&name, cwd);
    check_seam(&assembly, &name, &seam)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("keel-kernel")
        .enable_all()
        .build()
        .map_err(|e| KernelError::Activation(format!("cannot start the kernel runtime: {e}")))?;
    let handle = runtime.handle().clone();
    let specs = assembly.row_specs();
    let keel_home = paths.keel_home.clone();
    runtime.block_on(async move {
        let kernel = Kernel::new(handle, settings, keel_home, specs)?;
        if let Err(e) = kernel.start().await {
            kernel.shutdown().await;
            return Err(e);
        }
        // Boot-to-ready: profile resolution, digests, loading, checks and activation.
        tracing::info!(
            target: "keel::kernel",
            rows = kernel.status().len(),
            boot_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
            "kernel ready"
        );
        let work = async {
            match &seam {
                Seam::Driver(d) => kernel.run_driver(&name, d).await,
                Seam::Command(c) => {
                    let args = serde_json::to_value(c).unwrap_or_default();
                    kernel
                        .hand_off(&service_name(&c.command), args)
                        .await?
                        .ok_or_else(|| no_command(&name, &c.command))
                }
            }
        };
        tokio::pin!(work);
        let code = match stop::StopSignals::install() {
            Err(e) => {
                tracing::warn!(target: "keel::kernel", "no handler for SIGINT, SIGTERM, SIGHUP: {e}");
                work.await
            }
            Ok(mut signals) => tokio::select! {
                r = &mut work => r,
                first = signals.recv() => {
                    // §11: the driver owns the clean stop (abort the turn, flush, close); the
                    // kernel prints once, waits its grace, and picks the exit code.
                    let interrupt = async {
                        let Seam::Driver(_) = &seam else {
                            return false;
                        };
                        let asked = DriverInterrupt {
                            signal: first.name.to_owned(),
                            exit_code: first.exit_code(),
                        };
                        kernel.interrupt_driver(&asked).await
                    };
                    Ok(stop::stop(first, &mut work, interrupt, &mut signals).await)
                }
            },
        };
        kernel.shutdown().await;
        match code {
            Ok(c) => Ok(c),
            Err(e @ KernelError::Driver { .. }) => {
                crate::redact::eprintln(format_args!("keel: error[{}]: {e}", e.code()));
                Ok(1)
            }
            Err(e) => Err(e),
        }
    })
}

fn no_command(profile: &str, command: &str) -> KernelError {
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
