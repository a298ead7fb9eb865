//! Resident children (issue 16 item 2; SUB-01…04, SUB-06, MEM-07): long-lived named child
//! agents a parent session starts, feeds, looks at and stops through tools.
//!
//! A resident child is an ordinary `keel.agent` session (origin `resident`, depth parent + 1,
//! its profile's overrides) whose loop idles between messages: its input queue is the agent's
//! own, so the scheduler's levels apply inside it. The parent's `resident_send` queues an
//! interrupt on the child — B16 makes it an L4, the only L4 source on the child's ladder, but
//! `send` clamps a plugin's L4 to L3 (SCH-10), so it arrives as L3, the highest a plugin may
//! raise; the child's `notify_parent` is an L3 interrupt on the parent (SUB-06).
//!
//! Each child has two-level memory ([`crate::memory`], MEM-07): it writes only its temp store
//! and reads temp ∪ the parent's main store through a handle SQLite itself keeps read-only;
//! the parent promotes chosen records into main.
//!
//! A child whose turn ends out of context signals its parent ([`signal`], SUB-06), and the
//! parent's log records each child's start and end ([`lineage`]) so `keel resume` of the
//! parent recovers a child a crash left open.
//!
//! Teardown ([`stop`]) gives every unrun input one of the four residual states and ends in the
//! registry's one `cleanup` ([`registry::Registry::cleanup`], SUB-04), on every path: the
//! singular `resident_stop`, the parent session closing (`session/disposed`) and the row
//! unloading (an effect).

pub mod config;
pub mod registry;
pub mod stop;
pub mod tools;

mod child;
mod lineage;
mod parent;
pub mod signal;

use std::collections::HashSet;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};

use keel_plugin_api::events::session::{SessionDisposed, SessionEvent};
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::agent::AgentClient;
use keel_plugin_api::services::approval::{Approval, ApprovalClient};
use keel_plugin_api::services::session::SessionsClient;
use keel_plugin_api::services::tools::ToolSet;

use crate::config::SubagentConfig;
use crate::memory::MemoryRoot;
use registry::Registry;

/// What the resident tools and the stop paths share.
pub struct Host {
    pub(crate) ctx: Context,
    pub(crate) config: SubagentConfig,
    pub(crate) registry: Registry,
    pub(crate) memory: MemoryRoot,
    pub(crate) agents: AgentClient,
    pub(crate) sessions: SessionsClient,
    pub(crate) approval: Option<ApprovalClient>,
    /// Parents [`lineage`] opened again to record their children's ends: their close is not
    /// a stop path.
    pub(crate) reopened: Mutex<HashSet<String>>,
    /// Plural stops under way in spawned tasks (the parent-closing path).
    pub(crate) in_flight: AtomicUsize,
}

/// Installs the plural stop paths and answers `set` with the resident tools added — when
/// `resident.enabled`; otherwise `set` as it was, and nothing can start a child. The row serves
/// the set after this, so the tools are unregistered before the stop paths run.
///
/// # Errors
/// The data directory, a client or a listener the kernel refused.
pub fn prepare(ctx: &Context, config: &SubagentConfig, set: ToolSet) -> Result<ToolSet> {
    let host = Arc::new(Host {
        ctx: *ctx,
        config: config.clone(),
        registry: Registry::default(),
        memory: MemoryRoot::new(ctx.data_dir()?.join("resident")),
        agents: ctx.client::<keel_plugin_api::services::agent::AgentService>()?,
        sessions: ctx.client::<keel_plugin_api::services::session::Sessions>()?,
        approval: ctx.get_client::<Approval>()?,
        reopened: Mutex::default(),
        in_flight: AtomicUsize::new(0),
    });
    // A crashed process's temp stores (its cleanup never ran) go before any child of ours.
    for dir in host.memory.sweep_dead_temp() {
        tracing::info!(dir = %dir.display(), "removed the temp stores of a dead process");
    }
    if !config.resident.enabled {
        return Ok(set);
    }
    // Plural stop path 1: a parent session closes — its children stop; a resident child's own
    // session closing (by its stop or by anyone) ends in the same cleanup.
    let h = Arc::clone(&host);
    let spawner = *ctx;
    ctx.on::<SessionDisposed>(ListenerOptions::default(), move |s| {
        let id = s.session_id.as_str().to_owned();
        if h.is_reopened(&id) {
            return Ok(());
        }
        if h.registry.by_child(&id).is_some() {
            h.registry.cleanup(&id);
        }
        if !h.registry.of_parent(&id).is_empty() {
            // Counted from here, so the unload's `stop_all` waits for this stop to finish.
            let guard = stop::InFlight::enter(&h);
            let h = Arc::clone(&h);
            spawner.spawn(async move {
                h.stop_children_of(&id).await;
                drop(guard);
            })?;
        }
        Ok(())
    })?;
    // SUB-06 contextfull: a live child's turn that ended out of context signals its parent.
    let h = Arc::clone(&host);
    ctx.on::<SessionEvent>(ListenerOptions::default(), move |n| h.on_session_event(n))?;
    // Plural stop path 2: the row unloads — every child of every parent. Registered before
    // the tools are served so that it runs after they are unregistered (effects run last-in
    // first-out).
    let h = Arc::clone(&host);
    ctx.effect("stop the resident children", move || async move {
        h.stop_all().await;
        Ok(())
    })?;
    Ok(tools::with_tools(set, &host))
}

#[cfg(test)]
#[path = "resident_tests.rs"]
mod tests;
