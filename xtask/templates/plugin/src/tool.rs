//! The `{{snake}}_greet` tool: its arguments' type is its schema; a call runs [`greet`].

use keel_plugin_api::services::tools::{Tool, ToolCall, ToolResult, ToolSpec};

use crate::Config;
use crate::greet::{GreetArgs, greet};

/// The tool, holding the row's config.
pub struct Greet(pub Config);

impl Tool for Greet {
    const NAME: &'static str = "{{snake}}_greet";
    type Args = GreetArgs;
    fn describe(&self) -> ToolSpec {
        ToolSpec::new("Greets someone by name.").parallel_safe()
    }
    async fn run(&self, args: GreetArgs, _call: &ToolCall) -> ToolResult {
        match greet(&self.0, &args) {
            Ok(text) => ToolResult::ok(text),
            Err((code, message)) => ToolResult::error(code, message),
        }
    }
}
