//! `agent/*` events: the loop's seams (ARCHITECTURE §5, requirements B1, LOOP-08…12).
//!
//! Turn and step boundaries are durable session events, not emits; these are the decision
//! points around them and the live notifications. Decisions are typed ([`PreStepDecision`],
//! [`RetryDecision`], [`Steer`], [`LlmCallConfig`]) and so is each event's `data` (the `D` of
//! [`AgentPoint`]: [`PreStepData`], [`RequestErrorData`], [`StatusData`], …); both cross the
//! ABI as [`Typed`] values (issue 24 item 2), and the wire JSON is what it was.

use abi_stable::StableAbi;
use abi_stable::std_types::RString;
use serde::{Deserialize, Serialize};

use super::typed::Typed;
use crate::declare_event;
use crate::services::agent::{InboxTarget, InterruptLevel};
use crate::services::llm::{LlmCallConfig, LlmFailure};

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

/// `agent/request-error`'s `data`: `{"failure":LlmFailure,"attempt":n,"policy":{…}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestErrorData {
    /// The failed call's failure.
    pub failure: LlmFailure,
    /// Retries so far in this turn (0 on the first failure).
    pub attempt: u32,
    /// The loop's configured retry policy, as its row config spells it (`mode`,
    /// `max_retries`, `initial_backoff_ms`, …). Its type is the agent loop's config table, not
    /// an SDK type, so it rides as a JSON value: read it only to mirror the terminal's choice.
    pub policy: serde_json::Value,
}

/// Why `agent/turn-stopping` runs. Wire form: `{"kind":"completed"}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum StopReason {
    /// The model answered without tool calls: the turn would end `completed`.
    Completed,
}

/// `agent/turn-stopping`'s `data`: `{"reason":{"kind":"completed"}}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnStoppingData {
    /// Why the turn would stop.
    pub reason: StopReason,
}

/// The agent's state as `agent/status` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunState {
    /// Nothing to run.
    Idle,
    /// A turn is running.
    Running,
}

/// `agent/status`'s `data`: a `StatusData` (`{"status":"idle"|"running"}`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusData {
    /// The new state.
    pub status: RunState,
}

/// `agent/error`'s `data`: `{"code","message"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentErrorData {
    /// The error's code.
    pub code: String,
    /// Its message.
    pub message: String,
}

/// `agent/inbox/inserted`'s `data`: `{"target","message":{"id","content"},"level"?}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InboxInsertedData {
    /// Where the message went.
    pub target: InboxTarget,
    /// The message (no `source`).
    pub message: StepMessage,
    /// An interrupt's level, as the scheduler took it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<InterruptLevel>,
}

/// One dropped input of `agent/inbox/discarded`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DiscardedMessage {
    /// Inbox id.
    pub id: String,
    /// The text.
    pub content: String,
    /// Its interrupt level, when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<InterruptLevel>,
    /// Whether it was a suspended task (a stop only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspended: Option<bool>,
    /// Where it came from (a rejected step's messages: `{"kind":"user"}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<serde_json::Value>,
}

impl From<StepMessage> for DiscardedMessage {
    fn from(m: StepMessage) -> Self {
        DiscardedMessage {
            id: m.id,
            content: m.content,
            level: None,
            suspended: None,
            source: m.source,
        }
    }
}

/// Why inputs were dropped (absent: a rejected step).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DiscardReason {
    /// The input scheduler's interrupt queues were full; this was the oldest of the lowest
    /// level.
    Overflow,
    /// The session refused writes and the loop stopped with it waiting (issue 16).
    Stopped,
}

/// `agent/inbox/discarded`'s `data`: `{"messages":[…],"reason"?}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InboxDiscardedData {
    /// The dropped inputs.
    pub messages: Vec<DiscardedMessage>,
    /// Why; absent for a rejected step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<DiscardReason>,
}

/// `agent/resumed`'s `data`: `{"recovered":n}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResumedData {
    /// How many recovery closers the load committed.
    pub recovered: u64,
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

/// Where the loop is: the session, the open turn and step, and the event's data `D` (each
/// event names its own).
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
#[sabi(unsafe_unconstrained(D))]
pub struct AgentPoint<D> {
    /// Session id.
    pub session_id: RString,
    /// Open turn.
    pub turn: u64,
    /// Step about to run or running.
    pub step: u64,
    /// The event's data.
    pub data: Typed<D>,
}

declare_event! {
    /// Step admission (LOOP-10). `data`: a `PreStepData`, `{"messages":[StepMessage]}`, the claimed batch.
    /// Output: a `PreStepDecision` (`{"kind":"enter","messages":[…]}` or `{"kind":"reject"}`).
    /// The checkpoint flushes here (B6). The terminal enters the batch unchanged.
    pub struct PreStep: async_waterfall("agent/pre-step") -> AgentPoint<PreStepData> => Typed<PreStepDecision>;
}
declare_event! {
    /// Builds the frozen call configuration. `data`: the default `LlmCallConfig`. Output: the
    /// `LlmCallConfig` to use (a listener returns a replacement to switch provider or model).
    pub struct Request: async_waterfall("agent/request") -> AgentPoint<LlmCallConfig> => Typed<LlmCallConfig>;
}
declare_event! {
    /// Retry decision after a failed model call, run after the failed step closed and before
    /// the turn closes (LOOP-11). `data`: a `RequestErrorData` (`{"failure":LlmFailure,"attempt":n,"policy":{…}}`).
    /// Output: a `RetryDecision` (`{"kind":"retry","delay_ms":n}` or `{"kind":"fail"}`). The
    /// terminal applies the loop's configured policy (B14 defaults).
    pub struct RequestError: async_waterfall("agent/request-error") -> AgentPoint<RequestErrorData> => Typed<RetryDecision>;
}
declare_event! {
    /// The turn would stop (LOOP-12). Listeners are awaited in order; one that objects returns
    /// a `Steer` (`{"steer":"text"}`), which is queued as steering and runs another step of
    /// the same turn. `data`: a `TurnStoppingData` (`{"reason":{"kind":"completed"}}`).
    pub struct TurnStopping: serial("agent/turn-stopping") -> AgentPoint<TurnStoppingData> => Typed<Steer>;
}
declare_event! {
    /// The agent became `idle` or `running`. `data`: a `StatusData` (`{"status":"idle"|"running"}`).
    pub struct Status: emit("agent/status") -> AgentPoint<StatusData>;
}
declare_event! {
    /// A turn ended with an error. `data`: an `AgentErrorData` (`{"code","message"}`).
    pub struct AgentError: emit("agent/error") -> AgentPoint<AgentErrorData>;
}
declare_event! {
    /// A message entered the inbox. `data`: an `InboxInsertedData` (`{"target","message","level"?}`).
    pub struct InboxInserted: emit("agent/inbox/inserted") -> AgentPoint<InboxInsertedData>;
}
declare_event! {
    /// The loop claimed inbox messages for a step. `data`: the `PreStepData` (`{"messages":[…]}`).
    pub struct InboxClaimed: emit("agent/inbox/claimed") -> AgentPoint<PreStepData>;
}
declare_event! {
    /// Messages were dropped. `data`: an `InboxDiscardedData` (`{"messages":[…], "reason"?}`) — no reason: a rejected
    /// step; `"overflow"`: the input scheduler's interrupt queues were full and this was the
    /// oldest of the lowest level; `"stopped"`: the session refused writes and the loop
    /// stopped with it waiting (issue 16). It is the dropped input's terminal answer.
    pub struct InboxDiscarded: emit("agent/inbox/discarded") -> AgentPoint<InboxDiscardedData>;
}
/// What an `agent/delta` carries (the `llm/delta` kind, one type for both).
pub use super::llm::DeltaKind;

/// `agent/delta`'s `data`: `{"attempt","index","kind","text"}` — one piece of the step's
/// model stream as the adapter produced it (issue 26 item 1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeltaData {
    /// The request attempt within the step, from 0. A retried request streams again from the
    /// start: a driver that shows deltas drops what it showed for an earlier attempt.
    pub attempt: u32,
    /// The content block's index in the stream.
    pub index: u32,
    /// Text or reasoning.
    pub kind: DeltaKind,
    /// The piece, as it arrived.
    pub text: String,
}

declare_event! {
    /// A piece of the running step's model stream, forwarded by the loop as it arrives, for
    /// drivers that show text as it is generated (issue 26 item 1). Never written to the log:
    /// the step's `assistant/message` stays the one durable record, and deltas of a stream that
    /// failed or was cancelled are not followed by one. `data`: a `DeltaData`.
    pub struct Delta: emit("agent/delta") -> AgentPoint<DeltaData>;
}
declare_event! {
    /// A stored session was resumed (`keel.agent` `resume`), after its recovery closers were
    /// committed and before its loop starts; every listener is awaited. `data`:
    /// a `ResumedData` (`{"recovered":n}`). The subagent row recovers the children the log names here.
    pub struct Resumed: parallel("agent/resumed") -> AgentPoint<ResumedData>;
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn v<T: Serialize>(data: &T) -> serde_json::Value {
        serde_json::to_value(data).unwrap()
    }

    // The typed data writes the JSON the untyped one did (hooks and observers see it).
    #[test]
    fn the_data_keeps_its_wire_form() {
        let inserted = InboxInsertedData {
            target: InboxTarget::Steer,
            message: StepMessage {
                id: "m1".into(),
                content: "hi".into(),
                source: None,
            },
            level: None,
        };
        assert_eq!(
            v(&inserted),
            json!({"target": "steer", "message": {"id": "m1", "content": "hi"}})
        );
        let dropped = InboxDiscardedData {
            messages: vec![DiscardedMessage {
                id: "m2".into(),
                content: "x".into(),
                level: Some(InterruptLevel::L2),
                suspended: Some(false),
                source: None,
            }],
            reason: Some(DiscardReason::Stopped),
        };
        assert_eq!(
            v(&dropped),
            json!({"messages": [{"id": "m2", "content": "x", "level": 2, "suspended": false}],
                   "reason": "stopped"})
        );
        let rejected = InboxDiscardedData {
            messages: vec![DiscardedMessage::from(StepMessage {
                id: "m3".into(),
                content: "y".into(),
                source: Some(json!({"kind": "user"})),
            })],
            reason: None,
        };
        assert_eq!(
            v(&rejected),
            json!({"messages": [{"id": "m3", "content": "y", "source": {"kind": "user"}}]})
        );
        let stopping = TurnStoppingData {
            reason: StopReason::Completed,
        };
        assert_eq!(v(&stopping), json!({"reason": {"kind": "completed"}}));
        let status = StatusData {
            status: RunState::Idle,
        };
        assert_eq!(v(&status), json!({"status": "idle"}));
        assert_eq!(v(&ResumedData { recovered: 2 }), json!({"recovered": 2}));
    }
}
