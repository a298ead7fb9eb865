//! The agent seam (LOOP-01): drivers and surfaces drive the loop through `keel.agent` and never
//! depend on the concrete loop crate.

use serde::{Deserialize, Serialize};

use crate::services::driver::ProfileIdentity;

crate::contract! {
    /// The agent service (`agent-loop` plugin).
    pub contract AgentService = "keel.agent", version 1;
    provider AgentProvider;
    client AgentClient;
    /// Creates a session and starts its loop. Checks the model route first (`keel.llm`
    /// `check`): a missing credential fails here, before any request, with
    /// `CREDENTIAL_MISSING` naming the reference. `profile` is passed on to `keel.session`
    /// `create`, which records it with the session.
    fn create(CreateAgent) -> AgentCreated;
    /// Opens a stored session (crash closers committed) and starts its loop; logs
    /// `request/header{reason:"resume"}` before the next call.
    fn resume(ResumeAgent) -> AgentResumed;
    /// Queues a message for the session's loop (LOOP-02).
    fn send(SendMessage) -> MessageSent;
    /// Waits until the agent is idle and reports the interval (LOOP-25).
    fn wait_idle(AgentSession) -> RunReport;
    /// The running turn ends `aborted{user}`; its tool batch is cancelled first (running
    /// bodies stopped, every call answered; see `Tools` `cancel`).
    fn abort(AgentSession) -> ();
    /// Stops the loop, awaits its exit, flushes and closes the session (LOOP-07).
    fn close(AgentSession) -> ();
}

/// `create`'s request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateAgent {
    /// The session's working directory.
    pub cwd: String,
    /// A chosen session id (default: the session row picks one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Nothing is written to disk.
    #[serde(default)]
    pub ephemeral: bool,
    /// Turn budget of the loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u64>,
    /// The driver's profile, recorded with the session (issue 11 item 7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<ProfileIdentity>,
}

/// `create`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentCreated {
    /// The new session's id.
    pub session_id: String,
}

/// `resume`'s request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResumeAgent {
    /// The stored session.
    pub session_id: String,
    /// Turn budget of the loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u64>,
}

/// `resume`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentResumed {
    /// The session's id.
    pub session_id: String,
    /// Closers the load committed for a crashed session.
    #[serde(default)]
    pub recovered: u64,
}

/// `send`'s request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendMessage {
    /// The live session.
    pub session_id: String,
    /// The user message.
    pub content: String,
    /// Where it goes (default `followup`).
    #[serde(default = "InboxTarget::followup")]
    pub target: InboxTarget,
}

/// `send`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageSent {
    /// The message id (`msg_<session>_<n>`).
    pub id: String,
}

/// The request of the methods that only name a live session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentSession {
    /// The live session.
    pub session_id: String,
}

impl AgentSession {
    /// The request for `session_id`.
    pub fn new(session_id: impl Into<String>) -> Self {
        AgentSession {
            session_id: session_id.into(),
        }
    }
}

crate::error_codes! {
    /// The agent loop (`keel.agent`).
    pub enum AgentCode in "agent" {
        /// No live agent for the session (never created or resumed here, or closed).
        NoAgent = "NO_AGENT", by "`keel.agent` `send`/`wait_idle`/`abort`/`close`", retry Never;
        /// The agent's loop stopped before it became idle (the row is unloading).
        Stopped = "AGENT_STOPPED", by "`keel.agent` `wait_idle`", retry Never;
    }
}

/// Where a sent message goes (LOOP-02).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InboxTarget {
    /// Its own next turn; wakes the loop.
    Followup,
    /// The next step of the running turn, or a new turn when idle.
    Steer,
    /// The next step, without waking an idle loop.
    Inject,
}

impl InboxTarget {
    /// `followup` (the default of [`SendMessage::target`]).
    pub const fn followup() -> Self {
        InboxTarget::Followup
    }
}

/// What `wait_idle` answers: the interval from the first message to idle (LOOP-25).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct RunReport {
    /// Session id.
    pub session_id: String,
    /// Turns run in the interval.
    pub num_turns: u64,
    /// The last turn's `turn/end` reason (`{"kind":"completed"}`, `{"kind":"error","error":…}`).
    pub turn_end_reason: serde_json::Value,
    /// The last assistant text of the interval.
    pub result: String,
    /// Summed usage of the model answers that reported it.
    pub usage: crate::services::llm::Usage,
    /// Model answers of the interval that came without usage (a server that ignores
    /// `stream_options.include_usage`): when non-zero, the interval's usage is unknown, and
    /// [`RunReport::usage`] holds only what the other answers reported (issue 11 item 5).
    #[serde(default)]
    pub usage_unknown_calls: u64,
}

impl RunReport {
    /// The reason's kind (`completed`, `error`, `aborted`, `max-turns`, …).
    pub fn reason_kind(&self) -> &str {
        self.turn_end_reason
            .get("kind")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("unknown")
    }
}
