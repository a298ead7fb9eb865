//! Escalation (SBX-08, B10): a tool call may ask to run in a wider mode than the effective one,
//! once, after the user approved it.
//!
//! The sandbox owns the whole of it, so a wider mode can never be had without the approval,
//! and the pipeline's one-shot ask (TOOL-03) is the only question the user sees:
//!
//! 1. its `tools/pre-execute` listener reads the call's `sandbox_permissions` +
//!    `justification`; a strictly wider mode turns the chain's decision into an `ask` with
//!    the reason `escalate sandbox to <mode>: <justification>` and records a *pending* grant;
//! 2. the pipeline asks `keel.approval` (audited) before anything runs; only an
//!    `allowed-once` lets the call on to `tools/guard`, where the sandbox's guard turns the
//!    pending grant into a grant;
//! 3. `confine` / `check_path` honour a wider mode only with that call's grant;
//! 4. `tools/result` drops whatever the call held.
//!
//! A request that does not widen never prompts and runs in the mode it names (equal or
//! narrower).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use keel_plugin_api::services::sandbox::{
    CallRef, EscalationRequest, SandboxCode, SandboxMode, is_wider,
};
use keel_plugin_api::services::tools::PreDecision;
use serde_json::Value;

/// Grants outstanding at once before the oldest is dropped: a bound on memory if results were
/// never observed (calls are short-lived; a real session holds a handful).
const MAX_GRANTS: usize = 256;

/// Where a call's escalation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Asked for; the pipeline's approval has not let the call through yet.
    Pending(SandboxMode),
    /// Approved: `confine` / `check_path` may use the mode for this call.
    Granted(SandboxMode),
}

/// Escalations, one per call.
#[derive(Debug, Default)]
pub struct Grants {
    inner: Mutex<HashMap<CallRef, (Stage, u64)>>,
    counter: std::sync::atomic::AtomicU64,
}

impl Grants {
    fn lock(&self) -> MutexGuard<'_, HashMap<CallRef, (Stage, u64)>> {
        // Single inserts and removals: a poisoned map is still whole.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn put(&self, call: CallRef, stage: Stage) {
        let n = self
            .counter
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut map = self.lock();
        if map.len() >= MAX_GRANTS
            && !map.contains_key(&call)
            && let Some(oldest) = map
                .iter()
                .min_by_key(|(_, (_, at))| *at)
                .map(|(k, _)| k.clone())
        {
            map.remove(&oldest);
        }
        map.insert(call, (stage, n));
    }

    /// Records that `call` asks for `mode` (not usable until [`Grants::approve`]).
    pub fn pend(&self, call: CallRef, mode: SandboxMode) {
        self.put(call, Stage::Pending(mode));
    }

    /// The call passed its approval: a pending escalation becomes a grant. `true` when there
    /// was one.
    pub fn approve(&self, call: &CallRef) -> bool {
        let mut map = self.lock();
        match map.get_mut(call) {
            Some((stage @ Stage::Pending(_), _)) => {
                if let Stage::Pending(mode) = *stage {
                    *stage = Stage::Granted(mode);
                }
                true
            }
            _ => false,
        }
    }

    /// The mode granted to `call`, if any (a pending one is not).
    pub fn granted(&self, call: &CallRef) -> Option<SandboxMode> {
        match self.lock().get(call) {
            Some((Stage::Granted(m), _)) => Some(*m),
            _ => None,
        }
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
    /// A wider mode without a grant: `ESCALATION_NOT_APPROVED`, with the message the tool
    /// returns.
    pub fn mode_for(
        &self,
        effective: SandboxMode,
        requested: Option<SandboxMode>,
        call: Option<&CallRef>,
    ) -> Result<SandboxMode, (SandboxCode, String)> {
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
            SandboxCode::EscalationNotApproved,
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

/// The pre-execute decision for an escalation, given the rest of the chain's `downstream`
/// decision: a deny stays (nobody is asked about a call that will not run); anything else
/// becomes the one ask, with the escalation's reason.
pub fn decision(req: &EscalationRequest, downstream: &PreDecision) -> Option<PreDecision> {
    if matches!(downstream, PreDecision::Deny { .. }) {
        return None;
    }
    Some(PreDecision::Ask {
        reason: Some(req.reason()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use SandboxMode::*;
    use serde_json::json;

    /// A pending escalation whose call then passed its approval.
    fn grant(g: &Grants, c: CallRef, mode: SandboxMode) {
        g.pend(c.clone(), mode);
        assert!(g.approve(&c));
    }

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
        assert_eq!(err.0, SandboxCode::EscalationNotApproved);
        grant(&g, call("c1"), DangerFullAccess);
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
        grant(&g, call("c3"), WorkspaceWrite);
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

    // SBX-08: a pending escalation is not a grant until the call passed its approval.
    #[test]
    fn sbx08_pending_is_not_granted_until_approved() {
        let g = Grants::default();
        g.pend(call("p"), DangerFullAccess);
        assert_eq!(g.granted(&call("p")), None);
        assert!(
            g.mode_for(WorkspaceWrite, Some(DangerFullAccess), Some(&call("p")))
                .is_err()
        );
        assert!(g.approve(&call("p")));
        assert_eq!(g.granted(&call("p")), Some(DangerFullAccess));
        assert!(!g.approve(&call("unknown")));
        g.release(&call("p"));
        assert_eq!(g.granted(&call("p")), None);
    }

    #[test]
    fn sbx08_the_escalation_asks_unless_the_chain_denied() {
        let req = EscalationRequest {
            mode: DangerFullAccess,
            justification: "why".into(),
        };
        assert_eq!(
            decision(
                &req,
                &PreDecision::Deny {
                    reason: "no".into()
                }
            ),
            None
        );
        for downstream in [
            PreDecision::Allow,
            PreDecision::Ask {
                reason: Some("x".into()),
            },
        ] {
            let ask = decision(&req, &downstream).unwrap();
            // The wire form is what it was.
            assert_eq!(
                serde_json::to_value(&ask).unwrap(),
                json!({"kind": "ask", "reason": "escalate sandbox to danger-full-access: why"})
            );
        }
    }

    #[test]
    fn grants_are_bounded() {
        let g = Grants::default();
        for i in 0..(MAX_GRANTS + 10) {
            g.pend(call(&i.to_string()), DangerFullAccess);
        }
        assert_eq!(g.len(), MAX_GRANTS);
        assert!(!g.approve(&call("0")), "the oldest was dropped");
        assert!(g.approve(&call(&(MAX_GRANTS + 9).to_string())));
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
