//! The resident tools' face (issue 16 item 2, on the SDK's `Tool` trait since issue 24 item 1):
//! each tool's name, description and typed arguments, whose derived schema is what the model
//! reads. Parent-side: `resident_start`, `resident_send`, `resident_view`, `resident_promote`,
//! `resident_stop`. Child-side (`child_only`, offered only to child agents): `memory_write`,
//! `memory_read`, `notify_parent`. Every tool is exclusive (not parallel-safe) so one parent's
//! calls on its children run in the order the model wrote them. The bodies are [`Host`]'s
//! ([`super::parent`], [`super::child`]); a body's `Err` is the error result the model reads.

use std::sync::Arc;

use keel_plugin_api::services::tools::{Tool, ToolCall, ToolResult, ToolSet, ToolSpec};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::Host;
use super::stop::Residual;

/// `resident_start` arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartArgs {
    /// The resident child's name (letters, digits, _ and -).
    pub name: String,
    /// A named child profile of the subagent row (its model, tools, budgets).
    #[serde(default)]
    pub agent: Option<String>,
    /// Queue again the inputs parked at the last stop of this name.
    #[serde(default)]
    pub resume_parked: bool,
}

/// `resident_send` arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendArgs {
    /// The resident child's name (letters, digits, _ and -).
    pub name: String,
    /// The message the child is given.
    pub message: String,
}

/// `resident_view` arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ViewArgs {
    /// The resident child's name (letters, digits, _ and -).
    pub name: String,
    /// Wait until the child is idle first.
    #[serde(default)]
    pub wait: bool,
}

/// `resident_promote` arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PromoteArgs {
    /// The resident child's name (letters, digits, _ and -).
    pub name: String,
    /// The keys of the temp records to copy.
    #[schemars(length(min = 1))]
    pub keys: Vec<String>,
}

/// `resident_stop` arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StopArgs {
    /// The resident child's name (letters, digits, _ and -).
    pub name: String,
    /// What becomes of its inputs not yet run (default keep).
    #[serde(default)]
    #[schemars(schema_with = "residual_schema")]
    pub residual: Option<Residual>,
}

/// `residual` as the model reads it: the four spellings, inline.
fn residual_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "string", "enum": ["keep", "drop", "park", "return"] })
}

/// `memory_write` arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    /// The record's key.
    #[schemars(length(min = 1))]
    pub key: String,
    /// The record's text.
    pub text: String,
}

/// `memory_read` arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// Keep records whose key or text contains it.
    #[serde(default)]
    pub query: Option<String>,
}

/// `notify_parent` arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NotifyArgs {
    /// The message.
    #[schemars(length(min = 1))]
    pub message: String,
}

/// One resident tool: a unit struct over the host, its name, its arguments, its description,
/// whether only children are offered it, and the host method that runs it.
macro_rules! resident_tool {
    ($tool:ident, $name:literal, $args:ty, $child_only:literal, $body:ident, $description:literal) => {
        #[doc = concat!("`", $name, "`.")]
        pub struct $tool(pub Arc<Host>);

        impl Tool for $tool {
            const NAME: &'static str = $name;
            type Args = $args;

            fn describe(&self) -> ToolSpec {
                let spec = ToolSpec::new($description);
                if $child_only { spec.child_only() } else { spec }
            }

            async fn run(&self, args: $args, call: &ToolCall) -> ToolResult {
                self.0
                    .$body(call, args)
                    .await
                    .unwrap_or_else(|e| ToolResult::from_error(&e))
            }
        }
    };
}

resident_tool!(
    ResidentStart,
    "resident_start",
    StartArgs,
    false,
    start,
    "Start a long-lived named child agent (a resident) with its own input queue and memory. It \
     idles until `resident_send` gives it work and lives until `resident_stop` or until this \
     session ends. Inputs kept at its last stop are queued again; parked ones only with \
     `resume_parked`."
);
resident_tool!(
    ResidentSend,
    "resident_send",
    SendArgs,
    false,
    send,
    "Give a resident child a message. It is queued on the child's own queue as an interrupt (it \
     runs before the child's queued work) and the call returns at once; read the answer later \
     with `resident_view`."
);
resident_tool!(
    ResidentView,
    "resident_view",
    ViewArgs,
    false,
    view,
    "Look at a resident child without interrupting it: running or idle, its last answer, its \
     waiting inputs and its temp memory. `wait: true` first waits until it is idle."
);
resident_tool!(
    ResidentPromote,
    "resident_promote",
    PromoteArgs,
    false,
    promote,
    "Copy records of a resident child's temp memory into this session's main memory, which \
     every resident child of this session reads."
);
resident_tool!(
    ResidentStop,
    "resident_stop",
    StopArgs,
    false,
    stop_tool,
    "Stop a resident child. Its inputs not yet run are kept (queued again at the next start of \
     the name; the default), dropped (logged and answered skipped), parked (saved until a start \
     asks for them) or returned (in this result). A running task is aborted. Its temp memory \
     is deleted."
);
resident_tool!(
    MemoryWrite,
    "memory_write",
    WriteArgs,
    true,
    memory_write,
    "Write a record to your temp memory (a resident child's own; your parent may promote it to \
     main memory). The same key replaces the record."
);
resident_tool!(
    MemoryRead,
    "memory_read",
    ReadArgs,
    true,
    memory_read,
    "Read your memory: your temp records and your parent's main records (temp wins on the same \
     key). `query` keeps records whose key or text contains it."
);
resident_tool!(
    NotifyParent,
    "notify_parent",
    NotifyArgs,
    true,
    notify_parent,
    "Send your parent agent a message now (it interrupts the parent's queued work)."
);

/// `set` with the eight resident tools over `host` added.
pub fn with_tools(set: ToolSet, host: &Arc<Host>) -> ToolSet {
    let h = || Arc::clone(host);
    set.with(ResidentStart(h()))
        .with(ResidentSend(h()))
        .with(ResidentView(h()))
        .with(ResidentPromote(h()))
        .with(ResidentStop(h()))
        .with(MemoryWrite(h()))
        .with(MemoryRead(h()))
        .with(NotifyParent(h()))
}

/// A successful result whose content is `value` as JSON (what the model reads and the log
/// keeps), also in `meta`.
pub(super) fn json_result(value: &impl serde::Serialize) -> ToolResult {
    let v = serde_json::to_value(value).unwrap_or(Value::Null);
    ToolResult {
        content: v.to_string(),
        meta: Some(v),
        ..ToolResult::default()
    }
}

#[cfg(test)]
mod tests {
    use keel_plugin_api::services::tools::schema_of;
    use serde_json::json;

    use super::*;

    /// The argument names, the required ones and the closed objects the model was always shown
    /// (the schemas were hand-written JSON before issue 24).
    #[test]
    fn the_derived_schemas_keep_every_argument_name() {
        let cases = [
            (
                schema_of::<StartArgs>(),
                vec!["name", "agent", "resume_parked"],
                json!(["name"]),
            ),
            (
                schema_of::<SendArgs>(),
                vec!["name", "message"],
                json!(["name", "message"]),
            ),
            (
                schema_of::<ViewArgs>(),
                vec!["name", "wait"],
                json!(["name"]),
            ),
            (
                schema_of::<PromoteArgs>(),
                vec!["name", "keys"],
                json!(["name", "keys"]),
            ),
            (
                schema_of::<StopArgs>(),
                vec!["name", "residual"],
                json!(["name"]),
            ),
            (
                schema_of::<WriteArgs>(),
                vec!["key", "text"],
                json!(["key", "text"]),
            ),
            (schema_of::<ReadArgs>(), vec!["query"], Value::Null),
            (
                schema_of::<NotifyArgs>(),
                vec!["message"],
                json!(["message"]),
            ),
        ];
        for (schema, names, required) in cases {
            assert_eq!(schema["type"], "object", "{schema}");
            assert_eq!(schema["additionalProperties"], false, "{schema}");
            let props: Vec<&str> = schema["properties"]
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            assert_eq!(props, names, "{schema}");
            assert_eq!(
                schema.get("required").cloned().unwrap_or(Value::Null),
                required
            );
            assert!(!schema.to_string().contains("$ref"), "inline: {schema}");
        }
        let stop = schema_of::<StopArgs>();
        assert_eq!(
            stop["properties"]["residual"]["enum"],
            json!(["keep", "drop", "park", "return"])
        );
        assert_eq!(
            schema_of::<PromoteArgs>()["properties"]["keys"]["minItems"],
            1
        );
        assert_eq!(
            schema_of::<NotifyArgs>()["properties"]["message"]["minLength"],
            1
        );
    }
}
