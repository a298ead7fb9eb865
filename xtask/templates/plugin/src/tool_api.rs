//! The one file that speaks keel's tool protocol: the tool's definition, the provider service
//! `keel.tool.{{name}}` that runs it, and its registration with `keel.tools` for as long as the
//! row is loaded. Everything else in this crate is typed Rust that does not know the protocol.
//!
//! SDK 2 (issue 12): the tool protocol is becoming a typed contract. When the `ToolProvider`
//! contract lands in `keel_plugin_api::services::tools`, this file becomes a provider struct
//! implementing it, served with
//! `ctx.serve_named::<ToolProvider, _>(&provider_service_name(PLUGIN_ID), provider)?` and
//! registered through the typed `keel.tools` client; the `CallHandle` and method check below go.

use keel_plugin_api::codes::{ContractCode, ErrorCode as _};
use keel_plugin_api::prelude::*;
use keel_plugin_api::sdk::register_until_unload;
use keel_plugin_api::services::tools::{
    PROVIDER_METHOD, ToolDefinition, ToolInvocation, ToolResult, Tools, provider_service_name,
};

use crate::greet::{GreetArgs, greet};
use crate::{Config, PLUGIN_ID};

/// The tool's public name (what the model calls).
pub const TOOL: &str = "{{snake}}_greet";

/// What the manifest declares for the tool: the provider service, and `keel.tools`.
pub fn declare(manifest: Manifest) -> Manifest {
    manifest
        .provides_named(&provider_service_name(PLUGIN_ID), false)
        .requires::<Tools>()
}

/// The tool as the model sees it; the parameters are `GreetArgs`' derived JSON Schema.
pub fn definition() -> ToolDefinition {
    ToolDefinition {
        name: TOOL.to_owned(),
        description: "Greets someone by name.".to_owned(),
        parameters: keel_plugin_api::schemars::schema_for!(GreetArgs).to_value(),
        parallel_safe: true,
        mutating: false,
    }
}

/// One call: typed arguments in, a result the model reads out (errors included).
pub fn run(config: &Config, args: serde_json::Value) -> ToolResult {
    match serde_json::from_value::<GreetArgs>(args) {
        Err(e) => ToolResult::error(ContractCode::InvalidArguments.as_str(), e.to_string()),
        Ok(args) => match greet(config, &args) {
            Ok(text) => ToolResult::ok(text),
            Err((code, message)) => ToolResult::error(code.as_str(), message),
        },
    }
}

/// Serves the tool and registers it with `keel.tools` until the row unloads.
///
/// # Errors
/// `DUPLICATE_TOOL` when another row registered the name; what the kernel refuses.
pub async fn serve_and_register(ctx: Context, config: Config) -> Result<()> {
    let service = provider_service_name(PLUGIN_ID);
    ctx.provide_named(
        &service,
        CallHandle::new(move |method, args| {
            let config = config.clone();
            async move {
                if method != PROVIDER_METHOD {
                    return Err(Error::coded(
                        ContractCode::UnknownMethod,
                        format!("{PLUGIN_ID} provides only `{PROVIDER_METHOD}`, not `{method}`"),
                    ));
                }
                let call: ToolInvocation = serde_json::from_value(args)?;
                Ok(serde_json::to_value(run(&config, call.args))?)
            }
        }),
    )?;
    let registry = (*ctx.service::<Tools>()?).clone();
    let tools = serde_json::json!({ "service": service, "tools": [definition()] });
    register_until_unload(&ctx, registry, tools, "unregister the greet tool").await?;
    Ok(())
}

/// Test doubles for keel-plugin-test: a fake `keel.tools` served by the harness's probe, and a
/// call through the provider service exactly as `keel.tools` makes it.
#[cfg(test)]
pub(crate) mod fake {
    use std::sync::{Arc, Mutex};

    use keel_plugin_api::prelude::*;
    use keel_plugin_api::services::tools::{
        PROVIDER_METHOD, ToolResult, Tools, provider_service_name,
    };
    use keel_plugin_test::{Builder, TestHost};
    use serde_json::{Value, json};

    /// What the fake registry was asked to register.
    pub type Registered = Arc<Mutex<Vec<Value>>>;

    /// `builder` with a fake `keel.tools` recording each registration.
    pub fn tools(builder: Builder, registered: &Registered) -> Builder {
        let registered = Arc::clone(registered);
        builder
            .probe_manifest(|m| m.provides::<Tools>())
            .on_probe_activate(move |ctx| {
                ctx.provide::<Tools>(CallHandle::new(move |method, args| {
                    let registered = Arc::clone(&registered);
                    async move {
                        if method == "register" {
                            registered.lock().unwrap().push(args);
                        }
                        Ok(json!({ "registration": 1 }))
                    }
                }))?;
                Ok(())
            })
    }

    /// Calls the tool with `args` through its provider service.
    pub fn call(host: &TestHost, args: Value) -> ToolResult {
        let service = provider_service_name(crate::PLUGIN_ID);
        let provider = host.ctx().named_service(&service).unwrap().unwrap();
        let invocation = json!({
            "name": super::TOOL, "call_id": "c1", "session_id": "s1", "cwd": "/", "args": args,
        });
        let answer = host.block_on(provider.call(PROVIDER_METHOD, invocation));
        serde_json::from_value(answer.unwrap()).unwrap()
    }
}
