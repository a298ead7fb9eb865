//! The row's listeners: what happens in an editor's session reaches the client as
//! `session/update` notifications while the prompt runs.
//!
//! - `session/event` (every appended log event) → [`map::updates`]: the user's and the agent's
//!   messages, tool calls and their results, plans; a `turn/end` tells the waiting prompt that
//!   the turn's updates are out;
//! - `agent/delta` (the loop's stream pieces) → `agent_message_chunk` / `agent_thought_chunk`
//!   as they arrive; that step's `assistant/message` then adds no text;
//! - `approval/answer` → `session/request_permission` ([`crate::permission`]).
//!
//! Sessions no ACP client opened here are left alone (`None` from [`Shared::session`]); a
//! listener costs a map lookup while `keel acp` runs and an `Option` check otherwise.

use agent_client_protocol::v1::schema::{ContentBlock, ContentChunk, SessionUpdate};
use keel_plugin_api::events::agent::{AgentPoint, DeltaData, DeltaKind};
use keel_plugin_api::events::session::SessionEventNotice;
use serde_json::Value;

use crate::map;
use crate::state::Shared;

/// One `session/event` notice.
pub fn on_event(shared: &Shared, n: &SessionEventNotice) {
    let Some(tracked) = shared.session(n.session_id.as_str()) else {
        return;
    };
    let Ok(record) = serde_json::from_str::<Value>(n.record.as_str()) else {
        tracing::warn!(session = %n.session_id, seq = n.seq, "a session event that is not JSON");
        return;
    };
    let data = record.get("data").unwrap_or(&Value::Null);
    let at = |k: &str| data.get(k).and_then(Value::as_u64);
    let streamed = match (at("turn"), at("step")) {
        (Some(turn), Some(step)) => tracked.streamed(turn, step),
        _ => false,
    };
    let seen = map::Seen {
        replay: false,
        streamed,
        cwd: &tracked.cwd,
    };
    for update in map::updates(n.kind.as_str(), data, seen) {
        shared.notify(&tracked.id, update);
    }
    if n.kind.as_str() == "turn/end" {
        tracked.turn_ended();
    }
}

/// One `agent/delta`.
pub fn on_delta(shared: &Shared, p: &AgentPoint<DeltaData>) {
    let Some(tracked) = shared.session(p.session_id.as_str()) else {
        return;
    };
    let Ok(delta) = p.data.get() else {
        return;
    };
    if delta.text.is_empty() {
        return;
    }
    tracked.mark_streamed(p.turn, p.step);
    let chunk = ContentChunk::new(ContentBlock::from(delta.text));
    let update = match delta.kind {
        DeltaKind::Text => SessionUpdate::AgentMessageChunk(chunk),
        DeltaKind::Reasoning => SessionUpdate::AgentThoughtChunk(chunk),
    };
    shared.notify(&tracked.id, update);
}
