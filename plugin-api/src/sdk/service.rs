//! Typed services: a name plus an FFI-safe handle type, provided by one fiber, used by others.
//!
//! The handle type is any `StableAbi` value: a table of `extern "C"` fns, or — for every
//! request/response service — the [`ContractHandle`](super::ContractHandle) a
//! [`contract!`](crate::contract) declaration uses. The kernel compares the consumer's layout with the
//! provider's at lookup (consumer = expected, provider = found), so a provider at least as new
//! as its consumer is accepted, as in semver.

use std::marker::PhantomData;
use std::ops::Deref;

use abi_stable::StableAbi;

use crate::abi::ErasedShared;

/// A service interface: its registry name and handle type.
///
/// ```
/// use keel_plugin_api::prelude::*;
/// struct Clock;
/// impl Service for Clock {
///     const NAME: &'static str = "example.clock";
///     type Handle = ContractHandle;
/// }
/// ```
pub trait Service: 'static {
    /// Registry name, e.g. `keel.driver`.
    const NAME: &'static str;
    /// The FFI-safe handle consumers receive.
    type Handle: StableAbi + Send + Sync + 'static;
}

/// A consumer's reference to a provided service. Keeps the handle alive; derefs to it.
pub struct ServiceRef<S: Service> {
    shared: ErasedShared,
    _service: PhantomData<fn() -> S>,
}

impl<S: Service> ServiceRef<S> {
    pub(crate) fn from_shared(shared: ErasedShared) -> Self {
        ServiceRef {
            shared,
            _service: PhantomData,
        }
    }
}

impl<S: Service> Clone for ServiceRef<S> {
    fn clone(&self) -> Self {
        ServiceRef::from_shared(self.shared.clone())
    }
}

impl<S: Service> Deref for ServiceRef<S> {
    type Target = S::Handle;
    fn deref(&self) -> &S::Handle {
        // SAFETY: the kernel checked the provider's layout against S::Handle before handing it out.
        unsafe { self.shared.get::<S::Handle>() }
    }
}
