//! One configured server's life (issue 15 items 2 and 3): a supervisor task on the plugin's
//! runtime that connects, lists the tools, registers them with `keel.tools` (as its group of
//! the row's `DynamicTools`), follows
//! `tools/list_changed`, and restarts the server with backoff when it goes away; and the call
//! path the tool provider uses.
//!
//! While a server is down its tools stay registered: a call meanwhile is an error result
//! naming the server and why (`MCP_SERVER_UNAVAILABLE`), never a failed turn. A restart
//! re-lists and swaps the registration only when the list changed. A call runs as its own
//! task; when the pipeline drops it (deadline, cancel) or `call_timeout_ms` passes, the SDK's
//! guard sends `notifications/cancelled` for the request, so the server stops working on it.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use keel_plugin_api::prelude::*;
use keel_plugin_api::services::tools::{DynamicTools, ToolResult};
use rmcp::Peer;
use rmcp::RoleClient;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::config::{ServerConfig, Transport};
use crate::connect::{self, Handler, Live, StderrLog};
use crate::result::{McpError, to_tool_result};
use crate::stdio::Fault;
use crate::tools::{McpTool, map_tools};

/// Where a server is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// `enabled = false`.
    Disabled,
    /// The first start is under way.
    Starting,
    /// Connected; its tools are registered.
    Connected,
    /// The first start failed (retried with backoff unless the run was refused).
    Failed(String),
    /// It went away after having been connected; restarting.
    Restarting {
        /// Why it went away.
        reason: String,
        /// Failed attempts so far.
        attempt: u32,
    },
}

impl Phase {
    /// `connected`, `failed: …`, for `keel mcp list` and call errors.
    pub fn describe(&self) -> String {
        match self {
            Phase::Disabled => "disabled".to_owned(),
            Phase::Starting => "starting".to_owned(),
            Phase::Connected => "connected".to_owned(),
            Phase::Failed(r) => format!("failed: {r}"),
            Phase::Restarting { reason, attempt } => {
                format!("restarting (attempt {attempt}): {reason}")
            }
        }
    }
}

/// What the rest of the plugin reads about a server.
#[derive(Debug, Clone)]
pub struct Status {
    /// The phase.
    pub phase: Phase,
    /// Its tools as registered (kept while it restarts).
    pub tools: Vec<McpTool>,
    /// How it is confined.
    pub confinement: String,
    /// The child's pid (stdio).
    pub pid: Option<u32>,
}

/// One server.
pub struct Server {
    /// Its name.
    pub name: String,
    /// Its config.
    pub config: ServerConfig,
    status: Mutex<Status>,
    peer: Mutex<Option<Peer<RoleClient>>>,
    /// Bumped at every phase change (the start gate waits on it).
    pub changes: watch::Sender<u64>,
    /// Its stderr.
    pub stderr: Arc<StderrLog>,
    /// What the current connection's start and transport saw (exit status, an oversized
    /// message, no network).
    pub fault: Arc<Fault>,
}

impl Server {
    /// A server in its first phase.
    pub fn new(name: String, config: ServerConfig) -> Self {
        let phase = if config.enabled {
            Phase::Starting
        } else {
            Phase::Disabled
        };
        Server {
            name,
            config,
            status: Mutex::new(Status {
                phase,
                tools: Vec::new(),
                confinement: String::new(),
                pid: None,
            }),
            peer: Mutex::new(None),
            changes: watch::channel(0).0,
            stderr: Arc::default(),
            fault: Arc::default(),
        }
    }

    /// A snapshot.
    pub fn status(&self) -> Status {
        self.status
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set(&self, f: impl FnOnce(&mut Status)) {
        f(&mut self.status.lock().unwrap_or_else(PoisonError::into_inner));
        self.changes.send_modify(|n| *n += 1);
    }

    fn set_phase(&self, phase: Phase) {
        self.set(|s| s.phase = phase);
    }

    /// `reason`, then what the transport saw (its exit code, an oversized message) and the
    /// server's last stderr line (issue 23 item 17).
    fn with_tail(&self, reason: String) -> String {
        let reason = match self.fault.get() {
            Some(f) if !reason.contains(&f) => format!("{reason}; {f}"),
            _ => reason,
        };
        match (self.config.transport(), self.stderr.last()) {
            (Transport::Stdio, Some(l)) if !reason.contains(&l) => {
                format!("{reason}; its stderr: {l}")
            }
            _ => reason,
        }
    }

    fn start_timeout(&self) -> String {
        let ms = self.config.startup_timeout_ms;
        match self.config.transport() {
            // Issue 23 item 17: a package runner (`npx -y`, `uvx`) fetching offline waits
            // silently for a registry it cannot reach.
            Transport::Stdio if self.fault.offline() => format!(
                "no MCP answer within startup_timeout_ms = {ms}; it runs without network (the \
                 sandbox row's network = false), so a command that downloads its package \
                 first (npx -y, uvx) cannot reach the registry: install the server and point \
                 `command` at it, or allow the network"
            ),
            Transport::Stdio => format!(
                "no MCP answer within startup_timeout_ms = {ms} (does it speak MCP on stdout?)"
            ),
            Transport::Http => format!("no MCP answer within startup_timeout_ms = {ms}"),
        }
    }

    /// The supervisor: runs until `stop` turns true. Its tools are the group named after it
    /// in `tools`.
    pub async fn supervise(
        self: Arc<Self>,
        ctx: Context,
        tools: DynamicTools,
        mut stop: watch::Receiver<bool>,
    ) {
        let mut attempt: u32 = 0;
        let mut ever_connected = false;
        loop {
            if *stop.borrow() {
                return;
            }
            let reason = match self.run_once(&ctx, &tools, &mut stop).await {
                Ok(()) => return,
                Err((reason, connected)) => {
                    ever_connected |= connected;
                    if connected {
                        attempt = 0;
                    }
                    reason
                }
            };
            *self.peer.lock().unwrap_or_else(PoisonError::into_inner) = None;
            attempt += 1;
            let reason = self.with_tail(reason);
            // The first start's failure is the activation's error (or its own stderr line when
            // optional); a crash of a connected server is news.
            if ever_connected {
                tracing::warn!(server = %self.name, attempt, "mcp server down: {reason}");
            } else {
                tracing::debug!(server = %self.name, attempt, "mcp server did not start: {reason}");
            }
            self.set_phase(if ever_connected {
                Phase::Restarting { reason, attempt }
            } else {
                Phase::Failed(reason)
            });
            let wait = Duration::from_millis(self.config.backoff_ms(attempt));
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = stopped(&mut stop) => return,
            }
        }
    }

    /// One connection, from start to its end. `Ok` only when stopped; `Err((why, connected))`.
    async fn run_once(
        self: &Arc<Self>,
        ctx: &Context,
        served: &DynamicTools,
        stop: &mut watch::Receiver<bool>,
    ) -> Result<(), (String, bool)> {
        let changed = Arc::new(tokio::sync::Notify::new());
        let handler = Handler {
            server: self.name.clone(),
            changed: Arc::clone(&changed),
        };
        let limit = Duration::from_millis(self.config.startup_timeout_ms);
        self.fault.clear();
        let start = async {
            let (live, started) = connect::open(
                ctx,
                &self.name,
                &self.config,
                handler,
                Arc::clone(&self.stderr),
                Arc::clone(&self.fault),
            )
            .await?;
            let tools = list(&self.name, &live).await?;
            Ok::<_, String>((live, started, tools))
        };
        let (live, started, tools) = tokio::select! {
            r = tokio::time::timeout(limit, start) => match r {
                Ok(Ok(v)) => v,
                Ok(Err(e)) => return Err((e, false)),
                Err(_) => return Err((self.start_timeout(), false)),
            },
            () = stopped(stop) => return Ok(()),
        };
        self.install(served, tools)
            .await
            .map_err(|e| (format!("keel.tools refused its tools: {e}"), false))?;
        *self.peer.lock().unwrap_or_else(PoisonError::into_inner) = Some(live.peer().clone());
        self.set(|s| {
            s.phase = Phase::Connected;
            s.pid = started.pid;
            s.confinement = started.confinement;
        });
        let peer = live.peer().clone();
        let token = live.cancellation_token();
        let waiting = live.waiting();
        tokio::pin!(waiting);
        loop {
            tokio::select! {
                quit = &mut waiting => {
                    let why = match quit {
                        Ok(q) => format!("the connection ended ({q:?})"),
                        Err(e) => format!("the connection task failed: {e}"),
                    };
                    return Err((why, true));
                }
                () = changed.notified() => {
                    match peer.list_all_tools().await.map_err(|e| e.to_string()).and_then(|t| to_json(&self.name, &t)) {
                        Ok(tools) => {
                            if let Err(e) = self.install(served, tools).await {
                                tracing::warn!(server = %self.name, "re-registering after tools/list_changed failed: {e}");
                            }
                        }
                        Err(e) => {
                            let line = format!("keel: mcp server '{}': the changed tool list was refused, the previous one stays: {e}\n", self.name);
                            let _ = ctx.write_stderr(&keel_plugin_api::sdk::one_line(&line));
                        }
                    }
                }
                () = stopped(stop) => {
                    token.cancel();
                    let _ = tokio::time::timeout(Duration::from_secs(3), waiting).await;
                    return Ok(());
                }
            }
        }
    }

    /// Registers `tools` as this server's group of `served`, in place of its current
    /// registration (left alone when the definitions are the same).
    async fn install(self: &Arc<Self>, served: &DynamicTools, tools: Vec<McpTool>) -> Result<()> {
        served
            .replace(&self.name, crate::McpCall::set(self, &tools))
            .await?;
        self.set(|s| s.tools = tools);
        Ok(())
    }

    /// Runs one call of public tool `name`. Never an `Err`: failures are error results.
    pub async fn call(&self, name: &str, call_id: &str, args: Value) -> ToolResult {
        let status = self.status();
        let Some(original) = status
            .tools
            .iter()
            .find(|t| t.public == name)
            .map(|t| t.original.clone())
        else {
            return McpError::Unavailable(format!(
                "mcp server '{}' has no tool '{name}' now",
                self.name
            ))
            .result();
        };
        let peer = self
            .peer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let Some(peer) = peer.filter(|_| status.phase == Phase::Connected) else {
            return McpError::Unavailable(format!(
                "mcp server '{}' is unavailable: {}",
                self.name,
                status.phase.describe()
            ))
            .result();
        };
        let arguments = match args {
            Value::Object(_) => args,
            Value::Null => json!({}),
            other => {
                return McpError::ToolError(format!("arguments must be an object, not {other}"))
                    .result();
            }
        };
        let params: CallToolRequestParams = match serde_json::from_value(json!({
            "name": original,
            "arguments": arguments,
            "_meta": { "progressToken": call_id },
        })) {
            Ok(p) => p,
            Err(e) => return McpError::ToolError(format!("cannot build the call: {e}")).result(),
        };
        let limit = self.config.call_timeout_ms;
        let answer = if limit == 0 {
            Ok(peer.call_tool(params).await)
        } else {
            tokio::time::timeout(Duration::from_millis(limit), peer.call_tool(params)).await
        };
        match answer {
            Ok(Ok(r)) => match serde_json::to_value(&r) {
                Ok(v) => to_tool_result(&self.name, &v),
                Err(e) => McpError::CallFailed(format!("unreadable answer: {e}")).result(),
            },
            Ok(Err(rmcp::ServiceError::McpError(e))) => McpError::ToolError(format!(
                "mcp server '{}' refused the call: {}",
                self.name, e.message
            ))
            .result(),
            Ok(Err(e)) => McpError::CallFailed(self.with_tail(format!(
                "mcp server '{}' failed during the call: {e}; it is restarted",
                self.name
            )))
            .result(),
            Err(_) => McpError::Timeout(format!(
                "mcp server '{}': '{original}' ran past call_timeout_ms = {limit}; the request was cancelled",
                self.name
            ))
            .result(),
        }
    }
}

/// Resolves once `stop` turns true (or its sender is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await.map(|_| ());
}

/// `tools/list`, all pages, mapped.
async fn list(server: &str, live: &Live) -> Result<Vec<McpTool>, String> {
    let listed = live
        .peer()
        .list_all_tools()
        .await
        .map_err(|e| format!("tools/list failed: {e}"))?;
    to_json(server, &listed)
}

fn to_json(server: &str, listed: &[rmcp::model::Tool]) -> Result<Vec<McpTool>, String> {
    let values: Vec<Value> = listed
        .iter()
        .map(serde_json::to_value)
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| format!("tools/list: {e}"))?;
    map_tools(server, &values)
}
