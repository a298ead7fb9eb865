//! `approval`: the `keel.approval` service (TOOL-03, TOOL-05, ARCHITECTURE §9 "Approvals").
//!
//! Two jobs. A `tools/pre-execute` listener that runs the rest of the chain first and then
//! applies the approval policy ([`policy::decide`]): in mode `ask`, a `mutating` tool that was
//! allowed becomes `{"kind":"ask","reason":"<tool> changes the workspace"}`; a deny or ask from
//! downstream is kept. And the service the pipeline asks ([`approvals::Approvals::ask`]), which
//! audits every request as `approval/asked` + `approval/decided` (both `ignorable`).
//!
//! Row config: `mode` = `"ask"` (default) or `"never"` (headless and demo profiles set it).
//!
//! Methods:
//! - `ask` [`ApprovalRequest`] → `{outcome: "allowed-once"|"rejected"|"cancelled"|"unavailable"}`
//!   (no interactive approver exists yet: `unavailable`); an audit append that fails is an
//!   `Err`, never a decision;
//! - `mode {session_id?}` → `{mode}` (the session's override, else the row's);
//! - `set_mode {session_id, mode}` → `{}`: a per-session override (`--approval never|ask`);
//!   `INVALID_MODE` for anything else.
//!
//! Other codes: `INVALID_ARGS`, `UNKNOWN_METHOD`.

pub mod approvals;
pub mod policy;

use std::sync::Arc;

use keel_plugin_api::events::tools::PreExecute;
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::approval::{Approval, ApprovalRequest};
use keel_plugin_api::services::session::Sessions;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use approvals::{Approvals, Audit};
use policy::{CallView, Mode};

/// `set_mode` with a mode that is not `never` or `ask`.
pub const INVALID_MODE: &str = "INVALID_MODE";

/// The row config.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default = "default_mode")]
    mode: Mode,
}

fn default_mode() -> Mode {
    Mode::Ask
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ModeArgs {
    #[serde(default)]
    session_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetModeArgs {
    session_id: String,
    mode: String,
}

fn args<T: DeserializeOwned>(method: &str, v: Value) -> Result<T> {
    serde_json::from_value(v).map_err(|e| Error::new("INVALID_ARGS", format!("{method}: {e}")))
}

/// `keel.session` as the audit log.
struct SessionAudit {
    sessions: ServiceRef<Sessions>,
}

impl Audit for SessionAudit {
    async fn append(&self, session_id: &str, event: Value) -> Result<()> {
        let a = json!({"session_id": session_id, "events": [event]});
        self.sessions.call("append", a).await.map(|_| ())
    }
}

async fn call(ctx: Context, state: &Approvals, method: &str, a: Value) -> Result<Value> {
    match method {
        "ask" => {
            let request: ApprovalRequest = args(method, a)?;
            let audit = SessionAudit {
                sessions: ctx.service::<Sessions>()?,
            };
            let outcome = state.ask(&audit, &request).await?;
            Ok(json!({"outcome": outcome}))
        }
        "mode" => {
            let a: ModeArgs = args(method, a)?;
            Ok(json!({"mode": state.mode(a.session_id.as_deref())}))
        }
        "set_mode" => {
            let a: SetModeArgs = args(method, a)?;
            let mode = a
                .mode
                .parse::<Mode>()
                .map_err(|e| Error::new(INVALID_MODE, e))?;
            state.set_mode(&a.session_id, mode);
            Ok(json!({}))
        }
        other => Err(Error::new(
            "UNKNOWN_METHOD",
            format!("keel.approval has no method '{other}'"),
        )),
    }
}

/// The plugin value.
#[derive(Default)]
struct ApprovalPlugin;

impl Plugin for ApprovalPlugin {
    fn manifest(&self) -> Manifest {
        Manifest::new("approval", env!("CARGO_PKG_VERSION"))
            .description("approval policy on tool calls and the audited one-shot ask")
            .provides::<Approval>()
            .requires::<Sessions>()
            .config_schema(json!({
                "type": "object",
                "properties": {
                    "mode": { "enum": ["never", "ask"] }
                },
                "additionalProperties": false
            }))
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let config: Config = ctx.config()?;
        let state = Arc::new(Approvals::new(config.mode));

        let listener_state = Arc::clone(&state);
        ctx.async_waterfall::<PreExecute, _, _>(ListenerOptions::default(), move |exec, next| {
            let state = Arc::clone(&listener_state);
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
                Ok(state.pre_execute(&session_id, &view, downstream))
            }
        })?;

        ctx.provide::<Approval>(CallHandle::new(move |method, a| {
            let state = Arc::clone(&state);
            async move { call(ctx, &state, &method, a).await }
        }))?;
        Ok(())
    }
}

keel_plugin_api::export_plugin!(ApprovalPlugin);
