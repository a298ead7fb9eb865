//! `subagent/*` events: a child agent's life as its parent sees it (issue 16). Declared by the
//! `subagent` row, which starts children; the headless driver follows them so that a
//! `stream-json` consumer sees the whole tree.
//!
//! Each event's `data` is typed ([`ChildStartedData`], [`ChildEndedData`]) and crosses the ABI
//! as a [`Typed`] value (issue 24 item 2); the wire JSON is what it was.

use abi_stable::StableAbi;
use abi_stable::std_types::RString;
use serde::{Deserialize, Serialize};

use super::typed::Typed;
use crate::declare_event;
use crate::services::subagent::ChildOutcome;

/// How a child was started.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StartMode {
    /// A fresh session (the `agent` tool's `spawn`).
    Spawn,
    /// A copy of the parent's history (the `agent` tool's `fork`).
    Fork,
    /// A named resident child.
    Resident,
}

/// `subagent/started`'s data. Wire form: `{"agent":name,"mode":"spawn"|"fork"|"resident",
/// "depth":n}`, a resident child adds `"resident":NAME`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildStartedData {
    /// The agent definition the child runs (`null` for the default agent).
    pub agent: Option<String>,
    /// How it was started.
    pub mode: StartMode,
    /// Its depth in the tree (the root session is 0).
    pub depth: u32,
    /// A resident child's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resident: Option<String>,
}

/// `subagent/ended`'s data. Wire form: `{"outcome":…,"code"?:…}`; a stopped resident child
/// (`"outcome":"stopped"`) adds `"resident"`, `"residual"` and `"inputs"`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildEndedData {
    /// How it ended.
    pub outcome: ChildOutcome,
    /// The failure's code, when it failed with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// A resident child's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resident: Option<String>,
    /// A stopped resident's residual state for its pending inputs (`keep`, `drop`, `park`,
    /// `return`: the `subagent` row's vocabulary).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub residual: Option<String>,
    /// How many pending inputs the stop took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<u64>,
}

/// A child session and where it hangs in the tree, with the event's data `D`.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
#[sabi(unsafe_unconstrained(D))]
pub struct ChildPoint<D> {
    /// The delegating session.
    pub parent_session: RString,
    /// The parent's tool call that started the child (empty for a resident child started
    /// outside a call).
    pub parent_call_id: RString,
    /// The child's session id.
    pub child_session: RString,
    /// The event's data.
    pub data: Typed<D>,
}

declare_event! {
    /// A child's session exists and its loop is about to get its task. `data`: a
    /// `ChildStartedData` (`{"agent":name,"mode":"spawn"|"fork"|"resident","depth":n}`, a
    /// resident child adds `"resident":NAME`).
    pub struct ChildStarted: emit("subagent/started") -> ChildPoint<ChildStartedData>;
}
declare_event! {
    /// A child reached a terminal state and its session is closed. `data`: a `ChildEndedData`
    /// (`{"outcome":"completed"|"failed"|"timeout"|"cancelled"|"stopped","code"?:…}`).
    pub struct ChildEnded: emit("subagent/ended") -> ChildPoint<ChildEndedData>;
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    // The typed data writes the JSON the untyped one did (stream-json and hooks see it).
    #[test]
    fn the_data_keeps_its_wire_form() {
        let started = ChildStartedData {
            agent: None,
            mode: StartMode::Fork,
            depth: 1,
            resident: None,
        };
        assert_eq!(
            serde_json::to_value(&started).unwrap(),
            json!({"agent": null, "mode": "fork", "depth": 1})
        );
        let stopped = ChildEndedData {
            outcome: ChildOutcome::Stopped,
            code: None,
            resident: Some("r".into()),
            residual: Some("keep".into()),
            inputs: Some(2),
        };
        assert_eq!(
            serde_json::to_value(&stopped).unwrap(),
            json!({"outcome": "stopped", "resident": "r", "residual": "keep", "inputs": 2})
        );
        let failed = ChildEndedData {
            outcome: ChildOutcome::Failed,
            code: Some("TIMEOUT".into()),
            resident: None,
            residual: None,
            inputs: None,
        };
        assert_eq!(
            serde_json::to_value(&failed).unwrap(),
            json!({"outcome": "failed", "code": "TIMEOUT"})
        );
    }
}
