//! The compaction planner: which runs of the visible history to replace (CTX-05, CTX-06).
//!
//! Pure: it sees the visible nodes (seq, role, size) and answers runs of seqs; the manager
//! turns them into replacement events. The rules are the session projection's, so every plan
//! it answers appends cleanly and every projection keeps the tool-call contract:
//!
//! - a run is a contiguous sequence of whole **units**: a complete tool-call group (an
//!   assistant message and all its results: a call and its results are hidden together), or
//!   an assistant message without calls (text, or an earlier stub);
//! - user messages are never in a run (the task statement and every instruction stay
//!   verbatim), nor the newest `keep_recent` units, nor a group whose results are not all in;
//! - **seq closure**: a replacement `{start, end}` shadows every visible node whose seq is in
//!   `start..=end`. Nodes show in anchor order, and an earlier replacement sits at its first
//!   shadowed node's place with its own (late) seq, so a run is only valid when no visible
//!   node outside it has a seq between the run's smallest and largest. The planner grows or
//!   shrinks a run until that holds.
//!
//! Runs are taken oldest first, each only as long as needed to free the bytes asked for
//! (rounded up to the closure), so the newest history stays verbatim as long as possible.

/// What a visible node is, for planning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A user message: never replaced.
    User,
    /// An assistant message with `calls` tool calls.
    Assistant {
        /// Number of calls.
        calls: usize,
    },
    /// A tool result.
    Tool,
}

/// One visible node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanNode {
    /// The seq of the event it is projected from.
    pub seq: u64,
    /// Its role.
    pub role: Role,
    /// Its size on the wire (the frozen message's bytes).
    pub bytes: u64,
    /// It is an earlier compaction's stub (a replacement assistant message).
    pub stub: bool,
}

/// A unit: the nodes `start..end` replaced together or not at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Unit {
    start: usize,
    end: usize,
    sinkable: bool,
    only_stub: bool,
    bytes: u64,
}

fn units(nodes: &[PlanNode]) -> Vec<Unit> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < nodes.len() {
        let n = &nodes[i];
        let (end, sinkable) = match n.role {
            Role::User | Role::Tool => (i + 1, false),
            Role::Assistant { calls } => {
                let results = nodes[i + 1..]
                    .iter()
                    .take_while(|m| m.role == Role::Tool)
                    .count();
                (i + 1 + results, results == calls)
            }
        };
        out.push(Unit {
            start: i,
            end,
            sinkable,
            only_stub: n.stub,
            bytes: nodes[i..end].iter().map(|m| m.bytes).sum(),
        });
        i = end;
    }
    out
}

/// Whether replacing `nodes[start..end]` by one `{start: min seq, end: max seq}` shadows
/// exactly those nodes.
fn closed(nodes: &[PlanNode], start: usize, end: usize) -> bool {
    let run = &nodes[start..end];
    let (Some(lo), Some(hi)) = (
        run.iter().map(|n| n.seq).min(),
        run.iter().map(|n| n.seq).max(),
    ) else {
        return false;
    };
    nodes[..start]
        .iter()
        .chain(&nodes[end..])
        .all(|n| n.seq < lo || n.seq > hi)
}

/// The runs chosen, as node index ranges, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Runs {
    /// `start..end` index ranges into the nodes.
    pub ranges: Vec<(usize, usize)>,
    /// Bytes the runs hold (before their stubs replace them).
    pub bytes: u64,
}

impl Runs {
    /// The seqs of each run, in display order.
    pub fn seqs(&self, nodes: &[PlanNode]) -> Vec<Vec<u64>> {
        self.ranges
            .iter()
            .map(|&(s, e)| nodes[s..e].iter().map(|n| n.seq).collect())
            .collect()
    }
}

/// Chooses runs freeing at least `need` bytes where possible, each replaced by a stub of about
/// `stub_bytes`, keeping the newest `keep_recent` units verbatim.
pub fn plan_runs(nodes: &[PlanNode], need: u64, keep_recent: usize, stub_bytes: u64) -> Runs {
    let mut units = units(nodes);
    // The newest `keep_recent` units that could be replaced stay (and everything after them).
    let mut kept = 0;
    for u in units.iter_mut().rev() {
        if kept >= keep_recent {
            break;
        }
        if u.sinkable {
            kept += 1;
            u.sinkable = false;
        }
    }
    let mut runs = Runs::default();
    let mut freed = 0u64;
    let mut i = 0;
    while i < units.len() && freed < need {
        if !units[i].sinkable {
            i += 1;
            continue;
        }
        let seg_end = units[i..]
            .iter()
            .position(|u| !u.sinkable)
            .map_or(units.len(), |p| i + p);
        let segment = &units[i..seg_end];
        // The shortest prefix that frees what is still needed…
        let mut total = 0u64;
        let mut enough = segment.len();
        for (k, u) in segment.iter().enumerate() {
            total += u.bytes;
            if total.saturating_sub(stub_bytes) >= need - freed {
                enough = k + 1;
                break;
            }
        }
        // …grown to the closure, else the longest closed prefix that does any good.
        let worth = |p: usize| {
            let seg = &segment[..p];
            let bytes: u64 = seg.iter().map(|u| u.bytes).sum();
            !seg.iter().all(|u| u.only_stub)
                && bytes > stub_bytes
                && closed(nodes, seg[0].start, seg[p - 1].end)
        };
        let chosen = (enough..=segment.len())
            .find(|&p| worth(p))
            .or_else(|| (1..enough).rev().find(|&p| worth(p)));
        if let Some(p) = chosen {
            let (start, end) = (segment[0].start, segment[p - 1].end);
            let bytes: u64 = segment[..p].iter().map(|u| u.bytes).sum();
            runs.ranges.push((start, end));
            runs.bytes += bytes;
            freed += bytes.saturating_sub(stub_bytes);
        }
        i = seg_end;
    }
    runs
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
