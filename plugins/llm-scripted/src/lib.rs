//! `llm-scripted`: a keyless LLM adapter that replays a script (ARCHITECTURE §6, the `demo`
//! profile; requirements C8 and C17: the whole pipeline offline and deterministic).
//!
//! The row serves the `LlmAdapter` contract as `keel.llm.adapter.llm-scripted` and
//! registers its `provider` (default `scripted`) with `keel.llm`. The script comes from a TOML
//! or JSON file (`script`) or from the row itself (`steps`); it is loaded and checked at
//! activation ([`script`]), and answers are chosen and rendered by [`replay`]. `limits` answers
//! the row's `context_window` and `output_reserve` (issue 14 item 1), so a test can give the
//! context manager a window without a model server. A request with a `stream_id` gets its
//! answer's reasoning and text as `llm/delta` pieces, a word each, `piece_delay_ms` apart,
//! before the answer (issue 26 item 1).

pub mod replay;
pub mod script;

use std::path::PathBuf;
use std::sync::Arc;

use keel_plugin_api::events::llm::DeltaSink;
use keel_plugin_api::prelude::*;
use keel_plugin_api::sdk::sleep;
use keel_plugin_api::services::llm::{
    CheckRequest, Llm, LlmAdapterProvider, LlmCallConfig, LlmCode, LlmRequest, LlmResponse,
    ModelLimits, adapter_service_name, serve_adapter,
};
use schemars::JsonSchema;
use serde::Deserialize;

pub use script::{Script, Step};

/// The plugin id; the adapter service is named after it.
pub const PLUGIN_ID: &str = "llm-scripted";

/// The row config.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Provider name registered with `keel.llm`.
    #[serde(default = "scripted")]
    #[schemars(length(min = 1))]
    pub provider: String,
    /// Model name reported as the default model.
    #[serde(default = "scripted")]
    #[schemars(length(min = 1))]
    pub model: String,
    /// Script file (TOML or JSON); relative to the working directory.
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub script: Option<PathBuf>,
    /// Inline steps instead of a file.
    #[serde(default)]
    pub steps: Option<Vec<Step>>,
    /// The context window `limits` reports, in tokens (unknown when absent).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub context_window: Option<u64>,
    /// Tokens `limits` reserves for the answer when the request sets no `max_tokens`.
    #[serde(default)]
    pub output_reserve: Option<u64>,
}

/// The row's `context_window` and `output_reserve`, as `limits` reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RowLimits {
    /// `context_window`.
    pub context_window: Option<u64>,
    /// `output_reserve`.
    pub output_reserve: Option<u64>,
}

impl RowLimits {
    /// `limits`' answer for `config`: the row's numbers (`source: "config"`) when it sets any,
    /// the request's `max_tokens` before the row's reserve; else an unknown window.
    pub fn answer(self, config: &LlmCallConfig) -> ModelLimits {
        let configured = self.context_window.is_some() || self.output_reserve.is_some();
        ModelLimits {
            context_window: self.context_window,
            output_reserve: config.max_tokens.or(self.output_reserve).unwrap_or(0),
            bytes_per_token: None,
            source: if configured { "config" } else { "unknown" }.to_owned(),
        }
    }
}

fn scripted() -> String {
    "scripted".to_owned()
}

/// Loads the script the config names.
///
/// # Errors
/// `SCRIPT_INVALID` naming the file (or the inline steps) and what is wrong.
pub fn load(config: Config) -> Result<Script> {
    let loaded = match (config.script, config.steps) {
        (Some(path), None) => script::load_file(&path),
        (None, Some(steps)) => script::from_inline(steps),
        (Some(_), Some(_)) => Err("set either `script` or `steps`, not both".to_owned()),
        (None, None) => Err("set `script` (a TOML or JSON file) or inline `steps`".to_owned()),
    };
    loaded.map_err(|m| Error::coded(LlmCode::ScriptInvalid, format!("{PLUGIN_ID}: {m}")))
}

/// The adapter service: replays the script. `generate` never fails (its failures are chunks).
/// With a sink, a request's `stream_id` gets the answer's pieces before the answer.
pub struct Service(pub Arc<Script>, pub RowLimits, pub Option<DeltaSink>);

impl LlmAdapterProvider for Service {
    async fn generate(&self, request: LlmRequest) -> Result<LlmResponse> {
        let (response, delay) = replay::respond(&self.0, &request);
        if !delay.is_zero() {
            sleep(delay).await;
        }
        if let (Some(sink), Some(stream_id)) = (&self.2, request.stream_id) {
            let pause = replay::piece_pause(&self.0, &request);
            for (n, piece) in replay::pieces(&response.chunks, stream_id)
                .iter()
                .enumerate()
            {
                if n > 0 && !pause.is_zero() {
                    sleep(pause).await;
                }
                sink(piece);
            }
        }
        Ok(response)
    }

    /// Keyless and capability-agnostic: a replay can always be dispatched.
    async fn check(&self, _request: CheckRequest) -> Result<()> {
        Ok(())
    }

    async fn limits(&self, config: LlmCallConfig) -> Result<ModelLimits> {
        Ok(self.1.answer(&config))
    }
}

/// The plugin value.
#[derive(Default)]
struct ScriptedPlugin;

keel_plugin_api::dispatches! {
    /// What the adapter dispatches: its answers' pieces (issue 26 item 1).
    pub struct Dispatches {
        #[declared_by("llm")]
        pub delta: keel_plugin_api::events::llm::Delta,
    }
}

impl Plugin for ScriptedPlugin {
    type Dispatches = Dispatches;

    fn manifest(&self) -> Manifest {
        Manifest::new(PLUGIN_ID, env!("CARGO_PKG_VERSION"))
            .description("LLM adapter: replays a scripted conversation (keyless, offline)")
            .provides_named(&adapter_service_name(PLUGIN_ID), false)
            .requires::<Llm>()
            .config_type::<Config>()
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let config: Config = ctx.config()?;
        let provider = config.provider.clone();
        let model = config.model.clone();
        let limits = RowLimits {
            context_window: config.context_window,
            output_reserve: config.output_reserve,
        };
        let script = Arc::new(load(config)?);
        let sink: DeltaSink = Arc::new(move |piece| {
            if let Err(e) = ctx.emit(crate::DISPATCH.delta, piece) {
                tracing::debug!(error = %e, "llm/delta not dispatched");
            }
        });
        let service = Service(script, limits, Some(sink));
        serve_adapter(&ctx, PLUGIN_ID, service, vec![provider], model).await?;
        Ok(())
    }
}

keel_plugin_api::export_plugin!(ScriptedPlugin);

#[cfg(test)]
mod tests {
    use keel_plugin_api::services::llm::{LlmAdapter, LlmAdapterClient};
    use serde_json::json;

    use super::*;

    #[test]
    fn config_needs_exactly_one_source() {
        let none: Config = serde_json::from_value(json!({})).unwrap();
        assert!(load(none).unwrap_err().message.contains("set `script`"));
        let both: Config = serde_json::from_value(json!({
            "script": "x.toml", "steps": [{"text": "hi"}]
        }))
        .unwrap();
        assert!(load(both).unwrap_err().message.contains("not both"));
    }

    #[test]
    fn inline_steps_load_with_defaults() {
        let c: Config = serde_json::from_value(json!({"steps": [{"text": "hi"}]})).unwrap();
        assert_eq!(
            (c.provider.as_str(), c.model.as_str()),
            ("scripted", "scripted")
        );
        let s = load(c).unwrap();
        assert_eq!(s.source, "inline steps");
        assert_eq!(s.steps.len(), 1);
    }

    #[test]
    fn unknown_config_keys_are_refused() {
        let r: std::result::Result<Config, _> =
            serde_json::from_value(json!({"steps": [{"txt": "hi"}]}));
        assert!(r.unwrap_err().to_string().contains("txt"));
    }

    #[test]
    fn service_generate_and_check() {
        let script = Arc::new(
            script::from_inline(vec![Step {
                text: Some("hello".into()),
                ..Step::default()
            }])
            .unwrap(),
        );
        // Through the typed contract, as `keel.llm` calls it.
        let handle = ContractHandle::serve::<LlmAdapter, _>(
            PLUGIN_ID,
            Service(script, RowLimits::default(), None),
        );
        let client: LlmAdapterClient = ContractClient::new(handle, "test").into();
        let request: LlmRequest = serde_json::from_value(json!({
            "config": {"provider": "scripted", "model": "scripted"},
            "messages": [{"role": "user", "content": "hi"}]
        }))
        .unwrap();
        let config = request.config.clone();
        let out = futures::executor::block_on(client.generate(request)).unwrap();
        assert_eq!(
            serde_json::to_value(out).unwrap(),
            json!({"chunks": [
                {"type": "text-delta", "index": 0, "text": "hello"},
                {"type": "finish", "reason": {"kind": "stop"}}
            ]})
        );
        let check = CheckRequest {
            config: config.clone(),
            cwd: None,
        };
        assert_eq!(futures::executor::block_on(client.check(check)), Ok(()));
        // No window configured: unknown.
        let limits = futures::executor::block_on(client.limits(config)).unwrap();
        assert_eq!(
            (limits.context_window, limits.source.as_str()),
            (None, "unknown")
        );
    }

    // Issue 14 item 1: the row's window and reserve are what `limits` answers, through the
    // contract; the request's `max_tokens` wins over the row's reserve; the schema the kernel
    // checks before activation refuses a zero window.
    #[test]
    fn limits_answer_the_row_window_and_reserve() {
        let c: Config = serde_json::from_value(json!({
            "steps": [{"text": "hi"}], "context_window": 16000, "output_reserve": 700
        }))
        .unwrap();
        let row = RowLimits {
            context_window: c.context_window,
            output_reserve: c.output_reserve,
        };
        let script = Arc::new(load(c).unwrap());
        let handle = ContractHandle::serve::<LlmAdapter, _>(PLUGIN_ID, Service(script, row, None));
        let client: LlmAdapterClient = ContractClient::new(handle, "test").into();
        let mut config = LlmCallConfig {
            provider: "scripted".into(),
            model: "scripted".into(),
            ..LlmCallConfig::default()
        };
        let limits = futures::executor::block_on(client.limits(config.clone())).unwrap();
        assert_eq!(
            limits,
            ModelLimits {
                context_window: Some(16000),
                output_reserve: 700,
                bytes_per_token: None,
                source: "config".into(),
            }
        );
        config.max_tokens = Some(99);
        let limits = futures::executor::block_on(client.limits(config)).unwrap();
        assert_eq!(limits.output_reserve, 99);
        let schema = schemars::schema_for!(Config).to_value();
        assert_eq!(schema["properties"]["context_window"]["minimum"], json!(1));
    }

    #[test]
    fn no_configured_limits_is_an_unknown_window() {
        let limits = RowLimits::default().answer(&LlmCallConfig::default());
        assert_eq!(limits.source, "unknown");
        assert_eq!((limits.context_window, limits.output_reserve), (None, 0));
    }

    // Issue 26 item 1: a request with a `stream_id` gets its reasoning and text as word
    // pieces, in order, before the answer; one without gets none; the answer is the same.
    #[test]
    fn a_streamed_request_gets_its_text_in_word_pieces() {
        use std::sync::Mutex;

        use keel_plugin_api::events::llm::{DeltaKind, LlmDelta};

        let script = Arc::new(
            script::from_inline(vec![Step {
                reasoning: Some("think first".into()),
                text: Some("Hello there, world".into()),
                ..Step::default()
            }])
            .unwrap(),
        );
        type Seen = Mutex<Vec<(u64, u32, DeltaKind, String)>>;
        let got: Arc<Seen> = Arc::default();
        let seen = Arc::clone(&got);
        let sink: DeltaSink = Arc::new(move |d: &LlmDelta| {
            seen.lock()
                .unwrap()
                .push((d.stream_id, d.index, d.kind, d.text.to_string()));
        });
        let service = Service(script, RowLimits::default(), Some(sink));
        let mut request: LlmRequest = serde_json::from_value(json!({
            "config": {"provider": "scripted", "model": "scripted"},
            "messages": [{"role": "user", "content": "hi"}]
        }))
        .unwrap();
        let plain = futures::executor::block_on(service.generate(request.clone())).unwrap();
        assert!(got.lock().unwrap().is_empty());
        request.stream_id = Some(9);
        let streamed = futures::executor::block_on(service.generate(request)).unwrap();
        assert_eq!(plain, streamed);
        let text = |kind| {
            got.lock()
                .unwrap()
                .iter()
                .filter(|p| p.2 == kind)
                .map(|p| p.3.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(text(DeltaKind::Reasoning), ["think ", "first"]);
        assert_eq!(text(DeltaKind::Text), ["Hello ", "there, ", "world"]);
        let got = got.lock().unwrap();
        assert!(got.iter().all(|p| p.0 == 9));
        assert_eq!(got[0].1, 0);
        assert_eq!(got[2].1, 1, "the text is block 1 after the reasoning");
    }
}
