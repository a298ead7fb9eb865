//! The `agent` tool (issue 16 item 1; SUB-05, SUB-07): a one-shot child agent whose final
//! answer is the tool's result. This module owns the tool's face — its definition (which
//! lists the named agents of the config), the argument and cap checks that answer at once
//! (`SUBAGENT_UNKNOWN`, `SUBAGENT_DEPTH`, `SUBAGENT_LIMIT`: never a wait) — and hands a call
//! that passes them to [`crate::delegate_run`], which runs the child in a task of its own so
//! that a cancelled call still converges it. [`crate::delegate_resume`] recovers the children
//! a crash left open when their parent is resumed.

use std::sync::Arc;

use futures::channel::oneshot;
use keel_plugin_api::events::agent::Resumed;
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::agent::{AgentService, AgentSession};
use keel_plugin_api::services::session::Sessions;
use keel_plugin_api::services::subagent::{AGENT_TOOL, AgentArgs, SubagentCode};
use keel_plugin_api::services::tools::{Tool, ToolCall, ToolResult, ToolSpec, schema_of};
use serde_json::json;

use crate::config::{ChildProfile, SubagentConfig};
use crate::delegate_run::{self, ChildCall};
use crate::registry::Registry;

/// What every child run shares: the row's handle, config, registry and clients.
pub struct Shared {
    /// The row's context (tasks, events, optional services).
    pub ctx: Context,
    /// The row config.
    pub config: SubagentConfig,
    /// The live children.
    pub registry: Arc<Registry>,
    /// `keel.agent`.
    pub agent: keel_plugin_api::services::agent::AgentClient,
    /// `keel.session`.
    pub sessions: keel_plugin_api::services::session::SessionsClient,
    /// What each parent's turn has granted its children ([`crate::budget`]).
    pub budgets: crate::budget::Budgets,
}

/// Installs the resume listener and the unload effect that converges any child still open,
/// and answers the `agent` tool (the row serves it with its resident tools; served after
/// this, its unregistration runs before the convergence).
///
/// # Errors
/// A client or a listener the kernel refused.
pub fn prepare(ctx: &Context, config: &SubagentConfig) -> Result<AgentTool> {
    let shared = Arc::new(Shared {
        ctx: *ctx,
        config: config.clone(),
        registry: Arc::new(Registry::default()),
        agent: ctx.client::<AgentService>()?,
        sessions: ctx.client::<Sessions>()?,
        budgets: crate::budget::Budgets::default(),
    });
    let s = Arc::clone(&shared);
    ctx.on_parallel::<Resumed, _, _>(ListenerOptions::default(), move |p| {
        let s = Arc::clone(&s);
        let parent = p.session_id.as_str().to_owned();
        async move { crate::delegate_resume::recover(&s, &parent).await }
    })?;
    // A child a cancelled call left open (its convergence task was cut by the unload) is
    // aborted and closed here, before `keel.agent` goes: its log still ends with a terminal
    // `turn/end` (SUB-07).
    let s = Arc::clone(&shared);
    ctx.effect("converge open children", move || async move {
        for (child, _) in s.registry.live() {
            let _ = s.agent.abort(AgentSession::new(&child)).await;
            if let Err(e) = s.agent.close(AgentSession::new(&child)).await {
                tracing::debug!(child = %child, "close at unload: {e}");
            }
            s.registry.closed(&child);
        }
        Ok(())
    })?;
    Ok(AgentTool(shared))
}

/// The tool's spec: its description names every agent of the config, and its schema (derived
/// from [`AgentArgs`]) their names.
pub fn spec(config: &SubagentConfig) -> ToolSpec {
    let mut description = String::from(
        "Start a child agent on a self-contained task and get its final answer back as this \
         tool's result. The child works in its own session with its own tools; several `agent` \
         calls in one message run in parallel. `mode: \"spawn\"` (default) starts it with only \
         the task; `mode: \"fork\"` gives it this conversation's completed turns as context. \
         Write the task so it stands alone: what to do, where, and what to answer.",
    );
    if config.agents.is_empty() {
        description.push_str(" No named agents are configured: omit `agent`.");
    } else {
        description.push_str("\n\nNamed agents (`agent`):");
        for (name, p) in &config.agents {
            description.push_str(&format!("\n- {name}: {}", p.description));
        }
    }
    let mut schema = schema_of::<AgentArgs>();
    if !config.agents.is_empty()
        && let Some(agent) = schema.pointer_mut("/properties/agent")
    {
        agent["type"] = json!("string");
        agent["enum"] = json!(config.agents.keys().collect::<Vec<_>>());
    }
    ToolSpec::new(description).parallel_safe().schema(schema)
}

/// The `agent` tool.
pub struct AgentTool(Arc<Shared>);

impl Tool for AgentTool {
    const NAME: &'static str = AGENT_TOOL;
    type Args = AgentArgs;

    fn describe(&self) -> ToolSpec {
        spec(&self.0.config)
    }

    async fn run(&self, args: AgentArgs, call: &ToolCall) -> ToolResult {
        self.call(args, call)
            .await
            .unwrap_or_else(|e| ToolResult::from_error(&e))
    }
}

impl AgentTool {
    async fn call(&self, args: AgentArgs, call: &ToolCall) -> Result<ToolResult> {
        // The parent as its loop knows it: a child's depth (whoever started it, or its header
        // once resumed) and whether its session is kept in memory only.
        let parent = self
            .0
            .agent
            .status(AgentSession::new(&call.session_id))
            .await
            .ok();
        let parent_depth = parent.as_ref().map_or_else(
            || self.0.registry.depth_of(&call.session_id),
            |p| p.depth.max(self.0.registry.depth_of(&call.session_id)),
        );
        let steps_left = parent.as_ref().and_then(|p| p.steps_left);
        let ephemeral = parent.is_some_and(|p| p.ephemeral);
        let checked = match check(&self.0, call, &args, parent_depth) {
            Ok(c) => c,
            Err((code, message)) => return Ok(ToolResult::error(code, message)),
        };
        let (profile, depth) = checked;
        let slot = match self
            .0
            .registry
            .reserve(&call.session_id, self.0.config.max_concurrent)
        {
            Ok(s) => s,
            Err(full) => {
                return Ok(ToolResult::error(
                    SubagentCode::Limit,
                    format!(
                        "session '{}' already runs {} child agents (the subagent row's \
                         max_concurrent is {}); wait for one to finish and call again",
                        call.session_id, full.running, self.0.config.max_concurrent
                    ),
                ));
            }
        };
        let configured = profile.as_ref().and_then(|(_, p)| p.max_steps);
        let max_steps = match self
            .0
            .budgets
            .grant(&call.session_id, steps_left, configured)
        {
            Ok(m) => m,
            Err(e) => {
                return Ok(ToolResult::error(
                    SubagentCode::Limit,
                    format!(
                        "session '{}' has {} model request(s) left in this turn, {} of them \
                         already granted to its child agents: too few for another child; do \
                         this task yourself",
                        call.session_id, e.left, e.drawn
                    ),
                ));
            }
        };
        // The child runs in a task of its own; this call only waits for its answer. When the
        // call is dropped (the parent's batch cancelled), `cancel` goes with it and the task
        // aborts and closes the child (SUB-07).
        let (answer_tx, answer_rx) = oneshot::channel();
        let (cancel, cancelled) = oneshot::channel::<()>();
        let run = ChildCall {
            parent: call.session_id.clone(),
            call_id: call.call_id.clone(),
            cwd: call.cwd.clone(),
            deadline_ms: call.timeout_ms,
            args,
            profile,
            depth,
            ephemeral,
            max_steps,
        };
        let shared = Arc::clone(&self.0);
        self.0.ctx.spawn(async move {
            let result = delegate_run::run(&shared, run, slot, cancelled).await;
            let _ = answer_tx.send(result);
        })?;
        let answer = answer_rx.await;
        drop(cancel);
        Ok(answer.unwrap_or_else(|_| {
            ToolResult::error(
                SubagentCode::Cancelled,
                "the child agent's task ended without an answer (the subagent row is unloading)",
            )
        }))
    }
}

/// A named agent and its profile (`None`: a child with the parent's settings).
pub type Named = Option<(String, ChildProfile)>;

/// The named profile and the child's depth, or the code and message that refuse the call.
fn check(
    shared: &Shared,
    call: &ToolCall,
    args: &AgentArgs,
    parent_depth: u32,
) -> std::result::Result<(Named, u32), (SubagentCode, String)> {
    let profile = match &args.agent {
        None => None,
        Some(name) => match shared.config.agents.get(name) {
            Some(p) => Some((name.clone(), p.clone())),
            None => {
                let known: Vec<&str> = shared.config.agents.keys().map(String::as_str).collect();
                return Err((
                    SubagentCode::Unknown,
                    format!(
                        "no agent named '{name}' in the subagent row's agents ({})",
                        if known.is_empty() {
                            "none are configured".to_owned()
                        } else {
                            format!("known: {}", known.join(", "))
                        }
                    ),
                ));
            }
        },
    };
    let depth = parent_depth + 1;
    if depth > shared.config.max_depth {
        return Err((
            SubagentCode::Depth,
            format!(
                "session '{}' is at delegation depth {}; a child would be at depth {depth}, past \
                 the subagent row's max_depth {}: do this task yourself",
                call.session_id,
                depth - 1,
                shared.config.max_depth
            ),
        ));
    }
    Ok((profile, depth))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_description_lists_the_named_agents_and_the_schema_their_names() {
        let mut config = SubagentConfig::default();
        let d = spec(&config);
        assert!(d.parallel_safe && !d.mutating && !d.child_only);
        assert!(d.description.contains("No named agents"));
        let schema = d.schema.unwrap();
        assert!(schema["properties"]["agent"].get("enum").is_none());
        assert_eq!(schema["required"], json!(["task"]));
        assert_eq!(schema["additionalProperties"], false);
        config.agents.insert(
            "reader".into(),
            ChildProfile {
                description: "reads files, changes nothing".into(),
                ..ChildProfile::default()
            },
        );
        let d = spec(&config);
        assert!(
            d.description
                .contains("- reader: reads files, changes nothing")
        );
        let agent = &d.schema.unwrap()["properties"]["agent"];
        assert_eq!(agent["enum"], json!(["reader"]));
        assert_eq!(agent["type"], "string");
    }
}
