//! Dispatch in the five modes (ARCHITECTURE §4.4, cordis-semantics §1 and §5).
//!
//! - emit: every runnable listener, in order; each failure contained (EVT-10).
//! - waterfall (sync): a chain over `&mut payload`; `next` re-runs the rest each time it is
//!   called (keel's decision on Cordis case 24); not calling it short-circuits.
//! - async waterfall: the same over owned payloads; `next` is `'static` and re-runnable.
//! - parallel: all start before any is awaited; all are awaited; failures aggregated in
//!   registration order (EVT-05; dsh semantics, not Cordis rc.6's `Promise.all`).
//! - serial: one at a time until a decision; an error stops the chain and propagates.
//!
//! Faulted fibers and fibers no longer alive are skipped. Panics and timeouts count toward the
//! fault threshold in every mode.

use std::cell::Cell;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use futures::future::join_all;
use keel_plugin_api::abi::{
    AbiResult, AsyncTerminalFfi, ErasedBox, EventMode, PluginError, ROption, RResult, SyncStatus,
    SyncTerminalFfi, TypeLayout,
};
use keel_plugin_api::codes::ContractCode;
use keel_plugin_api::host::{
    AsyncChain, HostCode, PayloadMut, PayloadRef, SyncChain, async_next, sync_next,
};

use super::{Bus, Listener, Slot};

/// Runs `fut` with an optional deadline; on expiry the future is dropped (cancelled).
pub async fn with_deadline<T>(
    deadline: Option<Duration>,
    what: impl FnOnce() -> String,
    fut: impl Future<Output = AbiResult<T>>,
) -> AbiResult<T> {
    match deadline {
        None => fut.await,
        Some(d) => match tokio::time::timeout(d, fut).await {
            Ok(r) => r,
            Err(_) => RResult::RErr(PluginError::coded(
                HostCode::Timeout,
                format!("{} exceeded its deadline of {} ms", what(), d.as_millis()),
            )),
        },
    }
}

fn listener_label(event: &str, l: &Listener) -> String {
    format!("listener of row '{}' on '{event}'", l.fiber.row)
}

impl Bus {
    /// Emit: every runnable listener runs; failures are contained and reported.
    ///
    /// # Errors
    /// Only for misuse (unknown event, wrong mode, wrong layout).
    pub fn emit(
        &self,
        event: &str,
        layout: &'static TypeLayout,
        payload: PayloadRef<'_>,
        who: &dyn Fn() -> String,
    ) -> AbiResult<()> {
        let slot = match self.checked_slot(event, EventMode::Emit, Some(layout), None, false, who) {
            Ok(s) => s,
            Err(e) => return RResult::RErr(e),
        };
        for l in slot.snapshot().iter() {
            if !l.fiber.runnable() {
                continue;
            }
            if let RResult::RErr(e) = l.ffi.call_emit(payload) {
                self.contain(event, l, &e);
            }
        }
        RResult::ROk(())
    }

    /// Sync waterfall.
    ///
    /// # Errors
    /// The first error from a listener or the terminal.
    pub fn waterfall(
        &self,
        event: &str,
        layout: &'static TypeLayout,
        payload: PayloadMut<'_>,
        terminal: SyncTerminalFfi,
        who: &dyn Fn() -> String,
    ) -> AbiResult<()> {
        let slot =
            match self.checked_slot(event, EventMode::Waterfall, Some(layout), None, false, who) {
                Ok(s) => s,
                Err(e) => return RResult::RErr(e),
            };
        let frame = SyncFrame {
            bus: self,
            slot: &slot,
            snapshot: slot.snapshot(),
            terminal,
            contained: Cell::new(false),
        };
        frame.run_from(0, payload).into_abi()
    }

    /// Async waterfall.
    pub fn async_waterfall(
        self: &Arc<Self>,
        event: &str,
        output: &'static TypeLayout,
        payload: ErasedBox,
        terminal: AsyncTerminalFfi,
        who: &dyn Fn() -> String,
    ) -> impl Future<Output = AbiResult<ErasedBox>> + Send + 'static {
        let slot = self.checked_slot(
            event,
            EventMode::AsyncWaterfall,
            Some(payload.layout()),
            Some(output),
            false,
            who,
        );
        let bus = Arc::clone(self);
        async move {
            let slot = match slot {
                Ok(s) => s,
                Err(e) => return RResult::RErr(e),
            };
            let frame = Arc::new(AsyncFrame {
                bus,
                snapshot: slot.snapshot(),
                slot,
                terminal,
                contained: AtomicBool::new(false),
                running: AtomicUsize::new(TERMINAL),
            });
            frame.run_from(0, payload).await
        }
    }

    /// Parallel: all start, all awaited, failures aggregated in registration order.
    pub fn parallel(
        self: &Arc<Self>,
        event: &str,
        payload: ErasedBox,
        who: &dyn Fn() -> String,
    ) -> impl Future<Output = AbiResult<()>> + Send + 'static {
        let slot = self.checked_slot(
            event,
            EventMode::Parallel,
            Some(payload.layout()),
            None,
            false,
            who,
        );
        let bus = Arc::clone(self);
        async move {
            let slot = match slot {
                Ok(s) => s,
                Err(e) => return RResult::RErr(e),
            };
            let snapshot = slot.snapshot();
            let runnable: Vec<&Arc<Listener>> =
                snapshot.iter().filter(|l| l.fiber.runnable()).collect();
            // Start every listener before awaiting any (the payload outlives all of them).
            let futures = runnable.iter().map(|l| {
                let fut = l.ffi.call_parallel(PayloadRef::of_box(&payload));
                let deadline = l.deadline.or(bus.default_deadline);
                let name = &slot.name;
                with_deadline(deadline, move || listener_label(name, l), fut)
            });
            let results = join_all(futures).await;
            let mut failures = Vec::new();
            for (l, r) in runnable.iter().zip(results) {
                if let RResult::RErr(e) = r {
                    bus.contain(&slot.name, l, &e);
                    failures.push((l.fiber.row.clone(), e));
                }
            }
            drop(payload);
            match failures.len() {
                0 => RResult::ROk(()),
                1 => {
                    let (row, e) = failures.remove(0);
                    RResult::RErr(PluginError::received(
                        &e.code,
                        format!("row '{row}': {}", e.message),
                    ))
                }
                n => {
                    let detail: Vec<String> = failures
                        .iter()
                        .map(|(row, e)| format!("row '{row}': {}: {}", e.code, e.message))
                        .collect();
                    RResult::RErr(PluginError::coded(
                        HostCode::Aggregate,
                        format!(
                            "{n} listeners of '{}' failed: {}",
                            slot.name,
                            detail.join("; ")
                        ),
                    ))
                }
            }
        }
    }

    /// Serial: one at a time until a decision.
    pub fn serial(
        self: &Arc<Self>,
        event: &str,
        output: &'static TypeLayout,
        payload: ErasedBox,
        who: &dyn Fn() -> String,
    ) -> impl Future<Output = AbiResult<ROption<ErasedBox>>> + Send + 'static {
        let slot = self.checked_slot(
            event,
            EventMode::Serial,
            Some(payload.layout()),
            Some(output),
            false,
            who,
        );
        let bus = Arc::clone(self);
        async move {
            let slot = match slot {
                Ok(s) => s,
                Err(e) => return RResult::RErr(e),
            };
            for l in slot.snapshot().iter() {
                if !l.fiber.runnable() {
                    continue;
                }
                let fut = l.ffi.call_serial(PayloadRef::of_box(&payload));
                let deadline = l.deadline.or(bus.default_deadline);
                match with_deadline(deadline, || listener_label(&slot.name, l), fut).await {
                    RResult::ROk(ROption::RNone) => {}
                    RResult::ROk(ROption::RSome(decision)) => {
                        if let Err(r) = slot.output.check(decision.layout()) {
                            return RResult::RErr(PluginError::coded(
                                HostCode::EventLayout,
                                format!(
                                    "event '{}': decision of row '{}' has the wrong type: {r}",
                                    slot.name, l.fiber.row
                                ),
                            ));
                        }
                        return RResult::ROk(ROption::RSome(decision));
                    }
                    RResult::RErr(e) => {
                        bus.contain(&slot.name, l, &e);
                        return RResult::RErr(e);
                    }
                }
            }
            RResult::ROk(ROption::RNone)
        }
    }
}

struct SyncFrame<'a> {
    bus: &'a Bus,
    slot: &'a Slot,
    snapshot: Arc<[Arc<Listener>]>,
    terminal: SyncTerminalFfi,
    contained: Cell<bool>,
}

impl SyncChain for SyncFrame<'_> {
    fn run_from(&self, index: usize, mut payload: PayloadMut<'_>) -> SyncStatus {
        let mut i = index;
        while let Some(l) = self.snapshot.get(i) {
            if !l.fiber.runnable() {
                i += 1;
                continue;
            }
            let next = sync_next(self, i + 1);
            let status = l.ffi.call_waterfall(payload.reborrow(), &next);
            // A panic passing back up through `next` is counted once, where it started.
            if let Some(e) = status.error()
                && e.is(ContractCode::Panic)
                && !self.contained.replace(true)
            {
                self.bus.contain(&self.slot.name, l, e);
            }
            return status;
        }
        let status = self.terminal.run(payload);
        if let Some(e) = status.error()
            && e.is(ContractCode::Panic)
        {
            // The dispatcher's own default panicked: no listener is at fault.
            self.contained.set(true);
        }
        status
    }
}

struct AsyncFrame {
    bus: Arc<Bus>,
    slot: Arc<Slot>,
    snapshot: Arc<[Arc<Listener>]>,
    terminal: AsyncTerminalFfi,
    contained: AtomicBool,
    /// Index of the innermost listener currently running (or `TERMINAL`).
    running: AtomicUsize,
}

/// `AsyncFrame::running` while the dispatcher's default runs.
const TERMINAL: usize = usize::MAX;

impl AsyncFrame {
    /// Listener `owner`'s deadline `d` expired. Its time includes everything downstream of its
    /// `next`, so the fault goes to whoever was running when the clock ran out: the innermost
    /// listener still in progress, or nobody when it was the dispatcher's own default.
    fn deadline_expired(&self, owner: usize, d: Duration) -> AbiResult<ErasedBox> {
        let owner_row = &self.snapshot[owner].fiber.row;
        let culprit = self.running.load(Ordering::Acquire);
        let message = match self.snapshot.get(culprit) {
            Some(l) if culprit == owner => {
                format!(
                    "{} exceeded its deadline of {} ms",
                    listener_label(&self.slot.name, l),
                    d.as_millis()
                )
            }
            Some(l) => format!(
                "{} did not finish within the {} ms deadline of row '{owner_row}'",
                listener_label(&self.slot.name, l),
                d.as_millis()
            ),
            None => format!(
                "the dispatcher's default for '{}' did not finish within the {} ms deadline of row '{owner_row}'",
                self.slot.name,
                d.as_millis()
            ),
        };
        let e = PluginError::coded(HostCode::Timeout, message);
        if let Some(l) = self.snapshot.get(culprit)
            && !self.contained.swap(true, Ordering::AcqRel)
        {
            self.bus.contain(&self.slot.name, l, &e);
        }
        self.contained.store(true, Ordering::Release);
        RResult::RErr(e)
    }
}

impl AsyncChain for AsyncFrame {
    fn run_from(
        self: Arc<Self>,
        index: usize,
        payload: ErasedBox,
    ) -> keel_plugin_api::host::ChainFuture {
        Box::pin(async move {
            let position = self.snapshot[index.min(self.snapshot.len())..]
                .iter()
                .position(|l| l.fiber.runnable())
                .map(|p| p + index);
            let Some(i) = position else {
                let outer = self.running.swap(TERMINAL, Ordering::AcqRel);
                let out = self.terminal.run(payload).await;
                self.running.store(outer, Ordering::Release);
                if let RResult::RErr(e) = &out
                    && e.is(ContractCode::Panic)
                {
                    // The dispatcher's own default panicked: no listener is at fault.
                    self.contained.store(true, Ordering::Release);
                }
                return check_output(&self.slot, out, || "the dispatcher's default".to_owned());
            };
            let l = Arc::clone(&self.snapshot[i]);
            let chain: Arc<dyn AsyncChain> = self.clone();
            let outer = self.running.swap(i, Ordering::AcqRel);
            let fut = l
                .ffi
                .call_async_waterfall(payload, async_next(chain, i + 1));
            let r = match l.deadline {
                None => fut.await,
                Some(d) => match tokio::time::timeout(d, fut).await {
                    Ok(r) => r,
                    Err(_) => self.deadline_expired(i, d),
                },
            };
            self.running.store(outer, Ordering::Release);
            if let RResult::RErr(e) = &r
                && e.is(ContractCode::Panic)
                && !self.contained.swap(true, Ordering::AcqRel)
            {
                self.bus.contain(&self.slot.name, &l, e);
            }
            // `who` is only formatted on failure: this runs once per hop of every dispatch.
            check_output(&self.slot, r, || format!("row '{}'", l.fiber.row))
        })
    }
}

fn check_output(
    slot: &Slot,
    out: AbiResult<ErasedBox>,
    who: impl FnOnce() -> String,
) -> AbiResult<ErasedBox> {
    match out {
        RResult::ROk(b) => match slot.output.check(b.layout()) {
            Ok(()) => RResult::ROk(b),
            Err(r) => RResult::RErr(PluginError::coded(
                HostCode::EventLayout,
                format!(
                    "event '{}': output of {} has the wrong type: {r}",
                    slot.name,
                    who()
                ),
            )),
        },
        e => e,
    }
}
