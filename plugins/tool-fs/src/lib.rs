//! `tool-fs`: the file tools `read_file`, `write_file`, `edit_file`, `list_dir`, `glob` and
//! `grep` (ARCHITECTURE §8, requirements C10 FS-01…05, B11).
//!
//! The bodies are plain Rust ([`FsTools`]) behind an [`FsHooks`] seam; this file adapts them
//! to the kernel: the manifest and row config (`max_read_bytes`, `max_results`), the
//! one [`Tool`] per file tool whose `run` runs each call on its own std thread (file I/O
//! never blocks the kernel's async workers), served with `ctx.serve_tools`, and the hooks
//! that dispatch `fs/write-intent`, `fs/edit-intent` and `fs/observed`. Without a policy
//! plugin the intents keep the terminal's `unconditional` decision (FS-01). When a
//! `keel.sandbox` provider is loaded, `write_file` and `edit_file` ask its `check_path` before
//! deciding and again at mutation time (FS-06); a denial is `FS_SANDBOX_DENIED`. When a
//! `keel.editor-files` provider is loaded (`keel acp` with a client that offers `fs`), reads
//! and writes of its sessions go through the editor's buffers (issue 26 item 3).

pub mod atomic;
pub mod content;
pub mod error;
pub mod hooks;
pub mod mutate;
pub mod path;
pub mod read;
pub mod search;
pub mod tools;

#[cfg(test)]
mod behaviour_tests;
#[cfg(test)]
mod sandbox_tests;

use std::path::Path;
use std::sync::Arc;

use futures::channel::oneshot;
use keel_plugin_api::events::Typed;
use keel_plugin_api::events::fs::{
    EditDecision, EditIntent, FsIntent, FsObserved, Observed, WriteDecision, WriteIntent,
};
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::editor_files::{EditorFiles, EditorRead, EditorWrite};
use keel_plugin_api::services::sandbox::{Access, CallRef, CheckPathRequest, Sandbox};
use keel_plugin_api::services::tools::{
    Tool, ToolCall, ToolCode, ToolDefinition, ToolInvocation, ToolResult, ToolSet, ToolSpec,
};
use serde_json::Value;

pub use error::{FsError, FsErrorCode};
pub use hooks::{FsHooks, NoPolicy, Observation};
pub use tools::{FsConfig, FsTools, Scope, definitions};

/// The plugin id; the provider service is `keel.tool.tool-fs`.
pub const PLUGIN_ID: &str = "tool-fs";

/// Hooks that dispatch the real `fs/*` events through the kernel.
struct KernelHooks {
    ctx: Context,
}

impl KernelHooks {
    /// Runs one single-slot decision waterfall with `Unconditional` pre-set (the terminal
    /// keeps it: no policy → unconditional) and reads the typed answer.
    fn decide<D>(
        &self,
        slot: Dispatch<impl WaterfallEvent<Payload = FsIntent<D>>>,
        session_id: &str,
        target: &str,
        unconditional: &D,
    ) -> Result<D, String>
    where
        D: serde::Serialize + serde::de::DeserializeOwned,
    {
        let mut payload = FsIntent {
            session_id: session_id.into(),
            target: target.into(),
            decision: Typed::new(unconditional).map_err(|e| e.to_string())?,
        };
        self.ctx
            .run_waterfall(slot, &mut payload, |_| Ok(()))
            .map_err(|e| e.to_string())?;
        payload.decision.into_inner().map_err(|e| e.to_string())
    }
}

impl FsHooks for KernelHooks {
    fn write_intent(&self, session_id: &str, target: &str) -> Result<WriteDecision, String> {
        let slot = crate::DISPATCH.write_intent;
        self.decide(slot, session_id, target, &WriteDecision::Unconditional)
    }

    fn edit_intent(&self, session_id: &str, target: &str) -> Result<EditDecision, String> {
        let slot = crate::DISPATCH.edit_intent;
        self.decide(slot, session_id, target, &EditDecision::Unconditional)
    }

    fn check_write(&self, scope: Scope<'_>, target: &Path) -> Result<(), FsError> {
        let denied = |message: String| FsError::fs(FsErrorCode::SandboxDenied, message);
        let sandbox = match self.ctx.get_client::<Sandbox>() {
            Ok(None) => return Ok(()),
            Ok(Some(s)) => s,
            Err(e) => return Err(denied(format!("the sandbox could not be reached: {e}"))),
        };
        let request = CheckPathRequest {
            path: target.to_path_buf(),
            cwd: scope.cwd.to_path_buf(),
            access: Access::Write,
            mode: scope.mode,
            call: Some(CallRef {
                session_id: scope.session_id.to_owned(),
                call_id: scope.call_id.to_owned(),
            }),
        };
        // On the tool's worker thread: the sandbox's check does no waiting on the kernel.
        let verdict = futures::executor::block_on(sandbox.check_path(request)).map_err(|e| {
            denied(format!(
                "the sandbox could not check {}: {e}",
                target.display()
            ))
        })?;
        if verdict.allowed {
            return Ok(());
        }
        Err(denied(verdict.reason.unwrap_or_else(|| {
            format!(
                "[sandbox: file access denied] writing {} is not allowed",
                target.display()
            )
        })))
    }

    fn editor_read(&self, session_id: &str, target: &Path) -> Option<Option<String>> {
        let editor = self.ctx.get_client::<EditorFiles>().ok()??;
        let request = EditorRead {
            session_id: session_id.to_owned(),
            path: target.display().to_string(),
        };
        // On the tool's worker thread; the editor's answer comes over its own connection.
        match futures::executor::block_on(editor.read(request)) {
            Ok(text) if text.handled => Some(text.content),
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(error = %e, "the editor could not read {}; reading the disk", target.display());
                None
            }
        }
    }

    fn editor_write(
        &self,
        session_id: &str,
        target: &Path,
        content: &str,
    ) -> error::FsResult<bool> {
        let Ok(Some(editor)) = self.ctx.get_client::<EditorFiles>() else {
            return Ok(false);
        };
        let request = EditorWrite {
            session_id: session_id.to_owned(),
            path: target.display().to_string(),
            content: content.to_owned(),
        };
        futures::executor::block_on(editor.write(request))
            .map(|w| w.handled)
            .map_err(|e| {
                FsError::fs(
                    FsErrorCode::IoError,
                    format!("the editor could not write {}: {e}", target.display()),
                )
            })
    }

    fn observed(&self, session_id: &str, target: &str, observation: &Observation) {
        let Ok(observation) = Typed::new(observation) else {
            return;
        };
        let payload = FsObserved {
            session_id: session_id.into(),
            target: target.into(),
            observation,
        };
        // Listener failures are contained by the kernel; only misuse errors come back.
        if let Err(e) = self.ctx.emit(crate::DISPATCH.observed, &payload) {
            tracing::warn!(error = %e, "fs/observed could not be emitted");
        }
    }
}

/// One file tool: each call runs the body on a std thread and hands the result back. The
/// schemas are the hand-written public contract of [`definitions`] (they also carry the
/// sandbox's escalation keys, which [`FsTools::execute`] reads before it decodes the rest), so
/// the tool takes its argument document as JSON and names itself at run time.
struct FsTool {
    tools: Arc<FsTools>,
    definition: ToolDefinition,
}

impl Tool for FsTool {
    const NAME: &'static str = "tool-fs";
    type Args = Value;

    fn describe(&self) -> ToolSpec {
        ToolSpec::from(self.definition.clone())
    }

    async fn run(&self, args: Value, call: &ToolCall) -> ToolResult {
        let invocation = ToolInvocation {
            name: call.name.clone(),
            call_id: call.call_id.clone(),
            session_id: call.session_id.clone(),
            cwd: call.cwd.clone(),
            args,
            timeout_ms: call.timeout_ms,
        };
        let tools = Arc::clone(&self.tools);
        let (tx, rx) = oneshot::channel();
        let spawned = std::thread::Builder::new()
            .name(format!("keel-{PLUGIN_ID}"))
            .spawn(move || {
                let _ = tx.send(tools.execute(&invocation));
            });
        if let Err(e) = spawned {
            return ToolResult::error(ToolCode::ToolFailed, format!("no worker thread: {e}"));
        }
        rx.await.unwrap_or_else(|_| {
            ToolResult::error(ToolCode::ToolFailed, "the file tool's worker thread died")
        })
    }
}

/// The plugin value.
#[derive(Default)]
struct ToolFs;

keel_plugin_api::dispatches! {
    /// The `fs/*` events the file tools dispatch, and so declare.
    pub struct Dispatches {
        pub write_intent: WriteIntent,
        pub edit_intent: EditIntent,
        pub observed: Observed,
    }
}

impl Plugin for ToolFs {
    type Dispatches = Dispatches;

    fn manifest(&self) -> Manifest {
        Manifest::new(PLUGIN_ID, env!("CARGO_PKG_VERSION"))
            .description("file tools: read_file, write_file, edit_file, list_dir, glob, grep")
            .serves_tools()
            .optional::<Sandbox>()
            .optional::<EditorFiles>()
            .config_type::<FsConfig>()
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let config: FsConfig = ctx.config()?;
        let tools = Arc::new(
            FsTools::new(config, Arc::new(KernelHooks { ctx })).with_keel_home(ctx.keel_home()?),
        );
        let set = definitions()
            .into_iter()
            .fold(ToolSet::new(), |set, definition| {
                set.with(FsTool {
                    tools: Arc::clone(&tools),
                    definition,
                })
            });
        ctx.serve_tools(self, set).await
    }
}

keel_plugin_api::export_plugin!(ToolFs);
