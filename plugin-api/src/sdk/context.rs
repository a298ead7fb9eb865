//! [`Context`]: one fiber's handle on the kernel — registration, dispatch, services, effects.
//!
//! Every registration is an effect owned by the fiber: the kernel disposes it, last in first
//! out, when the fiber unloads, so plugins never write cleanup for listeners or services.
//! Registration methods are typed by mode (`on` for emit, `waterfall`, `async_waterfall`,
//! `on_parallel`, `on_serial`); dispatch methods likewise (`emit`, `run_waterfall`,
//! `run_async_waterfall`, `parallel`, `serial`, in [`super::dispatch`], each taking the
//! event's [`Dispatch`](super::Dispatch) handle). A mode mismatch does not compile.

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use abi_stable::StableAbi;
use abi_stable::std_types::{RResult, RStr, RString};
use async_ffi::FutureExt as _;
use serde::de::DeserializeOwned;

use super::contract::{Contract, ContractClient, ContractHandle, Serves};
use super::error::{Error, Result, from_abi};
use super::event::{
    AsyncWaterfallEvent, EmitEvent, Event, ParallelEvent, SerialEvent, WaterfallEvent,
};
use super::ffi::{self, AsyncNext, Next};
use super::link::host;
use super::service::{Service, ServiceRef};
use crate::abi::{
    AbiResult, DisposerFfi, ErasedShared, FiberId, HostApi_Ref, ListenerCall, ListenerFfi,
    ListenerOptions, SharedPtr,
};

/// A registration (listener, service or effect) that can be removed before its fiber unloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registration {
    /// Kernel-assigned id, unique within the process.
    pub id: u64,
}

/// One fiber's handle on the kernel. Cheap to clone; valid for the fiber's whole life.
#[derive(Clone, Copy)]
pub struct Context {
    pub(super) fiber: FiberId,
    pub(super) api: HostApi_Ref,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("fiber", &self.fiber)
            .finish()
    }
}

fn rstr(s: &str) -> RStr<'_> {
    RStr::from_str(s)
}

impl Context {
    pub(crate) fn new(fiber: FiberId, api: HostApi_Ref) -> Self {
        Context { fiber, api }
    }

    /// The fiber this context belongs to.
    pub fn fiber(&self) -> FiberId {
        self.fiber
    }

    // ---- config and environment ----------------------------------------------------------

    /// The id of the profile row this fiber runs.
    ///
    /// # Errors
    /// When the fiber is gone.
    pub fn row(&self) -> Result<String> {
        Ok(from_abi((self.api.row())(self.fiber))?.into_string())
    }

    /// The row config, deserialised. The kernel already validated it against the manifest's
    /// JSON Schema, so an error here means the schema is looser than the type.
    ///
    /// # Errors
    /// `CONFIG` when the row config does not deserialise into `C`.
    pub fn config<C: DeserializeOwned>(&self) -> Result<C> {
        let json = self.config_json()?;
        serde_json::from_value(json).map_err(|e| {
            Error::coded(
                crate::codes::ContractCode::Config,
                format!("row config: {e}"),
            )
        })
    }

    /// The row config as JSON.
    ///
    /// # Errors
    /// When the kernel cannot provide it (disposed fiber).
    pub fn config_json(&self) -> Result<serde_json::Value> {
        let raw = from_abi((self.api.config())(self.fiber))?;
        Ok(serde_json::from_str(raw.as_str())?)
    }

    /// `$KEEL_HOME` (default `~/.keel`): where sessions, secrets and credentials live. Not
    /// created by the kernel; create what you need with private modes.
    ///
    /// # Errors
    /// When the fiber is gone.
    pub fn keel_home(&self) -> Result<PathBuf> {
        Ok(PathBuf::from(
            from_abi((self.api.keel_home())(self.fiber))?.into_string(),
        ))
    }

    /// A data directory private to this row, created on demand.
    ///
    /// # Errors
    /// When the directory cannot be created.
    pub fn data_dir(&self) -> Result<PathBuf> {
        Ok(PathBuf::from(
            from_abi((self.api.data_dir())(self.fiber))?.into_string(),
        ))
    }

    /// All rows and their states, as the kernel sees them.
    ///
    /// # Errors
    /// When the kernel refuses (disposed fiber).
    pub fn plugin_status(&self) -> Result<serde_json::Value> {
        let raw = from_abi((self.api.plugin_status())(self.fiber))?;
        Ok(serde_json::from_str(raw.as_str())?)
    }

    /// Row control ([`ControlOp`]): disable, enable or reload a row, read every row's
    /// status, ask whether a project file is trusted. Answers once the change is done
    /// ([`ControlAnswer`]); a row answer carries `overtaken` when another lifecycle change
    /// ended the fiber this control made before it could answer (its provider went away).
    ///
    /// # Errors
    /// `UNKNOWN_ROW`, `BUSY`, `ROW_CONFIG`, `RELOAD_FAILED` ([`ControlCode`]); a gone fiber.
    ///
    /// [`ControlOp`]: crate::sdk::ControlOp
    /// [`ControlAnswer`]: crate::sdk::ControlAnswer
    /// [`ControlCode`]: crate::host::ControlCode
    pub async fn control(&self, op: crate::sdk::ControlOp) -> Result<crate::sdk::ControlAnswer> {
        let request = serde_json::to_string(&op)?;
        let fut = (self.api.control())(self.fiber, RString::from(request));
        let raw = from_abi(fut.await)?;
        Ok(serde_json::from_str(raw.as_str())?)
    }

    /// Whether a project file this plugin declared with
    /// [`Manifest::trusts_project_files`](super::Manifest::trusts_project_files) (the hooks
    /// row: `.claude/settings.json`) may be used as its bytes are now: `keel trust DIR`
    /// recorded them, or `--trust-project` vouches for this run. A workspace is the model's to
    /// write, so a plugin asks before it runs anything such a file names.
    ///
    /// # Errors
    /// A path this row did not declare (`UNDECLARED_TRUST_FILE`), an unreadable file
    /// (`CONFIG_IO`), an unreadable trust record (`TRUST_FILE`), a gone fiber.
    pub async fn project_file_trust(&self, path: &std::path::Path) -> Result<FileTrust> {
        let op = crate::sdk::ControlOp::ProjectFileTrust {
            path: path.to_string_lossy().into_owned(),
        };
        match self.control(op).await? {
            crate::sdk::ControlAnswer::FileTrust(trust) => Ok(trust),
            other => Err(Error::coded(
                crate::host::ControlCode::Control,
                format!("project-file-trust answered {other:?}"),
            )),
        }
    }

    // ---- registration --------------------------------------------------------------------

    fn register<E: Event>(
        &self,
        options: ListenerOptions,
        listener: ListenerFfi,
    ) -> Result<Registration> {
        let id = from_abi((self.api.register())(
            self.fiber,
            rstr(E::NAME),
            E::MODE,
            <E::Payload as StableAbi>::LAYOUT,
            <E::Output as StableAbi>::LAYOUT,
            options,
            listener,
        ))?;
        Ok(Registration { id })
    }

    /// Listens to an emit event. Errors and panics are contained by the kernel.
    ///
    /// # Errors
    /// `INACTIVE_FIBER` when the fiber is unloading; `EVENT_MODE` / `EVENT_LAYOUT` on mismatch.
    pub fn on<E: EmitEvent>(
        &self,
        options: ListenerOptions,
        f: impl Fn(&E::Payload) -> Result<()> + Send + Sync + 'static,
    ) -> Result<Registration> {
        fn shim<E: EmitEvent, F: Fn(&E::Payload) -> Result<()> + Send + Sync + 'static>(
            f: F,
        ) -> ListenerFfi {
            ListenerFfi {
                data: SharedPtr::new(f),
                call: ListenerCall::Emit(ffi::emit_shim::<E::Payload, F>),
            }
        }
        self.register::<E>(options, shim::<E, _>(f))
    }

    /// Joins a sync waterfall. Call `next.run(payload)` to continue; don't, to short-circuit.
    ///
    /// # Errors
    /// As for [`Context::on`].
    pub fn waterfall<E: WaterfallEvent>(
        &self,
        options: ListenerOptions,
        f: impl Fn(&mut E::Payload, Next<'_, E::Payload>) -> Result<()> + Send + Sync + 'static,
    ) -> Result<Registration> {
        fn shim<E: WaterfallEvent, F>(f: F) -> ListenerFfi
        where
            F: Fn(&mut E::Payload, Next<'_, E::Payload>) -> Result<()> + Send + Sync + 'static,
        {
            ListenerFfi {
                data: SharedPtr::new(f),
                call: ListenerCall::Waterfall(ffi::waterfall_shim::<E::Payload, F>),
            }
        }
        self.register::<E>(options, shim::<E, _>(f))
    }

    /// Joins an async waterfall: payload by value; `next.run(p).await` may be called repeatedly.
    ///
    /// # Errors
    /// As for [`Context::on`].
    pub fn async_waterfall<E, F, Fut>(&self, options: ListenerOptions, f: F) -> Result<Registration>
    where
        E: AsyncWaterfallEvent,
        F: Fn(E::Payload, AsyncNext<E>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<E::Output>> + Send + 'static,
    {
        let listener = ListenerFfi {
            data: SharedPtr::new(f),
            call: ListenerCall::AsyncWaterfall(ffi::async_waterfall_shim::<E, F, Fut>),
        };
        self.register::<E>(options, listener)
    }

    /// Joins a parallel event. Borrow what you need from the payload before the `async` part.
    ///
    /// # Errors
    /// As for [`Context::on`].
    pub fn on_parallel<E, F, Fut>(&self, options: ListenerOptions, f: F) -> Result<Registration>
    where
        E: ParallelEvent,
        F: Fn(&E::Payload) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<()>> + Send + 'static,
    {
        let listener = ListenerFfi {
            data: SharedPtr::new(f),
            call: ListenerCall::Parallel(ffi::parallel_shim::<E::Payload, F, Fut>),
        };
        self.register::<E>(options, listener)
    }

    /// Joins a serial event: return `Some(decision)` to stop the chain, `None` to pass.
    ///
    /// # Errors
    /// As for [`Context::on`].
    pub fn on_serial<E, F, Fut>(&self, options: ListenerOptions, f: F) -> Result<Registration>
    where
        E: SerialEvent,
        F: Fn(&E::Payload) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Option<E::Output>>> + Send + 'static,
    {
        let listener = ListenerFfi {
            data: SharedPtr::new(f),
            call: ListenerCall::Serial(ffi::serial_shim::<E, F, Fut>),
        };
        self.register::<E>(options, listener)
    }

    /// Removes a registration now, running its disposer (services: dependents unload first).
    ///
    /// # Errors
    /// Unknown registration ids.
    pub async fn unregister(&self, registration: Registration) -> Result<()> {
        from_abi((self.api.unregister())(self.fiber, registration.id).await)
    }

    // ---- dispatch: `dispatch.rs` (each method takes the event's `Dispatch` handle) ------

    // ---- services ------------------------------------------------------------------------

    /// Provides a service. It must be declared in the manifest's `provides`. Crate-private
    /// since SDK 3: plugins serve typed contracts ([`Context::serve`]).
    ///
    /// # Errors
    /// `UNDECLARED_SERVICE`, `DUPLICATE_PROVIDER`, `INACTIVE_FIBER`.
    pub(crate) fn provide<S: Service>(&self, handle: S::Handle) -> Result<Registration> {
        let id = from_abi((self.api.provide())(
            self.fiber,
            rstr(S::NAME),
            ErasedShared::new(handle),
        ))?;
        Ok(Registration { id })
    }

    /// A required service (declared in `requires`); it is active whenever this fiber is.
    /// Crate-private since SDK 3: plugins hold typed clients ([`Context::client`]).
    ///
    /// # Errors
    /// `UNDECLARED_REQUIREMENT` when not declared; `SERVICE_UNAVAILABLE`; `SERVICE_LAYOUT`.
    pub(crate) fn service<S: Service>(&self) -> Result<ServiceRef<S>> {
        self.lookup::<S>(false)?.ok_or_else(|| {
            Error::coded(
                crate::codes::ContractCode::ServiceUnavailable,
                format!("service '{}' has no active provider", S::NAME),
            )
        })
    }

    /// An optional probe: `None` when no provider is active (crate-private, as
    /// [`Context::service`]; plugins use [`Context::get_client`]).
    ///
    /// # Errors
    /// `SERVICE_LAYOUT` when a provider exists with an incompatible handle type.
    pub(crate) fn get_service<S: Service>(&self) -> Result<Option<ServiceRef<S>>> {
        self.lookup::<S>(true)
    }

    // ---- typed contracts -----------------------------------------------------------------

    /// Serves contract `C` with `provider` under `C::NAME` (declared in the manifest's
    /// `provides`).
    ///
    /// # Errors
    /// `UNDECLARED_SERVICE`, `DUPLICATE_PROVIDER`, `INACTIVE_FIBER`.
    pub fn serve<C: Serves<P>, P: Send + Sync + 'static>(
        &self,
        provider: P,
    ) -> Result<Registration> {
        let handle = ContractHandle::serve::<C, P>(&self.row()?, provider);
        self.provide::<C>(handle)
    }

    /// Serves contract `C` under a name chosen at run time (a tool provider's
    /// `keel.tool.<row>`, an adapter's `keel.llm.adapter.<row>`), declared with
    /// [`Manifest::provides_named`](super::Manifest::provides_named).
    ///
    /// # Errors
    /// `UNDECLARED_SERVICE`, `DUPLICATE_PROVIDER`, `INACTIVE_FIBER`.
    pub fn serve_named<C: Serves<P>, P: Send + Sync + 'static>(
        &self,
        name: &str,
        provider: P,
    ) -> Result<Registration> {
        let handle = ContractHandle::serve::<C, P>(&self.row()?, provider);
        let id = from_abi((self.api.provide())(
            self.fiber,
            rstr(name),
            ErasedShared::new(handle),
        ))?;
        Ok(Registration { id })
    }

    /// A typed client of a required contract (declared in `requires`).
    ///
    /// # Errors
    /// As [`Context::service`].
    pub fn client<C: Contract>(&self) -> Result<C::Client> {
        let service = self.service::<C>()?;
        Ok(ContractClient::<C>::new((*service).clone(), &self.row()?).into())
    }

    /// A typed client of an optional contract: `None` when no provider is active.
    ///
    /// # Errors
    /// As [`Context::get_service`].
    pub fn get_client<C: Contract>(&self) -> Result<Option<C::Client>> {
        let Some(service) = self.get_service::<C>()? else {
            return Ok(None);
        };
        Ok(Some(
            ContractClient::<C>::new((*service).clone(), &self.row()?).into(),
        ))
    }

    /// A typed client of contract `C` served under a name learnt at run time; `None` when no
    /// provider is active under it.
    ///
    /// # Errors
    /// `SERVICE_LAYOUT` when the provider's handle is not a contract handle.
    pub fn named_client<C: Contract>(&self, name: &str) -> Result<Option<C::Client>> {
        let found = from_abi((self.api.service())(
            self.fiber,
            rstr(name),
            <ContractHandle as StableAbi>::LAYOUT,
            true,
        ))?;
        let Some(shared) = found.into_option() else {
            return Ok(None);
        };
        let service: ServiceRef<C> = ServiceRef::from_shared(shared);
        Ok(Some(
            ContractClient::<C>::new((*service).clone(), &self.row()?).into(),
        ))
    }

    fn lookup<S: Service>(&self, optional: bool) -> Result<Option<ServiceRef<S>>> {
        let found = from_abi((self.api.service())(
            self.fiber,
            rstr(S::NAME),
            <S::Handle as StableAbi>::LAYOUT,
            optional,
        ))?;
        Ok(found.into_option().map(ServiceRef::from_shared))
    }

    // ---- effects and tasks ---------------------------------------------------------------

    /// Registers a disposer, run at teardown in strict last-in-first-out order.
    ///
    /// # Errors
    /// `INACTIVE_FIBER` when the fiber is unloading or disposed.
    pub fn effect<F, Fut>(&self, label: &str, disposer: F) -> Result<Registration>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<()>> + Send + 'static,
    {
        let id = from_abi((self.api.effect())(
            self.fiber,
            rstr(label),
            disposer_ffi(disposer),
        ))?;
        Ok(Registration { id })
    }

    /// Spawns a task on the kernel's runtime; it is cancelled when this fiber unloads.
    ///
    /// # Errors
    /// `INACTIVE_FIBER`.
    pub fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) -> Result<()> {
        let (fiber, api) = (self.fiber, self.api);
        let guarded = async move {
            if let Err(p) =
                futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(task)).await
            {
                // Contained, but never silent.
                let message = format!(
                    "a task spawned by this row panicked: {}",
                    ffi::panic_message(&*p)
                );
                (api.log())(
                    fiber,
                    crate::abi::LogLevel::Error,
                    RStr::from_str("keel::plugin::task"),
                    RStr::from_str(&message),
                );
            }
        };
        from_abi((self.api.spawn())(self.fiber, guarded.into_ffi()))
    }
}

/// Sleeps on the kernel's timer (plugins have no tokio reactor of their own).
///
/// Before the kernel first activated a row of this plugin there is no timer to use, and the
/// call returns at once; plugins only run code after activation, so this is not reachable
/// through the SDK's normal paths.
pub async fn sleep(duration: Duration) {
    if let Ok(api) = host() {
        let ms = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
        (api.sleep())(ms).await;
    }
}

fn disposer_ffi<F, Fut>(f: F) -> DisposerFfi
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = Result<()>> + Send + 'static,
{
    unsafe extern "C" fn call<F, Fut>(data: *mut ()) -> async_ffi::FfiFuture<AbiResult<()>>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<()>> + Send + 'static,
    {
        // SAFETY: `data` is the `Box<F>` leaked below; consumed exactly once.
        let f = unsafe { Box::from_raw(data.cast::<F>()) };
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
            Ok(fut) => ffi::guard_future(fut),
            Err(p) => {
                let e = crate::abi::PluginError::coded(
                    crate::codes::ContractCode::Panic,
                    format!("plugin panicked: {}", ffi::panic_message(&*p)),
                );
                async move { RResult::RErr(e) }.into_ffi()
            }
        }
    }
    unsafe extern "C" fn drop_unrun<F>(data: *mut ()) {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // SAFETY: never run, so the box is still owned.
            drop(unsafe { Box::from_raw(data.cast::<F>()) })
        }));
    }
    let data = Box::into_raw(Box::new(f)).cast::<()>();
    // SAFETY: `call` and `drop_unrun` are monomorphised for the same F as `data`.
    unsafe { DisposerFfi::from_raw(data, call::<F, Fut>, drop_unrun::<F>) }
}

/// Builds a disposer from a plain closure (unit tests of the ABI types).
#[cfg(test)]
pub(crate) fn test_disposer(f: impl FnOnce() + Send + 'static) -> DisposerFfi {
    disposer_ffi(move || async move {
        f();
        Ok(())
    })
}

use super::control::FileTrust;
