//! `context`: long sessions (issue 14; CTX-01…06, MEM-08). Serves `keel.context` — the agent
//! loop's `fit` before every model request — and the `coldcontext_search` /
//! `coldcontext_read` tools.
//!
//! What it owns and why it is a plugin: the kernel and the loop know nothing of tokens or
//! windows. This row measures each request against the window its adapter row reports
//! (`keel.llm` `limits`), and past the threshold compacts the history *by replacement*: old
//! tool-call groups sink to the cold tier behind a short stub (or, when configured, are
//! summarised by a side request), oversized results are capped to head and tail. Every
//! original stays in the session log, where the cold tools read it back exactly; the search
//! index is derived from the log. A profile without this row sends the history unchanged.
//!
//! Modules: [`config`] (the row's keys), [`estimate`] (bytes → tokens, corrected by usage),
//! [`plan`] (which runs may be replaced), [`actions`] (caps and runs for a view), [`stub`] (what replaces them), [`cold`] (the FTS5
//! index), [`summarise`] (the optional side request), [`manager`] (`fit`), [`tools`].

pub mod actions;
pub mod cold;
pub mod config;
pub mod estimate;
pub mod manager;
pub mod plan;
pub mod stub;
pub mod summarise;
pub mod tools;

use std::sync::Arc;

use keel_plugin_api::codes::ContractCode;
use keel_plugin_api::events::context::{Compact, Compacted};
use keel_plugin_api::events::session::SessionDisposed;
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::context::{
    Calibration, ContextManager, ContextProvider, FitRequest, Fitted,
};
use keel_plugin_api::services::llm::Llm;
use keel_plugin_api::services::protected::{protected_paths, refuse_read};
use keel_plugin_api::services::session::Sessions;

use crate::config::ContextConfig;
use crate::manager::Manager;

/// The plugin id; the tool provider is served as `keel.tool.context`.
pub const PLUGIN_ID: &str = "context";

/// `keel.context` over the manager.
struct Service(Arc<Manager>);

impl ContextProvider for Service {
    async fn fit(&self, request: FitRequest) -> Result<Fitted> {
        self.0.fit(request).await
    }
    async fn calibrate(&self, request: Calibration) -> Result<()> {
        self.0.calibrate(&request.session_id, request.input_tokens);
        Ok(())
    }
}

/// The plugin value.
#[derive(Default)]
struct ContextPlugin;

keel_plugin_api::dispatches! {
    /// What the context row dispatches.
    pub struct Dispatches {
        pub compact: Compact,
        pub compacted: Compacted,
    }
}

impl Plugin for ContextPlugin {
    type Dispatches = Dispatches;

    fn manifest(&self) -> Manifest {
        Manifest::new(PLUGIN_ID, env!("CARGO_PKG_VERSION"))
            .description("token budget, compaction by replacement, the cold tier and its tools")
            .provides::<ContextManager>()
            .requires::<Sessions>()
            .requires::<Llm>()
            .serves_tools()
            .config_type::<ContextConfig>()
            // An untrusted project layer must not pick the file sent to the model as the
            // summary prompt, nor the provider it goes to (docs/profiles.md, trust).
            // Nor raise what the context keeps (issue 23 item 6).
            .guard_keys(&[
                "summarise",
                "strategies",
                "threshold",
                "target",
                "keep_recent_steps",
                "result_cap_bytes",
            ])
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let config: ContextConfig = ctx.config()?;
        config
            .check()
            .map_err(|m| Error::coded(ContractCode::InvalidArguments, format!("context: {m}")))?;
        let summary_prompt = match &config.summarise {
            Some(s) if config.strategies.contains(&config::Strategy::Summarise) => {
                refuse_keel_home(&s.prompt, &ctx.keel_home()?)?;
                Some(std::fs::read_to_string(&s.prompt).map_err(|e| {
                    Error::coded(
                        ContractCode::InvalidArguments,
                        format!(
                            "context: cannot read the summary prompt {}: {e}",
                            s.prompt.display()
                        ),
                    )
                })?)
            }
            _ => None,
        };
        let manager = Arc::new(Manager::new(
            ctx,
            config,
            summary_prompt,
            ctx.client::<Sessions>()?,
            ctx.client::<Llm>()?,
        ));
        ctx.serve::<ContextManager, _>(Service(Arc::clone(&manager)))?;
        // A closed session's meter and index go with it (a later resume rebuilds the index
        // from the log).
        let m = Arc::clone(&manager);
        ctx.on::<SessionDisposed>(ListenerOptions::default(), move |s| {
            m.states().remove(s.session_id.as_str());
            Ok(())
        })?;
        ctx.serve_tools(self, tools::tool_set(manager)).await
    }
}

/// The summary prompt goes to the model verbatim, so it must not be one of keel's own files:
/// a config layer naming `$KEEL_HOME/credentials.toml` would send the user's keys. The same
/// derivation that keeps the tools out of `$KEEL_HOME` decides (`services::protected`).
fn refuse_keel_home(prompt: &std::path::Path, keel_home: &std::path::Path) -> Result<()> {
    let shields = protected_paths(Some(keel_home), keel_home);
    let target = std::fs::canonicalize(prompt).unwrap_or_else(|_| prompt.to_path_buf());
    match refuse_read(&shields, &target) {
        Some(p) => Err(Error::coded(
            ContractCode::InvalidArguments,
            format!(
                "context: the summary prompt goes to the model, so it may not be inside keel's home: {}",
                p.refusal(prompt, false)
            ),
        )),
        None => Ok(()),
    }
}

keel_plugin_api::export_plugin!(ContextPlugin);
