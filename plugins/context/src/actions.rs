//! From the visible history to a plan's actions (issue 14 items 2 and 4): caps for oversized
//! originals, and the runs that bring a request down to its target, kept as long as possible
//! at `keep_recent_steps`; and the check a plan a `context/compact` listener returned must pass
//! before anything is appended.

use keel_plugin_api::codes::ContractCode;
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::context::CompactAction;
use keel_plugin_api::services::session::{SurfaceNode, SurfaceRole};

use crate::config::Strategy;
use crate::estimate::bytes_at;
use crate::manager::{Manager, Measure};
use crate::plan::{PlanNode, Role, plan_runs};
use crate::stub::STUB_BYTES;

/// Slack over the cap before a result is capped (the message's JSON framing).
const CAP_SLACK: usize = 512;

impl Manager {
    /// The actions for this view: caps of oversized originals, and — when `target` is set —
    /// runs that bring the request down to it (the newest groups kept as long as possible).
    pub(crate) fn plan(
        &self,
        view: &[SurfaceNode],
        now: &Measure,
        target: Option<u64>,
        bpt: f64,
    ) -> Vec<CompactAction> {
        let cap = self.config.result_cap_bytes;
        let mut nodes: Vec<PlanNode> = view.iter().map(plan_node).collect();
        let mut caps: Vec<usize> = Vec::new();
        for (i, n) in view.iter().enumerate() {
            if !n.replacement
                && matches!(n.role, SurfaceRole::Tool { .. })
                && n.message.len() > cap + CAP_SLACK
            {
                caps.push(i);
                nodes[i].bytes = (cap * 3 / 4 + CAP_SLACK) as u64;
            }
        }
        let saved: u64 = caps
            .iter()
            .map(|&i| (view[i].message.len() as u64).saturating_sub(nodes[i].bytes))
            .sum();
        let mut actions = Vec::new();
        let mut in_runs: Vec<(usize, usize)> = Vec::new();
        if let Some(target) = target {
            let need = now
                .bytes
                .saturating_sub(saved)
                .saturating_sub(bytes_at(target, bpt));
            let strategy = self.config.strategies.first().copied();
            let mut runs = plan_runs(&nodes, need, self.config.keep_recent_steps, STUB_BYTES);
            for keep in (1..self.config.keep_recent_steps).rev() {
                if runs
                    .bytes
                    .saturating_sub(STUB_BYTES * runs.ranges.len() as u64)
                    >= need
                {
                    break;
                }
                runs = plan_runs(&nodes, need, keep, STUB_BYTES);
            }
            for seqs in runs.seqs(&nodes) {
                actions.push(match strategy {
                    Some(Strategy::Summarise) => CompactAction::Summarise { seqs },
                    _ => CompactAction::Sink { seqs },
                });
            }
            in_runs = runs.ranges;
        }
        for i in caps {
            if !in_runs.iter().any(|&(s, e)| (s..e).contains(&i)) {
                actions.push(CompactAction::Cap { seq: view[i].seq });
            }
        }
        actions
    }
}

/// The planner's view of one node.
fn plan_node(n: &SurfaceNode) -> PlanNode {
    PlanNode {
        seq: n.seq,
        role: match &n.role {
            SurfaceRole::User => Role::User,
            SurfaceRole::Assistant { calls } => Role::Assistant { calls: calls.len() },
            SurfaceRole::Tool { .. } => Role::Tool,
        },
        bytes: n.message.len() as u64,
        stub: n.replacement
            && matches!(&n.role, SurfaceRole::Assistant { calls } if calls.is_empty()),
    }
}

/// A plan a listener returned must still name visible nodes the way the planner would: runs
/// of consecutive visible nodes, a cap on one tool result.
pub(crate) fn check_plan(actions: &[CompactAction], view: &[SurfaceNode]) -> Result<()> {
    let position = |seq: u64| view.iter().position(|n| n.seq == seq);
    let bad = |msg: String| Err(Error::coded(ContractCode::InvalidArguments, msg));
    for action in actions {
        match action {
            CompactAction::Cap { seq } => {
                if !position(*seq).is_some_and(|i| matches!(view[i].role, SurfaceRole::Tool { .. }))
                {
                    return bad(format!(
                        "context/compact: cap of seq {seq}, which is not a visible tool result"
                    ));
                }
            }
            CompactAction::Sink { seqs } | CompactAction::Summarise { seqs } => {
                let positions: Option<Vec<usize>> = seqs.iter().map(|s| position(*s)).collect();
                let ok = positions
                    .is_some_and(|p| !p.is_empty() && p.windows(2).all(|w| w[1] == w[0] + 1));
                if !ok {
                    return bad(format!(
                        "context/compact: the run {seqs:?} is not a contiguous run of visible messages"
                    ));
                }
            }
        }
    }
    Ok(())
}
