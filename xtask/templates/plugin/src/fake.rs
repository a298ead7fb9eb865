//! Test doubles for keel-plugin-test: a fake `keel.tools` served by the harness's probe, and a
//! call through the row's provider exactly as `keel.tools` makes it.

use std::sync::{Arc, Mutex};

use keel_plugin_api::codes::ContractCode;
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::tools::{
    BatchOutcome, BatchRequest, CancelRequest, ListRequest, RegisterRequest, Registered,
    ToolInvocation, ToolList, ToolProvider, ToolResult, Tools, ToolsProvider, UnregisterRequest,
    provider_service_name,
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
        Err(Error::coded(
            ContractCode::Plugin,
            "the fake keel.tools runs nothing",
        ))
    }
    async fn cancel(&self, _: CancelRequest) -> Result<()> {
        Ok(())
    }
}

/// `builder` with a fake `keel.tools` recording each registration.
pub fn tools(builder: Builder, registered: &Registrations) -> Builder {
    builder.serve::<Tools, _>(FakeTools(Arc::clone(registered)))
}

/// Calls tool `name` with `args` through the row's provider, as `keel.tools` does.
pub fn call(host: &TestHost, name: &str, args: Value) -> ToolResult {
    let service = provider_service_name(crate::PLUGIN_ID);
    let provider = host.named_client::<ToolProvider>(&service).unwrap();
    let invocation = ToolInvocation {
        name: name.to_owned(),
        call_id: "c1".to_owned(),
        session_id: "s1".to_owned(),
        cwd: "/".to_owned(),
        args,
        timeout_ms: 0,
    };
    host.block_on(provider.execute(invocation)).unwrap()
}
