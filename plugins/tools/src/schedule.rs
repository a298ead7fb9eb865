//! The batch scheduler (B9, TOOL-07/09/10): which call starts when, and in which order results
//! are committed. It knows nothing about the kernel: the stages of one call are behind the
//! [`Pipeline`] trait, so the ordering rules are unit-tested with plain futures.
//!
//! Rules:
//! - calls start in model order; each is classified right before it starts ([`Mode`]);
//!   a parallel call starts when fewer than `max_parallel` calls run and no exclusive call runs;
//!   an exclusive call is a barrier: it waits until nothing runs, then runs alone;
//! - admission (`tool/call`, pre-execute, approval, guards) runs one call at a time, in model
//!   order, so policy decisions follow model order; bodies of admitted calls run concurrently;
//! - results are committed (post-execute, freeze, notify, append) strictly in model order: a
//!   finished call waits for every earlier one (a commit cursor);
//! - a stage failure or a cancel stops new starts: started calls drain (a cancel also stops a
//!   running body at once, see [`crate::provider`]; a successful body that finishes after a
//!   cancel becomes `ABORTED`), unstarted ones get their `tool/call` logged and an
//!   `ABORTED_BEFORE_DISPATCH` result (TOOL-08/09);
//! - a fatal error (the session refused an append) drains everything started, commits nothing
//!   more and fabricates nothing.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;

use futures::FutureExt as _;
use futures::future::{BoxFuture, poll_fn};
use futures::stream::{FuturesUnordered, StreamExt as _};
use keel_plugin_api::sdk::{Error, Result};
use keel_plugin_api::services::tools::{BatchFailure, ToolCode, ToolResult};
use serde::Serialize;

/// How a call may share the pool (TOOL-10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// May run beside other parallel calls.
    Parallel,
    /// A barrier: runs alone.
    Exclusive,
}

/// A stage's verdict on one call: the result so far and, when a listener broke, the failure
/// that stops the batch.
#[derive(Debug, Clone, PartialEq)]
pub struct Settled {
    /// The call's result.
    pub result: ToolResult,
    /// Set when a listener failed (the result is then a `TOOL_FAILED` error).
    pub failure: Option<BatchFailure>,
}

impl Settled {
    /// A verdict with no failure.
    pub fn ok(result: ToolResult) -> Self {
        Settled {
            result,
            failure: None,
        }
    }
}

/// The outcome of admitting one call.
#[derive(Debug)]
pub enum Admission<T> {
    /// Policy passed: the body may run.
    Run(T),
    /// The call ended before any body (unknown tool, bad arguments, denied, broken listener).
    Settled(T, Settled),
}

/// The answer of a whole batch: one committed result per call, and the failure.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatchOutcome<C> {
    /// One committed result per call, in model order.
    pub results: Vec<C>,
    /// Set when a listener failure stopped the batch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<BatchFailure>,
}

/// The stages of one call, as the scheduler drives them. `Err` from [`Pipeline::admit`],
/// [`Pipeline::commit`] or [`Pipeline::skip`] is fatal (the session log is broken).
pub trait Pipeline: Sync {
    /// What admission hands to the later stages of the same call.
    type Ticket: Send + Sync;
    /// What a committed call yields (the frozen result).
    type Committed: Send;

    /// Classifies call `index` (asked again before every start attempt).
    fn classify(&self, index: usize) -> Mode;

    /// Logs `tool/call` and runs policy: arguments, pre-execute, approval, guards.
    fn admit(&self, index: usize) -> impl Future<Output = Result<Admission<Self::Ticket>>> + Send;

    /// Runs the execute stage and the body.
    fn execute(&self, ticket: &Self::Ticket) -> impl Future<Output = Settled> + Send;

    /// Runs post-execute on a body's result (in model order).
    fn finish(
        &self,
        ticket: &Self::Ticket,
        result: ToolResult,
    ) -> impl Future<Output = Settled> + Send;

    /// Freezes the final result, notifies observers and appends `tool/result`; returns the
    /// frozen result.
    fn commit(
        &self,
        ticket: &Self::Ticket,
        result: ToolResult,
    ) -> impl Future<Output = Result<Self::Committed>> + Send;

    /// Logs `tool/call` for a call that will never start.
    fn skip(&self, index: usize) -> impl Future<Output = Result<Self::Ticket>> + Send;
}

/// The result of a call that never reached its body.
pub fn aborted_before_dispatch() -> ToolResult {
    ToolResult::error(
        ToolCode::AbortedBeforeDispatch,
        "tool call aborted before dispatch",
    )
}

/// What a successful body's result becomes when the batch was cancelled while it ran.
pub fn aborted(ran: ToolResult) -> ToolResult {
    let mut out = ToolResult::error(
        ToolCode::Aborted,
        format!(
            "the call was cancelled while it ran; it ran to completion and printed:\n{}",
            ran.content
        ),
    );
    out.meta = ran.meta;
    out
}

/// Where a call stands on the way to its commit.
enum Slot<T> {
    /// Not started, or in flight.
    Waiting,
    /// Done with its body (or without one): commit when the cursor reaches it.
    Ready {
        ticket: T,
        result: ToolResult,
        post: bool,
    },
    /// Never started: log the call, then commit `ABORTED_BEFORE_DISPATCH`.
    Skip,
}

enum Event<T, C> {
    Admitted(usize, Mode, Result<Admission<T>>),
    Ran(usize, Mode, T, Settled),
    Committed(Option<BatchFailure>, Result<C>),
}

/// Runs `calls` calls through `pipeline` (see the module doc for the rules).
///
/// # Errors
/// The first fatal error of [`Pipeline::admit`], [`Pipeline::commit`] or [`Pipeline::skip`],
/// after every started call drained.
pub async fn run_batch<P: Pipeline>(
    pipeline: &P,
    calls: usize,
    max_parallel: usize,
    cancel: &AtomicBool,
) -> Result<BatchOutcome<P::Committed>> {
    let cap = max_parallel.max(1);
    let mut slots: Vec<Slot<P::Ticket>> = (0..calls).map(|_| Slot::Waiting).collect();
    let mut results: Vec<P::Committed> = Vec::with_capacity(calls);
    let mut failure: Option<BatchFailure> = None;
    let mut fatal: Option<Error> = None;
    let mut next_start = 0usize;
    let mut running = 0usize;
    let mut exclusive_running = false;
    type Fut<'a, O> = BoxFuture<'a, O>;
    let mut admitting: Option<Fut<'_, Event<P::Ticket, P::Committed>>> = None;
    let mut committing: Option<Fut<'_, Event<P::Ticket, P::Committed>>> = None;
    let mut bodies: FuturesUnordered<Fut<'_, Event<P::Ticket, P::Committed>>> =
        FuturesUnordered::new();

    loop {
        let cancelled = cancel.load(Ordering::SeqCst);
        if fatal.is_some() {
            next_start = calls;
        } else if failure.is_some() || cancelled {
            for slot in slots.iter_mut().skip(next_start) {
                *slot = Slot::Skip;
            }
            next_start = calls;
        }

        if admitting.is_none() && next_start < calls {
            let index = next_start;
            let mode = pipeline.classify(index);
            let may_start = match mode {
                Mode::Exclusive => running == 0,
                Mode::Parallel => !exclusive_running && running < cap,
            };
            if may_start {
                running += 1;
                exclusive_running = mode == Mode::Exclusive;
                next_start += 1;
                admitting = Some(
                    async move { Event::Admitted(index, mode, pipeline.admit(index).await) }
                        .boxed(),
                );
            }
        }

        if committing.is_none() && fatal.is_none() {
            let index = results.len();
            if let Some(slot) = slots.get_mut(index) {
                match std::mem::replace(slot, Slot::Waiting) {
                    Slot::Ready {
                        ticket,
                        result,
                        post,
                    } => {
                        committing = Some(
                            async move {
                                let (result, failed) = if post {
                                    let s = pipeline.finish(&ticket, result).await;
                                    (s.result, s.failure)
                                } else {
                                    (result, None)
                                };
                                Event::Committed(failed, pipeline.commit(&ticket, result).await)
                            }
                            .boxed(),
                        );
                    }
                    Slot::Skip => {
                        committing = Some(
                            async move {
                                let done = match pipeline.skip(index).await {
                                    Ok(ticket) => {
                                        pipeline.commit(&ticket, aborted_before_dispatch()).await
                                    }
                                    Err(e) => Err(e),
                                };
                                Event::Committed(None, done)
                            }
                            .boxed(),
                        );
                    }
                    Slot::Waiting => {}
                }
            }
        }

        if admitting.is_none() && committing.is_none() && bodies.is_empty() {
            if let Some(e) = fatal {
                return Err(e);
            }
            if results.len() == calls {
                return Ok(BatchOutcome { results, failure });
            }
            // Unreachable by construction: something is always startable or committable.
            return Err(Error::msg(format!(
                "the tool batch stalled at call {}",
                results.len()
            )));
        }

        let event = poll_fn(|cx| {
            if let Some(fut) = admitting.as_mut()
                && let Poll::Ready(ev) = fut.as_mut().poll(cx)
            {
                admitting = None;
                return Poll::Ready(ev);
            }
            if let Some(fut) = committing.as_mut()
                && let Poll::Ready(ev) = fut.as_mut().poll(cx)
            {
                committing = None;
                return Poll::Ready(ev);
            }
            match bodies.poll_next_unpin(cx) {
                Poll::Ready(Some(ev)) => Poll::Ready(ev),
                _ => Poll::Pending,
            }
        })
        .await;

        match event {
            Event::Admitted(index, mode, admission) => {
                running -= 1;
                if mode == Mode::Exclusive {
                    exclusive_running = false;
                }
                match admission {
                    Err(e) => {
                        fatal.get_or_insert(e);
                    }
                    Ok(Admission::Settled(ticket, settled)) => {
                        if let Some(f) = settled.failure {
                            failure.get_or_insert(f);
                        }
                        put(&mut slots, index, ticket, settled.result, false);
                    }
                    Ok(Admission::Run(ticket)) => {
                        if fatal.is_some() {
                            // Nothing more is committed; the ticket is dropped.
                        } else if failure.is_some() || cancel.load(Ordering::SeqCst) {
                            put(&mut slots, index, ticket, aborted_before_dispatch(), false);
                        } else {
                            running += 1;
                            exclusive_running = mode == Mode::Exclusive;
                            bodies.push(
                                async move {
                                    let settled = pipeline.execute(&ticket).await;
                                    Event::Ran(index, mode, ticket, settled)
                                }
                                .boxed(),
                            );
                        }
                    }
                }
            }
            Event::Ran(index, mode, ticket, settled) => {
                running -= 1;
                if mode == Mode::Exclusive {
                    exclusive_running = false;
                }
                if let Some(f) = settled.failure {
                    failure.get_or_insert(f);
                    put(&mut slots, index, ticket, settled.result, false);
                } else if cancel.load(Ordering::SeqCst) {
                    let result = if settled.result.is_error {
                        settled.result
                    } else {
                        aborted(settled.result)
                    };
                    put(&mut slots, index, ticket, result, false);
                } else {
                    put(&mut slots, index, ticket, settled.result, true);
                }
            }
            Event::Committed(failed, done) => {
                if let Some(f) = failed {
                    failure.get_or_insert(f);
                }
                match done {
                    Ok(result) => results.push(result),
                    Err(e) => {
                        fatal.get_or_insert(e);
                    }
                }
            }
        }
    }
}

fn put<T>(slots: &mut [Slot<T>], index: usize, ticket: T, result: ToolResult, post: bool) {
    if let Some(slot) = slots.get_mut(index) {
        *slot = Slot::Ready {
            ticket,
            result,
            post,
        };
    }
}

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;
