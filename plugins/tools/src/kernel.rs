//! The [`Host`] over the kernel: the session's `append`, the five `tools/*` dispatches with
//! their terminals, `keel.approval`, and the body (the `tools/execute` terminal) that calls the
//! provider's `execute` under the call's deadline on the host timer and under the batch's
//! cancellation. The body's result is frozen once, here; the pipeline keeps the snapshot as long
//! as no listener changes the result.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use keel_plugin_api::events::Typed;
use keel_plugin_api::events::tools::{ToolExecution, ToolOutcome};
use keel_plugin_api::prelude::*;
use keel_plugin_api::sdk::sleep;
use keel_plugin_api::services::approval::{ApprovalClient, ApprovalRequest};
use keel_plugin_api::services::session::{AppendEvents, EventInput, SessionsClient};
use keel_plugin_api::services::tools::{
    GuardDecision, PostDecision, PreDecision, RewriteDecision, ToolCode, ToolInvocation,
    ToolProvider, ToolResult,
};
use serde_json::Value;

use crate::batches::Cancel;
use crate::provider::run_body;
use crate::registry::Registry;
use crate::stages::{AskAnswer, Executed, Host, Snapshot};

/// One batch's view of the kernel.
pub struct KernelHost {
    /// The row's context.
    pub ctx: Context,
    /// `keel.session`.
    pub sessions: SessionsClient,
    /// `keel.approval`, when loaded.
    pub approval: Option<ApprovalClient>,
    /// The registry (the body looks the provider up at run time).
    pub registry: Arc<Registry>,
    /// The batch's session.
    pub session_id: String,
    /// The batch's cancellation (a running body stops when it fires).
    pub cancel: Arc<Cancel>,
}

impl Host for KernelHost {
    async fn append(&self, event: Value) -> Result<()> {
        let request = AppendEvents {
            session_id: self.session_id.clone(),
            events: vec![EventInput::from_json(event)?],
        };
        self.sessions.append(request).await.map(drop)
    }

    async fn rewrite(&self, exec: ToolExecution) -> Result<Typed<RewriteDecision>> {
        self.ctx
            .run_async_waterfall(crate::DISPATCH.rewrite, exec, |_| async {
                Typed::new(&RewriteDecision::default())
            })
            .await
    }

    async fn pre_execute(&self, exec: ToolExecution) -> Result<Typed<PreDecision>> {
        self.ctx
            .run_async_waterfall(crate::DISPATCH.pre_execute, exec, |_| async {
                Typed::new(&PreDecision::Allow)
            })
            .await
    }

    async fn ask(&self, request: ApprovalRequest) -> AskAnswer {
        let Some(approval) = &self.approval else {
            return AskAnswer::NoService;
        };
        // An answer that is not one of the four outcomes fails to decode: the call is denied
        // as `APPROVAL_UNAVAILABLE` (TOOL-05).
        match approval.ask(request).await {
            Err(e) => AskAnswer::Failed(e),
            Ok(answer) => AskAnswer::Outcome(answer.outcome),
        }
    }

    async fn guard(&self, exec: ToolExecution) -> Result<Option<Typed<GuardDecision>>> {
        self.ctx.serial(crate::DISPATCH.guard, exec).await
    }

    async fn execute(&self, exec: ToolExecution, args: Value) -> Result<Executed> {
        let ctx = self.ctx;
        // The pipeline's parsed arguments, valid while no execute listener changes the text.
        let carried = Arc::new((exec.args.text.to_string(), args));
        let registry = Arc::clone(&self.registry);
        let cancel = Arc::clone(&self.cancel);
        // The body's snapshot, beside the text the waterfall carries (its only encode).
        let kept: Arc<Mutex<Option<Snapshot>>> = Arc::default();
        let slot = Arc::clone(&kept);
        let json = self
            .ctx
            .run_async_waterfall(crate::DISPATCH.execute, exec, move |exec| {
                let registry = Arc::clone(&registry);
                let cancel = Arc::clone(&cancel);
                let slot = Arc::clone(&slot);
                let args = (exec.args.text.as_str() == carried.0).then(|| carried.1.clone());
                async move {
                    let snapshot = Snapshot::of(body(ctx, &registry, &cancel, exec, args).await)?;
                    let json = snapshot.typed();
                    *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(snapshot);
                    Ok(json)
                }
            })
            .await?;
        let snapshot = kept.lock().unwrap_or_else(PoisonError::into_inner).take();
        Ok(Executed { json, snapshot })
    }

    async fn post_execute(&self, outcome: ToolOutcome) -> Result<Typed<PostDecision>> {
        self.ctx
            .run_async_waterfall(crate::DISPATCH.post_execute, outcome, |_| async {
                Typed::new(&PostDecision::Accept { content: None })
            })
            .await
    }

    fn notify(&self, outcome: &ToolOutcome) {
        // Listener failures are contained by the kernel; an error here is misuse (unknown
        // event), which must not cost the call its result.
        if let Err(e) = self.ctx.emit(crate::DISPATCH.tools_result, outcome) {
            tracing::warn!(error = %e, "tools/result could not be emitted");
        }
    }
}

/// The tool body: the provider's `execute` under `exec.timeout_ms` and `cancel`.
async fn body(
    ctx: Context,
    registry: &Registry,
    cancel: &Cancel,
    exec: ToolExecution,
    args: Option<Value>,
) -> ToolResult {
    if cancel.is_cancelled() {
        // Cancelled while an execute wrapper ran: the provider is never called.
        return crate::schedule::aborted_before_dispatch();
    }
    let name = exec.name.as_str();
    let Some(entry) = registry.lookup(name) else {
        return ToolResult::error(
            ToolCode::UnknownTool,
            format!("the tool '{name}' was unregistered before it ran"),
        );
    };
    let provider = match ctx.named_client::<ToolProvider>(&entry.service) {
        Ok(Some(h)) => h,
        Ok(None) => {
            return ToolResult::error(
                ToolCode::ToolFailed,
                format!("the provider of '{name}' ({}) is not active", entry.service),
            );
        }
        Err(e) => {
            return ToolResult::error(
                ToolCode::ToolFailed,
                format!("the provider of '{name}' cannot be reached: {e}"),
            );
        }
    };
    // Parsed again only when a listener (the firewall's fill) changed the text.
    let parsed = match args {
        Some(args) => Ok(args),
        None => crate::stages::parse_text(exec.args.text.as_str()),
    };
    let args = match parsed {
        Ok(a) => a,
        Err(e) => {
            return ToolResult::error(
                ToolCode::ToolFailed,
                format!("an execute listener left arguments that are not JSON: {e}"),
            );
        }
    };
    let invocation = ToolInvocation {
        name: name.to_owned(),
        call_id: exec.call_id.to_string(),
        session_id: exec.session_id.to_string(),
        cwd: exec.cwd.to_string(),
        args,
        timeout_ms: exec.timeout_ms,
    };
    let deadline = (exec.timeout_ms > 0).then(|| sleep(Duration::from_millis(exec.timeout_ms)));
    run_body(
        provider.execute(invocation),
        deadline,
        cancel.fired(),
        exec.timeout_ms,
    )
    .await
}
