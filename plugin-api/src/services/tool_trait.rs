//! A tool is one trait (issue 24 item 1): [`Tool`] says what a tool is called, what its
//! arguments are (a Rust type whose JSON Schema is what the model reads) and what a call does;
//! [`ToolSet`] gathers a row's tools and [`Context::serve_tools`] serves them, registers them
//! with `keel.tools` and unregisters them when the row unloads.
//!
//! Underneath, the wire protocol between `keel.tools` and a providing row stays the
//! [`ToolProvider`] contract served as `keel.tool.<plugin>` (an ABI matter): this module writes
//! that provider, the registration and the manifest declaration
//! ([`Manifest::serves_tools`]) so an author writes none of them. A call's arguments arrive
//! parsed once by the pipeline and are decoded here once into [`Tool::Args`]; a document that
//! does not decode becomes an `INVALID_ARGUMENTS` error result naming the tool and the field.
//!
//! A dynamic tool (one whose name and schema are known only at run time, an MCP server's)
//! implements the same trait with `Args = serde_json::Value` and supplies both through
//! [`ToolSpec::named`] and [`ToolSpec::schema`] (or `ToolSpec::from(definition)`). Tools that
//! become known only after activation are served with `Context::serve_dynamic_tools` and
//! registered later, group by group, through its handle ([`super::tool_dynamic`]).
//!
//! Every in-tree tool is on this trait (`tool-fs`, `tool-shell`, `context`, `subagent`,
//! `mcp`, the test plugin `proof-tools`): no plugin outside this crate serves
//! `serve_named::<ToolProvider, _>` or calls `register_until_unload` any more. Both stay
//! public as the wire protocol this module and [`super::tool_dynamic`] write.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;

use serde::de::DeserializeOwned;

use super::tools::{
    ToolCode, ToolDefinition, ToolExecutor, ToolInvocation, ToolProvider, ToolResult, Tools,
    provider_service_name, register_until_unload,
};
use crate::codes::ContractCode;
use crate::sdk::{Context, Error, Manifest, Plugin, Result};

/// One tool: its name, its typed arguments and its body.
///
/// ```ignore
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct GreetArgs { /// Who to greet.
///                    name: String }
/// struct Greet;
/// impl Tool for Greet {
///     const NAME: &'static str = "greet";
///     type Args = GreetArgs;
///     fn describe(&self) -> ToolSpec { ToolSpec::new("Greets someone by name.").parallel_safe() }
///     async fn run(&self, args: GreetArgs, _call: &ToolCall) -> ToolResult {
///         ToolResult::ok(format!("Hello, {}!", args.name))
///     }
/// }
/// ```
pub trait Tool: Send + Sync + 'static {
    /// The public name the model calls (ARCHITECTURE §8), unless [`ToolSpec::named`] gives
    /// one at run time.
    const NAME: &'static str;
    /// The arguments. Their derived JSON Schema is the tool's `parameters` (unless
    /// [`ToolSpec::schema`] supplies one); each call's argument document is decoded into
    /// this type once, before [`Tool::run`].
    type Args: DeserializeOwned + schemars::JsonSchema + Send;
    /// What the model reads about the tool, and how the pipeline schedules it.
    fn describe(&self) -> ToolSpec;
    /// Runs one call. A failure is an error [`ToolResult`] the model reads
    /// ([`ToolResult::error`]).
    fn run(&self, args: Self::Args, call: &ToolCall) -> impl Future<Output = ToolResult> + Send;
}

/// A tool's description and scheduling flags ([`Tool::describe`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolSpec {
    /// What the model reads.
    pub description: String,
    /// May run beside other parallel-safe calls (TOOL-10; default exclusive).
    pub parallel_safe: bool,
    /// Changes the world: approval mode `ask` asks first.
    pub mutating: bool,
    /// Offered only to child agents.
    pub child_only: bool,
    /// A name chosen at run time (a dynamic tool); `None`: [`Tool::NAME`].
    pub name: Option<String>,
    /// A schema supplied at run time (a dynamic tool); `None`: derived from [`Tool::Args`].
    pub schema: Option<serde_json::Value>,
}

impl ToolSpec {
    /// A spec with `description`, exclusive and not mutating.
    pub fn new(description: impl Into<String>) -> Self {
        ToolSpec {
            description: description.into(),
            ..ToolSpec::default()
        }
    }

    /// The tool may run concurrently with other parallel-safe calls.
    #[must_use]
    pub fn parallel_safe(mut self) -> Self {
        self.parallel_safe = true;
        self
    }

    /// The tool changes the world (files, processes).
    #[must_use]
    pub fn mutating(mut self) -> Self {
        self.mutating = true;
        self
    }

    /// The tool is offered only to child agents.
    #[must_use]
    pub fn child_only(mut self) -> Self {
        self.child_only = true;
        self
    }

    /// The name, chosen at run time (dynamic tools).
    #[must_use]
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The JSON Schema of the arguments, supplied at run time (dynamic tools, or a tool whose
    /// arguments carry keys its `Args` does not model).
    #[must_use]
    pub fn schema(mut self, schema: serde_json::Value) -> Self {
        self.schema = Some(schema);
        self
    }
}

/// A registered definition as a spec (a dynamic tool that holds the definition it was
/// given, an MCP server's): name and schema included.
impl From<ToolDefinition> for ToolSpec {
    fn from(d: ToolDefinition) -> Self {
        ToolSpec {
            description: d.description,
            parallel_safe: d.parallel_safe,
            mutating: d.mutating,
            child_only: d.child_only,
            name: Some(d.name),
            schema: Some(d.parameters),
        }
    }
}

/// Who made a call and where: everything of the invocation but its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The tool name called.
    pub name: String,
    /// The call id.
    pub call_id: String,
    /// The session (observation state is keyed by it).
    pub session_id: String,
    /// The session's working root (relative paths resolve here).
    pub cwd: String,
    /// The deadline the pipeline enforces around the body, ms (0 = none).
    pub timeout_ms: u64,
}

/// The JSON Schema of `T`, as a tool's `parameters`: without `$schema`, and without the
/// `title` and root `description` schemars takes from the type's name and doc comment (what
/// the model reads about the tool is [`Tool::describe`]'s; the fields' docs stay).
pub fn schema_of<T: schemars::JsonSchema>() -> serde_json::Value {
    let mut schema = schemars::schema_for!(T).to_value();
    if let Some(map) = schema.as_object_mut() {
        for key in ["$schema", "title", "description"] {
            map.remove(key);
        }
    }
    schema
}

/// The future an erased tool's call returns.
pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = ToolResult> + Send + 'a>>;

/// A [`Tool`] with its types erased, as a [`ToolSet`] holds it.
pub trait ErasedTool: Send + Sync + 'static {
    /// The definition registered with `keel.tools`.
    fn definition(&self) -> ToolDefinition;
    /// Decodes `args` once into the tool's arguments and runs it.
    fn call<'a>(&'a self, args: serde_json::Value, call: &'a ToolCall) -> ToolFuture<'a>;
}

impl<T: Tool> ErasedTool for T {
    fn definition(&self) -> ToolDefinition {
        let spec = self.describe();
        ToolDefinition {
            name: spec.name.unwrap_or_else(|| T::NAME.to_owned()),
            description: spec.description,
            parameters: spec.schema.unwrap_or_else(schema_of::<T::Args>),
            parallel_safe: spec.parallel_safe,
            mutating: spec.mutating,
            child_only: spec.child_only,
        }
    }

    fn call<'a>(&'a self, args: serde_json::Value, call: &'a ToolCall) -> ToolFuture<'a> {
        match decode_args::<T::Args>(&call.name, args) {
            Ok(args) => Box::pin(self.run(args, call)),
            Err(result) => Box::pin(async move { *result }),
        }
    }
}

/// Decodes a call's argument document into `A` (the one decode of a call):
/// `INVALID_ARGUMENTS` naming the tool and what did not fit otherwise.
///
/// # Errors
/// The error result the model reads.
pub fn decode_args<A: DeserializeOwned>(
    tool: &str,
    args: serde_json::Value,
) -> std::result::Result<A, Box<ToolResult>> {
    serde_json::from_value(args).map_err(|e| {
        Box::new(ToolResult::error(
            ContractCode::InvalidArguments,
            format!("{tool}: the arguments do not fit the tool's schema: {e}"),
        ))
    })
}

/// A row's tools, built with [`ToolSet::with`] and served by [`Context::serve_tools`].
#[derive(Default)]
pub struct ToolSet {
    tools: Vec<Box<dyn ErasedTool>>,
}

impl std::fmt::Debug for ToolSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.tools.iter().map(|t| t.definition().name).collect();
        f.debug_struct("ToolSet").field("tools", &names).finish()
    }
}

impl ToolSet {
    /// No tools yet.
    pub fn new() -> Self {
        ToolSet::default()
    }

    /// Adds `tool`.
    #[must_use]
    pub fn with(mut self, tool: impl Tool) -> Self {
        self.tools.push(Box::new(tool));
        self
    }

    /// Adds an already erased tool (a dynamic set built at run time).
    #[must_use]
    pub fn with_erased(mut self, tool: Box<dyn ErasedTool>) -> Self {
        self.tools.push(tool);
        self
    }

    /// The definitions, in the order added.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.tools.iter().map(|t| t.definition()).collect()
    }

    /// The provider that dispatches each invocation to its tool by name (what
    /// [`Context::serve_tools`] serves; tests call it directly).
    pub fn into_provider(self) -> ToolSetProvider {
        let tools = self
            .tools
            .into_iter()
            .map(|t| (t.definition().name, t))
            .collect();
        ToolSetProvider { tools }
    }

    /// The erased tools, in the order added (a [`DynamicTools`] group takes them).
    pub(super) fn into_tools(self) -> Vec<Box<dyn ErasedTool>> {
        self.tools
    }
}

/// Splits an invocation into the call it describes and its argument document.
pub(super) fn split(invocation: ToolInvocation) -> (ToolCall, serde_json::Value) {
    let ToolInvocation {
        name,
        call_id,
        session_id,
        cwd,
        args,
        timeout_ms,
    } = invocation;
    let call = ToolCall {
        name,
        call_id,
        session_id,
        cwd,
        timeout_ms,
    };
    (call, args)
}

/// The error result of a call to a name this provider does not serve.
pub(super) fn unknown_tool(name: &str) -> ToolResult {
    ToolResult::error(
        ToolCode::UnknownTool,
        format!("this provider has no tool named '{name}'"),
    )
}

/// One tool is a set of one: `ctx.serve_tools(self, MyTool)`.
impl<T: Tool> From<T> for ToolSet {
    fn from(tool: T) -> Self {
        ToolSet::new().with(tool)
    }
}

/// The [`ToolProvider`] of a [`ToolSet`]: one invocation, one tool, one decode.
pub struct ToolSetProvider {
    tools: HashMap<String, Box<dyn ErasedTool>>,
}

impl ToolSetProvider {
    /// Runs `invocation` on the tool it names (`UNKNOWN_TOOL` for another name).
    pub async fn invoke(&self, invocation: ToolInvocation) -> ToolResult {
        let (call, args) = split(invocation);
        match self.tools.get(&call.name) {
            Some(tool) => tool.call(args, &call).await,
            None => unknown_tool(&call.name),
        }
    }
}

impl ToolExecutor for ToolSetProvider {
    async fn execute(&self, call: ToolInvocation) -> Result<ToolResult> {
        Ok(self.invoke(call).await)
    }
}

impl Manifest {
    /// Declares that this row serves tools: the provider service `keel.tool.<id>` the
    /// pipeline calls, and the `keel.tools` registry it registers with. Pair it with
    /// [`Context::serve_tools`] in `activate`.
    #[must_use]
    pub fn serves_tools(self) -> Self {
        let service = provider_service_name(&self.id);
        self.provides_named(&service, false).requires::<Tools>()
    }
}

impl Context {
    /// Serves `tools` (one [`Tool`], or a [`ToolSet`]) for `plugin` (whose manifest declares
    /// [`Manifest::serves_tools`]),
    /// registers them with `keel.tools`, and unregisters them when this fiber unloads.
    ///
    /// # Errors
    /// `PLUGIN` when the manifest lacks `serves_tools()`; the registry's refusal
    /// (`DUPLICATE_TOOL`, `INVALID_TOOL_DEFINITION`); `SERVICE_UNAVAILABLE`.
    pub async fn serve_tools(&self, plugin: &impl Plugin, tools: impl Into<ToolSet>) -> Result<()> {
        let tools = tools.into();
        let (id, service) = tools_service(plugin)?;
        let definitions = tools.definitions();
        let label = format!("unregister the tools of {id}");
        self.serve_named::<ToolProvider, _>(&service, tools.into_provider())?;
        register_until_unload(self, &service, definitions, &label).await?;
        Ok(())
    }
}

/// `plugin`'s id and its provider service, when its manifest declares
/// [`Manifest::serves_tools`].
///
/// # Errors
/// `PLUGIN` naming the plugin otherwise.
pub(super) fn tools_service(plugin: &impl Plugin) -> Result<(String, String)> {
    let manifest = plugin.manifest();
    let service = provider_service_name(&manifest.id);
    if !manifest.provides.iter().any(|p| p.name == service) {
        return Err(Error::coded(
            ContractCode::Plugin,
            format!(
                "plugin '{}' serves tools but its manifest does not call serves_tools()",
                manifest.id
            ),
        ));
    }
    Ok((manifest.id, service))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct EchoArgs {
        /// What to say back.
        text: String,
    }

    struct Echo;

    impl Tool for Echo {
        const NAME: &'static str = "echo";
        type Args = EchoArgs;
        fn describe(&self) -> ToolSpec {
            ToolSpec::new("Says it back.").parallel_safe()
        }
        async fn run(&self, args: EchoArgs, call: &ToolCall) -> ToolResult {
            ToolResult::ok(format!("{} {}", call.call_id, args.text))
        }
    }

    fn invocation(name: &str, args: serde_json::Value) -> ToolInvocation {
        ToolInvocation {
            name: name.into(),
            call_id: "c1".into(),
            session_id: "s".into(),
            cwd: "/".into(),
            args,
            timeout_ms: 0,
        }
    }

    #[test]
    fn the_definition_is_derived_from_the_args_type_and_the_spec() {
        let defs = ToolSet::new().with(Echo).definitions();
        assert_eq!(defs[0].name, "echo");
        assert!(defs[0].parallel_safe && !defs[0].mutating);
        assert_eq!(defs[0].parameters["type"], "object");
        assert_eq!(defs[0].parameters["properties"]["text"]["type"], "string");
        assert_eq!(defs[0].parameters["required"][0], "text");
        assert_eq!(
            defs[0].parameters["properties"]["text"]["description"],
            "What to say back."
        );
        for key in ["$schema", "title", "description"] {
            assert!(defs[0].parameters.get(key).is_none(), "{key}");
        }
    }

    #[test]
    fn a_call_is_decoded_once_into_args_and_a_bad_document_names_the_field() {
        let provider = ToolSet::new().with(Echo).into_provider();
        let ok = futures::executor::block_on(
            provider.invoke(invocation("echo", serde_json::json!({"text": "hi"}))),
        );
        assert_eq!(ok.content, "c1 hi");
        let bad = futures::executor::block_on(
            provider.invoke(invocation("echo", serde_json::json!({"txt": "hi"}))),
        );
        assert_eq!(bad.code(), Some("INVALID_ARGUMENTS"), "{bad:?}");
        assert!(
            bad.content.contains("echo") && bad.content.contains("txt"),
            "{bad:?}"
        );
        let other =
            futures::executor::block_on(provider.invoke(invocation("nope", serde_json::json!({}))));
        assert_eq!(other.code(), Some("UNKNOWN_TOOL"));
    }

    #[test]
    fn a_dynamic_tool_names_itself_and_supplies_its_schema_at_run_time() {
        struct Dynamic(String);
        impl Tool for Dynamic {
            const NAME: &'static str = "dynamic";
            type Args = serde_json::Value;
            fn describe(&self) -> ToolSpec {
                ToolSpec::new("A tool found at run time.")
                    .named(self.0.clone())
                    .schema(serde_json::json!({"type": "object"}))
            }
            async fn run(&self, args: serde_json::Value, _: &ToolCall) -> ToolResult {
                ToolResult::ok(args.to_string())
            }
        }
        let set = ToolSet::new().with(Dynamic("mcp__srv__x".into()));
        assert_eq!(set.definitions()[0].name, "mcp__srv__x");
        assert_eq!(set.definitions()[0].parameters["type"], "object");
        let provider = set.into_provider();
        let out = futures::executor::block_on(
            provider.invoke(invocation("mcp__srv__x", serde_json::json!({"a": 1}))),
        );
        assert_eq!(out.content, r#"{"a":1}"#);
    }
}
