//! Issue 14 item 1: `keel.llm` `limits` forwards to the adapter, and an adapter of contract
//! version 1 (no `limits`) answers an unknown window instead of failing the caller.

use futures::executor::block_on;
use keel_plugin_api::services::llm::{
    CheckRequest, LlmAdapter, LlmAdapterProvider, LlmCode, LlmRequest, LlmResponse,
};

use super::*;

/// The adapter contract as version 1 declared it: no `limits`.
mod v1 {
    use super::*;
    keel_plugin_api::contract! {
        /// `keel.llm.adapter.*` before issue 14.
        pub contract OldAdapter = "keel.llm.adapter.*", version 1;
        provider OldAdapterProvider;
        client OldAdapterClient;
        /// One attempt.
        fn generate(LlmRequest) -> LlmResponse;
        /// Could it dispatch.
        fn check(CheckRequest) -> ();
    }
}

struct Old;
impl v1::OldAdapterProvider for Old {
    async fn generate(&self, _: LlmRequest) -> Result<LlmResponse> {
        Ok(LlmResponse { chunks: vec![] })
    }
    async fn check(&self, _: CheckRequest) -> Result<()> {
        Ok(())
    }
}

/// A version-2 adapter that answers `limits` with what it was given (or refuses).
struct New(Result<ModelLimits>);
impl LlmAdapterProvider for New {
    async fn generate(&self, _: LlmRequest) -> Result<LlmResponse> {
        Ok(LlmResponse { chunks: vec![] })
    }
    async fn check(&self, _: CheckRequest) -> Result<()> {
        Ok(())
    }
    async fn limits(&self, config: LlmCallConfig) -> Result<ModelLimits> {
        assert_eq!(config.model, "m", "the config is forwarded");
        self.0.clone()
    }
}

fn config() -> LlmCallConfig {
    LlmCallConfig {
        provider: "p".into(),
        model: "m".into(),
        ..LlmCallConfig::default()
    }
}

fn client(handle: ContractHandle) -> LlmAdapterClient {
    ContractClient::<LlmAdapter>::new(handle, "llm").into()
}

#[test]
fn a_version_1_adapter_answers_an_unknown_window() {
    let adapter = client(ContractHandle::serve::<v1::OldAdapter, _>("old", Old));
    assert_eq!(adapter.contract().handle().version(), 1);
    // The client itself refuses the call; `from_adapter` turns that into "unknown".
    let refused = block_on(adapter.limits(config())).unwrap_err();
    assert!(refused.is(ContractCode::UnknownMethod), "{refused}");
    let limits = block_on(from_adapter(&adapter, config())).unwrap();
    assert_eq!(limits, unknown());
    assert_eq!(limits.source, "unknown");
    assert_eq!(limits.context_window, None);
}

#[test]
fn a_version_2_adapter_answer_is_forwarded_unchanged() {
    let answer = ModelLimits {
        context_window: Some(16_000),
        output_reserve: 512,
        bytes_per_token: Some(3.5),
        source: "config".into(),
    };
    let adapter = client(ContractHandle::serve::<LlmAdapter, _>(
        "new",
        New(Ok(answer.clone())),
    ));
    assert_eq!(block_on(from_adapter(&adapter, config())).unwrap(), answer);
}

#[test]
fn a_version_2_adapter_refusal_stays_an_error() {
    let adapter = client(ContractHandle::serve::<LlmAdapter, _>(
        "new",
        New(Err(Error::coded(LlmCode::BadRequest, "no such model"))),
    ));
    let err = block_on(from_adapter(&adapter, config())).unwrap_err();
    assert!(err.is(LlmCode::BadRequest), "{err}");
    assert!(err.message.contains("no such model"), "{err}");
}
