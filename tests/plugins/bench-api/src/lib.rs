//! Vocabulary of keel's dispatch benchmark (test-only): a typed payload shaped like a chat
//! request and one event per dispatch mode.
//!
//! The listener work lives here too ([`bump`], [`observe`]) so that the listeners registered
//! across the ABI (`bench-listener`) and the in-process baseline inside `bench-driver` run the
//! very same code; only the dispatch machinery around it differs.

use std::hint::black_box;

use keel_plugin_api::abi::{RString, RVec, StableAbi};
use keel_plugin_api::declare_event;

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
