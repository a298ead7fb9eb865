//! `acp`: `keel acp`, an Agent Client Protocol server for editors (SURF-03, issue 26 item 3,
//! ARCHITECTURE §4.6 and §11). It serves the command `keel.command.acp` (the grammar in
//! [`options`]) and `keel.editor-files` ([`files`]), requires `keel.agent`, and uses `keel.approval`, `keel.sandbox` and
//! `keel.session` when rows provide them. docs/acp.md says what is supported.
//!
//! This file is only the SDK adapter. The job lives in modules:
//!
//! - [`server`]: the connection (initialize, sessions, prompts, cancel, list) on the official
//!   `agent-client-protocol` crate;
//! - [`feed`]: the row's listeners, which turn log events and stream deltas into updates;
//! - [`permission`]: the `approval/answer` seam answered by the editor;
//! - [`files`]: `keel.editor-files`, the file tools' reads and writes through the client;
//! - [`map`]: log events → ACP updates, turn ends → stop reasons (pure);
//! - [`state`]: the connection and the editor sessions;
//! - [`transport`]: stdin and stdout as JSON-RPC lines.
//!
//! The row is a command, not the profile's driver: `keel run` keeps its driver, and `keel acp`
//! runs in the same profile. Its listeners do nothing until a client connects.

pub mod feed;
pub mod files;
pub mod map;
pub mod options;
pub mod permission;
pub mod server;
pub mod state;
pub mod transport;

use std::sync::Arc;

use keel_plugin_api::codes::{ContractCode, DriverCode};
use keel_plugin_api::events::Typed;
use keel_plugin_api::events::agent::{AgentPoint, Delta, DeltaData};
use keel_plugin_api::events::approval::Answer;
use keel_plugin_api::events::session::{SessionEvent, SessionEventNotice};
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::agent::{AgentClient, AgentService};
use keel_plugin_api::services::approval::Approval;
use keel_plugin_api::services::command::{
    Command, CommandInvocation, CommandOutcome, CommandProvider, service_name,
};
use keel_plugin_api::services::editor_files::EditorFiles;
use keel_plugin_api::services::sandbox::Sandbox;
use keel_plugin_api::services::session::Sessions;

use crate::options::Options;
use crate::state::Shared;

/// The row config: none.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct Config {}

/// `keel.command.acp`.
struct AcpCommand {
    ctx: Context,
    agent: AgentClient,
    shared: Arc<Shared>,
}

impl CommandProvider for AcpCommand {
    async fn run(&self, inv: CommandInvocation) -> Result<CommandOutcome> {
        if inv.command != options::COMMAND {
            return Err(Error::coded(
                ContractCode::InvalidArguments,
                format!("keel.command.acp does not run `keel {}`", inv.command),
            ));
        }
        let options: Options = inv.parse_args().map_err(|e| {
            Error::coded(
                DriverCode::Usage,
                format!("invalid `keel acp` options: {e}"),
            )
        })?;
        if self.shared.connection().is_some() {
            return Err(Error::coded(
                DriverCode::Busy,
                "this process already serves an ACP connection",
            ));
        }
        let ctx = self.ctx;
        let server = server::Server {
            agent: self.agent.clone(),
            approval: ctx.get_client::<Approval>()?,
            sandbox: ctx.get_client::<Sandbox>()?,
            sessions: ctx.get_client::<Sessions>()?,
            shared: Arc::clone(&self.shared),
            options,
        };
        let exit_code = server::serve(ctx, server).await;
        Ok(CommandOutcome { exit_code })
    }
}

/// The plugin value.
#[derive(Default)]
struct Acp;

impl Plugin for Acp {
    type Dispatches = ();

    fn manifest(&self) -> Manifest {
        Manifest::new("acp", env!("CARGO_PKG_VERSION"))
            .description("`keel acp`: an Agent Client Protocol server for editors, over stdio")
            .command(options::spec())
            .provides::<EditorFiles>()
            .requires::<AgentService>()
            .optional::<Approval>()
            .optional::<Sandbox>()
            .optional::<Sessions>()
            .config_type::<Config>()
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let agent = ctx.client::<AgentService>()?;
        let shared = Arc::new(Shared::default());
        let s = Arc::clone(&shared);
        ctx.on::<SessionEvent>(ListenerOptions::default(), move |n: &SessionEventNotice| {
            feed::on_event(&s, n);
            Ok(())
        })?;
        let s = Arc::clone(&shared);
        ctx.on::<Delta>(
            ListenerOptions::default(),
            move |p: &AgentPoint<DeltaData>| {
                feed::on_delta(&s, p);
                Ok(())
            },
        )?;
        let s = Arc::clone(&shared);
        ctx.on_serial::<Answer, _, _>(ListenerOptions::default(), move |question| {
            let s = Arc::clone(&s);
            let parsed = question.get();
            async move {
                let Ok(q) = parsed else {
                    return Ok(None);
                };
                match permission::answer(&s, q).await {
                    Some(answer) => Typed::new(&answer).map(Some),
                    None => Ok(None),
                }
            }
        })?;
        ctx.serve::<EditorFiles, _>(files::Files {
            shared: Arc::clone(&shared),
        })?;
        ctx.serve_named::<Command, _>(
            &service_name(options::COMMAND),
            AcpCommand { ctx, agent, shared },
        )?;
        Ok(())
    }
}

keel_plugin_api::export_plugin!(Acp);
