//! Shims between typed Rust closures and the `extern "C"` entry points of the ABI.
//!
//! Every function here that the kernel (or another plugin's image) can call catches panics:
//! abi_stable's own shims would call `exit(1)` and async-ffi would re-panic in the caller, so
//! the SDK turns every panic into `PluginError { code: "PANIC" }` before it reaches either. The
//! `unsafe` casts rely on one invariant the kernel upholds: a payload pointer is only passed to a
//! listener after its `TypeLayout` was checked against the one the listener registered with.

use std::any::Any;
use std::future::Future;
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};

use abi_stable::std_types::{ROption, RResult};
use async_ffi::{FfiFuture, FutureExt as _};
use futures::FutureExt as _;

use super::error::{Result, to_abi};
use super::event::Event;
use crate::abi::{
    AbiResult, AsyncNextFfi, AsyncTerminalFfi, ErasedBox, PluginError, SharedPtr, SyncNextFfi,
    SyncStatus, SyncTerminalFfi,
};

/// The text of a panic payload.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

fn panic_error(payload: &(dyn Any + Send)) -> PluginError {
    PluginError::coded(
        crate::codes::ContractCode::Panic,
        format!("plugin panicked: {}", panic_message(payload)),
    )
}

/// Runs `f`, turning a panic into a `PANIC` error.
pub(crate) fn guard<T>(f: impl FnOnce() -> Result<T>) -> AbiResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => to_abi(r),
        Err(p) => RResult::RErr(panic_error(&*p)),
    }
}

/// Like [`guard`], for the sync hot path: success costs no copy of a large result.
#[inline]
pub(crate) fn guard_status(f: impl FnOnce() -> Result<()>) -> SyncStatus {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => SyncStatus::ok(),
        Ok(Err(e)) => SyncStatus::err(e.into_abi()),
        Err(p) => SyncStatus::err(panic_error(&*p)),
    }
}

/// Wraps a future so that a panic in any poll becomes a `PANIC` error, then crosses as FFI.
pub(crate) fn guard_future<T, F>(fut: F) -> FfiFuture<AbiResult<T>>
where
    T: Send + 'static,
    F: Future<Output = Result<T>> + Send + 'static,
{
    async move {
        match AssertUnwindSafe(fut).catch_unwind().await {
            Ok(r) => to_abi(r),
            Err(p) => RResult::RErr(panic_error(&*p)),
        }
    }
    .into_ffi()
}

fn ready<T: Send + 'static>(r: AbiResult<T>) -> FfiFuture<AbiResult<T>> {
    async move { r }.into_ffi()
}

// ---- listeners -------------------------------------------------------------------------------

pub(crate) unsafe extern "C" fn emit_shim<P, F>(
    data: *const (),
    payload: *const (),
) -> AbiResult<()>
where
    F: Fn(&P) -> Result<()>,
{
    // SAFETY: `data` is this image's `Arc<F>`; the kernel checked `payload`'s layout against P.
    guard(|| unsafe { (*data.cast::<F>())(&*payload.cast::<P>()) })
}

/// Ties a `Next` to its dispatch frame's lifetime and payload type.
type FrameMarker<'a, P> = PhantomData<(&'a (), fn(&mut P))>;

/// `next` for a sync waterfall listener: runs the rest of the chain. May be called again.
pub struct Next<'a, P> {
    pub(crate) ffi: *const SyncNextFfi,
    pub(crate) _frame: FrameMarker<'a, P>,
}

impl<P> Next<'_, P> {
    /// Runs the downstream listeners and the dispatcher's default with `payload`.
    ///
    /// # Errors
    /// Whatever a downstream listener or the default returns.
    #[inline]
    pub fn run(&self, payload: &mut P) -> Result<()> {
        // SAFETY: `ffi` and the frame it borrows are alive for this listener call (lifetime 'a).
        let status = unsafe {
            let ffi = &*self.ffi;
            (ffi.call)(ffi.frame, ffi.index, (payload as *mut P).cast::<()>())
        };
        if status.is_ok() {
            return Ok(());
        }
        status.into_result().map_err(Into::into)
    }
}

pub(crate) unsafe extern "C" fn waterfall_shim<P, F>(
    data: *const (),
    payload: *mut (),
    next: *const SyncNextFfi,
) -> SyncStatus
where
    F: Fn(&mut P, Next<'_, P>) -> Result<()>,
{
    let next = Next {
        ffi: next,
        _frame: PhantomData,
    };
    // SAFETY: as in `emit_shim`; the payload is exclusively ours for this call.
    guard_status(|| unsafe { (*data.cast::<F>())(&mut *payload.cast::<P>(), next) })
}

/// `next` for an async waterfall listener: owned, re-runnable (retry middleware).
pub struct AsyncNext<E: Event> {
    pub(crate) ffi: AsyncNextFfi,
    pub(crate) _event: PhantomData<fn() -> E>,
}

impl<E: Event> Clone for AsyncNext<E> {
    fn clone(&self) -> Self {
        AsyncNext {
            ffi: self.ffi.clone(),
            _event: PhantomData,
        }
    }
}

impl<E: Event> AsyncNext<E> {
    /// Runs the downstream chain with `payload` and returns its output.
    ///
    /// # Errors
    /// Whatever a downstream listener or the default returns.
    pub async fn run(&self, payload: E::Payload) -> Result<E::Output> {
        // SAFETY: the kernel keeps the chain alive through `ffi.chain`.
        let fut = unsafe {
            (self.ffi.call)(
                self.ffi.chain.as_ptr(),
                self.ffi.index,
                ErasedBox::new(payload),
            )
        };
        let out = super::error::from_abi(fut.await)?;
        // SAFETY: the kernel checked every output in this chain against E::Output's layout.
        Ok(unsafe { out.into_inner::<E::Output>() })
    }
}

pub(crate) unsafe extern "C" fn async_waterfall_shim<E, F, Fut>(
    data: *const (),
    payload: ErasedBox,
    next: AsyncNextFfi,
) -> FfiFuture<AbiResult<ErasedBox>>
where
    E: Event,
    F: Fn(E::Payload, AsyncNext<E>) -> Fut,
    Fut: Future<Output = Result<E::Output>> + Send + 'static,
{
    let next = AsyncNext::<E> {
        ffi: next,
        _event: PhantomData,
    };
    // SAFETY: as in `emit_shim`.
    let started = catch_unwind(AssertUnwindSafe(|| unsafe {
        (*data.cast::<F>())(payload.into_inner::<E::Payload>(), next)
    }));
    match started {
        Ok(fut) => guard_future(fut.map(|r| r.map(ErasedBox::new))),
        Err(p) => ready(RResult::RErr(panic_error(&*p))),
    }
}

pub(crate) unsafe extern "C" fn parallel_shim<P, F, Fut>(
    data: *const (),
    payload: *const (),
) -> FfiFuture<AbiResult<()>>
where
    F: Fn(&P) -> Fut,
    Fut: Future<Output = Result<()>> + Send + 'static,
{
    // SAFETY: as in `emit_shim`; the returned future does not borrow the payload.
    match catch_unwind(AssertUnwindSafe(|| unsafe {
        (*data.cast::<F>())(&*payload.cast::<P>())
    })) {
        Ok(fut) => guard_future(fut),
        Err(p) => ready(RResult::RErr(panic_error(&*p))),
    }
}

pub(crate) unsafe extern "C" fn serial_shim<E, F, Fut>(
    data: *const (),
    payload: *const (),
) -> FfiFuture<AbiResult<ROption<ErasedBox>>>
where
    E: Event,
    F: Fn(&E::Payload) -> Fut,
    Fut: Future<Output = Result<Option<E::Output>>> + Send + 'static,
{
    // SAFETY: as in `emit_shim`.
    match catch_unwind(AssertUnwindSafe(|| unsafe {
        (*data.cast::<F>())(&*payload.cast::<E::Payload>())
    })) {
        Ok(fut) => guard_future(fut.map(|r| r.map(|o| o.map(ErasedBox::new).into()))),
        Err(p) => ready(RResult::RErr(panic_error(&*p))),
    }
}

// ---- dispatcher terminals ------------------------------------------------------------------

unsafe extern "C" fn sync_terminal_shim<P, F>(data: *const (), payload: *mut ()) -> SyncStatus
where
    F: FnMut(&mut P) -> Result<()>,
{
    // SAFETY: `data` is the dispatcher's `&mut F`, alive and unaliased for the whole dispatch
    // (sync dispatch never runs the terminal concurrently with itself).
    guard_status(|| unsafe { (*data.cast::<F>().cast_mut())(&mut *payload.cast::<P>()) })
}

/// Borrows `f` as a sync terminal for the duration of one dispatch.
pub(crate) fn sync_terminal<P, F>(f: &mut F) -> SyncTerminalFfi
where
    F: FnMut(&mut P) -> Result<()>,
{
    SyncTerminalFfi {
        data: (f as *mut F).cast::<()>().cast_const(),
        call: sync_terminal_shim::<P, F>,
    }
}

unsafe extern "C" fn async_terminal_shim<E, F, Fut>(
    data: *const (),
    payload: ErasedBox,
) -> FfiFuture<AbiResult<ErasedBox>>
where
    E: Event,
    F: Fn(E::Payload) -> Fut,
    Fut: Future<Output = Result<E::Output>> + Send + 'static,
{
    // SAFETY: `data` is this image's `Arc<F>`; the kernel checked the payload's layout.
    match catch_unwind(AssertUnwindSafe(|| unsafe {
        (*data.cast::<F>())(payload.into_inner::<E::Payload>())
    })) {
        Ok(fut) => guard_future(fut.map(|r| r.map(ErasedBox::new))),
        Err(p) => ready(RResult::RErr(panic_error(&*p))),
    }
}

/// Shares `f` as an async terminal.
pub(crate) fn async_terminal<E, F, Fut>(f: F) -> AsyncTerminalFfi
where
    E: Event,
    F: Fn(E::Payload) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<E::Output>> + Send + 'static,
{
    AsyncTerminalFfi {
        data: SharedPtr::new(f),
        call: async_terminal_shim::<E, F, Fut>,
    }
}
