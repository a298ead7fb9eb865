//! `agent/*` events: the loop's seams (ARCHITECTURE §5, requirements B1, LOOP-08…12).
//!
//! Turn and step boundaries are durable session events, not emits; these are the decision
//! points around them and the live notifications.

use abi_stable::StableAbi;
use abi_stable::std_types::RString;

use super::json::Json;
use crate::declare_event;

/// Where the loop is: the session, the open turn and step.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct AgentPoint {
    /// Session id.
    pub session_id: RString,
    /// Open turn.
    pub turn: u64,
    /// Step about to run or running.
    pub step: u64,
    /// Event-specific JSON (documented per event).
    pub data: Json,
}

declare_event! {
    /// Step admission (LOOP-10). `data`: `{"messages":[UserMessage]}`, the claimed batch.
    /// Output: `{"kind":"enter","messages":[…]}` or `{"kind":"reject"}`. The checkpoint flushes
    /// here (B6). The terminal enters the batch unchanged.
    pub struct PreStep: async_waterfall("agent/pre-step") -> AgentPoint => Json;
}
declare_event! {
    /// Builds the frozen call configuration. `data`: the default `LlmCallConfig`. Output: the
    /// config to use (a listener returns a replacement to switch provider or model).
    pub struct Request: async_waterfall("agent/request") -> AgentPoint => Json;
}
declare_event! {
    /// Retry decision after a failed model call, run after the failed step closed and before
    /// the turn closes (LOOP-11). `data`: `{"failure":LlmFailure,"attempt":n,"policy":{…}}`.
    /// Output: `{"kind":"retry","delay_ms":n}` or `{"kind":"fail"}`. The terminal applies the
    /// loop's configured policy (B14 defaults).
    pub struct RequestError: async_waterfall("agent/request-error") -> AgentPoint => Json;
}
declare_event! {
    /// The turn would stop (LOOP-12). Listeners are awaited in order; one that objects returns
    /// `{"steer":"text"}`, which is queued as steering and runs another step of the same turn.
    /// `data`: `{"reason":{…}}`.
    pub struct TurnStopping: serial("agent/turn-stopping") -> AgentPoint => Json;
}
declare_event! {
    /// The agent became `idle` or `running`. `data`: `{"status":"idle"|"running"}`.
    pub struct Status: emit("agent/status") -> AgentPoint;
}
declare_event! {
    /// A turn ended with an error. `data`: `{"code","message"}`.
    pub struct AgentError: emit("agent/error") -> AgentPoint;
}
declare_event! {
    /// A message entered the inbox. `data`: `{"target","message"}`.
    pub struct InboxInserted: emit("agent/inbox/inserted") -> AgentPoint;
}
declare_event! {
    /// The loop claimed inbox messages for a step. `data`: `{"messages":[…]}`.
    pub struct InboxClaimed: emit("agent/inbox/claimed") -> AgentPoint;
}
declare_event! {
    /// Messages were dropped. `data`: `{"messages":[…], "reason"?}` — no reason: a rejected
    /// step; `"overflow"`: the input scheduler's interrupt queues were full and this was the
    /// oldest of the lowest level; `"stopped"`: the session refused writes and the loop
    /// stopped with it waiting (issue 16). It is the dropped input's terminal answer.
    pub struct InboxDiscarded: emit("agent/inbox/discarded") -> AgentPoint;
}
declare_event! {
    /// A stored session was resumed (`keel.agent` `resume`), after its recovery closers were
    /// committed and before its loop starts; every listener is awaited. `data`:
    /// `{"recovered":n}`. The subagent row recovers the children the log names here.
    pub struct Resumed: parallel("agent/resumed") -> AgentPoint;
}
