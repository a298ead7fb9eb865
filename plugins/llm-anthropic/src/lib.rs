//! `llm-anthropic`: an LLM adapter for Anthropic's Messages API, streamed (issue 15 item 2;
//! ARCHITECTURE §8 and §11, requirements C8 and B14).
//!
//! The row serves the [`LlmAdapter`](keel_plugin_api::services::llm::LlmAdapter) contract as
//! `keel.llm.adapter.llm-anthropic` (`generate`, `check`, `limits`) and registers its `provider`
//! (default `anthropic`) with `keel.llm`, the row's `model` as its default model. A profile
//! switches to it by disabling `llm-openai` and inserting this row (docs/llm-anthropic.md).
//! The HTTP work ([`client`]) runs on the plugin's own tokio runtime; the request shape
//! ([`request`]), the SSE decoding ([`decode`]), the failure mapping ([`failure`]), the key
//! ([`credential`]) and the model's window ([`limits`]) are plain Rust. Each answer's text and
//! thinking pieces go out as `llm/delta` while it streams, for a request with a `stream_id`
//! (issue 26 item 1; the event is the `llm` row's).
//!
//! Why a plugin of its own and not a mode of `llm-openai`: the two APIs differ in every part
//! that matters (headers, the system prompt's place, content blocks, tool results as user
//! turns, signed thinking, cache breakpoints, the event stream); what they share is the chunk
//! protocol, which lives in the plugin API.

pub mod client;
pub mod config;
pub mod credential;
pub mod decode;
pub mod failure;
pub mod limits;
pub mod request;

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

/// The plugin id.
pub const PLUGIN_ID: &str = "llm-anthropic";

/// The adapter service. Public so tests can drive it exactly as `keel.llm` does.
pub struct Service(pub Arc<Adapter>);

impl LlmAdapterProvider for Service {
    /// One attempt, on the plugin runtime, aborted if the caller drops this future, so a
    /// cancelled model call closes its connection at once (LLM-06).
    async fn generate(&self, request: LlmRequest) -> Result<LlmResponse> {
        let adapter = Arc::clone(&self.0);
        keel_llm_http_kit::attempt("the Anthropic adapter", async move {
            adapter.generate(request).await
        })
        .await
    }

    async fn check(&self, request: CheckRequest) -> Result<()> {
        self.0.check(&request.config, request.cwd.as_deref()).await
    }

    /// The row's limits, else the table's ([`limits`]); no I/O.
    async fn limits(&self, config: LlmCallConfig) -> Result<ModelLimits> {
        Ok(limits::answer(self.0.config(), &config))
    }
}

/// The plugin value.
#[derive(Default)]
struct AnthropicPlugin;

keel_plugin_api::dispatches! {
    /// What the adapter dispatches: its answers' pieces as they arrive (issue 26 item 1).
    pub struct Dispatches {
        #[declared_by("llm")]
        pub delta: keel_plugin_api::events::llm::Delta,
    }
}

impl Plugin for AnthropicPlugin {
    type Dispatches = Dispatches;

    fn manifest(&self) -> Manifest {
        Manifest::new(PLUGIN_ID, env!("CARGO_PKG_VERSION"))
            .description("LLM adapter: Anthropic Messages API (streamed, tools, thinking)")
            .provides_named(&adapter_service_name(PLUGIN_ID), false)
            .requires::<Llm>()
            // Present: the key resolves through its layers; absent: the process environment.
            .optional::<Credentials>()
            // Where the key goes and which key: a planted endpoint would receive it.
            .guard_keys(&["base_url", "api_key_ref"])
            .config_schema(config::schema())
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let config: Config = ctx.config()?;
        let provider = config.provider.clone();
        let model = config.model.clone();
        let row = ctx.row().unwrap_or_else(|_| PLUGIN_ID.to_owned());
        // Looked up per request, so a credentials row that loads or goes away later counts.
        let lookup: ServiceLookup = Arc::new(move || match ctx.get_client::<Credentials>() {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(error = %e, "keel.credentials lookup failed; using the environment");
                None
            }
        });
        let resolver = Resolver::with_service(lookup, &row);
        // Built on the plugin runtime: the client's pool lives with the reactor it uses.
        let adapter = spawn_bridged(async move { Adapter::new(config, resolver) })
            .await??
            .with_deltas(keel_llm_http_kit::emitter(ctx, crate::DISPATCH.delta));
        serve_adapter(
            &ctx,
            PLUGIN_ID,
            Service(Arc::new(adapter)),
            vec![provider],
            model,
        )
        .await?;
        Ok(())
    }
}

keel_plugin_api::export_plugin!(AnthropicPlugin);
