//! Vocabulary shared by keel's proof plugins (test-only).
//!
//! It shows that a third party can declare its own events and services outside
//! `keel-plugin-api`: the declaring plugin lists them in its manifest and the kernel checks
//! modes and layouts exactly as for core events, and a contract ([`Counter`]) is declared here
//! with `contract!` as the core services are in plugin-api. Every proof plugin records what it does as one
//! line in the trace file named by `KEEL_PROOF_TRACE`, so tests assert on a file on disk, not on
//! anything a plugin says about itself.

use std::io::Write as _;

use keel_plugin_api::abi::{RString, RVec, StableAbi};
use keel_plugin_api::declare_event;

/// Appends one line to the trace file (no-op without `KEEL_PROOF_TRACE`).
pub fn trace(line: impl AsRef<str>) {
    let Some(path) = std::env::var_os("KEEL_PROOF_TRACE") else {
        return;
    };
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(f, "{}", line.as_ref());
    }
}

/// Whether `line` is in the trace file, waiting for it up to `limit_ms` (polling every 10 ms):
/// how proof plugins rendezvous with each other without timing assumptions.
pub async fn traced(line: &str, limit_ms: u64) -> bool {
    for _ in 0..=limit_ms / 10 {
        let seen = std::env::var_os("KEEL_PROOF_TRACE")
            .and_then(|p| std::fs::read_to_string(p).ok())
            .is_some_and(|t| t.lines().any(|l| l == line));
        if seen {
            return true;
        }
        keel_plugin_api::sdk::sleep(std::time::Duration::from_millis(10)).await;
    }
    false
}

/// A payload naming who dispatched it.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct Probe {
    /// Free-form tag set by the dispatcher.
    pub tag: RString,
}

/// A sync-waterfall payload: listeners append to `log` and bump `value`.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct Chain {
    /// Running value.
    pub value: i64,
    /// Who touched it, in order.
    pub log: RVec<RString>,
}

/// A serial decision.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The deciding listener's tag.
    pub by: RString,
}

declare_event! {
    /// Proof emit event.
    pub struct ProofEmit: emit("proof/emit") -> Probe;
}
declare_event! {
    /// Proof sync waterfall.
    pub struct ProofWaterfall: waterfall("proof/waterfall") -> Chain;
}
declare_event! {
    /// Proof async waterfall: the output is the chain after everyone ran.
    pub struct ProofAsyncWaterfall: async_waterfall("proof/async-waterfall") -> Chain => Chain;
}
declare_event! {
    /// Proof parallel event.
    pub struct ProofParallel: parallel("proof/parallel") -> Probe;
}
declare_event! {
    /// Proof serial event.
    pub struct ProofSerial: serial("proof/serial") -> Probe => Decision;
}
declare_event! {
    /// Same name as `proof/waterfall` but claims to be an emit: a lying plugin (EVT-01).
    pub struct LyingMode: emit("proof/waterfall") -> Chain;
}
declare_event! {
    /// Same name and mode as `proof/emit` but another payload type (layout check).
    pub struct LyingLayout: emit("proof/emit") -> Chain;
}
declare_event! {
    /// Declared by no manifest.
    pub struct Undeclared: emit("proof/undeclared") -> Probe;
}

keel_plugin_api::contract! {
    /// The counter service offered by `proof-provider`: a contract declared outside
    /// `keel-plugin-api`, served and called exactly as the core ones (issue 12 item 5).
    pub contract Counter = "proof.counter", version 1;
    provider CounterProvider;
    client CounterClient;
    /// Who answers, and how many calls it has answered (this one included).
    fn get() -> CounterReading;
}

/// The counter's answer.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CounterReading {
    /// The providing row.
    pub row: String,
    /// Its fiber id.
    pub fiber: u64,
    /// Calls answered by this fiber so far.
    pub calls: u64,
}

/// A facility two rows of `proof-graph` provide and require (a cycle when both are present).
pub const RING: &str = "proof.ring";
