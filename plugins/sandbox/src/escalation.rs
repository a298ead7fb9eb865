//! Escalation (SBX-08, B10): a tool call may ask to run in a wider mode than the effective one,
//! once, after the user approved it.
//!
//! The sandbox owns the whole of it, so a wider mode can never be had without the approval:
//! its `tools/pre-execute` listener reads the call's `sandbox_permissions` + `justification`,
//! asks `keel.approval` (audited) before anything runs, and records a grant for that one call;
//! `confine` / `check_path` honour a wider mode only with that call's grant; the grant is
//! dropped when the call's result is out (`tools/result`). A request that does not widen
//! never prompts and runs in the mode asked for (equal or narrower).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use keel_plugin_api::services::sandbox::{
    CallRef, ESCALATION_NOT_APPROVED, EscalationRequest, SandboxMode, is_wider,
};
use serde_json::{Value, json};

/// Grants outstanding at once before the oldest is dropped: a bound on memory if results were
/// never observed (calls are short-lived; a real session holds a handful).
const MAX_GRANTS: usize = 256;

/// Approved escalations, one per call.
#[derive(Debug, Default)]
pub struct Grants {
    inner: Mutex<HashMap<CallRef, (SandboxMode, u64)>>,
    counter: std::sync::atomic::AtomicU64,
}

impl Grants {
    fn lock(&self) -> MutexGuard<'_, HashMap<CallRef, (SandboxMode, u64)>> {
        // Single inserts and removals: a poisoned map is still whole.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records an approved escalation of `call` to `mode`.
    pub fn grant(&self, call: CallRef, mode: SandboxMode) {
        let n = self
            .counter
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut map = self.lock();
        if map.len() >= MAX_GRANTS
            && let Some(oldest) = map
                .iter()
                .min_by_key(|(_, (_, at))| *at)
                .map(|(k, _)| k.clone())
        {
            map.remove(&oldest);
        }
        map.insert(call, (mode, n));
    }

    /// The mode granted to `call`, if any.
    pub fn granted(&self, call: &CallRef) -> Option<SandboxMode> {
        self.lock().get(call).map(|(m, _)| *m)
    }

    /// Drops `call`'s grant (its result is out).
    pub fn release(&self, call: &CallRef) {
        self.lock().remove(call);
    }

    /// How many grants are outstanding.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The mode a `confine` / `check_path` request runs in: `requested` when it is not wider
    /// than `effective`, or when `call` holds a grant for exactly it.
    ///
    /// # Errors
    /// A wider mode without a grant: [`ESCALATION_NOT_APPROVED`], with the message the tool
    /// returns.
    pub fn mode_for(
        &self,
        effective: SandboxMode,
        requested: Option<SandboxMode>,
        call: Option<&CallRef>,
    ) -> Result<SandboxMode, (&'static str, String)> {
        let Some(requested) = requested else {
            return Ok(effective);
        };
        if !is_wider(effective, requested) {
            return Ok(requested);
        }
        if call.and_then(|c| self.granted(c)) == Some(requested) {
            return Ok(requested);
        }
        Err((
            ESCALATION_NOT_APPROVED,
            format!(
                "running in {} mode (wider than the effective {} mode) needs an approved \
                 escalation for this call, and there is none",
                requested.as_str(),
                effective.as_str()
            ),
        ))
    }
}

/// What the pre-execute listener does with a call, before the rest of the chain has spoken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// No escalation asked for, or one that does not widen: pass the chain's decision on.
    PassOn,
    /// Malformed escalation arguments: deny with this reason.
    Deny(String),
    /// A real escalation: ask with this request (if the chain did not deny already).
    Ask(EscalationRequest),
}

/// SBX-08 for one call's arguments under the `effective` mode.
pub fn plan(effective: SandboxMode, args: &Value) -> Plan {
    match EscalationRequest::from_args(args) {
        Ok(None) => Plan::PassOn,
        Err(why) => Plan::Deny(why),
        Ok(Some(req)) if is_wider(effective, req.mode) => Plan::Ask(req),
        Ok(Some(_)) => Plan::PassOn,
    }
}

/// The denial when the approver did not allow the escalation.
pub fn not_approved(req: &EscalationRequest, outcome: &str) -> Value {
    json!({
        "kind": "deny",
        "reason": format!(
            "the escalation to {} mode was not approved ({outcome}); nothing was run. \
             Retry without {} to run in the current mode.",
            req.mode.as_str(),
            keel_plugin_api::services::sandbox::SANDBOX_PERMISSIONS_ARG,
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use SandboxMode::*;

    fn call(id: &str) -> CallRef {
        CallRef {
            session_id: "s".into(),
            call_id: id.into(),
        }
    }

    // SBX-08: a wider mode needs that call's grant, for exactly that mode; the grant is per
    // call and goes with release.
    #[test]
    fn sbx08_wider_needs_the_calls_grant() {
        let g = Grants::default();
        assert_eq!(g.mode_for(WorkspaceWrite, None, None), Ok(WorkspaceWrite));
        assert_eq!(
            g.mode_for(WorkspaceWrite, Some(ReadOnly), None),
            Ok(ReadOnly)
        );
        let err = g
            .mode_for(WorkspaceWrite, Some(DangerFullAccess), Some(&call("c1")))
            .unwrap_err();
        assert_eq!(err.0, ESCALATION_NOT_APPROVED);
        g.grant(call("c1"), DangerFullAccess);
        assert_eq!(
            g.mode_for(WorkspaceWrite, Some(DangerFullAccess), Some(&call("c1"))),
            Ok(DangerFullAccess)
        );
        // Another call, or no call at all, does not share it.
        assert!(
            g.mode_for(WorkspaceWrite, Some(DangerFullAccess), Some(&call("c2")))
                .is_err()
        );
        assert!(
            g.mode_for(WorkspaceWrite, Some(DangerFullAccess), None)
                .is_err()
        );
        // A grant for workspace-write does not open danger-full-access.
        g.grant(call("c3"), WorkspaceWrite);
        assert!(
            g.mode_for(ReadOnly, Some(DangerFullAccess), Some(&call("c3")))
                .is_err()
        );
        g.release(&call("c1"));
        assert!(
            g.mode_for(WorkspaceWrite, Some(DangerFullAccess), Some(&call("c1")))
                .is_err()
        );
    }

    #[test]
    fn grants_are_bounded() {
        let g = Grants::default();
        for i in 0..(MAX_GRANTS + 10) {
            g.grant(call(&i.to_string()), DangerFullAccess);
        }
        assert_eq!(g.len(), MAX_GRANTS);
        assert!(g.granted(&call("0")).is_none());
        assert!(g.granted(&call(&(MAX_GRANTS + 9).to_string())).is_some());
    }

    // SBX-08: a request that does not widen never prompts; malformed ones are denied.
    #[test]
    fn sbx08_plan_prompts_only_for_wider_modes() {
        let ask = json!({"command": "x", "sandbox_permissions": "danger-full-access",
            "justification": "write to ~/.cache"});
        assert!(matches!(plan(WorkspaceWrite, &ask), Plan::Ask(r) if r.mode == DangerFullAccess));
        assert_eq!(plan(DangerFullAccess, &ask), Plan::PassOn);
        let same = json!({"sandbox_permissions": "workspace-write", "justification": "x"});
        assert_eq!(plan(WorkspaceWrite, &same), Plan::PassOn);
        assert!(matches!(plan(ReadOnly, &same), Plan::Ask(_)));
        assert_eq!(plan(WorkspaceWrite, &json!({"command": "x"})), Plan::PassOn);
        assert!(matches!(
            plan(
                WorkspaceWrite,
                &json!({"sandbox_permissions": "danger-full-access"})
            ),
            Plan::Deny(_)
        ));
    }
}
