//! `keel acp`: the Agent Client Protocol server (SURF-03, ARCHITECTURE §11) on the official
//! `agent-client-protocol` crate, over stdio, one connection per process.
//!
//! Each editor session is a keel session (`keel.agent` `create` / `resume`), with the same
//! log, firewall, sandbox and hooks as `keel run`. A prompt is one inbox message; it settles
//! when the whole agent is idle (`wait_idle`), with the stop reason of the last `turn/end`
//! ([`map::stop_reason`]). What the client sees while it runs comes from the row's listeners
//! (`crate::feed`): the log's events and the loop's `agent/delta`.
//!
//! Requests that wait on the agent (a prompt) run as tasks of the connection, so the dispatch
//! loop keeps reading (`session/cancel`, a second prompt, which is refused). A malformed line,
//! an unknown method or a bad parameter is answered by the crate with a JSON-RPC error, and the
//! connection goes on.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, ContentBlock, Implementation, InitializeRequest,
    InitializeResponse, ListSessionsRequest, ListSessionsResponse, LoadSessionRequest,
    LoadSessionResponse, NewSessionRequest, NewSessionResponse, PromptCapabilities, PromptRequest,
    PromptResponse, SessionCapabilities, SessionId, SessionInfo, SessionListCapabilities,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, Lines};
use futures::FutureExt as _;
use futures::channel::oneshot;
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::agent::{
    AgentClient, AgentSession, CreateAgent, InboxTarget, ResumeAgent, RunReport, SendMessage,
};
use keel_plugin_api::services::approval::{self, ApprovalClient};
use keel_plugin_api::services::sandbox::{self, SandboxClient};
use keel_plugin_api::services::session::{SessionRef, SessionsClient};
use serde_json::json;

use crate::map;
use crate::options::Options;
use crate::state::{ClientFs, Shared, Tracked};
use crate::transport;

/// How long a settled prompt waits for its `turn/end` to have gone out before it answers (the
/// feed normally delivers it before `wait_idle` returns; this only bounds a lost notice).
const TURN_END_GRACE: Duration = Duration::from_secs(2);

/// What the handlers share.
pub struct Server {
    /// `keel.agent`.
    pub agent: AgentClient,
    /// `keel.approval`, when a row provides it.
    pub approval: Option<ApprovalClient>,
    /// `keel.sandbox`, when a row provides it.
    pub sandbox: Option<SandboxClient>,
    /// `keel.session`, when a row provides it (`session/load`, `session/list`).
    pub sessions: Option<SessionsClient>,
    /// The connection and the editor sessions.
    pub shared: Arc<Shared>,
    /// `keel acp`'s options.
    pub options: Options,
}

/// A keel error as a JSON-RPC error: the keel code and message in `data`.
fn rpc_error(base: agent_client_protocol::Error, e: &Error) -> agent_client_protocol::Error {
    base.data(json!({ "code": e.code, "message": e.message }))
}

fn invalid(message: &str) -> agent_client_protocol::Error {
    agent_client_protocol::Error::invalid_params().data(json!({ "message": message }))
}

/// Runs the connection on stdin/stdout until the client closes stdin; then closes every
/// session it opened. The exit code: 0, or 1 when the connection failed.
pub async fn serve(ctx: Context, server: Server) -> i32 {
    let incoming = match transport::stdin_lines() {
        Ok(lines) => lines,
        Err(e) => {
            let _ = ctx.write_stderr(&format!("keel acp: cannot read stdin: {e}\n"));
            return 1;
        }
    };
    let server = Arc::new(server);
    let lines = Lines::new(Box::pin(transport::stdout_lines(ctx)), incoming);
    let (s1, s2, s3, s4, s5, s6) = (
        Arc::clone(&server),
        Arc::clone(&server),
        Arc::clone(&server),
        Arc::clone(&server),
        Arc::clone(&server),
        Arc::clone(&server),
    );
    let result = Agent
        .v1()
        .name("keel")
        .on_receive_request(
            async move |r: InitializeRequest, responder: Responder<InitializeResponse>, cx| {
                responder.respond(s1.initialize(&r, cx))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |r: NewSessionRequest, responder: Responder<NewSessionResponse>, _cx| {
                match s2.new_session(r).await {
                    Ok(id) => responder.respond(NewSessionResponse::new(SessionId::new(id))),
                    Err(e) => responder.respond_with_error(e),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |r: LoadSessionRequest, responder: Responder<LoadSessionResponse>, _cx| {
                match s3.load_session(r).await {
                    Ok(()) => responder.respond(LoadSessionResponse::new()),
                    Err(e) => responder.respond_with_error(e),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |r: PromptRequest, responder: Responder<PromptResponse>, cx| {
                Arc::clone(&s4).prompt(r, responder, &cx)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |n: CancelNotification, cx: ConnectionTo<Client>| s5.cancel(&n, &cx),
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |_: ListSessionsRequest, responder: Responder<ListSessionsResponse>, _cx| {
                match s6.list().await {
                    Ok(list) => responder.respond(list),
                    Err(e) => responder.respond_with_error(e),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_to(lines)
        .await;
    server.shared.set_connection(None);
    for id in server.shared.take_all() {
        if let Err(e) = server.agent.close(AgentSession::new(&id)).await {
            tracing::warn!(session = id, "closing the session failed: {e}");
        }
    }
    match result {
        Ok(()) => 0,
        Err(e) => {
            let _ = ctx.write_stderr(&format!("keel acp: the connection failed: {e}\n"));
            1
        }
    }
}

impl Server {
    fn initialize(&self, r: &InitializeRequest, cx: ConnectionTo<Client>) -> InitializeResponse {
        self.shared.set_client_fs(ClientFs {
            read: r.client_capabilities.fs.read_text_file,
            write: r.client_capabilities.fs.write_text_file,
        });
        self.shared.set_connection(Some(cx));
        let capabilities = AgentCapabilities::new()
            .load_session(self.sessions.is_some())
            .prompt_capabilities(PromptCapabilities::new().embedded_context(true))
            .session_capabilities(if self.sessions.is_some() {
                SessionCapabilities::new().list(SessionListCapabilities::new())
            } else {
                SessionCapabilities::new()
            });
        InitializeResponse::new(
            r.protocol_version
                .min(agent_client_protocol::schema::ProtocolVersion::V1),
        )
        .agent_capabilities(capabilities)
        .agent_info(Implementation::new("keel", env!("CARGO_PKG_VERSION")))
    }

    async fn new_session(
        &self,
        r: NewSessionRequest,
    ) -> Result<String, agent_client_protocol::Error> {
        if !r.cwd.is_absolute() {
            return Err(invalid("cwd must be an absolute path"));
        }
        let created = self
            .agent
            .create(CreateAgent {
                cwd: r.cwd.display().to_string(),
                session_id: None,
                ephemeral: false,
                max_turns: self.options.max_turns,
                profile: None,
                lineage: None,
                overrides: None,
            })
            .await
            .map_err(|e| rpc_error(agent_client_protocol::Error::internal_error(), &e))?;
        let id = created.session_id;
        self.shared.track(&id, r.cwd);
        self.apply_modes(&id).await?;
        Ok(id)
    }

    /// `--approval` and `--sandbox` for a session this server opened.
    async fn apply_modes(&self, id: &str) -> Result<(), agent_client_protocol::Error> {
        let internal = agent_client_protocol::Error::internal_error;
        if let (Some(mode), Some(a)) = (&self.options.approval, &self.approval) {
            a.set_mode(approval::SetModeRequest {
                session_id: id.to_owned(),
                mode: mode.clone(),
            })
            .await
            .map_err(|e| rpc_error(internal(), &e))?;
        }
        if let (Some(mode), Some(s)) = (&self.options.sandbox, &self.sandbox) {
            s.set_mode(sandbox::SetModeRequest { mode: mode.clone() })
                .await
                .map_err(|e| rpc_error(internal(), &e))?;
        }
        Ok(())
    }

    /// Replays the stored log as updates, then resumes the session's loop.
    async fn load_session(
        &self,
        r: LoadSessionRequest,
    ) -> Result<(), agent_client_protocol::Error> {
        let id = r.session_id.0.to_string();
        let Some(sessions) = &self.sessions else {
            return Err(agent_client_protocol::Error::method_not_found());
        };
        if self.shared.session(&id).is_some() {
            return Err(invalid(&format!(
                "session {id} is already open on this connection"
            )));
        }
        let log = sessions
            .inspect(SessionRef::new(&id))
            .await
            .map_err(|e| rpc_error(agent_client_protocol::Error::invalid_params(), &e))?;
        let cwd = if r.cwd.is_absolute() {
            r.cwd.clone()
        } else {
            PathBuf::from(&log.header.cwd)
        };
        let resumed = self
            .agent
            .resume(ResumeAgent {
                session_id: id.clone(),
                max_turns: self.options.max_turns,
            })
            .await
            .map_err(|e| rpc_error(agent_client_protocol::Error::invalid_params(), &e))?;
        let tracked = self.shared.track(&id, cwd);
        for event in log.events.iter().chain(log.recovered.iter()) {
            let seen = map::Seen {
                replay: true,
                streamed: false,
                cwd: &tracked.cwd,
            };
            for update in map::updates(&event.kind, &event.data, seen) {
                self.shared.notify(&id, update);
            }
        }
        if !resumed.session_id.is_empty() && resumed.session_id != id {
            tracing::warn!(
                session = id,
                resumed = resumed.session_id,
                "resume answered another id"
            );
        }
        self.apply_modes(&id).await
    }

    /// Takes the session's prompt slot and runs the prompt as a task of the connection.
    fn prompt(
        self: Arc<Self>,
        r: PromptRequest,
        responder: Responder<PromptResponse>,
        cx: &ConnectionTo<Client>,
    ) -> Result<(), agent_client_protocol::Error> {
        let id = r.session_id.0.to_string();
        let Some(tracked) = self.shared.session(&id) else {
            return responder.respond_with_error(invalid(&format!(
                "unknown session {id}: create it with session/new or open it with session/load"
            )));
        };
        let content = prompt_text(&r.prompt);
        if content.trim().is_empty() {
            return responder.respond_with_error(invalid("the prompt has no text"));
        }
        let (turn_end_tx, turn_end_rx) = oneshot::channel();
        if !tracked.begin_prompt(turn_end_tx) {
            // SURF-03: one prompt in flight per session.
            return responder.respond_with_error(invalid(&format!(
                "session {id} is already running a prompt; cancel it or wait for its answer"
            )));
        }
        cx.spawn(async move {
            let answer = self.run_prompt(&tracked, content, turn_end_rx).await;
            tracked.end_prompt();
            match answer {
                Ok(response) => responder.respond(response),
                Err(e) => responder.respond_with_error(e),
            }
        })
    }

    async fn run_prompt(
        &self,
        tracked: &Tracked,
        content: String,
        turn_end: oneshot::Receiver<()>,
    ) -> Result<PromptResponse, agent_client_protocol::Error> {
        let id = tracked.id.as_str();
        self.agent
            .send(SendMessage {
                session_id: id.to_owned(),
                content,
                target: InboxTarget::Followup,
                level: None,
            })
            .await
            .map_err(|e| rpc_error(agent_client_protocol::Error::internal_error(), &e))?;
        let report: RunReport = self
            .agent
            .wait_idle(AgentSession::new(id))
            .await
            .map_err(|e| rpc_error(agent_client_protocol::Error::internal_error(), &e))?;
        // The turn's last updates go out before its answer.
        let mut grace = Box::pin(keel_plugin_api::sdk::sleep(TURN_END_GRACE).fuse());
        let mut ended = turn_end.fuse();
        futures::select! {
            _ = ended => {},
            () = grace => {},
        }
        let kind = report.reason_kind();
        if kind == "error" {
            let error = report
                .turn_end_reason
                .get("error")
                .cloned()
                .unwrap_or_default();
            return Err(agent_client_protocol::Error::internal_error()
                .data(json!({ "turn_end": report.turn_end_reason, "error": error })));
        }
        Ok(PromptResponse::new(map::stop_reason(kind)))
    }

    /// `session/cancel`: the running turn ends `aborted` (its tool tree stopped), and the
    /// prompt answers `cancelled`.
    fn cancel(
        &self,
        n: &CancelNotification,
        cx: &ConnectionTo<Client>,
    ) -> Result<(), agent_client_protocol::Error> {
        let id = n.session_id.0.to_string();
        let Some(tracked) = self.shared.session(&id) else {
            tracing::debug!(
                session = id,
                "cancel for a session this connection did not open"
            );
            return Ok(());
        };
        if !tracked.prompting() {
            return Ok(());
        }
        let agent = self.agent.clone();
        cx.spawn(async move {
            if let Err(e) = agent.abort(AgentSession::new(&id)).await {
                tracing::warn!(session = id, "abort failed: {e}");
            }
            Ok(())
        })
    }

    async fn list(&self) -> Result<ListSessionsResponse, agent_client_protocol::Error> {
        let Some(sessions) = &self.sessions else {
            return Err(agent_client_protocol::Error::method_not_found());
        };
        let listing = sessions
            .list()
            .await
            .map_err(|e| rpc_error(agent_client_protocol::Error::internal_error(), &e))?;
        let infos = listing
            .sessions
            .into_iter()
            .filter(|s| s.header.parent_session.is_none())
            .map(|s| SessionInfo::new(SessionId::new(s.header.id), PathBuf::from(s.header.cwd)))
            .collect();
        Ok(ListSessionsResponse::new(infos))
    }
}

/// The prompt's text: text blocks as they are, a linked or embedded resource as a mention of
/// its URI (with the embedded text, when there is one).
fn prompt_text(blocks: &[ContentBlock]) -> String {
    let mut parts = Vec::new();
    for block in blocks {
        match block {
            ContentBlock::Text(t) => parts.push(t.text.clone()),
            ContentBlock::ResourceLink(link) => parts.push(format!("@{}", link.uri)),
            ContentBlock::Resource(embedded) => {
                let v = serde_json::to_value(&embedded.resource).unwrap_or_default();
                let uri = v.get("uri").and_then(|u| u.as_str()).unwrap_or_default();
                match v.get("text").and_then(|t| t.as_str()) {
                    Some(text) => parts.push(format!("@{uri}\n```\n{text}\n```")),
                    None => parts.push(format!("@{uri}")),
                }
            }
            _ => {}
        }
    }
    parts.join("\n")
}
