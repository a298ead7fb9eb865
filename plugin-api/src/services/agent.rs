//! The agent seam (LOOP-01): drivers and surfaces drive the loop through `keel.agent` and never
//! depend on the concrete loop crate.

use serde::{Deserialize, Serialize};

use crate::sdk::{CallHandle, Service};

/// The agent service (`agent-loop` plugin). Methods, with JSON shapes:
///
/// - `"create"`: `{cwd, session_id?, ephemeral?, max_turns?, profile?}` → `{session_id}`.
///   Checks the model route first (`keel.llm` `"check"`): a missing credential fails here,
///   before any request, with `CREDENTIAL_MISSING` naming the reference. `profile`
///   (`{name, digest}`, the driver's [`ProfileIdentity`](crate::services::driver::ProfileIdentity))
///   is passed on to `keel.session` `create`, which records it with the session.
/// - `"resume"`: `{session_id, max_turns?}` → `{session_id, recovered}`: opens the session
///   (crash closers committed) and logs `request/header{reason:"resume"}` before the next call.
/// - `"send"`: `{session_id, content, target: "followup"|"steer"|"inject"}` → `{id}` (LOOP-02).
/// - `"wait_idle"`: `{session_id}` → [`RunReport`] once the agent is idle.
/// - `"abort"`: `{session_id}` → `{}`: the running turn ends `aborted{user}`; its tool batch is
///   cancelled first (running bodies stopped, every call answered; see `Tools` `"cancel"`).
/// - `"close"`: `{session_id}` → `{}`: stops the loop, awaits its exit, flushes and closes the
///   session (LOOP-07).
#[derive(Debug, Clone, Copy)]
pub struct Agent;

impl Service for Agent {
    const NAME: &'static str = "keel.agent";
    type Handle = CallHandle;
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

/// What `"wait_idle"` answers: the interval from the first message to idle (LOOP-25).
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
