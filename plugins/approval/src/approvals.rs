//! The approval state and the audited one-shot ask (TOOL-03, TOOL-05): the row's mode, the
//! per-session overrides, and `ask`, which appends `approval/asked` before the decision and
//! `approval/decided` after it, and never returns a decision whose audit append failed.
//!
//! Session writes are behind [`Audit`] so the flow is tested without the kernel.

use keel_plugin_api::services::approval::ApprovalCode;
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use keel_plugin_api::events::Typed;
use keel_plugin_api::sdk::Result;
use keel_plugin_api::services::approval::{ApprovalOutcome, ApprovalRequest};
use serde_json::{Value, json};

use crate::policy::{CallView, Decision, Mode, decide};

/// An ask for a session without an open turn (TOOL-05).
pub const NO_OPEN_TURN: ApprovalCode = ApprovalCode::NoOpenTurn;

/// Who answers an ask: the `approval/answer` seam in the plugin, a script in tests.
pub trait Responder: Sync {
    /// The answer to `request` (audit id `id`); `unavailable` when nobody can answer.
    fn answer(
        &self,
        id: &str,
        request: &ApprovalRequest,
    ) -> impl Future<Output = ApprovalOutcome> + Send;
}

/// Nobody can answer (the headless driver without an approver plugin).
pub struct NoResponder;

impl Responder for NoResponder {
    async fn answer(&self, _id: &str, _request: &ApprovalRequest) -> ApprovalOutcome {
        ApprovalOutcome::Unavailable
    }
}

/// Where the audit pair goes.
pub trait Audit: Sync {
    /// Appends one event (`{type, data, ignorable}`) to `session_id`.
    fn append(&self, session_id: &str, event: Value) -> impl Future<Output = Result<()>> + Send;
}

/// The approval row's state.
pub struct Approvals {
    default_mode: Mode,
    overrides: Mutex<HashMap<String, Mode>>,
    /// Sessions with an open turn (from the `session/event` feed): an ask outside one is
    /// rejected before anything is appended (TOOL-05).
    open_turns: Mutex<std::collections::HashSet<String>>,
    next_id: AtomicU64,
    /// Distinguishes ids across processes writing the same session over time.
    epoch: u64,
}

impl Approvals {
    /// State with the row's `mode`.
    pub fn new(default_mode: Mode) -> Self {
        let epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        Approvals {
            default_mode,
            overrides: Mutex::new(HashMap::new()),
            open_turns: Mutex::default(),
            next_id: AtomicU64::new(1),
            epoch,
        }
    }

    fn overrides(&self) -> MutexGuard<'_, HashMap<String, Mode>> {
        // Single inserts only: a poisoned map is still whole.
        self.overrides.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The mode in force for `session_id` (its override, else the row's).
    pub fn mode(&self, session_id: Option<&str>) -> Mode {
        session_id
            .and_then(|s| self.overrides().get(s).copied())
            .unwrap_or(self.default_mode)
    }

    /// The session log said `turn/start` (`true`) or `turn/end` (`false`).
    pub fn turn(&self, session_id: &str, open: bool) {
        let mut turns = self.open_turns.lock().unwrap_or_else(|p| p.into_inner());
        if open {
            turns.insert(session_id.to_owned());
        } else {
            turns.remove(session_id);
        }
    }

    fn in_turn(&self, session_id: &str) -> bool {
        self.open_turns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(session_id)
    }

    /// Overrides the mode of one session (the headless driver's `--approval`).
    pub fn set_mode(&self, session_id: &str, mode: Mode) {
        self.overrides().insert(session_id.to_owned(), mode);
    }

    /// The `tools/pre-execute` contribution: `downstream` is the rest of the chain's output.
    /// A downstream answer that is not a decision is passed on untouched (the pipeline reports
    /// it as a broken stage).
    pub fn pre_execute(
        &self,
        session_id: &str,
        call: &CallView<'_>,
        downstream: Typed<Decision>,
    ) -> Typed<Decision> {
        let Ok(decision) = downstream.get() else {
            return downstream;
        };
        let decided = decide(self.mode(Some(session_id)), call, decision);
        Typed::new(&decided).unwrap_or(downstream)
    }

    /// The one-shot ask: audit, decide, audit. `Err` (an audit append failed) is never a
    /// decision; the pipeline then denies (TOOL-05).
    ///
    /// # Errors
    /// The session's error when either audit append fails.
    pub async fn ask<A: Audit, R: Responder>(
        &self,
        audit: &A,
        responder: &R,
        request: &ApprovalRequest,
    ) -> Result<ApprovalOutcome> {
        if !self.in_turn(&request.session_id) {
            return Err(keel_plugin_api::sdk::Error::coded(
                NO_OPEN_TURN,
                format!(
                    "session {} has no open turn: an approval can only be asked for a call of \
                     a running turn",
                    request.session_id
                ),
            ));
        }
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        let id = format!("apr_{:x}_{n}", self.epoch);
        let mut asked = json!({
            "id": id,
            "tool_name": request.tool_name,
            "call_id": request.call_id,
        });
        if let (Some(reason), Some(data)) = (&request.reason, asked.as_object_mut()) {
            data.insert("reason".into(), reason.as_str().into());
        }
        audit
            .append(
                &request.session_id,
                json!({"type": "approval/asked", "data": asked, "ignorable": true}),
            )
            .await?;
        let outcome = responder.answer(&id, request).await;
        audit
            .append(
                &request.session_id,
                json!({
                    "type": "approval/decided",
                    "data": {"id": id, "outcome": outcome},
                    "ignorable": true,
                }),
            )
            .await?;
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::block_on;
    use keel_plugin_api::sdk::Error;
    use pretty_assertions::assert_eq;

    #[derive(Default)]
    struct Log {
        events: Mutex<Vec<(String, Value)>>,
        fail_on: Option<&'static str>,
    }

    impl Audit for Log {
        async fn append(&self, session_id: &str, event: Value) -> Result<()> {
            if self.fail_on == event["type"].as_str() {
                return Err(Error::coded(
                    keel_plugin_api::services::session::SessionCode::Io,
                    "disk full",
                ));
            }
            self.events
                .lock()
                .unwrap()
                .push((session_id.to_owned(), event));
            Ok(())
        }
    }

    fn request(reason: Option<&str>) -> ApprovalRequest {
        ApprovalRequest {
            session_id: "s1".into(),
            tool_name: "write_file".into(),
            call_id: "c7".into(),
            reason: reason.map(str::to_owned),
            args: json!({"path": "a"}),
        }
    }

    #[test]
    fn tool05_ask_appends_the_audit_pair_and_headless_is_unavailable() {
        let approvals = Approvals::new(Mode::Ask);
        approvals.turn("s1", true);
        let log = Log::default();
        let outcome =
            block_on(approvals.ask(&log, &NoResponder, &request(Some("changes files")))).unwrap();
        assert_eq!(outcome, ApprovalOutcome::Unavailable);
        let events = log.events.lock().unwrap().clone();
        assert_eq!(events.len(), 2);
        assert!(events.iter().all(|(s, _)| s == "s1"));
        let (asked, decided) = (&events[0].1, &events[1].1);
        let id = asked["data"]["id"].clone();
        assert_eq!(
            *asked,
            json!({"type": "approval/asked", "ignorable": true, "data": {"id": id,
                "tool_name": "write_file", "call_id": "c7", "reason": "changes files"}})
        );
        assert_eq!(
            *decided,
            json!({"type": "approval/decided", "ignorable": true,
                "data": {"id": id, "outcome": "unavailable"}})
        );
    }

    struct Says(ApprovalOutcome, Mutex<Vec<String>>);

    impl Responder for Says {
        async fn answer(&self, id: &str, _request: &ApprovalRequest) -> ApprovalOutcome {
            self.1.lock().unwrap().push(id.to_owned());
            self.0
        }
    }

    #[test]
    fn tool05_the_responder_answers_between_the_audit_pair() {
        let approvals = Approvals::new(Mode::Ask);
        approvals.turn("s1", true);
        let log = Log::default();
        let says = Says(ApprovalOutcome::AllowedOnce, Mutex::default());
        let outcome = block_on(approvals.ask(&log, &says, &request(None))).unwrap();
        assert_eq!(outcome, ApprovalOutcome::AllowedOnce);
        let events = log.events.lock().unwrap().clone();
        // The responder was handed the audit id of the pair around it.
        assert_eq!(says.1.lock().unwrap()[0], events[0].1["data"]["id"]);
        assert_eq!(events[1].1["data"]["outcome"], "allowed-once");
    }

    #[test]
    fn tool05_reason_is_optional_and_ids_are_unique() {
        let approvals = Approvals::new(Mode::Ask);
        approvals.turn("s1", true);
        let log = Log::default();
        block_on(approvals.ask(&log, &NoResponder, &request(None))).unwrap();
        block_on(approvals.ask(&log, &NoResponder, &request(None))).unwrap();
        let events = log.events.lock().unwrap().clone();
        assert!(events[0].1["data"].get("reason").is_none());
        assert_ne!(events[0].1["data"]["id"], events[2].1["data"]["id"]);
    }

    #[test]
    fn tool05_no_decision_when_an_audit_append_fails() {
        let approvals = Approvals::new(Mode::Ask);
        approvals.turn("s1", true);
        for fail_on in ["approval/asked", "approval/decided"] {
            let log = Log {
                fail_on: Some(fail_on),
                ..Log::default()
            };
            let err = block_on(approvals.ask(&log, &NoResponder, &request(None))).unwrap_err();
            assert_eq!(err.code, "SESSION_IO");
        }
        // A failed `asked` means nothing was decided, so nothing else was written.
        let log = Log {
            fail_on: Some("approval/asked"),
            ..Log::default()
        };
        let _ = block_on(approvals.ask(&log, &NoResponder, &request(None)));
        assert!(log.events.lock().unwrap().is_empty());
    }

    // TOOL-05: outside an open turn the ask is rejected before anything is appended.
    #[test]
    fn tool05_an_ask_outside_an_open_turn_appends_nothing() {
        let approvals = Approvals::new(Mode::Ask);
        let log = Log::default();
        let err = block_on(approvals.ask(&log, &NoResponder, &request(None))).unwrap_err();
        assert!(err.is(NO_OPEN_TURN));
        assert!(log.events.lock().unwrap().is_empty());
        approvals.turn("s1", true);
        block_on(approvals.ask(&log, &NoResponder, &request(None))).unwrap();
        approvals.turn("s1", false);
        assert!(block_on(approvals.ask(&log, &NoResponder, &request(None))).is_err());
        assert_eq!(log.events.lock().unwrap().len(), 2);
    }

    #[test]
    fn per_session_mode_overrides_the_row() {
        let approvals = Approvals::new(Mode::Ask);
        approvals.set_mode("ci", Mode::Never);
        assert_eq!(approvals.mode(Some("ci")), Mode::Never);
        assert_eq!(approvals.mode(Some("other")), Mode::Ask);
        assert_eq!(approvals.mode(None), Mode::Ask);
    }

    /// A document as a listener's output, as it is (a foreign one may be no decision).
    fn j(v: Value) -> Typed<Decision> {
        Typed::from_payload(keel_plugin_api::sdk::Payload {
            text: v.to_string().into(),
            frozen: Default::default(),
        })
    }

    #[test]
    fn pre_execute_follows_the_session_mode_and_keeps_denials() {
        let approvals = Approvals::new(Mode::Ask);
        approvals.set_mode("ci", Mode::Never);
        let args = json!({});
        let write = CallView {
            name: "write_file",
            args: &args,
            mutating: true,
        };
        let allow = || j(json!({"kind": "allow"}));
        assert_eq!(
            approvals.pre_execute("s1", &write, allow()),
            j(json!({"kind": "ask", "reason": "write_file changes the workspace"}))
        );
        assert_eq!(approvals.pre_execute("ci", &write, allow()), allow());
        let deny = j(json!({"kind": "deny", "reason": "no"}));
        assert_eq!(approvals.pre_execute("s1", &write, deny.clone()), deny);
        // Not a decision: passed on untouched.
        let junk = j(json!({"kind": "maybe"}));
        assert_eq!(approvals.pre_execute("s1", &write, junk.clone()), junk);
    }
}
