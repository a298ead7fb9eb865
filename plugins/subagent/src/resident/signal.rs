//! A resident child out of context signals its parent (issue 16 item 2; SUB-06 "contextfull",
//! B16 "Resident subagent"). The child only signals; the parent pulls what it needs with
//! `resident_view` (or ends it with `resident_stop`).
//!
//! The signal follows the child's log, not `agent/error`: the loop emits `agent/error` only
//! for a turn a seam failure ended (a context fit that cannot fit, `CONTEXT_OVERFLOW`), while
//! a model call the server refused as over its window ends the turn with `turn/end {reason:
//! {kind:"error", error:{code:"CONTEXT_WINDOW_EXCEEDED"}}}` and no `agent/error` (the context
//! row's one compaction retry failing again ends it `CONTEXT_OVERFLOW` the same way). Every
//! such turn's `turn/end` reaches `session/event`, so that feed covers both, once each.
//!
//! The message is an interrupt on the parent asked at L4 (B16: a child's contextfull is the
//! parent's highest level); `keel.agent` `send` clamps a plugin's L4 to L3 (SCH-10), so it
//! arrives as L3 and runs as the parent's next task.

use std::sync::Arc;

use keel_plugin_api::events::session::SessionEventNotice;
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::agent::{InboxTarget, InterruptLevel, SendMessage};
use keel_plugin_api::services::context::ContextCode;
use keel_plugin_api::services::llm::LlmCode;
use serde_json::Value;

use super::Host;

/// The turn-ending codes that mean "out of context".
pub fn is_context_full(code: &str) -> bool {
    code == ContextCode::Overflow.as_str() || code == LlmCode::ContextWindowExceeded.as_str()
}

/// The `(code, message)` of a `turn/end` record that ended out of context.
pub fn context_full(record: &Value) -> Option<(String, String)> {
    if record["type"] != "turn/end" {
        return None;
    }
    let reason = &record["data"]["reason"];
    if reason["kind"] != "error" {
        return None;
    }
    let code = reason["error"]["code"].as_str()?;
    is_context_full(code).then(|| {
        let message = reason["error"]["message"].as_str().unwrap_or_default();
        (code.to_owned(), message.to_owned())
    })
}

/// The text the parent receives.
pub fn text(name: &str, child: &str, code: &str, message: &str) -> String {
    format!(
        "Resident child {name:?} (session {child}) ran out of context: [{code}] {message}; \
         resident_view it or resident_stop it"
    )
}

impl Host {
    /// The `session/event` listener's body: a live resident child's `turn/end` out of
    /// context sends its parent the signal (spawned: the notice comes inside the child's
    /// append).
    pub(super) fn on_session_event(self: &Arc<Self>, notice: &SessionEventNotice) -> Result<()> {
        if notice.kind.as_str() != "turn/end" {
            return Ok(());
        }
        let Some(r) = self.registry.by_child(notice.session_id.as_str()) else {
            return Ok(());
        };
        let record: Value = serde_json::from_str(notice.record.as_str())?;
        let Some((code, message)) = context_full(&record) else {
            return Ok(());
        };
        let host = Arc::clone(self);
        self.ctx.spawn(async move {
            let sent = host
                .agents
                .send(SendMessage {
                    session_id: r.parent.clone(),
                    content: text(&r.name, &r.child, &code, &message),
                    target: InboxTarget::Interrupt,
                    level: Some(InterruptLevel::L4),
                })
                .await;
            if let Err(e) = sent {
                tracing::warn!(
                    parent = %r.parent,
                    child = %r.child,
                    "resident child {:?} ran out of context; its parent could not be told: {e}",
                    r.name
                );
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn end(reason: Value) -> Value {
        json!({ "seq": 9, "type": "turn/end", "data": { "turn": 0, "reason": reason } })
    }

    #[test]
    fn sub06_only_a_turn_ended_out_of_context_is_a_signal() {
        let overflow = end(
            json!({"kind": "error", "error": {"code": "CONTEXT_OVERFLOW", "message": "still too long"}}),
        );
        assert_eq!(
            context_full(&overflow),
            Some(("CONTEXT_OVERFLOW".into(), "still too long".into()))
        );
        let window = end(
            json!({"kind": "error", "error": {"code": "CONTEXT_WINDOW_EXCEEDED", "message": "m"}}),
        );
        assert_eq!(
            context_full(&window).map(|c| c.0).as_deref(),
            Some("CONTEXT_WINDOW_EXCEEDED")
        );
        for other in [
            end(json!({"kind": "error", "error": {"code": "LLM_SERVER", "message": "500"}})),
            end(json!({"kind": "completed"})),
            end(json!({"kind": "aborted", "reason": {"kind": "user"}})),
            json!({"type": "turn/start", "data": {"reason": {"kind": "error", "error": {"code": "CONTEXT_OVERFLOW"}}}}),
        ] {
            assert_eq!(context_full(&other), None, "{other}");
        }
    }

    #[test]
    fn the_signal_names_the_child_its_session_and_what_to_do() {
        let t = text("scout", "s-1", "CONTEXT_OVERFLOW", "too long");
        assert_eq!(
            t,
            "Resident child \"scout\" (session s-1) ran out of context: [CONTEXT_OVERFLOW] too long; resident_view it or resident_stop it"
        );
    }
}
