//! Calling into plugins from the kernel's bus: listeners, terminals and `next` trampolines.
//!
//! Payload pointers travel as [`PayloadRef`] / [`PayloadMut`], which carry the layout of the
//! type they point to. The kernel checks that layout against the listener's registered layout
//! before calling (the bus does this once per event slot and caches it); these functions rely
//! on that and are otherwise plain pass-throughs. Every kernel callback a plugin can invoke
//! (`next`) is guarded with `catch_unwind`, because a kernel panic unwinding into plugin code
//! would abort the process.

use std::future::Future;
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;

use abi_stable::std_types::{ROption, RResult};
use async_ffi::{FfiFuture, FutureExt as _};

use crate::abi::{
    AbiResult, AsyncNextFfi, AsyncTerminalFfi, ErasedBox, ListenerCall, ListenerFfi, PluginError,
    SharedPtr, SyncNextFfi, SyncStatus, SyncTerminalFfi,
};

/// A borrowed payload of a known layout.
#[derive(Clone, Copy)]
pub struct PayloadRef<'a> {
    ptr: *const (),
    _borrow: PhantomData<&'a ()>,
}

impl PayloadRef<'_> {
    /// Wraps a raw payload pointer received through `HostApi`.
    pub(crate) fn from_raw(ptr: *const ()) -> Self {
        PayloadRef {
            ptr,
            _borrow: PhantomData,
        }
    }

    /// Borrows an erased box's value.
    pub fn of_box(b: &ErasedBox) -> PayloadRef<'_> {
        PayloadRef {
            ptr: b.as_ptr(),
            _borrow: PhantomData,
        }
    }

    /// Borrows a typed value (the kernel's own emits).
    pub fn of<T: crate::abi::StableAbi>(v: &T) -> PayloadRef<'_> {
        PayloadRef {
            ptr: (v as *const T).cast::<()>(),
            _borrow: PhantomData,
        }
    }
}

/// A mutably borrowed payload (sync waterfall).
pub struct PayloadMut<'a> {
    ptr: *mut (),
    _borrow: PhantomData<&'a mut ()>,
}

impl PayloadMut<'_> {
    pub(crate) fn from_raw(ptr: *mut ()) -> Self {
        PayloadMut {
            ptr,
            _borrow: PhantomData,
        }
    }

    /// Reborrows for a nested call.
    pub fn reborrow(&mut self) -> PayloadMut<'_> {
        PayloadMut {
            ptr: self.ptr,
            _borrow: PhantomData,
        }
    }

    /// Borrows a typed value mutably (in-process dispatch and benchmarks).
    pub fn of<T: crate::abi::StableAbi>(v: &mut T) -> PayloadMut<'_> {
        PayloadMut {
            ptr: (v as *mut T).cast::<()>(),
            _borrow: PhantomData,
        }
    }
}

fn mode_error(expected: &str) -> PluginError {
    PluginError::coded(
        crate::host::HostCode::EventMode,
        format!("listener is not a {expected} listener"),
    )
}

fn ready<T: Send + 'static>(r: AbiResult<T>) -> FfiFuture<AbiResult<T>> {
    async move { r }.into_ffi()
}

/// Calls a listener. Precondition for all: the payload's layout was checked against the
/// listener's registered payload layout.
impl ListenerFfi {
    /// Emit listener.
    pub fn call_emit(&self, payload: PayloadRef<'_>) -> AbiResult<()> {
        match self.call {
            // SAFETY: see the method precondition; the shim catches panics.
            ListenerCall::Emit(f) => unsafe { f(self.data.as_ptr(), payload.ptr) },
            _ => RResult::RErr(mode_error("emit")),
        }
    }

    /// Sync waterfall listener (the hot path: pointer-sized status, `next` by reference).
    #[inline]
    pub fn call_waterfall(&self, payload: PayloadMut<'_>, next: &SyncNextFfi) -> SyncStatus {
        match self.call {
            // SAFETY: as above; `next` outlives the call.
            ListenerCall::Waterfall(f) => unsafe { f(self.data.as_ptr(), payload.ptr, next) },
            _ => SyncStatus::err(mode_error("waterfall")),
        }
    }

    /// Async waterfall listener.
    pub fn call_async_waterfall(
        &self,
        payload: ErasedBox,
        next: AsyncNextFfi,
    ) -> FfiFuture<AbiResult<ErasedBox>> {
        match self.call {
            // SAFETY: as above.
            ListenerCall::AsyncWaterfall(f) => unsafe { f(self.data.as_ptr(), payload, next) },
            _ => ready(RResult::RErr(mode_error("async-waterfall"))),
        }
    }

    /// Parallel listener.
    pub fn call_parallel(&self, payload: PayloadRef<'_>) -> FfiFuture<AbiResult<()>> {
        match self.call {
            // SAFETY: as above; the returned future does not borrow the payload (SDK contract).
            ListenerCall::Parallel(f) => unsafe { f(self.data.as_ptr(), payload.ptr) },
            _ => ready(RResult::RErr(mode_error("parallel"))),
        }
    }

    /// Serial listener.
    pub fn call_serial(&self, payload: PayloadRef<'_>) -> FfiFuture<AbiResult<ROption<ErasedBox>>> {
        match self.call {
            // SAFETY: as above.
            ListenerCall::Serial(f) => unsafe { f(self.data.as_ptr(), payload.ptr) },
            _ => ready(RResult::RErr(mode_error("serial"))),
        }
    }

    /// The mode this listener was built for.
    pub fn mode(&self) -> crate::abi::EventMode {
        use crate::abi::EventMode;
        match self.call {
            ListenerCall::Emit(_) => EventMode::Emit,
            ListenerCall::Waterfall(_) => EventMode::Waterfall,
            ListenerCall::AsyncWaterfall(_) => EventMode::AsyncWaterfall,
            ListenerCall::Parallel(_) => EventMode::Parallel,
            ListenerCall::Serial(_) => EventMode::Serial,
        }
    }
}

impl SyncTerminalFfi {
    /// Runs the dispatcher's default.
    #[inline]
    pub fn run(&self, payload: PayloadMut<'_>) -> SyncStatus {
        // SAFETY: the terminal was built by the dispatcher for this dispatch's payload type.
        unsafe { (self.call)(self.data, payload.ptr) }
    }
}

impl AsyncTerminalFfi {
    /// Runs the dispatcher's default.
    pub fn run(&self, payload: ErasedBox) -> FfiFuture<AbiResult<ErasedBox>> {
        // SAFETY: as above.
        unsafe { (self.call)(self.data.as_ptr(), payload) }
    }
}

// ---- next trampolines ----------------------------------------------------------------------

/// The kernel's sync chain: runs listeners from `index` on, then the terminal.
pub trait SyncChain {
    /// Continues the chain.
    fn run_from(&self, index: usize, payload: PayloadMut<'_>) -> SyncStatus;
}

unsafe extern "C" fn sync_next_trampoline<C: SyncChain>(
    frame: *const (),
    index: usize,
    payload: *mut (),
) -> SyncStatus {
    match catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: `frame` is the `&C` given to `sync_next`, alive during the listener call.
        let chain = unsafe { &*frame.cast::<C>() };
        chain.run_from(index, PayloadMut::from_raw(payload))
    })) {
        Ok(r) => r,
        Err(_) => SyncStatus::err(PluginError::coded(
            crate::host::HostCode::KernelPanic,
            "kernel panicked in waterfall next",
        )),
    }
}

/// Builds `next` continuing at `index`, borrowing `chain`. Monomorphised per chain type, so the
/// trampoline calls the kernel's `run_from` directly (no virtual call on the hot path).
#[inline]
pub fn sync_next<C: SyncChain>(chain: &C, index: usize) -> SyncNextFfi {
    SyncNextFfi {
        frame: (chain as *const C).cast::<()>(),
        index,
        call: sync_next_trampoline::<C>,
    }
}

/// A boxed future, as the kernel's async chain returns it.
pub type ChainFuture = Pin<Box<dyn Future<Output = AbiResult<ErasedBox>> + Send + 'static>>;

/// The kernel's async chain snapshot.
pub trait AsyncChain: Send + Sync + 'static {
    /// Continues the chain with `payload`.
    fn run_from(self: Arc<Self>, index: usize, payload: ErasedBox) -> ChainFuture;
}

unsafe extern "C" fn async_next_trampoline(
    chain: *const (),
    index: usize,
    payload: ErasedBox,
) -> FfiFuture<AbiResult<ErasedBox>> {
    match catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: `chain` is the `Arc<dyn AsyncChain>` shared by `async_next`, kept alive by the
        // `AsyncNextFfi` the caller holds.
        let chain = unsafe { &*chain.cast::<Arc<dyn AsyncChain>>() };
        Arc::clone(chain).run_from(index, payload)
    })) {
        Ok(fut) => fut.into_ffi(),
        Err(_) => ready(RResult::RErr(PluginError::coded(
            crate::host::HostCode::KernelPanic,
            "kernel panicked in waterfall next",
        ))),
    }
}

/// Builds an owned `next` continuing at `index`.
pub fn async_next(chain: Arc<dyn AsyncChain>, index: usize) -> AsyncNextFfi {
    AsyncNextFfi {
        chain: SharedPtr::new(chain),
        index,
        call: async_next_trampoline,
    }
}
