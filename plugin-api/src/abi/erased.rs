//! Type-erased values and call objects that cross the boundary.
//!
//! The bus is generic over payload types, but the ABI cannot be: a listener registered by one
//! image is called by the kernel with a payload built by a third. So payloads cross as raw
//! pointers plus the `TypeLayout` of their type; the kernel compares layouts when a listener
//! registers and when a dispatcher dispatches, and only then does the SDK cast back. Every owned
//! value carries the drop/free functions of the image that allocated it, so memory is always
//! released by its own allocator. Each call object is a `repr(C)` pair of data pointer and
//! `extern "C"` function, built only by the SDK (see `sdk::ffi`), which wraps every call in
//! `catch_unwind`.

use std::mem::ManuallyDrop;
use std::sync::Arc;

use abi_stable::StableAbi;
use abi_stable::std_types::ROption;
use abi_stable::type_layout::TypeLayout;
use async_ffi::FfiFuture;

use super::AbiResult;
use super::status::SyncStatus;

/// Runs `f`, swallowing a panic: used where unwinding out of an `extern "C"` fn would abort.
fn no_unwind(f: impl FnOnce()) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
}

/// An owned value of some `StableAbi` type, freed by the image that allocated it.
#[repr(C)]
#[derive(StableAbi)]
pub struct ErasedBox {
    ptr: *mut (),
    drop_value: unsafe extern "C" fn(*mut ()),
    free_shell: unsafe extern "C" fn(*mut ()),
    layout: &'static TypeLayout,
}

// SAFETY: only constructed from `T: Send` (see `ErasedBox::new`).
unsafe impl Send for ErasedBox {}

unsafe extern "C" fn drop_boxed<T>(ptr: *mut ()) {
    // SAFETY: `ptr` came from `Box::<T>::into_raw` in `ErasedBox::new` of this same image.
    no_unwind(|| drop(unsafe { Box::from_raw(ptr.cast::<T>()) }));
}

unsafe extern "C" fn free_boxed_shell<T>(ptr: *mut ()) {
    // SAFETY: the value was moved out with `ptr::read`; free the allocation without dropping it.
    no_unwind(|| drop(unsafe { Box::from_raw(ptr.cast::<ManuallyDrop<T>>()) }));
}

impl ErasedBox {
    /// Boxes `value`, remembering its layout and this image's drop functions.
    pub fn new<T: StableAbi + Send + 'static>(value: T) -> Self {
        ErasedBox {
            ptr: Box::into_raw(Box::new(value)).cast::<()>(),
            drop_value: drop_boxed::<T>,
            free_shell: free_boxed_shell::<T>,
            layout: T::LAYOUT,
        }
    }

    /// The layout of the boxed value's type.
    pub fn layout(&self) -> &'static TypeLayout {
        self.layout
    }

    /// A pointer to the value, valid while `self` lives.
    pub fn as_ptr(&self) -> *const () {
        self.ptr
    }

    /// Moves the value out.
    ///
    /// # Safety
    /// The caller must have checked that the boxed type's layout is compatible with `T`.
    pub unsafe fn into_inner<T>(self) -> T {
        let this = ManuallyDrop::new(self);
        // SAFETY: layout-compatible per the caller; the shell is freed by its own image.
        unsafe {
            let value = std::ptr::read(this.ptr.cast::<T>());
            (this.free_shell)(this.ptr);
            value
        }
    }
}

impl Drop for ErasedBox {
    fn drop(&mut self) {
        // SAFETY: `ptr` is live and owned; `drop_value` belongs to the allocating image.
        unsafe { (self.drop_value)(self.ptr) }
    }
}

/// A reference-counted opaque object (a closure, a service handle), released by its own image.
#[repr(C)]
#[derive(StableAbi)]
pub struct SharedPtr {
    ptr: *const (),
    retain: unsafe extern "C" fn(*const ()),
    release: unsafe extern "C" fn(*const ()),
}

// SAFETY: only constructed from `Arc<T>` with `T: Send + Sync`.
unsafe impl Send for SharedPtr {}
// SAFETY: as for `Send`: the pointee is an `Arc<T>` with `T: Sync`.
unsafe impl Sync for SharedPtr {}

unsafe extern "C" fn arc_retain<T>(ptr: *const ()) {
    // SAFETY: `ptr` came from `Arc::<T>::into_raw` of this image and is still counted.
    no_unwind(|| unsafe { Arc::increment_strong_count(ptr.cast::<T>()) });
}

unsafe extern "C" fn arc_release<T>(ptr: *const ()) {
    // SAFETY: as above; this gives back one count.
    no_unwind(|| unsafe { Arc::decrement_strong_count(ptr.cast::<T>()) });
}

impl SharedPtr {
    /// Shares `value` across the boundary.
    pub fn new<T: Send + Sync + 'static>(value: T) -> Self {
        SharedPtr {
            ptr: Arc::into_raw(Arc::new(value)).cast::<()>(),
            retain: arc_retain::<T>,
            release: arc_release::<T>,
        }
    }

    /// The raw pointer, valid while `self` lives.
    pub fn as_ptr(&self) -> *const () {
        self.ptr
    }
}

impl Clone for SharedPtr {
    fn clone(&self) -> Self {
        // SAFETY: `self` holds a count, so the object is alive.
        unsafe { (self.retain)(self.ptr) };
        SharedPtr {
            ptr: self.ptr,
            retain: self.retain,
            release: self.release,
        }
    }
}

impl Drop for SharedPtr {
    fn drop(&mut self) {
        // SAFETY: gives back the count this value holds.
        unsafe { (self.release)(self.ptr) }
    }
}

/// A shared value of a `StableAbi` type (a service handle), with its layout.
#[repr(C)]
#[derive(StableAbi, Clone)]
pub struct ErasedShared {
    inner: SharedPtr,
    layout: &'static TypeLayout,
}

impl ErasedShared {
    /// Shares `value`, remembering its layout.
    pub fn new<T: StableAbi + Send + Sync + 'static>(value: T) -> Self {
        ErasedShared {
            inner: SharedPtr::new(value),
            layout: T::LAYOUT,
        }
    }

    /// The layout of the shared value's type.
    pub fn layout(&self) -> &'static TypeLayout {
        self.layout
    }

    /// Borrows the value.
    ///
    /// # Safety
    /// The caller must have checked that the layout is compatible with `T`.
    pub unsafe fn get<T>(&self) -> &T {
        // SAFETY: per the caller, and the pointer is alive while `self` is.
        unsafe { &*self.inner.as_ptr().cast::<T>() }
    }
}

/// Per-listener options chosen at registration. `Default` is order 0, the kernel's deadline.
#[repr(C)]
#[derive(StableAbi, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ListenerOptions {
    /// Lower runs first; ties run in registration order.
    pub order: i32,
    /// Deadline for one call of an async listener, in ms; 0 = the kernel's default.
    pub deadline_ms: u64,
}

impl ListenerOptions {
    /// Options with an explicit order (lower runs first).
    pub fn order(order: i32) -> Self {
        ListenerOptions {
            order,
            deadline_ms: 0,
        }
    }

    /// Sets a per-call deadline in milliseconds (async listeners).
    pub fn deadline_ms(mut self, ms: u64) -> Self {
        self.deadline_ms = ms;
        self
    }
}

/// The mode-specific entry point of a listener. The variant is checked against the event's mode.
#[repr(u8)]
#[derive(StableAbi, Clone, Copy)]
pub enum ListenerCall {
    /// `fn(data, &Payload)`
    Emit(unsafe extern "C" fn(data: *const (), payload: *const ()) -> AbiResult<()>),
    /// `fn(data, &mut Payload, next)`
    Waterfall(
        unsafe extern "C" fn(
            data: *const (),
            payload: *mut (),
            next: *const SyncNextFfi,
        ) -> SyncStatus,
    ),
    /// `fn(data, Payload, next) -> Output`
    AsyncWaterfall(
        unsafe extern "C" fn(
            data: *const (),
            payload: ErasedBox,
            next: AsyncNextFfi,
        ) -> FfiFuture<AbiResult<ErasedBox>>,
    ),
    /// `fn(data, &Payload)`; the returned future must not borrow the payload.
    Parallel(unsafe extern "C" fn(data: *const (), payload: *const ()) -> FfiFuture<AbiResult<()>>),
    /// `fn(data, &Payload) -> Option<Output>`; the returned future must not borrow the payload.
    Serial(
        unsafe extern "C" fn(
            data: *const (),
            payload: *const (),
        ) -> FfiFuture<AbiResult<ROption<ErasedBox>>>,
    ),
}

/// A registered listener: its closure (owned by the plugin image) and its entry point.
#[repr(C)]
#[derive(StableAbi, Clone)]
pub struct ListenerFfi {
    /// The plugin's closure, type-erased.
    pub data: SharedPtr,
    /// How to call it.
    pub call: ListenerCall,
}

/// `next` of a sync waterfall: borrows the kernel's dispatch frame, valid during the call only.
#[repr(C)]
#[derive(StableAbi, Clone, Copy)]
pub struct SyncNextFfi {
    /// Kernel dispatch frame.
    pub frame: *const (),
    /// Index of the next listener in the frame's snapshot.
    pub index: usize,
    /// Runs listeners `index..` and then the terminal.
    pub call: unsafe extern "C" fn(frame: *const (), index: usize, payload: *mut ()) -> SyncStatus,
}

/// `next` of an async waterfall: owned and `'static`, may be called more than once.
#[repr(C)]
#[derive(StableAbi, Clone)]
pub struct AsyncNextFfi {
    /// Kernel chain snapshot (kept alive by this value).
    pub chain: SharedPtr,
    /// Index of the next listener.
    pub index: usize,
    /// Runs listeners `index..` and then the terminal with `payload`.
    pub call: unsafe extern "C" fn(
        chain: *const (),
        index: usize,
        payload: ErasedBox,
    ) -> FfiFuture<AbiResult<ErasedBox>>,
}

/// The dispatcher's default for a sync waterfall: runs after the last listener calls `next`.
#[repr(C)]
#[derive(StableAbi, Clone, Copy)]
pub struct SyncTerminalFfi {
    /// The dispatcher's closure (borrowed for the dispatch).
    pub data: *const (),
    /// Entry point.
    pub call: unsafe extern "C" fn(data: *const (), payload: *mut ()) -> SyncStatus,
}

/// The dispatcher's default for an async waterfall; may run several times (re-run `next`).
#[repr(C)]
#[derive(StableAbi, Clone)]
pub struct AsyncTerminalFfi {
    /// The dispatcher's closure.
    pub data: SharedPtr,
    /// Entry point.
    pub call: unsafe extern "C" fn(
        data: *const (),
        payload: ErasedBox,
    ) -> FfiFuture<AbiResult<ErasedBox>>,
}

/// A one-shot disposer of an effect; dropped without being called if never run.
#[repr(C)]
#[derive(StableAbi)]
pub struct DisposerFfi {
    data: *mut (),
    call: unsafe extern "C" fn(data: *mut ()) -> FfiFuture<AbiResult<()>>,
    drop_unrun: unsafe extern "C" fn(data: *mut ()),
}

// SAFETY: only constructed from `Send` closures.
unsafe impl Send for DisposerFfi {}

impl DisposerFfi {
    /// Builds a disposer from its raw parts. Used by the SDK only.
    ///
    /// # Safety
    /// `call` consumes `data`; `drop_unrun` frees it without running; both from the same image.
    pub unsafe fn from_raw(
        data: *mut (),
        call: unsafe extern "C" fn(*mut ()) -> FfiFuture<AbiResult<()>>,
        drop_unrun: unsafe extern "C" fn(*mut ()),
    ) -> Self {
        DisposerFfi {
            data,
            call,
            drop_unrun,
        }
    }

    /// Runs the disposer, consuming it.
    pub fn run(self) -> FfiFuture<AbiResult<()>> {
        let this = ManuallyDrop::new(self);
        // SAFETY: `call` consumes `data` exactly once; `this` is never dropped.
        unsafe { (this.call)(this.data) }
    }
}

impl Drop for DisposerFfi {
    fn drop(&mut self) {
        // SAFETY: the disposer was never run, so `data` is still owned here.
        unsafe { (self.drop_unrun)(self.data) }
    }
}

#[cfg(test)]
#[path = "erased_tests.rs"]
mod tests;
