//! `llm-openai`: an LLM adapter for OpenAI-compatible chat completions, streamed (SSE) or not
//! (ARCHITECTURE §8 and §11, requirements C8 and B14).
//!
//! The row provides the JSON service `keel.llm.adapter.llm-openai` (methods `generate` and
//! `check`) and registers its `provider` with `keel.llm`, with the row's `model` as the default
//! model; an effect unregisters it when the row unloads. The HTTP work ([`client`]) runs on the
//! plugin's own tokio runtime; the request shape ([`request`]), stream decoding ([`decode`]),
//! failure mapping ([`failure`]) and credential lookup ([`credential`]) are plain Rust.
//!
//! The key is resolved per request through `keel.credentials` when a credentials row is loaded
//! (an optional requirement, fetched with `get_service` at each request), else from the process
//! environment.

pub mod client;
pub mod config;
pub mod credential;
pub mod decode;
pub mod failure;
pub mod request;

use std::sync::Arc;

use keel_plugin_api::prelude::*;
use keel_plugin_api::sdk::register_until_unload;
use keel_plugin_api::sdk::{plugin_runtime, spawn_bridged};
use keel_plugin_api::services::credentials::Credentials;
use keel_plugin_api::services::llm::{
    Llm, LlmCallConfig, LlmFailure, LlmRequest, LlmResponse, StreamChunk, adapter_service_name,
};
use serde::Deserialize;
use serde_json::{Value, json};

pub use client::Adapter;
pub use config::Config;
use credential::{Resolver, ServiceLookup};

/// The plugin id; the adapter service is named after it.
pub const PLUGIN_ID: &str = "llm-openai";

#[derive(Deserialize)]
struct CheckArgs {
    config: LlmCallConfig,
    /// The caller's working directory, when it knows one (selects the cwd `.env` layer).
    #[serde(default)]
    cwd: Option<String>,
}

/// Aborts the plugin-runtime task when dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One adapter service call (`generate` runs on the plugin runtime). Public so tests can drive
/// the service exactly as `keel.llm` does.
///
/// # Errors
/// `INVALID_ARGS`, `UNKNOWN_METHOD`, and `check`'s refusals.
pub async fn serve(adapter: Arc<Adapter>, method: String, args: Value) -> Result<Value> {
    match method.as_str() {
        "generate" => {
            let request: LlmRequest = serde_json::from_value(args)
                .map_err(|e| Error::new("INVALID_ARGS", format!("generate: {e}")))?;
            // Spawned on the plugin runtime and aborted if the caller drops this future, so a
            // cancelled model call closes its connection at once (LLM-06).
            let task = plugin_runtime()?.spawn(async move { adapter.generate(request).await });
            let mut task = AbortOnDrop(task);
            let response = match (&mut task.0).await {
                Ok(r) => r,
                Err(e) => LlmResponse {
                    chunks: vec![StreamChunk::error(LlmFailure {
                        message: format!("the OpenAI adapter's task failed: {e}"),
                        code: if e.is_panic() { "PANIC" } else { "ABORTED" }.to_owned(),
                        status: None,
                        provider_retry_after_ms: None,
                        request_id: None,
                    })],
                },
            };
            Ok(serde_json::to_value(response)?)
        }
        "check" => {
            let a: CheckArgs = serde_json::from_value(args)
                .map_err(|e| Error::new("INVALID_ARGS", format!("check: {e}")))?;
            adapter.check_resolved(&a.config, a.cwd.as_deref()).await?;
            Ok(json!({}))
        }
        other => Err(Error::new(
            "UNKNOWN_METHOD",
            format!("{PLUGIN_ID} has no method '{other}'"),
        )),
    }
}

/// The plugin value.
#[derive(Default)]
struct OpenAiPlugin;

impl Plugin for OpenAiPlugin {
    fn manifest(&self) -> Manifest {
        Manifest::new(PLUGIN_ID, env!("CARGO_PKG_VERSION"))
            .description("LLM adapter: OpenAI-compatible chat completions (streamed or not)")
            .provides_named(&adapter_service_name(PLUGIN_ID), false)
            .requires::<Llm>()
            // Present: the key resolves through its layers; absent: the process environment.
            .optional::<Credentials>()
            // Where the key goes and which key: a planted endpoint would receive it.
            .guard_keys(&["base_url", "headers", "api_key_ref"])
            .config_schema(config::schema())
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let config: Config = ctx.config()?;
        let provider = config.provider.clone();
        let model = config.model.clone();
        // Built on the plugin runtime: the client's pool lives with the reactor it uses.
        let adapter = spawn_bridged(async move { Adapter::new(config) }).await??;
        // Looked up per request, so a credentials row that loads, reloads or goes away later is
        // honoured; with none, the process environment is the only source.
        let lookup: ServiceLookup = Arc::new(move || match ctx.get_client::<Credentials>() {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(error = %e, "keel.credentials lookup failed; using the environment");
                None
            }
        });
        let adapter = Arc::new(
            adapter.with_credentials(Resolver::with_service(lookup, ctx.keel_home().ok())),
        );
        let service = adapter_service_name(PLUGIN_ID);
        ctx.provide_named(
            &service,
            CallHandle::new(move |method, args| serve(Arc::clone(&adapter), method, args)),
        )?;
        register(ctx, &service, &provider, &model).await
    }
}

/// Registers `provider` with `keel.llm` and unregisters it when the row unloads.
async fn register(ctx: Context, service: &str, provider: &str, model: &str) -> Result<()> {
    let llm: CallHandle = (*ctx.service::<Llm>()?).clone();
    register_until_unload(
        &ctx,
        llm,
        json!({ "service": service, "providers": [provider], "default_model": model }),
        "unregister the adapter from keel.llm",
    )
    .await
    .map(|_| ())
}

keel_plugin_api::export_plugin!(OpenAiPlugin);
