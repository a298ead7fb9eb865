//! Vocabulary of keel's dispatch benchmark (test-only): a typed payload shaped like a chat
//! request and one event per dispatch mode.
//!
//! The listener work lives here too ([`bump`], [`observe`]) so that the listeners registered
//! across the ABI (`bench-listener`) and the in-process baseline inside `bench-driver` run the
//! very same code; only the dispatch machinery around it differs.

use std::hint::black_box;

use keel_plugin_api::abi::{RString, RVec, StableAbi};
use keel_plugin_api::declare_event;
use keel_plugin_api::events::{Json, Typed};
use keel_plugin_api::sdk::Result;
use serde::{Deserialize, Serialize};

/// A chat-completion request: the shape of the hot payloads keel dispatches per model call.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq)]
pub struct ChatRequest {
    /// Model name.
    pub model: RString,
    /// Token budget; every benchmark listener adds one.
    pub max_tokens: u32,
    /// Sampling temperature.
    pub temperature: f32,
    /// Conversation so far.
    pub messages: RVec<RString>,
}

impl ChatRequest {
    /// The request every benchmark dispatches (two short messages, like the ABI research).
    pub fn sample() -> ChatRequest {
        ChatRequest {
            model: RString::from("bench-model-1"),
            max_tokens: 0,
            temperature: 0.7,
            messages: vec![
                RString::from("system: you are a benchmark"),
                RString::from("user: count the hops"),
            ]
            .into(),
        }
    }
}

/// A waterfall listener's work: one field update (then the caller runs `next`).
#[inline]
pub fn bump(request: &mut ChatRequest) {
    request.max_tokens = request.max_tokens.wrapping_add(1);
}

/// A notification listener's work: read one field so the call cannot be optimised away.
#[inline]
pub fn observe(request: &ChatRequest) {
    black_box(request.max_tokens);
}

declare_event! {
    /// Benchmark sync waterfall: listeners bump `max_tokens` and call `next`.
    pub struct BenchWaterfall: waterfall("bench/waterfall") -> ChatRequest;
}
declare_event! {
    /// Benchmark async waterfall: the request in, the request (after everyone) out.
    pub struct BenchAsyncWaterfall: async_waterfall("bench/async-waterfall") -> ChatRequest => ChatRequest;
}
declare_event! {
    /// Benchmark emit: listeners read the request.
    pub struct BenchEmit: emit("bench/emit") -> ChatRequest;
}
declare_event! {
    /// Benchmark parallel: listeners read the request and complete at once.
    pub struct BenchParallel: parallel("bench/parallel") -> ChatRequest;
}

/// A step-admission-shaped decision (issue 24 item 2): what `agent/pre-step` returns.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum BenchDecision {
    /// Enter the step with these messages.
    Enter {
        /// The batch.
        messages: Vec<String>,
    },
    /// Drop the batch.
    Reject,
}

impl BenchDecision {
    /// The decision every decision case's terminal returns (two short messages).
    pub fn sample() -> BenchDecision {
        BenchDecision::Enter {
            messages: vec!["user: count the hops".into(), "user: and again".into()],
        }
    }
}

/// A JSON-decision listener's work (the pre-issue-24 pattern): parse the text and compare the
/// `kind` string.
///
/// # Errors
/// `INVALID_JSON` when the decision is not JSON.
#[inline]
pub fn read_json_decision(decision: &Json) -> Result<()> {
    let value: serde_json::Value = decision.parse()?;
    black_box(value.get("kind").and_then(|k| k.as_str()) == Some("enter"));
    Ok(())
}

/// A typed-decision listener's work: decode the `BenchDecision` and match on it.
///
/// # Errors
/// `INVALID_ARGUMENTS` when the decision is not a `BenchDecision`.
#[inline]
pub fn read_typed_decision(decision: &Typed<BenchDecision>) -> Result<()> {
    black_box(matches!(decision.get()?, BenchDecision::Enter { .. }));
    Ok(())
}

declare_event! {
    /// Benchmark decision waterfall, JSON text: each listener runs `next` and reads the decision
    /// with `read_json_decision` (the JSON hop of issue 24 item 2).
    pub struct BenchDecisionJson: async_waterfall("bench/decision-json") -> ChatRequest => Json;
}
declare_event! {
    /// Benchmark decision waterfall, typed: each listener runs `next` and reads the decision
    /// with `read_typed_decision` (the typed hop of issue 24 item 2).
    pub struct BenchDecisionTyped: async_waterfall("bench/decision-typed") -> ChatRequest => Typed<BenchDecision>;
}
