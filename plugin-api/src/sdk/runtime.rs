//! The opt-in plugin-owned tokio runtime, for tokio-bound libraries (reqwest, tonic).
//!
//! Each cdylib has its own copy of tokio whose thread-local context the kernel's runtime never
//! sets, so `tokio::spawn` or a reqwest call in plugin code would panic with "no reactor
//! running". Passing the kernel's `Handle` across is unsound (tokio#5974). Instead the plugin
//! lazily builds a one-worker runtime of its own copy and bridges work to it: the future runs
//! there, and the kernel awaits the join handle through runtime-agnostic wakers.

use std::future::Future;
use std::sync::Mutex;

use super::error::{Error, Result};

static RUNTIME: Mutex<Option<tokio::runtime::Runtime>> = Mutex::new(None);

/// A handle to this plugin's own runtime, built on first use.
///
/// # Errors
/// `RUNTIME` when the runtime cannot be built or was shut down.
pub fn plugin_runtime() -> Result<tokio::runtime::Handle> {
    let mut slot = RUNTIME.lock().map_err(|_| {
        Error::coded(
            crate::codes::SdkCode::Runtime,
            "plugin runtime lock poisoned",
        )
    })?;
    if let Some(rt) = slot.as_ref() {
        return Ok(rt.handle().clone());
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("keel-plugin-rt")
        .enable_all()
        .build()
        .map_err(|e| {
            Error::coded(
                crate::codes::SdkCode::Runtime,
                format!("cannot build plugin runtime: {e}"),
            )
        })?;
    let handle = rt.handle().clone();
    *slot = Some(rt);
    Ok(handle)
}

/// Runs `fut` on the plugin runtime and awaits it from wherever the caller is polled.
///
/// # Errors
/// `RUNTIME` when the runtime is unavailable; `PANIC` when the task panicked.
pub async fn spawn_bridged<T, F>(fut: F) -> Result<T>
where
    T: Send + 'static,
    F: Future<Output = T> + Send + 'static,
{
    let handle = plugin_runtime()?;
    handle.spawn(fut).await.map_err(|e| {
        if e.is_panic() {
            Error::coded(
                crate::codes::ContractCode::Panic,
                "task on the plugin runtime panicked",
            )
        } else {
            Error::coded(
                crate::codes::SdkCode::Cancelled,
                "task on the plugin runtime was cancelled",
            )
        }
    })
}

pub(crate) fn shutdown_runtime() {
    if let Ok(mut slot) = RUNTIME.lock()
        && let Some(rt) = slot.take()
    {
        rt.shutdown_background();
    }
}
