//! `llm-openai`: an LLM adapter for OpenAI-compatible chat completions, streamed (SSE) or not
//! (ARCHITECTURE §8 and §11, requirements C8 and B14).
//!
//! The row serves the [`LlmAdapter`](keel_plugin_api::services::llm::LlmAdapter) contract as
//! `keel.llm.adapter.llm-openai` (`generate`, `check` and `limits`) and registers its `provider`
//! with `keel.llm`, with the row's `model` as the default model; an effect unregisters it when
//! the row unloads. The HTTP work ([`client`]) runs on the plugin's own tokio runtime; the
//! request shape ([`request`]), stream decoding ([`decode`]), failure mapping ([`failure`]),
//! credential lookup ([`credential`]) and the model's window ([`limits`]) are plain Rust.
//!
//! The key is resolved per request through `keel.credentials` when a credentials row is loaded
//! (an optional requirement, fetched with `get_service` at each request), else from the process
//! environment. Each answer's text and reasoning pieces go out as `llm/delta` while it streams,
//! for a request that carries a `stream_id` (issue 26 item 1; the event is the `llm` row's).

pub mod client;
pub mod config;
pub mod credential;
pub mod decode;
pub mod failure;
pub mod limits;
pub mod request;
pub mod wire_messages;

use std::sync::Arc;

use keel_plugin_api::prelude::*;
use keel_plugin_api::sdk::spawn_bridged;
use keel_plugin_api::services::credentials::Credentials;
use keel_plugin_api::services::llm::{
    CheckRequest, Llm, LlmAdapterProvider, LlmCallConfig, LlmRequest, LlmResponse, ModelLimits,
    adapter_service_name, serve_adapter,
};

pub use client::Adapter;
pub use config::Config;
use credential::{Resolver, ServiceLookup};

/// The plugin id; the adapter service is named after it.
pub const PLUGIN_ID: &str = "llm-openai";

/// The adapter service (`keel.llm.adapter.llm-openai`). Public so tests can drive it exactly as
/// `keel.llm` does.
pub struct Service(pub Arc<Adapter>);

impl LlmAdapterProvider for Service {
    /// One attempt, on the plugin runtime, aborted if the caller drops this future, so a
    /// cancelled model call closes its connection at once (LLM-06).
    async fn generate(&self, request: LlmRequest) -> Result<LlmResponse> {
        let adapter = Arc::clone(&self.0);
        keel_llm_http_kit::attempt("the OpenAI adapter", async move {
            adapter.generate(request).await
        })
        .await
    }

    async fn check(&self, request: CheckRequest) -> Result<()> {
        self.0
            .check_resolved(&request.config, request.cwd.as_deref())
            .await
    }

    /// The row's limits, else the table's ([`limits`]); no I/O.
    async fn limits(&self, config: LlmCallConfig) -> Result<ModelLimits> {
        Ok(limits::answer(self.0.config(), &config))
    }
}

/// The plugin value.
#[derive(Default)]
struct OpenAiPlugin;

keel_plugin_api::dispatches! {
    /// What the adapter dispatches: its answers' pieces as they arrive (issue 26 item 1).
    pub struct Dispatches {
        #[declared_by("llm")]
        pub delta: keel_plugin_api::events::llm::Delta,
    }
}

impl Plugin for OpenAiPlugin {
    type Dispatches = Dispatches;

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
            adapter
                .with_credentials(Resolver::with_service(lookup, ctx.keel_home().ok()))
                .with_deltas(keel_llm_http_kit::emitter(ctx, crate::DISPATCH.delta)),
        );
        serve_adapter(&ctx, PLUGIN_ID, Service(adapter), vec![provider], model).await?;
        Ok(())
    }
}

keel_plugin_api::export_plugin!(OpenAiPlugin);
