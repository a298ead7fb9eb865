//! [`CallHandle`]: a ready-made service handle for request/response services that are not on a
//! hot path (drivers, control surfaces, test fixtures).
//!
//! Arguments and results are JSON strings: about a microsecond per call, evolvable without an ABI
//! break. The agent's services (LLM registry and adapters, tools, approval) use it too: a model
//! request or a tool body costs milliseconds, so the JSON hop is noise (see
//! `docs/performance.md`, per-step overhead).

use std::future::Future;

use abi_stable::StableAbi;
use abi_stable::std_types::{RStr, RString};
use async_ffi::FfiFuture;

use super::error::{Result, from_abi};
use super::ffi;
use crate::abi::{AbiResult, SharedPtr};

/// A JSON request/response service handle.
#[repr(C)]
#[derive(StableAbi, Clone)]
pub struct CallHandle {
    data: SharedPtr,
    call: unsafe extern "C" fn(
        data: *const (),
        method: RStr<'_>,
        args: RString,
    ) -> FfiFuture<AbiResult<RString>>,
}

impl std::fmt::Debug for CallHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CallHandle")
    }
}

#[allow(unsafe_code)]
unsafe extern "C" fn call_shim<F, Fut>(
    data: *const (),
    method: RStr<'_>,
    args: RString,
) -> FfiFuture<AbiResult<RString>>
where
    F: Fn(String, serde_json::Value) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<serde_json::Value>> + Send + 'static,
{
    let method = method.as_str().to_owned();
    let started = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let args: serde_json::Value = serde_json::from_str(args.as_str())?;
        // SAFETY: `data` is this image's `Arc<F>`.
        Ok::<_, super::Error>(unsafe { (*data.cast::<F>())(method, args) })
    }));
    match started {
        Ok(Ok(fut)) => ffi::guard_future(async move { Ok(RString::from(fut.await?.to_string())) }),
        Ok(Err(e)) => ffi::guard_future(async move { Err(e) }),
        Err(p) => {
            let msg = format!("plugin panicked: {}", ffi::panic_message(&*p));
            ffi::guard_future(async move { Err(super::Error::new("PANIC", msg)) })
        }
    }
}

impl CallHandle {
    /// Wraps an async function of `(method, args)`.
    pub fn new<F, Fut>(f: F) -> Self
    where
        F: Fn(String, serde_json::Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<serde_json::Value>> + Send + 'static,
    {
        CallHandle {
            data: SharedPtr::new(f),
            call: call_shim::<F, Fut>,
        }
    }

    /// Calls `method` with `args`.
    ///
    /// # Errors
    /// Whatever the provider returns; `PANIC` if it panicked.
    pub async fn call(&self, method: &str, args: serde_json::Value) -> Result<serde_json::Value> {
        let raw = self.call_text(method, args.to_string()).await?;
        Ok(serde_json::from_str(&raw)?)
    }

    /// Calls `method` with arguments that are already JSON text, and returns the answer as
    /// text: for registries that forward a payload they do not need to read (the LLM registry
    /// passing a request to its adapter), so it is not parsed and re-serialised on the way.
    /// The provider still receives parsed arguments; malformed text fails there.
    ///
    /// # Errors
    /// Whatever the provider returns; `PANIC` if it panicked.
    #[allow(unsafe_code)]
    pub async fn call_text(&self, method: &str, args: String) -> Result<String> {
        // SAFETY: `data` belongs to `call`'s image and is kept alive by `self`.
        let fut = unsafe {
            (self.call)(
                self.data.as_ptr(),
                RStr::from_str(method),
                RString::from(args),
            )
        };
        Ok(from_abi(fut.await)?.into_string())
    }
}
