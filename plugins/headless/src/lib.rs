//! `headless`: the one-shot driver behind `keel run` and `keel resume` (SURF-01, SURF-02,
//! ARCHITECTURE §11). It provides the [`Driver`] contract (`run`: [`DriverInvocation`] →
//! [`DriverOutcome`]; `interrupt`: [`DriverInterrupt`]), requires `keel.agent` (a typed
//! [`AgentClient`]), and uses `keel.approval` when a row provides it.
//!
//! This file is only the SDK adapter. The job lives in SDK-free modules:
//!
//! - [`run`]: the flow (prompt, create/resume, send, wait, close, exit code);
//! - [`format`]: every line printed, per `--output-format` (the public contract);
//! - [`input`]: the stdin lines of `--input-format stream-json` (messages while running);
//! - [`lines`]: reading those lines with a size cap, skipping ones that are not UTF-8;
//! - [`claude`]: Claude Code's `assistant`/`user` message lines beside the `event` lines;
//! - [`partial`]: `--include-partial-messages`, Claude Code's `stream_event` lines for the
//!   model's pieces (`agent/delta`) as they arrive;
//! - [`feed`]: the output thread and the ordered `session/event` feed for stream-json, each
//!   event held until `session/durable` says it is stored;
//! - [`interrupt`]: the kernel's `interrupt` (SIGINT, SIGTERM, SIGHUP) → `abort`;
//! - [`profile`]: which profile `keel resume` runs a session under (the one it was created
//!   with, unless `--profile` says otherwise).
//!
//! The kernel owns the signals (`kernel/src/cli/run.rs`): it calls `interrupt`, then gives the
//! run a grace period to return. When the run does not return in time (or a second signal
//! comes), it drops the driver's future and unloads the rows, dependents first. The disposer
//! registered here then finishes the session that run left open ([`run::finish_stopped`]:
//! abort, wait for the turn to close, close and flush, print the result), so an interrupted
//! run is flushed and its output complete either way.

pub mod claude;
pub mod feed;
pub mod format;
pub mod input;
pub mod interrupt;
pub mod lines;
pub mod partial;
pub mod profile;
pub mod run;

use std::io::{IsTerminal as _, Read as _};
use std::sync::Arc;

use keel_plugin_api::events::agent::{AgentPoint, Delta, DeltaData, DeltaKind};
use keel_plugin_api::events::session::{
    SessionDurability, SessionDurable, SessionEvent, SessionEventNotice,
};
use keel_plugin_api::events::subagent::{ChildPoint, ChildStarted, ChildStartedData};
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::agent::{AgentClient, AgentService};
use keel_plugin_api::services::approval::Approval;
use keel_plugin_api::services::driver::{
    Driver, DriverInterrupt, DriverInvocation, DriverOutcome, DriverProvider,
};
use keel_plugin_api::services::llm::Llm;
use keel_plugin_api::services::sandbox::Sandbox;
use keel_plugin_api::services::session::Sessions;
use keel_plugin_api::services::tools::{ListRequest, Tools};

use crate::feed::{Hub, Lineage, Notice, Sink as _, StdSink};
use crate::format::InitInfo;
use crate::interrupt::{Interrupts, Stops};
use crate::partial::Piece;
use crate::run::{Active, RunEnv, Services};

fn read_stdin() -> std::io::Result<String> {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s)?;
    Ok(s)
}

/// The `keel.driver` provider: what its methods share.
struct DriverState {
    ctx: Context,
    agent: AgentClient,
    hub: Arc<Hub>,
    active: Arc<Active>,
    stops: Stops,
}

impl DriverProvider for DriverState {
    async fn interrupt(&self, stop: DriverInterrupt) -> Result<()> {
        self.stops.request(stop);
        Ok(())
    }

    async fn run(&self, inv: DriverInvocation) -> Result<DriverOutcome> {
        let ctx = self.ctx;
        if inv.command == "resume"
            && let (Some(sessions), Some(id)) = (ctx.get_client::<Sessions>()?, &inv.session_id)
        {
            match profile::decide(&inv, profile::recorded(&sessions, id).await.as_ref()) {
                profile::Decision::Relaunch(relaunch) => {
                    return Ok(DriverOutcome {
                        exit_code: 0,
                        relaunch: Some(relaunch),
                    });
                }
                profile::Decision::Proceed(Some(line)) => StdSink(Some(ctx)).err(&line),
                profile::Decision::Proceed(None) => {}
            }
        }
        let approval = ctx.get_client::<Approval>()?;
        let sandbox = ctx.get_client::<Sandbox>()?;
        let sessions = ctx.get_client::<Sessions>()?;
        let interrupts: Interrupts = self.stops.listen();
        let describe = describe(ctx).await;
        let services = Services {
            agent: &self.agent,
            approval: approval.as_ref(),
            sandbox: sandbox.as_ref(),
            sessions: sessions.as_ref(),
            describe: Some(&describe),
        };
        let env = RunEnv {
            hub: Arc::clone(&self.hub),
            active: Arc::clone(&self.active),
            sink: Box::new(StdSink(Some(ctx))),
            progress: inv
                .stderr_is_terminal
                .unwrap_or_else(|| std::io::stderr().is_terminal()),
            interrupts,
            stdin: Box::new(read_stdin),
            lines: Box::new(|| Box::new(std::io::BufReader::new(std::io::stdin()))),
        };
        let exit_code = run::run(&inv, services, env).await;
        Ok(DriverOutcome {
            exit_code,
            relaunch: None,
        })
    }
}

/// The tools the model is offered and the default provider's model, for `system/init`
/// (issue 23 item 13). What a row cannot tell stays empty; a run never fails for it.
async fn describe(ctx: Context) -> InitInfo {
    let mut info = InitInfo::default();
    if let Ok(Some(tools)) = ctx.get_client::<Tools>()
        && let Ok(list) = tools.list(ListRequest {}).await
    {
        info.tools = list.tools.into_iter().map(|t| t.name).collect();
    }
    for name in &info.tools {
        if let Some(server) = name
            .strip_prefix("mcp__")
            .and_then(|rest| rest.split_once("__"))
            .map(|(server, _)| server.to_owned())
            && !info.mcp_servers.contains(&server)
        {
            info.mcp_servers.push(server);
        }
    }
    if let Ok(Some(llm)) = ctx.get_client::<Llm>()
        && let Ok(list) = llm.providers().await
    {
        info.model = list
            .providers
            .into_iter()
            .find_map(|p| p.default_model)
            .unwrap_or_default();
    }
    info
}

/// The row config: none.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct Config {}

/// The plugin value.
#[derive(Default)]
struct Headless;

impl Plugin for Headless {
    type Dispatches = ();

    fn manifest(&self) -> Manifest {
        let manifest = Manifest::new("headless", env!("CARGO_PKG_VERSION"))
            .description("one-shot driver: run a prompt to idle, print the result, exit")
            .provides::<Driver>()
            .requires::<AgentService>()
            .optional::<Approval>()
            .optional::<Sandbox>()
            .optional::<Sessions>()
            .optional::<Tools>()
            .optional::<Llm>()
            .config_type::<Config>();
        run::run_options()
            .into_iter()
            .fold(manifest, Manifest::run_option)
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let agent = ctx.client::<AgentService>()?;
        // Read back at teardown only (see `run::finish_stopped`); `keel.agent` needs it anyway.
        let sessions = ctx.get_client::<Sessions>()?;
        let hub = Arc::new(Hub::default());
        let active = Arc::new(Active::default());
        let listening = Arc::clone(&hub);
        ctx.on::<SessionEvent>(ListenerOptions::default(), move |n: &SessionEventNotice| {
            listening.notice(|| Notice {
                session_id: n.session_id.to_string(),
                seq: n.seq,
                kind: n.kind.to_string(),
                record: n.record.to_string(),
            });
            Ok(())
        })?;
        // Children of the run's session (issue 16): their events join stream-json.
        let listening = Arc::clone(&hub);
        ctx.on::<ChildStarted>(
            ListenerOptions::default(),
            move |c: &ChildPoint<ChildStartedData>| {
                listening.follow(|| {
                    (
                        c.child_session.to_string(),
                        Lineage {
                            parent_session: c.parent_session.to_string(),
                            parent_call_id: c.parent_call_id.to_string(),
                        },
                    )
                });
                Ok(())
            },
        )?;
        // The model's pieces (issue 26 item 1): decoded only while a run prints them.
        let listening = Arc::clone(&hub);
        ctx.on::<Delta>(
            ListenerOptions::default(),
            move |d: &AgentPoint<DeltaData>| {
                listening.delta(|| {
                    let data = d.data.get().ok()?;
                    Some(Piece {
                        session_id: d.session_id.to_string(),
                        turn: d.turn,
                        step: d.step,
                        attempt: data.attempt,
                        index: data.index,
                        reasoning: data.kind == DeltaKind::Reasoning,
                        text: data.text,
                    })
                });
                Ok(())
            },
        )?;
        let listening = Arc::clone(&hub);
        ctx.on::<SessionDurable>(ListenerOptions::default(), move |d: &SessionDurability| {
            listening.durable(|| d.session_id.to_string(), d.seq);
            Ok(())
        })?;
        ctx.serve::<Driver, _>(DriverState {
            ctx,
            agent: agent.clone(),
            hub,
            active: Arc::clone(&active),
            stops: Stops::default(),
        })?;
        ctx.effect("finish a run the kernel stopped", move || async move {
            if let Some(open) = active.take_open() {
                run::finish_stopped(&agent, sessions.as_ref(), open).await;
            }
            Ok(())
        })?;
        Ok(())
    }
}

keel_plugin_api::export_plugin!(Headless);

#[cfg(test)]
pub(crate) mod testing {
    //! A sink that captures lines, for the feed and run tests.

    use std::sync::{Arc, Mutex};

    use crate::feed::Sink;

    /// Captured lines: `('o', line)` for stdout, `('e', line)` for stderr.
    #[derive(Clone, Default)]
    pub(crate) struct Captured(pub(crate) Arc<Mutex<Vec<(char, String)>>>);

    impl Captured {
        pub(crate) fn stdout(&self) -> Vec<String> {
            self.lines('o')
        }

        pub(crate) fn stderr(&self) -> Vec<String> {
            self.lines('e')
        }

        fn lines(&self, which: char) -> Vec<String> {
            self.0
                .lock()
                .unwrap()
                .iter()
                .filter(|(w, _)| *w == which)
                .map(|(_, l)| l.clone())
                .collect()
        }
    }

    impl Sink for Captured {
        fn out(&mut self, line: &str) -> bool {
            self.0.lock().unwrap().push(('o', line.to_owned()));
            true
        }

        fn err(&mut self, line: &str) {
            self.0.lock().unwrap().push(('e', line.to_owned()));
        }
    }
}
