//! Typed service contracts: a service is declared once, with the [`contract!`](crate::contract)
//! macro, as a provider trait and a client whose methods take and return Rust types. A wrong
//! method or argument type does not compile; no plugin matches method names by hand.
//!
//! Under the types, every contract shares one handle, [`ContractHandle`]: a method name, the
//! caller's name and contract version, and a [`Payload`]. One handle type for all contracts
//! means the kernel's layout check at lookup stays what it was, and evolving a contract is
//! additive: a method added within an ABI major gets `since N` and a higher contract version.
//! A caller that needs a method its provider's version lacks is refused *before* the call, and
//! a provider asked for a method it does not know refuses it; both answers are `UNKNOWN_METHOD`
//! naming the caller and the provider with their versions.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;

use abi_stable::StableAbi;
use abi_stable::std_types::{RStr, RString};
use async_ffi::FfiFuture;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::error::{Error, Result, from_abi};
use super::ffi;
use super::payload::Payload;
use super::service::Service;
use crate::abi::{AbiResult, SharedPtr};
use crate::codes::ContractCode;

/// A future a provider's method returns, boxed for dispatch.
pub type BoxedAnswer = Pin<Box<dyn Future<Output = Result<Payload>> + Send>>;

/// One method of a contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MethodSpec {
    /// The method name on the wire.
    pub name: &'static str,
    /// The contract version that introduced it.
    pub since: u32,
}

/// A declared contract (see [`contract!`](crate::contract)).
pub trait Contract: Service<Handle = ContractHandle> + Sized {
    /// This declaration's version: the highest `since` of its methods.
    const VERSION: u32;
    /// Its methods.
    const METHODS: &'static [MethodSpec];
    /// The typed client consumers get from `Context::client`.
    type Client: From<ContractClient<Self>> + Clone + Send + Sync + 'static;
}

/// Implemented by the macro: contract `Self` can be served by any `P` implementing its
/// provider trait. (Declared on the contract, not on `P`, so a contract declared outside this
/// crate can implement it: the contract is the local type.)
pub trait Serves<P: Send + Sync + 'static>: Contract {
    /// Decodes the request of `method`, runs it on `provider`, encodes the answer; `None` for
    /// a method the contract does not have.
    #[doc(hidden)]
    fn dispatch(provider: Arc<P>, method: &str, args: Payload) -> Option<BoxedAnswer>;
}

/// The one handle type of every contract.
#[repr(C)]
#[derive(StableAbi, Clone)]
pub struct ContractHandle {
    data: SharedPtr,
    provider: RString,
    version: u32,
    call: unsafe extern "C" fn(
        data: *const (),
        method: RStr<'_>,
        caller: RStr<'_>,
        caller_version: u32,
        args: Payload,
    ) -> FfiFuture<AbiResult<Payload>>,
}

impl std::fmt::Debug for ContractHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ContractHandle({} v{})", self.provider, self.version)
    }
}

struct Served<P> {
    provider: Arc<P>,
    row: String,
}

unsafe extern "C" fn dispatch_shim<C: Serves<P>, P: Send + Sync + 'static>(
    data: *const (),
    method: RStr<'_>,
    caller: RStr<'_>,
    caller_version: u32,
    args: Payload,
) -> FfiFuture<AbiResult<Payload>> {
    let started = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: `data` is this image's `Served<P>`, kept alive by the handle being called.
        let served = unsafe { &*data.cast::<Served<P>>() };
        C::dispatch(Arc::clone(&served.provider), method.as_str(), args)
            .ok_or_else(|| {
                Error::coded(
                    ContractCode::UnknownMethod,
                    format!(
                        "`{}` ({} v{caller_version}) called `{}`, which provider `{}` ({} v{}) does not have",
                        caller.as_str(),
                        C::NAME,
                        method.as_str(),
                        served.row,
                        C::NAME,
                        C::VERSION
                    ),
                )
            })
    }));
    match started {
        Ok(Ok(fut)) => ffi::guard_future(fut),
        Ok(Err(e)) => ffi::guard_future(async move { Err(e) }),
        Err(p) => {
            let msg = format!("plugin panicked: {}", ffi::panic_message(&*p));
            ffi::guard_future(async move { Err(Error::coded(ContractCode::Panic, msg)) })
        }
    }
}

impl ContractHandle {
    /// The handle through which `provider` serves contract `C`; `row` names it in errors.
    pub fn serve<C: Serves<P>, P: Send + Sync + 'static>(row: &str, provider: P) -> Self {
        ContractHandle {
            data: SharedPtr::new(Served {
                provider: Arc::new(provider),
                row: row.to_owned(),
            }),
            provider: RString::from(row),
            version: C::VERSION,
            call: dispatch_shim::<C, P>,
        }
    }

    /// The providing row.
    pub fn provider(&self) -> &str {
        self.provider.as_str()
    }

    /// The provider's contract version.
    pub fn version(&self) -> u32 {
        self.version
    }

    #[cfg(test)]
    pub(crate) fn with_version(mut self, version: u32) -> Self {
        self.version = version;
        self
    }
}

/// A consumer's untyped-free view of one provider: what the generated clients wrap.
pub struct ContractClient<C: Contract> {
    handle: ContractHandle,
    caller: Arc<str>,
    _contract: PhantomData<fn() -> C>,
}

impl<C: Contract> Clone for ContractClient<C> {
    fn clone(&self) -> Self {
        ContractClient {
            handle: self.handle.clone(),
            caller: Arc::clone(&self.caller),
            _contract: PhantomData,
        }
    }
}

impl<C: Contract> std::fmt::Debug for ContractClient<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} client of {:?}", C::NAME, self.handle)
    }
}

impl<C: Contract> ContractClient<C> {
    /// A client of `handle`; `caller` names the calling row (or `kernel`) in errors.
    pub fn new(handle: ContractHandle, caller: &str) -> Self {
        ContractClient {
            handle,
            caller: Arc::from(caller),
            _contract: PhantomData,
        }
    }

    /// The handle (its provider and version).
    pub fn handle(&self) -> &ContractHandle {
        &self.handle
    }

    /// Whether the provider has `method` (its version is at least the method's `since`).
    pub fn has(&self, method: &str) -> bool {
        C::METHODS
            .iter()
            .any(|m| m.name == method && m.since <= self.handle.version)
    }

    /// Calls `method` (introduced in version `since`) with `request`. Only the clients
    /// `contract!` generates call this (SDK 3: a method is never named by a string in plugin
    /// code); it is public because the macro expands in the plugin's crate.
    ///
    /// # Errors
    /// `UNKNOWN_METHOD` when the provider's version predates the method; `INVALID_ANSWER` when
    /// the answer is not a `Resp`; whatever the provider returns.
    #[doc(hidden)]
    pub async fn __call<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        method: &str,
        since: u32,
        request: &Req,
    ) -> Result<Resp> {
        if since > self.handle.version {
            return Err(Error::coded(
                ContractCode::UnknownMethod,
                format!(
                    "`{}` ({} v{}) called `{method}` (since v{since}), which provider `{}` ({} v{}) does not have",
                    self.caller,
                    C::NAME,
                    C::VERSION,
                    self.handle.provider,
                    C::NAME,
                    self.handle.version
                ),
            ));
        }
        let args = Payload::encode(request)?;
        // SAFETY: `data` belongs to `call`'s image and is kept alive by `self.handle`.
        let fut = unsafe {
            (self.handle.call)(
                self.handle.data.as_ptr(),
                RStr::from_str(method),
                RStr::from_str(&self.caller),
                C::VERSION,
                args,
            )
        };
        let answer = from_abi(fut.await)?;
        answer.decode::<Resp>(method).map_err(|e| {
            Error::coded(
                ContractCode::InvalidAnswer,
                format!(
                    "{} `{method}` from `{}`: {}",
                    C::NAME,
                    self.handle.provider,
                    e.message
                ),
            )
        })
    }
}

#[doc(hidden)]
pub fn __boxed<Resp, F>(fut: F) -> BoxedAnswer
where
    Resp: Serialize,
    F: Future<Output = Result<Resp>> + Send + 'static,
{
    Box::pin(async move { Payload::encode(&fut.await?) })
}
