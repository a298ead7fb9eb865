//! `llm-scripted`: a keyless LLM adapter that replays a script (ARCHITECTURE §6, the `demo`
//! profile; requirements C8 and C17: the whole pipeline offline and deterministic).
//!
//! The row provides `keel.llm.adapter.llm-scripted` (methods `generate` and `check`) and
//! registers its `provider` (default `scripted`) with `keel.llm`. The script comes from a TOML
//! or JSON file (`script`) or from the row itself (`steps`); it is loaded and checked at
//! activation ([`script`]), and answers are chosen and rendered by [`replay`].

pub mod replay;
pub mod script;

use std::path::PathBuf;
use std::sync::Arc;

use keel_plugin_api::prelude::*;
use keel_plugin_api::sdk::register_until_unload;
use keel_plugin_api::sdk::sleep;
use keel_plugin_api::services::llm::{Llm, LlmRequest, adapter_service_name};
use serde::Deserialize;
use serde_json::{Value, json};

pub use script::{Script, Step};

/// The plugin id; the adapter service is named after it.
pub const PLUGIN_ID: &str = "llm-scripted";

/// The row config.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Provider name registered with `keel.llm`.
    #[serde(default = "scripted")]
    pub provider: String,
    /// Model name reported as the default model.
    #[serde(default = "scripted")]
    pub model: String,
    /// Script file (TOML or JSON); relative to the working directory.
    #[serde(default)]
    pub script: Option<PathBuf>,
    /// Inline steps instead of a file.
    #[serde(default)]
    pub steps: Option<Vec<Step>>,
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
    loaded.map_err(|m| Error::new("SCRIPT_INVALID", format!("{PLUGIN_ID}: {m}")))
}

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "provider": { "type": "string", "minLength": 1 },
            "model": { "type": "string", "minLength": 1 },
            "script": { "type": "string", "minLength": 1 },
            "steps": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "text": { "type": "string" },
                        "reasoning": { "type": "string" },
                        "tool_calls": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "name": { "type": "string", "minLength": 1 },
                                    "arguments": { "type": ["string", "object"] }
                                },
                                "required": ["name"],
                                "additionalProperties": false
                            }
                        },
                        "finish": { "enum": ["stop", "length"] },
                        "error": {
                            "type": "object",
                            "properties": {
                                "code": { "type": "string", "minLength": 1 },
                                "message": { "type": "string" }
                            },
                            "required": ["code", "message"],
                            "additionalProperties": false
                        },
                        "usage": {
                            "type": "object",
                            "properties": {
                                "input_tokens": { "type": "integer", "minimum": 0 },
                                "output_tokens": { "type": "integer", "minimum": 0 }
                            },
                            "required": ["input_tokens", "output_tokens"],
                            "additionalProperties": false
                        },
                        "delay_ms": { "type": "integer", "minimum": 0 }
                    },
                    "additionalProperties": false
                }
            }
        },
        "additionalProperties": false
    })
}

/// One adapter service call.
///
/// # Errors
/// `INVALID_ARGS` and `UNKNOWN_METHOD`; `generate` itself never fails (its failures are chunks).
pub async fn serve(script: Arc<Script>, method: String, args: Value) -> Result<Value> {
    match method.as_str() {
        "generate" => {
            let request: LlmRequest = serde_json::from_value(args)
                .map_err(|e| Error::new("INVALID_ARGS", format!("generate: {e}")))?;
            let (response, delay) = replay::respond(&script, &request);
            if !delay.is_zero() {
                sleep(delay).await;
            }
            Ok(serde_json::to_value(response)?)
        }
        // Keyless and capability-agnostic: a replay can always be dispatched.
        "check" => Ok(json!({})),
        other => Err(Error::new(
            "UNKNOWN_METHOD",
            format!("{PLUGIN_ID} has no method '{other}'"),
        )),
    }
}

/// The plugin value.
#[derive(Default)]
struct ScriptedPlugin;

impl Plugin for ScriptedPlugin {
    fn manifest(&self) -> Manifest {
        Manifest::new(PLUGIN_ID, env!("CARGO_PKG_VERSION"))
            .description("LLM adapter: replays a scripted conversation (keyless, offline)")
            .provides_named(&adapter_service_name(PLUGIN_ID), false)
            .requires::<Llm>()
            .config_schema(schema())
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let config: Config = ctx.config()?;
        let provider = config.provider.clone();
        let model = config.model.clone();
        let script = Arc::new(load(config)?);
        let service = adapter_service_name(PLUGIN_ID);
        ctx.provide_named(
            &service,
            CallHandle::new(move |method, args| serve(Arc::clone(&script), method, args)),
        )?;
        let llm: CallHandle = (*ctx.service::<Llm>()?).clone();
        register_until_unload(
            &ctx,
            llm,
            json!({ "service": service, "providers": [provider], "default_model": model }),
            "unregister the adapter from keel.llm",
        )
        .await?;
        Ok(())
    }
}

keel_plugin_api::export_plugin!(ScriptedPlugin);

#[cfg(test)]
mod tests {
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
        let request = json!({
            "config": {"provider": "scripted", "model": "scripted"},
            "messages": [{"role": "user", "content": "hi"}]
        });
        let out =
            futures::executor::block_on(serve(Arc::clone(&script), "generate".into(), request))
                .unwrap();
        assert_eq!(
            out,
            json!({"chunks": [
                {"type": "text-delta", "index": 0, "text": "hello"},
                {"type": "finish", "reason": {"kind": "stop"}}
            ]})
        );
        let ok = futures::executor::block_on(serve(script, "check".into(), json!({}))).unwrap();
        assert_eq!(ok, json!({}));
    }
}
