//! `agent/*` events: the loop's seams (ARCHITECTURE §5, requirements B1, LOOP-08…12).
//!
//! Turn and step boundaries are durable session events, not emits; these are the decision
//! points around them and the live notifications. Decisions are typed ([`PreStepDecision`],
//! [`RetryDecision`], [`Steer`], [`LlmCallConfig`]) and cross the ABI as [`Typed`] values
//! (issue 24 item 2); the wire JSON is what it was.

use abi_stable::StableAbi;
use abi_stable::std_types::RString;
use serde::{Deserialize, Serialize};

use super::json::Json;
use super::typed::Typed;
use crate::declare_event;
use crate::services::llm::LlmCallConfig;

/// One user message of a step's batch, as `agent/pre-step` carries it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepMessage {
    /// Inbox id (a listener that adds a message makes one up).
    pub id: String,
    /// The text.
    pub content: String,
    /// Where it came from (`{"kind":"user"}`); absent on messages a listener added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<serde_json::Value>,
}

/// `agent/pre-step`'s `data`: `{"messages":[StepMessage]}`, the claimed batch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PreStepData {
    /// The batch the loop claimed.
    pub messages: Vec<StepMessage>,
}

/// What `agent/pre-step` decides (LOOP-10). Wire form: `{"kind":"enter","messages":[…]}` or
/// `{"kind":"reject"}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum PreStepDecision {
    /// Run the step with these messages (the ones left out stay removed from the inbox).
    Enter {
        /// The admitted batch, in order.
        messages: Vec<StepMessage>,
    },
    /// Drop the batch: the loop emits `agent/inbox/discarded` and runs no step.
    Reject,
}

/// What `agent/request-error` decides (LOOP-11). Wire form: `{"kind":"retry","delay_ms":n}`
/// or `{"kind":"fail"}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum RetryDecision {
    /// Run the call again after `delay_ms`.
    Retry {
        /// Milliseconds to wait first.
        delay_ms: u64,
    },
    /// Give up: the turn ends with the failure.
    Fail,
}

/// An `agent/turn-stopping` objection (LOOP-12). Wire form: `{"steer":"text"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Steer {
    /// Queued as steering; another step of the same turn runs with it.
    pub steer: String,
}

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
    /// Step admission (LOOP-10). `data`: a `PreStepData`, `{"messages":[StepMessage]}`, the claimed batch.
    /// Output: a `PreStepDecision` (`{"kind":"enter","messages":[…]}` or `{"kind":"reject"}`).
    /// The checkpoint flushes here (B6). The terminal enters the batch unchanged.
    pub struct PreStep: async_waterfall("agent/pre-step") -> AgentPoint => Typed<PreStepDecision>;
}
declare_event! {
    /// Builds the frozen call configuration. `data`: the default `LlmCallConfig`. Output: the
    /// `LlmCallConfig` to use (a listener returns a replacement to switch provider or model).
    pub struct Request: async_waterfall("agent/request") -> AgentPoint => Typed<LlmCallConfig>;
}
declare_event! {
    /// Retry decision after a failed model call, run after the failed step closed and before
    /// the turn closes (LOOP-11). `data`: `{"failure":LlmFailure,"attempt":n,"policy":{…}}`.
    /// Output: a `RetryDecision` (`{"kind":"retry","delay_ms":n}` or `{"kind":"fail"}`). The
    /// terminal applies the loop's configured policy (B14 defaults).
    pub struct RequestError: async_waterfall("agent/request-error") -> AgentPoint => Typed<RetryDecision>;
}
declare_event! {
    /// The turn would stop (LOOP-12). Listeners are awaited in order; one that objects returns
    /// a `Steer` (`{"steer":"text"}`), which is queued as steering and runs another step of
    /// the same turn. `data`: `{"reason":{…}}`.
    pub struct TurnStopping: serial("agent/turn-stopping") -> AgentPoint => Typed<Steer>;
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
