//! Tools known only at run time (issue 24 item 1): serve now, register later. A row whose tools
//! come from elsewhere while it runs (an MCP server's `tools/list`, which changes on
//! `notifications/tools/list_changed`) serves its provider at activation with
//! [`Context::serve_dynamic_tools`] and gets a [`DynamicTools`] handle; whenever it learns a
//! list it hands the handle a [`ToolSet`] for a *group* (one server), and the handle registers
//! that group with `keel.tools` in place of the group's previous registration.
//!
//! Each tool is an ordinary [`super::tool_trait::Tool`] (a dynamic one: `Args =
//! serde_json::Value`, its name from [`super::tool_trait::ToolSpec::named`], its schema from
//! [`super::tool_trait::ToolSpec::schema`]), so a call is decoded and dispatched exactly as a
//! static set's. A group is registered on its own: the registry's all-or-nothing refusal of one
//! group leaves the others in place. A list equal to the registered one (same definitions)
//! swaps the tools' bodies and leaves the registration alone, so the model's tool list does
//! not churn on a restart that changed nothing. At unload the handle unregisters every group
//! and refuses further changes (`INACTIVE_FIBER`).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use super::tool_trait::{ErasedTool, ToolSet, split, tools_service, unknown_tool};
use super::tools::{
    RegisterRequest, ToolDefinition, ToolExecutor, ToolInvocation, ToolProvider, ToolResult, Tools,
    UnregisterRequest,
};
use crate::host::HostCode;
use crate::sdk::{Context, Error, Plugin, Result};

/// The handle of a row's run-time tools ([`Context::serve_dynamic_tools`]). Cheap to clone;
/// every clone changes the same groups.
#[derive(Clone)]
pub struct DynamicTools {
    shared: Arc<Shared>,
}

struct Shared {
    ctx: Context,
    /// The provider service the groups are registered as provided by.
    service: String,
    /// One change of the registry at a time (a replace is an unregister then a register).
    turn: futures::lock::Mutex<()>,
    /// Shared with the provider, which reads only the dispatch map.
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    /// Every group's tools, by public name: what the provider dispatches to.
    tools: HashMap<String, Arc<dyn ErasedTool>>,
    groups: BTreeMap<String, Group>,
    /// The row unloaded: no change any more.
    closed: bool,
}

#[derive(Default)]
struct Group {
    registration: Option<u64>,
    definitions: Vec<ToolDefinition>,
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl State {
    /// Drops `group`'s tools from the dispatch map and answers its registration.
    fn forget(&mut self, group: &str) -> Option<u64> {
        let old = self.groups.remove(group)?;
        for d in &old.definitions {
            self.tools.remove(&d.name);
        }
        old.registration
    }
}

impl DynamicTools {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        lock(&self.shared.state)
    }

    fn open(&self) -> Result<()> {
        if self.state().closed {
            return Err(Error::coded(
                HostCode::InactiveFiber,
                format!(
                    "{}: the row is unloading; its run-time tools change no more",
                    self.shared.service
                ),
            ));
        }
        Ok(())
    }

    /// Makes `tools` the tools of `group`: registered with `keel.tools` in place of the
    /// group's previous registration (all or nothing), or, when their definitions equal the
    /// registered ones, only their bodies swapped. Answers whether the registry was changed.
    ///
    /// # Errors
    /// `INACTIVE_FIBER` after unload; the registry's refusal (`DUPLICATE_TOOL`,
    /// `INVALID_TOOL_DEFINITION`: the group is then left without tools) or
    /// `SERVICE_UNAVAILABLE`.
    pub async fn replace(&self, group: &str, tools: ToolSet) -> Result<bool> {
        let _turn = self.shared.turn.lock().await;
        self.open()?;
        let definitions = tools.definitions();
        let tools: Vec<(String, Arc<dyn ErasedTool>)> = tools
            .into_tools()
            .into_iter()
            .zip(&definitions)
            .map(|(t, d)| (d.name.clone(), Arc::from(t)))
            .collect();
        {
            let mut state = self.state();
            let same = state
                .groups
                .get(group)
                .is_some_and(|g| g.registration.is_some() && g.definitions == definitions);
            if same {
                state.tools.extend(tools);
                return Ok(false);
            }
        }
        let registry = self.shared.ctx.client::<Tools>()?;
        let old = self.state().forget(group);
        if let Some(registration) = old {
            registry
                .unregister(UnregisterRequest { registration })
                .await?;
        }
        // The bodies first, so a call the registry routes right after the register finds them.
        self.state().tools.extend(tools);
        let answer = registry
            .register(RegisterRequest {
                service: self.shared.service.clone(),
                tools: definitions.clone(),
            })
            .await;
        let mut state = self.state();
        let registration = match answer {
            Ok(r) => Some(r.registration),
            Err(e) => {
                for d in &definitions {
                    state.tools.remove(&d.name);
                }
                return Err(e);
            }
        };
        state.groups.insert(
            group.to_owned(),
            Group {
                registration,
                definitions,
            },
        );
        Ok(true)
    }

    /// Unregisters `group`'s tools (nothing when it has none).
    ///
    /// # Errors
    /// The registry's `UNKNOWN_REGISTRATION` or `SERVICE_UNAVAILABLE`.
    pub async fn remove(&self, group: &str) -> Result<()> {
        let _turn = self.shared.turn.lock().await;
        let old = self.state().forget(group);
        if let Some(registration) = old {
            self.shared
                .ctx
                .client::<Tools>()?
                .unregister(UnregisterRequest { registration })
                .await?;
        }
        Ok(())
    }

    /// The definitions of `group` as registered (empty when it has none).
    pub fn definitions(&self, group: &str) -> Vec<ToolDefinition> {
        self.state()
            .groups
            .get(group)
            .map(|g| g.definitions.clone())
            .unwrap_or_default()
    }

    /// At unload: no change any more, every group unregistered (a failure is logged: the
    /// registry may be gone first).
    async fn close(&self) {
        let _turn = self.shared.turn.lock().await;
        let registrations: Vec<u64> = {
            let mut state = self.state();
            state.closed = true;
            state.tools.clear();
            std::mem::take(&mut state.groups)
                .into_values()
                .filter_map(|g| g.registration)
                .collect()
        };
        let Ok(registry) = self.shared.ctx.client::<Tools>() else {
            return;
        };
        for registration in registrations {
            if let Err(e) = registry
                .unregister(UnregisterRequest { registration })
                .await
            {
                tracing::debug!(error = %e, service = %self.shared.service, "unregister at unload");
            }
        }
    }
}

/// The provider of a [`DynamicTools`]: dispatches by name to the tools the groups hold now.
struct DynamicProvider(Arc<Mutex<State>>);

impl DynamicProvider {
    async fn invoke(&self, invocation: ToolInvocation) -> ToolResult {
        let (call, args) = split(invocation);
        let tool = lock(&self.0).tools.get(&call.name).cloned();
        match tool {
            Some(tool) => tool.call(args, &call).await,
            None => unknown_tool(&call.name),
        }
    }
}

impl ToolExecutor for DynamicProvider {
    async fn execute(&self, call: ToolInvocation) -> Result<ToolResult> {
        Ok(self.invoke(call).await)
    }
}

impl Context {
    /// Serves the provider of `plugin`'s run-time tools (its manifest declares
    /// [`crate::sdk::Manifest::serves_tools`]) with no tool registered yet, and answers the
    /// handle that registers them as they become known ([`DynamicTools::replace`]). At unload
    /// every group is unregistered.
    ///
    /// # Errors
    /// `PLUGIN` when the manifest lacks `serves_tools()`; `DUPLICATE_PROVIDER`,
    /// `INACTIVE_FIBER`.
    pub fn serve_dynamic_tools(&self, plugin: &impl Plugin) -> Result<DynamicTools> {
        let (id, service) = tools_service(plugin)?;
        let state = Arc::new(Mutex::new(State::default()));
        let handle = DynamicTools {
            shared: Arc::new(Shared {
                ctx: *self,
                service: service.clone(),
                turn: futures::lock::Mutex::new(()),
                state: Arc::clone(&state),
            }),
        };
        self.serve_named::<ToolProvider, _>(&service, DynamicProvider(state))?;
        let closing = handle.clone();
        self.effect(
            &format!("unregister the run-time tools of {id}"),
            move || async move {
                closing.close().await;
                Ok(())
            },
        )?;
        Ok(handle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::services::tool_trait::{Tool, ToolCall, ToolSpec};

    struct Named(&'static str, &'static str);

    impl Tool for Named {
        const NAME: &'static str = "dynamic";
        type Args = serde_json::Value;
        fn describe(&self) -> ToolSpec {
            ToolSpec::new("run time")
                .named(self.0)
                .schema(serde_json::json!({"type": "object"}))
        }
        async fn run(&self, args: serde_json::Value, _: &ToolCall) -> ToolResult {
            ToolResult::ok(format!("{} {args}", self.1))
        }
    }

    fn invocation(name: &str) -> ToolInvocation {
        ToolInvocation {
            name: name.into(),
            call_id: "c".into(),
            session_id: "s".into(),
            cwd: "/".into(),
            args: serde_json::json!({"a": 1}),
            timeout_ms: 0,
        }
    }

    /// The dispatch map follows the groups: forgetting a group removes exactly its names and
    /// answers its registration, and a call to a name no group holds is `UNKNOWN_TOOL`.
    #[test]
    fn the_provider_dispatches_to_what_the_groups_hold_now() {
        let state = Arc::new(Mutex::new(State::default()));
        for (group, name, body) in [("a", "mcp__a__x", "ax"), ("b", "mcp__b__x", "bx")] {
            let tool: Arc<dyn ErasedTool> = Arc::new(Named(name, body));
            let mut s = lock(&state);
            s.groups.insert(
                group.into(),
                Group {
                    registration: Some(1),
                    definitions: vec![tool.definition()],
                },
            );
            s.tools.insert(name.into(), tool);
        }
        let provider = DynamicProvider(Arc::clone(&state));
        let run = |name: &str| futures::executor::block_on(provider.invoke(invocation(name)));
        assert_eq!(run("mcp__a__x").content, r#"ax {"a":1}"#);
        assert_eq!(run("mcp__b__x").content, r#"bx {"a":1}"#);
        assert_eq!(lock(&state).forget("a"), Some(1));
        assert_eq!(lock(&state).forget("a"), None);
        assert_eq!(run("mcp__a__x").code(), Some("UNKNOWN_TOOL"));
        assert_eq!(run("mcp__b__x").content, r#"bx {"a":1}"#);
    }
}
