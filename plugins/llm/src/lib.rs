//! `llm`: the `keel.llm` service (ARCHITECTURE §8, requirements C8 and B14). It owns the adapter
//! registry ([`registry`], plain Rust) and runs every model call through the `llm/stream`
//! waterfall, whose terminal dispatches exactly one attempt to the adapter the call was prepared
//! against. Adapter trouble of any kind comes back as a terminal `finish{error}` chunk
//! ([`normalise`]); only middleware failures (a listener that failed or panicked) are errors.
//! `check` and `limits` ([`limits`]) go straight to the provider's adapter, without I/O.
//!
//! The request is forwarded untouched: its history is a list of `Frozen` messages, so reading
//! the route, running the waterfall and calling the adapter move references, never the text.

pub mod limits;
pub mod normalise;
pub mod registry;

use std::sync::{Arc, Mutex, MutexGuard};

use keel_plugin_api::codes::ContractCode;
use keel_plugin_api::events::Typed;
use keel_plugin_api::events::llm::{LlmCall, Stream};
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::llm::{
    AdapterRegistration, CheckRequest, Llm, LlmAdapter, LlmAdapterClient, LlmCallConfig, LlmCode,
    LlmFailure, LlmProvider, LlmRequest, LlmResponse, ModelLimits, ProviderList, RegisterAdapter,
    ReplaceProviders,
};

use registry::{PreparedCall, Registry, RegistryError};

type Shared = Arc<Mutex<Registry>>;

fn lock(state: &Shared) -> Result<MutexGuard<'_, Registry>> {
    state
        .lock()
        .map_err(|_| Error::coded(ContractCode::Plugin, "the LLM registry lock is poisoned"))
}

fn refusal(e: RegistryError) -> Error {
    Error::coded(e.code, e.message)
}

fn failure_error(f: LlmFailure) -> Error {
    Error::coded(f.code, f.message)
}

/// The `keel.llm` provider: the registry and this fiber's context.
struct Service {
    ctx: Context,
    state: Shared,
}

impl LlmProvider for Service {
    async fn register(&self, a: RegisterAdapter) -> Result<AdapterRegistration> {
        let registration = lock(&self.state)?
            .register(&a.service, a.providers, a.default_model)
            .map_err(refusal)?;
        Ok(AdapterRegistration { registration })
    }

    async fn replace(&self, a: ReplaceProviders) -> Result<()> {
        lock(&self.state)?
            .replace(a.registration, a.providers)
            .map_err(refusal)
    }

    async fn unregister(&self, a: AdapterRegistration) -> Result<()> {
        lock(&self.state)?
            .unregister(a.registration)
            .map_err(refusal)
    }

    async fn providers(&self) -> Result<ProviderList> {
        Ok(ProviderList {
            providers: lock(&self.state)?.providers(),
        })
    }

    async fn check(&self, request: CheckRequest) -> Result<()> {
        check(self.ctx, &self.state, request).await
    }

    async fn stream(&self, request: LlmRequest) -> Result<LlmResponse> {
        stream(self.ctx, &self.state, request).await
    }

    async fn limits(&self, config: LlmCallConfig) -> Result<ModelLimits> {
        let adapter = adapter_for(self.ctx, &self.state, &config.provider)?;
        limits::from_adapter(&adapter, config).await
    }
}

/// `check`: asks the adapter for `config.provider` whether it could dispatch (no I/O).
async fn check(ctx: Context, state: &Shared, request: CheckRequest) -> Result<()> {
    adapter_for(ctx, state, &request.config.provider)?
        .check(request)
        .await
}

/// The running adapter that serves `provider` (`check` and `limits`).
///
/// # Errors
/// `NO_ADAPTER` when nothing is registered for it or its adapter is not running.
fn adapter_for(ctx: Context, state: &Shared, provider: &str) -> Result<LlmAdapterClient> {
    let route = {
        let registry = lock(state)?;
        registry
            .resolve(provider)
            .ok_or_else(|| failure_error(registry.no_adapter(provider)))?
    };
    ctx.named_client::<LlmAdapter>(&route.service)?
        .ok_or_else(|| {
            Error::coded(
                LlmCode::NoAdapter,
                format!(
                    "provider '{provider}' is registered by '{}', which is not running",
                    route.service
                ),
            )
        })
}

/// `stream`: prepares the call once, then runs `llm/stream` with the dispatching terminal.
async fn stream(ctx: Context, state: &Shared, request: LlmRequest) -> Result<LlmResponse> {
    let prepared: Arc<Result<PreparedCall, LlmFailure>> =
        Arc::new(lock(state)?.prepare(&request.config));
    let payload = LlmCall::new(&request)?;
    drop(request);
    let terminal = move |call: LlmCall| {
        let prepared = Arc::clone(&prepared);
        async move {
            let response = dispatch(ctx, &prepared, &call).await?;
            Typed::new(&response)
        }
    };
    let out = ctx
        .run_async_waterfall(crate::DISPATCH.stream, payload, terminal)
        .await?;
    let response: LlmResponse = out.into_inner().map_err(|e| {
        Error::coded(
            LlmCode::LlmStreamOutput,
            format!(
                "an llm/stream listener returned an invalid response: {}",
                e.message
            ),
        )
    })?;
    if !normalise::is_well_formed(&response) {
        return Err(Error::coded(
            LlmCode::LlmStreamOutput,
            "an llm/stream listener returned a response that does not end in exactly one finish chunk",
        ));
    }
    Ok(response)
}

/// The waterfall's terminal: one attempt at the prepared adapter, every failure a chunk.
async fn dispatch(
    ctx: Context,
    prepared: &Result<PreparedCall, LlmFailure>,
    call: &LlmCall,
) -> Result<LlmResponse> {
    // A listener that garbled the request is a middleware failure: it stays an error.
    let request = call.request()?;
    let prepared = match prepared {
        Ok(p) => p,
        Err(f) => return Ok(normalise::failed(f.clone())),
    };
    let service = match prepared.dispatch(&request.config) {
        Ok(s) => s.to_owned(),
        Err(f) => return Ok(normalise::failed(f)),
    };
    let adapter = match ctx.named_client::<LlmAdapter>(&service) {
        Ok(Some(a)) => a,
        Ok(None) => {
            return Ok(normalise::failed(normalise::failure(
                LlmCode::NoAdapter,
                format!(
                    "the adapter '{service}' for provider '{}' is no longer running",
                    request.config.provider
                ),
            )));
        }
        Err(e) => {
            return Ok(normalise::failed(normalise::failure(
                LlmCode::NoAdapter,
                format!("the adapter '{service}' cannot be reached: {e}"),
            )));
        }
    };
    Ok(match adapter.generate(request).await {
        Ok(response) => normalise::enforce(&service, response),
        Err(e) => normalise::from_adapter_error(&service, e),
    })
}

/// The row config: none.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct Config {}

/// The plugin value.
#[derive(Default)]
struct LlmPlugin;

keel_plugin_api::dispatches! {
    /// What the llm row dispatches: the stream waterfall around every model call. It also
    /// declares `llm/delta`, the pieces of an answer, which the adapters dispatch as they
    /// arrive (issue 26 item 1): the event belongs to the model-call domain, whichever adapter
    /// serves the call.
    pub struct Dispatches {
        pub stream: Stream,
        pub delta: keel_plugin_api::events::llm::Delta,
    }
}

impl Plugin for LlmPlugin {
    type Dispatches = Dispatches;

    fn manifest(&self) -> Manifest {
        Manifest::new("llm", env!("CARGO_PKG_VERSION"))
            .description("LLM adapter registry and the llm/stream waterfall")
            .provides::<Llm>()
            .config_type::<Config>()
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        ctx.serve::<Llm, _>(Service {
            ctx,
            state: Arc::default(),
        })?;
        Ok(())
    }
}

keel_plugin_api::export_plugin!(LlmPlugin);
