//! [`SyncStatus`]: the result type of the synchronous hot path (sync waterfall listeners, their
//! `next`, and the dispatcher's default).
//!
//! Measured: returning the 72-byte `RResult<(), PluginError>` by value through every `next`
//! frame made a sync hop cost ~20× an in-process call, almost all of it copying results through
//! memory (docs/performance.md). `SyncStatus` is one pointer — null for success, otherwise an
//! owned boxed error freed by the image that allocated it — so it travels in a register, and
//! the error path pays for the allocation instead of every success.

use std::mem::ManuallyDrop;

use abi_stable::StableAbi;

use super::{AbiResult, PluginError};

/// An error boxed by one image, with that image's deallocator.
#[repr(C)]
#[derive(StableAbi)]
pub struct BoxedError {
    error: PluginError,
    free_shell: unsafe extern "C" fn(*mut BoxedError),
}

/// Null = success; otherwise an owned [`BoxedError`].
#[repr(transparent)]
#[derive(StableAbi)]
pub struct SyncStatus {
    err: *mut BoxedError,
}

// SAFETY: the boxed error is plain data (R-types) owned by this value.
unsafe impl Send for SyncStatus {}

unsafe extern "C" fn free_shell(p: *mut BoxedError) {
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: `p` came from `Box::into_raw` in `SyncStatus::err` of this image, and its
        // error was moved out; free the allocation without dropping the fields again.
        drop(unsafe { Box::from_raw(p.cast::<ManuallyDrop<BoxedError>>()) })
    });
}

impl SyncStatus {
    /// Success.
    #[inline(always)]
    pub fn ok() -> Self {
        SyncStatus {
            err: std::ptr::null_mut(),
        }
    }

    /// Failure with `error`.
    pub fn err(error: PluginError) -> Self {
        SyncStatus {
            err: Box::into_raw(Box::new(BoxedError { error, free_shell })),
        }
    }

    /// Whether this is success.
    #[inline(always)]
    pub fn is_ok(&self) -> bool {
        self.err.is_null()
    }

    /// Borrows the error, if any.
    #[inline(always)]
    pub fn error(&self) -> Option<&PluginError> {
        // SAFETY: non-null means an owned, live `BoxedError`.
        unsafe { self.err.as_ref().map(|b| &b.error) }
    }

    /// Converts to a `Result`, freeing the box with its own image's deallocator.
    pub fn into_result(self) -> Result<(), PluginError> {
        let this = ManuallyDrop::new(self);
        if this.err.is_null() {
            return Ok(());
        }
        // SAFETY: owned and live; the error is moved out exactly once, then the shell freed.
        unsafe {
            let error = std::ptr::read(&(*this.err).error);
            ((*this.err).free_shell)(this.err);
            Err(error)
        }
    }

    /// Converts to the general ABI result.
    pub fn into_abi(self) -> AbiResult<()> {
        self.into_result().into()
    }

    /// From the general ABI result.
    pub fn from_abi(r: AbiResult<()>) -> Self {
        match r.into_result() {
            Ok(()) => SyncStatus::ok(),
            Err(e) => SyncStatus::err(e),
        }
    }
}

impl Drop for SyncStatus {
    #[inline(always)]
    fn drop(&mut self) {
        // Success (the hot path) is a null check; freeing an error is out of line.
        if !self.err.is_null() {
            self.drop_error();
        }
    }
}

impl SyncStatus {
    #[cold]
    #[inline(never)]
    fn drop_error(&mut self) {
        let owned = SyncStatus {
            err: std::mem::replace(&mut self.err, std::ptr::null_mut()),
        };
        let _ = owned.into_result();
    }
}
