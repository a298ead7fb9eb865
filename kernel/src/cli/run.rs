//! `keel run` / `keel resume`: assemble, start, hand the command line to the driver, shut down.

use keel_plugin_api::services::driver::DriverInvocation;

use super::RunArgs;
use crate::assemble::assemble;
use crate::error::{KernelError, Result};
use crate::paths::Paths;
use crate::runtime::Kernel;

pub(super) fn run(
    paths: &Paths,
    command: &str,
    session_id: Option<String>,
    args: RunArgs,
) -> Result<i32> {
    let started = std::time::Instant::now();
    let profile = args.profile.resolve(paths)?;
    let settings = profile.kernel;
    let name = profile.name.clone();
    let assembly = assemble(paths, profile, true)?;
    if let crate::assemble::LockState::Unlocked(why) = &assembly.lock {
        tracing::debug!(target: "keel::kernel", "running unlocked: {why}");
    }
    if !assembly.has_driver() {
        return Err(KernelError::NoDriver { profile: name });
    }
    let cwd = std::env::current_dir()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let invocation = DriverInvocation {
        command: command.to_owned(),
        session_id,
        prompt: args.prompt.clone(),
        cwd,
        profile: name.clone(),
        options: serde_json::json!({
            "output_format": args.output_format,
            "ephemeral": args.ephemeral,
            "max_turns": args.max_turns,
            "sandbox": args.sandbox,
            "approval": args.approval,
        }),
    };
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
        let code = tokio::select! {
            r = kernel.run_driver(&name, &invocation) => r,
            _ = tokio::signal::ctrl_c() => {
                eprintln!("keel: interrupted");
                Ok(130)
            }
        };
        kernel.shutdown().await;
        match code {
            Ok(c) => Ok(c),
            Err(e @ KernelError::Driver { .. }) => {
                eprintln!("keel: error[{}]: {e}", e.code());
                Ok(1)
            }
            Err(e) => Err(e),
        }
    })
}
