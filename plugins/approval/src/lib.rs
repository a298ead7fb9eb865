//! `approval`: the `keel.approval` service (TOOL-03, TOOL-05, ARCHITECTURE §9 "Approvals").
//!
//! Two jobs. A `tools/pre-execute` listener that runs the rest of the chain first and then
//! applies the approval policy ([`policy::decide`]): in mode `ask`, a `mutating` tool that was
//! allowed becomes `{"kind":"ask","reason":"<tool> changes the workspace"}`; a deny or ask from
//! downstream is kept. And the service the pipeline asks ([`approvals::Approvals::ask`]), which
//! audits every request as `approval/asked` + `approval/decided` (both `ignorable`).
//!
//! Row config: `mode` = `"ask"` (default) or `"never"` (headless and demo profiles set it), and
//! `rules = { allow = [...], ask = [...], deny = [...] }` of `tool` / `tool(pattern)` entries
//! (see [`rules`]): deny > ask > allow, and none loosens another listener's decision.
//!
//! The service is the typed [`Approval`] contract (methods `ask`, `mode`, `set_mode`; shapes
//! and codes in `keel_plugin_api::services::approval`): `ask` is answered by the first
//! `approval/answer` listener (an interactive front end or an approver plugin), `unavailable`
//! when none answers; an audit append that fails is an `Err`, never a decision.

pub mod approvals;
pub mod policy;
pub mod rules;

use std::sync::Arc;

use keel_plugin_api::events::tools::PreExecute;
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::approval::{
    Approval, ApprovalCode, ApprovalProvider, ApprovalRequest, AskAnswer, ModeAnswer, ModeRequest,
    SetModeRequest,
};
use keel_plugin_api::services::session::{AppendEvents, EventInput, Sessions, SessionsClient};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use approvals::{Approvals, Audit, Responder};
use keel_plugin_api::events::Typed;
use keel_plugin_api::events::approval::{Answer, ApprovalQuestion};
use keel_plugin_api::events::session::{SessionEvent, SessionEventNotice};
use keel_plugin_api::services::approval::ApprovalOutcome;
use policy::{CallView, Mode};

/// The row config.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default = "default_mode")]
    mode: Mode,
    /// Allow / ask / deny rules by tool name and argument pattern.
    #[serde(default)]
    rules: rules::RulesConfig,
}

fn default_mode() -> Mode {
    Mode::Ask
}

/// `keel.session` as the audit log.
struct SessionAudit {
    sessions: SessionsClient,
}

impl Audit for SessionAudit {
    async fn append(&self, session_id: &str, event: Value) -> Result<()> {
        let request = AppendEvents {
            session_id: session_id.to_owned(),
            events: vec![EventInput::from_json(event)?],
        };
        self.sessions.append(request).await.map(drop)
    }
}

/// The `approval/answer` seam: the first listener with a valid answer decides; nobody, a
/// failing listener or an answer outside the vocabulary is `unavailable` (which denies).
struct SeamResponder {
    ctx: Context,
}

impl Responder for SeamResponder {
    async fn answer(&self, id: &str, request: &ApprovalRequest) -> ApprovalOutcome {
        let question = ApprovalQuestion {
            id: id.to_owned(),
            request: request.clone(),
        };
        let Ok(payload) = Typed::new(&question) else {
            return ApprovalOutcome::Unavailable;
        };
        match self.ctx.serial(crate::DISPATCH.answer, payload).await {
            Ok(Some(reply)) => reply
                .into_inner()
                .map_or(ApprovalOutcome::Unavailable, |a| a.outcome),
            Ok(None) => ApprovalOutcome::Unavailable,
            Err(e) => {
                tracing::warn!(error = %e, "an approval/answer listener failed; the ask is unavailable");
                ApprovalOutcome::Unavailable
            }
        }
    }
}

/// The service: the shared state and the fiber's context.
struct Service {
    ctx: Context,
    state: Arc<Approvals>,
}

impl ApprovalProvider for Service {
    async fn ask(&self, request: ApprovalRequest) -> Result<AskAnswer> {
        let audit = SessionAudit {
            sessions: self.ctx.client::<Sessions>()?,
        };
        let responder = SeamResponder { ctx: self.ctx };
        let outcome = self.state.ask(&audit, &responder, &request).await?;
        Ok(AskAnswer { outcome })
    }

    async fn mode(&self, request: ModeRequest) -> Result<ModeAnswer> {
        Ok(ModeAnswer {
            mode: self.state.mode(request.session_id.as_deref()),
        })
    }

    async fn set_mode(&self, request: SetModeRequest) -> Result<()> {
        let mode = request
            .mode
            .parse::<Mode>()
            .map_err(|e| Error::coded(ApprovalCode::InvalidMode, e))?;
        self.state.set_mode(&request.session_id, mode);
        Ok(())
    }
}

/// The plugin value.
#[derive(Default)]
struct ApprovalPlugin;

keel_plugin_api::dispatches! {
    /// What the approval row dispatches: the question, asked of `approval/answer`'s listeners.
    pub struct Dispatches {
        pub answer: Answer,
    }
}

impl Plugin for ApprovalPlugin {
    type Dispatches = Dispatches;

    fn manifest(&self) -> Manifest {
        Manifest::new("approval", env!("CARGO_PKG_VERSION"))
            .description("approval policy on tool calls and the audited one-shot ask")
            .provides::<Approval>()
            .requires::<Sessions>()
            .guard_row()
            .config_type::<Config>()
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let config: Config = ctx.config()?;
        let rules = Arc::new(
            rules::Rules::parse(&config.rules)
                .map_err(|e| Error::coded(ApprovalCode::InvalidRule, e))?,
        );
        let state = Arc::new(Approvals::new(config.mode));

        let listener_state = Arc::clone(&state);
        ctx.async_waterfall::<PreExecute, _, _>(ListenerOptions::default(), move |exec, next| {
            let state = Arc::clone(&listener_state);
            let rules = Arc::clone(&rules);
            async move {
                let session_id = exec.session_id.to_string();
                let name = exec.name.to_string();
                let mutating = exec.mutating;
                let parsed: Value = exec.args.parse().unwrap_or(Value::Null);
                let downstream = next.run(exec).await?;
                let view = CallView {
                    name: &name,
                    args: &parsed,
                    mutating,
                };
                let by_mode = state.pre_execute(&session_id, &view, downstream.clone());
                // The rules refine the mode's answer; neither loosens the chain's (TOOL-02).
                let (Ok(chain), Ok(mode_says)) = (downstream.get(), by_mode.get()) else {
                    return Ok(by_mode);
                };
                Typed::new(&rules.decide(&view, &chain, mode_says))
            }
        })?;

        // TOOL-05: which sessions have an open turn, from the log's own feed.
        let turns = Arc::clone(&state);
        ctx.on::<SessionEvent>(ListenerOptions::default(), move |n: &SessionEventNotice| {
            match n.kind.as_str() {
                "turn/start" => turns.turn(n.session_id.as_str(), true),
                "turn/end" => turns.turn(n.session_id.as_str(), false),
                _ => {}
            }
            Ok(())
        })?;

        ctx.serve::<Approval, _>(Service { ctx, state })?;
        Ok(())
    }
}

keel_plugin_api::export_plugin!(ApprovalPlugin);
