//! The agent seam (LOOP-01): drivers and surfaces drive the loop through `keel.agent` and never
//! depend on the concrete loop crate.

use serde::{Deserialize, Serialize};

use crate::services::driver::ProfileIdentity;

crate::contract! {
    /// The agent service (`agent-loop` plugin).
    pub contract AgentService = "keel.agent", version 2;
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
    /// Takes every input still queued for the agent (followups, interrupts not yet run and
    /// suspended tasks), in the order they would have run; the agent keeps running what it
    /// has in hand. A resident child's teardown decides where they go (SUB-02).
    fn take_pending(AgentSession) -> PendingInputs, since 2;
    /// The agent's state without waiting: running or idle, queued work, the scheduler's
    /// counts (SCH-06) and the last result.
    fn status(AgentSession) -> AgentStatus, since 2;
}

/// A child agent's place in the delegation tree (issue 16, SES-13/SUB-05).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lineage {
    /// The delegating session.
    pub parent_session: String,
    /// The parent's tool call that started the child.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_call_id: Option<String>,
    /// The child's depth (the root is 0).
    pub depth: u32,
    /// How the child's session starts.
    pub mode: ChildMode,
    /// Recorded as the session's `origin` (`"subagent"`, `"resident"`).
    pub origin: String,
}

/// How a child's session starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ChildMode {
    /// A fresh session; nothing of the parent is copied.
    Spawn,
    /// Seeded with the parent's events up to its last `turn/end` (SES-13).
    Fork,
}

/// What a child agent changes of the loop row's settings (its named profile, issue 16).
/// Absent fields keep the row's value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentOverrides {
    /// Provider of the call config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Model of the call config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Output token cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Model requests one turn may make.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<u64>,
    /// The tools this agent is offered and may call (by public name); absent: every tool
    /// but the child-only ones for a root agent, every tool for a child. A call to another
    /// tool is refused by the pipeline (`UNKNOWN_TOOL`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
}

/// `take_pending`'s answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingInputs {
    /// The inputs, in the order they would have run.
    pub inputs: Vec<PendingInput>,
}

/// One input that had not run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingInput {
    /// The message id it was queued under.
    pub id: String,
    /// Its text.
    pub content: String,
    /// Its level (`None`: queued work, not an interrupt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<InterruptLevel>,
    /// It was running and had been suspended by a higher interrupt.
    #[serde(default)]
    pub suspended: bool,
}

/// `status`'s answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentStatus {
    /// The session.
    pub session_id: String,
    /// A turn runs.
    pub running: bool,
    /// Inputs waiting (queued, interrupts, suspended).
    pub pending: u64,
    /// Tasks suspended so far (SCH-06).
    pub suspended: u64,
    /// Tasks resumed so far; equals `suspended` once drained.
    pub resumed: u64,
    /// The last assistant text.
    pub last_result: String,
    /// The agent's delegation depth (0 for a root agent; a child's from its lineage or, once
    /// resumed, its header), so a child's own children are counted from it (issue 16).
    #[serde(default)]
    pub depth: u32,
    /// The agent's session is kept in memory only: its children must be too.
    #[serde(default)]
    pub ephemeral: bool,
    /// Model requests the running turn may still make after the one in progress (its
    /// `max_steps` less those made); `None` when no turn runs. A child's step budget is
    /// drawn from it (issue 23 item 19).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps_left: Option<u64>,
}

/// An interrupt level (SCH-01, B16). Only strictly higher preempts; L4 is the kernel's
/// (SCH-10): `send` clamps an L4 to L3.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(try_from = "u8", into = "u8")]
pub enum InterruptLevel {
    /// Background.
    L1 = 1,
    /// A message.
    L2 = 2,
    /// Interactive: needs timely handling.
    L3 = 3,
    /// Critical: raised only by the loop itself (context overflow, a failed task).
    L4 = 4,
}

impl TryFrom<u8> for InterruptLevel {
    type Error = String;
    fn try_from(v: u8) -> std::result::Result<Self, String> {
        Ok(match v {
            1 => InterruptLevel::L1,
            2 => InterruptLevel::L2,
            3 => InterruptLevel::L3,
            4 => InterruptLevel::L4,
            other => return Err(format!("interrupt level {other} is not 1..=4")),
        })
    }
}

impl From<InterruptLevel> for u8 {
    fn from(l: InterruptLevel) -> u8 {
        l as u8
    }
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
    /// A child agent's lineage: recorded in its header, and with `fork` its seed (issue 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lineage: Option<Lineage>,
    /// A child agent's own settings (model row, tool set, step budget).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overrides: Option<AgentOverrides>,
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
    /// The level of an `interrupt` (default L1); ignored for the other targets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<InterruptLevel>,
}

/// `send`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageSent {
    /// The message id (`msg_<session>_<n>`).
    pub id: String,
    /// The level an interrupt was queued at (an L4 asked by a plugin is clamped to L3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<InterruptLevel>,
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
    /// A task of its own at [`SendMessage::level`] (SCH-01): it preempts a running task of a
    /// strictly lower level at the next step boundary, never inside a tool batch (SCH-07).
    Interrupt,
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
    /// Model requests of the interval that got an answer or an error (Claude Code's
    /// `num_turns` counts these, not keel's turns; issue 23 item 13).
    #[serde(default)]
    pub model_requests: u64,
    /// Wall time spent waiting on those requests, in ms (the result's `duration_api_ms`).
    #[serde(default)]
    pub api_ms: u64,
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
