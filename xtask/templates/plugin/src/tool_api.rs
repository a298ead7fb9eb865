//! The one file that speaks keel's tool seam: the tool's definition, the provider that runs it
//! (the typed `ToolProvider` contract, served as `keel.tool.{{name}}`), and its registration
//! with `keel.tools` for as long as the row is loaded. Everything else in this crate is typed
//! Rust that does not know the seam.

use keel_plugin_api::codes::ContractCode;
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::tools::{
    ToolDefinition, ToolExecutor, ToolInvocation, ToolProvider, ToolResult, Tools,
    provider_service_name, register_until_unload,
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
        child_only: false,
    }
}

/// One call: typed arguments in, a result the model reads out (errors included).
pub fn run(config: &Config, args: serde_json::Value) -> ToolResult {
    match serde_json::from_value::<GreetArgs>(args) {
        Err(e) => ToolResult::error(ContractCode::InvalidArguments, e.to_string()),
        Ok(args) => match greet(config, &args) {
            Ok(text) => ToolResult::ok(text),
            Err((code, message)) => ToolResult::error(code, message),
        },
    }
}

/// The provider `keel.tools` calls for each of this tool's calls.
pub struct Provider {
    config: Config,
}

impl ToolExecutor for Provider {
    async fn execute(&self, call: ToolInvocation) -> Result<ToolResult> {
        Ok(run(&self.config, call.args))
    }
}

/// Serves the tool and registers it with `keel.tools` until the row unloads.
///
/// # Errors
/// `DUPLICATE_TOOL` when another row registered the name; what the kernel refuses.
pub async fn serve_and_register(ctx: Context, config: Config) -> Result<()> {
    let service = provider_service_name(PLUGIN_ID);
    ctx.serve_named::<ToolProvider, _>(&service, Provider { config })?;
    register_until_unload(&ctx, &service, vec![definition()], "unregister the greet tool").await?;
    Ok(())
}

/// Test doubles for keel-plugin-test: a fake `keel.tools` served by the harness's probe, and a
/// call through the provider exactly as `keel.tools` makes it.
#[cfg(test)]
pub(crate) mod fake {
    use std::sync::{Arc, Mutex};

    use keel_plugin_api::codes::ContractCode;
    use keel_plugin_api::prelude::*;
    use keel_plugin_api::services::tools::{
        BatchOutcome, BatchRequest, CancelRequest, ListRequest, RegisterRequest, Registered,
        ToolInvocation, ToolList, ToolProvider, ToolResult, Tools, ToolsProvider,
        UnregisterRequest, provider_service_name,
    };
    use keel_plugin_test::{Builder, TestHost};
    use serde_json::Value;

    /// What the fake registry was asked to register.
    pub type Registrations = Arc<Mutex<Vec<RegisterRequest>>>;

    /// A `keel.tools` that records registrations and runs nothing.
    struct FakeTools(Registrations);

    impl ToolsProvider for FakeTools {
        async fn register(&self, request: RegisterRequest) -> Result<Registered> {
            let mut seen = self.0.lock().unwrap();
            seen.push(request);
            Ok(Registered {
                registration: seen.len() as u64,
            })
        }
        async fn unregister(&self, _: UnregisterRequest) -> Result<()> {
            Ok(())
        }
        async fn list(&self, _: ListRequest) -> Result<ToolList> {
            Ok(ToolList { tools: vec![] })
        }
        async fn run_batch(&self, _: BatchRequest) -> Result<BatchOutcome> {
            Err(Error::coded(ContractCode::Plugin, "the fake keel.tools runs nothing"))
        }
        async fn cancel(&self, _: CancelRequest) -> Result<()> {
            Ok(())
        }
    }

    /// `builder` with a fake `keel.tools` recording each registration.
    pub fn tools(builder: Builder, registered: &Registrations) -> Builder {
        builder.serve::<Tools, _>(FakeTools(Arc::clone(registered)))
    }

    /// Calls the tool with `args` through its provider, as `keel.tools` does.
    pub fn call(host: &TestHost, args: Value) -> ToolResult {
        let service = provider_service_name(crate::PLUGIN_ID);
        let provider = host.named_client::<ToolProvider>(&service).unwrap();
        let invocation = ToolInvocation {
            name: super::TOOL.to_owned(),
            call_id: "c1".to_owned(),
            session_id: "s1".to_owned(),
            cwd: "/".to_owned(),
            args,
            timeout_ms: 0,
        };
        host.block_on(provider.execute(invocation)).unwrap()
    }
}
