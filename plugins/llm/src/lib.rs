//! `llm`: the `keel.llm` service (ARCHITECTURE §8, requirements C8 and B14). It owns the adapter
//! registry ([`registry`], plain Rust) and runs every model call through the `llm/stream`
//! waterfall, whose terminal dispatches exactly one attempt to the adapter the call was prepared
//! against. Adapter trouble of any kind comes back as a terminal `finish{error}` chunk
//! ([`normalise`]); only middleware failures (a listener that failed or panicked) are errors.

pub mod normalise;
pub mod registry;

use std::sync::{Arc, Mutex, MutexGuard};

use keel_plugin_api::events::Json;
use keel_plugin_api::events::llm::{LlmCall, Stream};
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::llm::{Llm, LlmCallConfig, LlmFailure, LlmResponse};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use registry::{PreparedCall, Registry, RegistryError};

type Shared = Arc<Mutex<Registry>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RegisterArgs {
    service: String,
    providers: Vec<String>,
    #[serde(default)]
    default_model: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplaceArgs {
    registration: u64,
    providers: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UnregisterArgs {
    registration: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckArgs {
    config: LlmCallConfig,
}

fn args<T: DeserializeOwned>(method: &str, value: Value) -> Result<T> {
    serde_json::from_value(value)
        .map_err(|e| Error::new("INVALID_ARGS", format!("keel.llm {method}: {e}")))
}

fn lock(state: &Shared) -> Result<MutexGuard<'_, Registry>> {
    state
        .lock()
        .map_err(|_| Error::new("INTERNAL", "the LLM registry lock is poisoned"))
}

fn refusal(e: RegistryError) -> Error {
    Error::new(e.code, e.message)
}

fn failure_error(f: LlmFailure) -> Error {
    Error::new(&f.code, f.message)
}

/// One `keel.llm` call.
async fn handle(ctx: Context, state: Shared, method: String, value: Value) -> Result<Value> {
    match method.as_str() {
        "register" => {
            let a: RegisterArgs = args(&method, value)?;
            let id = lock(&state)?
                .register(&a.service, a.providers, a.default_model)
                .map_err(refusal)?;
            Ok(json!({ "registration": id }))
        }
        "replace" => {
            let a: ReplaceArgs = args(&method, value)?;
            lock(&state)?
                .replace(a.registration, a.providers)
                .map_err(refusal)?;
            Ok(json!({}))
        }
        "unregister" => {
            let a: UnregisterArgs = args(&method, value)?;
            lock(&state)?.unregister(a.registration).map_err(refusal)?;
            Ok(json!({}))
        }
        "providers" => Ok(json!({ "providers": lock(&state)?.providers() })),
        "check" => {
            let a: CheckArgs = args(&method, value)?;
            check(ctx, &state, a.config).await
        }
        "stream" => {
            // Only the route is read here; the request travels on as JSON text (it holds the
            // whole history, and every parse and re-serialisation is a pass over it).
            let head = <RequestHead as serde::Deserialize>::deserialize(&value)
                .map_err(|e| Error::new("INVALID_ARGS", format!("keel.llm {method}: {e}")))?;
            let response = stream(ctx, &state, head, Json::of(&value)?).await?;
            Ok(serde_json::to_value(response)?)
        }
        other => Err(Error::new(
            "UNKNOWN_METHOD",
            format!("keel.llm has no method '{other}'"),
        )),
    }
}

/// `check`: asks the adapter for `config.provider` whether it could dispatch (no I/O).
async fn check(ctx: Context, state: &Shared, config: LlmCallConfig) -> Result<Value> {
    let route = {
        let registry = lock(state)?;
        registry
            .resolve(&config.provider)
            .ok_or_else(|| failure_error(registry.no_adapter(&config.provider)))?
    };
    let Some(adapter) = ctx.named_service(&route.service)? else {
        return Err(Error::new(
            "NO_ADAPTER",
            format!(
                "provider '{}' is registered by '{}', which is not running",
                config.provider, route.service
            ),
        ));
    };
    adapter.call("check", json!({ "config": config })).await?;
    Ok(json!({}))
}

/// `stream`: prepares the call once, then runs `llm/stream` with the dispatching terminal.
/// The part of an `LlmRequest` the registry reads: the route and the session.
#[derive(serde::Deserialize)]
struct RequestHead {
    #[serde(default)]
    session_id: Option<String>,
    config: LlmCallConfig,
}

async fn stream(
    ctx: Context,
    state: &Shared,
    head: RequestHead,
    request: Json,
) -> Result<LlmResponse> {
    let prepared: Arc<Result<PreparedCall, LlmFailure>> =
        Arc::new(lock(state)?.prepare(&head.config));
    let payload = LlmCall {
        session_id: head.session_id.unwrap_or_default().into(),
        request,
    };
    let terminal = move |call: LlmCall| {
        let prepared = Arc::clone(&prepared);
        async move {
            let response = dispatch(ctx, &prepared, &call).await?;
            Json::of(&response)
        }
    };
    let out = ctx
        .run_async_waterfall::<Stream, _, _>(payload, terminal)
        .await?;
    let response: LlmResponse = out.parse().map_err(|e| {
        Error::new(
            "LLM_STREAM_OUTPUT",
            format!(
                "an llm/stream listener returned an invalid response: {}",
                e.message
            ),
        )
    })?;
    if !normalise::is_well_formed(&response) {
        return Err(Error::new(
            "LLM_STREAM_OUTPUT",
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
    let request: RequestHead = call.request.parse()?;
    let prepared = match prepared {
        Ok(p) => p,
        Err(f) => return Ok(normalise::failed(f.clone())),
    };
    let service = match prepared.dispatch(&request.config) {
        Ok(s) => s.to_owned(),
        Err(f) => return Ok(normalise::failed(f)),
    };
    let adapter = match ctx.named_service(&service) {
        Ok(Some(a)) => a,
        Ok(None) => {
            return Ok(normalise::failed(normalise::failure(
                "NO_ADAPTER",
                format!(
                    "the adapter '{service}' for provider '{}' is no longer running",
                    request.config.provider
                ),
            )));
        }
        Err(e) => {
            return Ok(normalise::failed(normalise::failure(
                "NO_ADAPTER",
                format!("the adapter '{service}' cannot be reached: {e}"),
            )));
        }
    };
    Ok(
        match adapter
            .call_text("generate", call.request.text.to_string())
            .await
            .and_then(|text| Ok(serde_json::from_str::<Value>(&text)?))
        {
            Ok(answer) => normalise::from_adapter_answer(&service, answer),
            Err(e) => normalise::from_adapter_error(&service, e),
        },
    )
}

/// The plugin value.
#[derive(Default)]
struct LlmPlugin;

impl Plugin for LlmPlugin {
    fn manifest(&self) -> Manifest {
        Manifest::new("llm", env!("CARGO_PKG_VERSION"))
            .description("LLM adapter registry and the llm/stream waterfall")
            .provides::<Llm>()
            .config_schema(json!({ "type": "object", "additionalProperties": false }))
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let state: Shared = Arc::default();
        let handle =
            CallHandle::new(move |method, value| handle(ctx, Arc::clone(&state), method, value));
        ctx.provide::<Llm>(handle)?;
        Ok(())
    }
}

keel_plugin_api::export_plugin!(LlmPlugin);
