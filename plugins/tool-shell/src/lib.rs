//! `tool-shell`: the `shell` tool (ARCHITECTURE §8 and §9, requirements B12, SBX-01…03).
//!
//! The run itself is plain blocking Rust ([`Shell`], [`run`]); this file adapts it to the
//! kernel: the manifest and row config (`default_timeout_ms`, `max_timeout_ms`, `grace_ms`,
//! `max_output_bytes`, `env`, `pass_env`), the [`Tool`] whose `run` runs
//! each call on a std thread and hands the result back over a oneshot channel (no tokio: the
//! kernel's executor only ever awaits the channel), served with `ctx.serve_tools`, and
//! disposal, which terminates and joins every process tree still running (SBX-02). When a
//! `keel.sandbox` provider is loaded, every command is confined by it first ([`confine`]);
//! without one the tool behaves as before. A caller
//! that stops waiting (the pipeline's deadline, cancellation) drops the channel, and the run
//! terminates its tree.

pub mod capture;
pub mod confine;
pub mod env;
pub mod group;
pub mod run;
pub mod tool;

#[cfg(test)]
mod behaviour_tests;
#[cfg(test)]
mod sandbox_tests;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::channel::oneshot;
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::child_env::{PASS_ENV_KEY, check_pass_env, held_references};
use keel_plugin_api::services::credentials::Credentials;
use keel_plugin_api::services::sandbox::Sandbox;
use keel_plugin_api::services::tools::{
    Tool, ToolCall, ToolCode, ToolInvocation, ToolResult, ToolSpec,
};

pub use confine::{Confiner, SandboxService};
pub use group::LiveGroups;
pub use tool::{SHELL_EXIT, SHELL_SPAWN, SHELL_TIMEOUT, Shell, ShellConfig, definition};

/// The plugin id; the provider service is `keel.tool.tool-shell`.
pub const PLUGIN_ID: &str = "tool-shell";

/// Extra time disposal waits, beyond the grace period, for trees to be gone.
const DISPOSE_SLACK: Duration = Duration::from_secs(5);

/// The tool: each call finds the sandbox (when one is loaded), runs on a std thread and hands
/// the result back.
struct ShellTool {
    ctx: Context,
    shell: Arc<Shell>,
    /// The definition registered (its schema is written by hand: the argument document also
    /// carries the sandbox's escalation keys and the firewall's secret variables, which
    /// [`Shell`] reads itself, so the tool takes the document as JSON).
    spec: ToolSpec,
}

impl Tool for ShellTool {
    const NAME: &'static str = "shell";
    type Args = serde_json::Value;

    fn describe(&self) -> ToolSpec {
        self.spec.clone()
    }

    async fn run(&self, args: serde_json::Value, call: &ToolCall) -> ToolResult {
        let call = ToolInvocation {
            name: call.name.clone(),
            call_id: call.call_id.clone(),
            session_id: call.session_id.clone(),
            cwd: call.cwd.clone(),
            args,
            timeout_ms: call.timeout_ms,
        };
        self.execute(call)
            .await
            .unwrap_or_else(|e| ToolResult::from_error(&e))
    }
}

impl ShellTool {
    async fn execute(&self, call: ToolInvocation) -> Result<ToolResult> {
        // Looked up per call: the sandbox row may come and go with reloads.
        let sandbox = self.ctx.get_client::<Sandbox>()?.map(SandboxService);
        // Issue 23 item 1: what the credentials row holds never reaches the command.
        let held = held_references(self.ctx.get_client::<Credentials>()?).await?;
        let shell = Arc::clone(&self.shell);
        let (tx, rx) = oneshot::channel();
        std::thread::Builder::new()
            .name(format!("keel-{PLUGIN_ID}"))
            .spawn(move || {
                // The receiver is dropped when the caller stops waiting: terminate the tree.
                let confiner = sandbox.as_ref().map(|s| s as &dyn Confiner);
                let result = shell.execute_holding(&call, &|| tx.is_canceled(), confiner, &held);
                let _ = tx.send(result);
            })?;
        rx.await
            .map_err(|_| Error::coded(ToolCode::ToolFailed, "the shell tool's worker thread died"))
    }
}

/// The plugin value.
#[derive(Default)]
struct ToolShell;

impl Plugin for ToolShell {
    type Dispatches = ();

    fn manifest(&self) -> Manifest {
        Manifest::new(PLUGIN_ID, env!("CARGO_PKG_VERSION"))
            .description("shell tool: bash -c in its own process group, allow-listed environment")
            .serves_tools()
            .optional::<Sandbox>()
            .optional::<Credentials>()
            // `env` and `pass_env` reach the runner process itself, before it confines
            // anything.
            // The limits too (issue 23 item 6): an untrusted layer must not raise them.
            .guard_keys(&[
                "env",
                PASS_ENV_KEY,
                "default_timeout_ms",
                "max_timeout_ms",
                "max_output_bytes",
                "grace_ms",
            ])
            .config_type::<ShellConfig>()
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let config: ShellConfig = ctx.config()?;
        check_pass_env(&config.pass_env).map_err(|e| {
            Error::coded(
                keel_plugin_api::codes::ContractCode::Config,
                format!("row config: {e}"),
            )
        })?;
        let groups = Arc::new(LiveGroups::default());
        let grace = Duration::from_millis(config.grace_ms);
        let definition = definition(&config);
        let spec = ToolSpec {
            description: definition.description,
            parallel_safe: definition.parallel_safe,
            mutating: definition.mutating,
            child_only: definition.child_only,
            name: None,
            schema: Some(definition.parameters),
        };
        let shell = Arc::new(Shell::new(config, Arc::clone(&groups)));
        // Effects run last-in first-out: the tool is unregistered first, then running trees
        // are stopped and joined (SBX-02).
        ctx.effect("stop running shell commands", move || async move {
            groups.stop_all();
            let started = Instant::now();
            while !groups.is_empty() && started.elapsed() < grace + DISPOSE_SLACK {
                keel_plugin_api::sdk::sleep(Duration::from_millis(20)).await;
            }
            groups.kill_all();
            Ok(())
        })?;
        let tool = ShellTool { ctx, shell, spec };
        ctx.serve_tools(self, tool).await
    }
}

keel_plugin_api::export_plugin!(ToolShell);
