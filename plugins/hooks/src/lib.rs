//! `hooks`: command hooks compatible with Claude Code's settings (issue 15 item 3).
//!
//! Hooks come from this row's `hooks` table (Claude Code's `hooks` object, in TOML) and, with
//! `claude_settings = true`, from the workspace's `.claude/settings.json` and
//! `.claude/settings.local.json` as they are — each file only when the project trust covers it
//! (an untrusted one is named on stderr and ignored, never run). The whole row is guarded: an
//! untrusted project layer cannot add a hook. Everything is checked at activation, so a bad
//! hook refuses the run before any model request.
//!
//! Modules: [`config`] (the row and the hook table), [`settings`] (Claude Code's files),
//! [`trust`], [`protocol`] (stdin, exit codes, JSON output), [`runner`] (one confined process
//! under its timeout), [`engine`] (firing an event's hooks, the audit events) and [`listen`]
//! (which keel event each hook event rides on). Claude Code compatibility (issue 23): [`alias`]
//! (keel's tools under Claude Code's names and fields), [`response`] (`tool_response` in Claude
//! Code's shapes), [`transcript`] (`transcript_path`) and [`formatted`] (a file a PostToolUse
//! hook rewrote counts as observed). The kernel knows nothing of hooks; the one
//! seam they needed that keel lacked, argument rewriting, is the tools pipeline's
//! `tools/rewrite` stage.

pub mod alias;
pub mod config;
pub mod engine;
pub mod formatted;
pub mod listen;
pub mod protocol;
pub mod response;
pub mod runner;
pub mod settings;
pub mod transcript;
pub mod trust;

use keel_plugin_api::codes::ContractCode;
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::approval::Approval;
use keel_plugin_api::services::sandbox::Sandbox;
use keel_plugin_api::services::session::Sessions;
use keel_plugin_api::services::tools::Tools;

use crate::config::{HookSet, HooksConfig};
use crate::engine::Engine;

/// The plugin id.
pub const PLUGIN_ID: &str = "hooks";

fn invalid(message: String) -> Error {
    Error::coded(ContractCode::InvalidArguments, format!("hooks: {message}"))
}

/// The hooks of the row and of the trusted settings files.
async fn load(ctx: &Context, config: &HooksConfig, root: &std::path::Path) -> Result<HookSet> {
    let mut set = HookSet::default();
    let row = ctx.row()?;
    set.add(
        &config.hooks,
        &format!("row '{row}'"),
        config.default_timeout,
    )
    .map_err(invalid)?;
    if !config.claude_settings {
        notice_unused(ctx, root);
        return Ok(set);
    }
    for rel in settings::FILES {
        let path = root.join(rel);
        if !path.exists() {
            continue;
        }
        let text = match trust::trusted_text(ctx, &path).await {
            Ok(Ok(text)) => text,
            Ok(Err(state)) => {
                let _ = ctx.write_stderr(&format!(
                    "keel: hooks: ignoring {}: {state}; its hooks never run (review it, then \
                     `keel trust {}` or pass --trust-project)\n",
                    path.display(),
                    root.display()
                ));
                continue;
            }
            Err(e) => return Err(invalid(format!("{}: {e}", path.display()))),
        };
        let name = path.display().to_string();
        let (table, skipped) = settings::parse(&name, &text).map_err(invalid)?;
        for event in skipped {
            tracing::info!("{name}: keel runs no {event} hooks; skipped");
        }
        set.add(&table, &name, config.default_timeout)
            .map_err(invalid)?;
    }
    Ok(set)
}

/// Issue 23 item 11: with `claude_settings = false` (the default), a workspace settings file
/// that has hooks is named once on stderr with the key that would use them. The default stays
/// off: a hook is a command keel runs on its own, and `--trust-project` (used in CI) vouches
/// for a whole project layer, so running a cloned repository's hooks stays a separate, explicit
/// choice — but never a silent one.
fn notice_unused(ctx: &Context, root: &std::path::Path) {
    for rel in settings::FILES {
        let path = root.join(rel);
        if settings::has_hooks(&path) {
            let _ = ctx.write_stderr(&format!(
                "keel: hooks: {} has hooks; set hooks.claude_settings = true to use them (they \
                 run only under project trust)\n",
                path.display()
            ));
        }
    }
}

/// The plugin value.
#[derive(Default)]
struct HooksPlugin;

keel_plugin_api::dispatches! {
    /// What the hooks row dispatches.
    pub struct Dispatches {
        #[declared_by("tool-fs")]
        pub observed: keel_plugin_api::events::fs::Observed,
    }
}

impl Plugin for HooksPlugin {
    type Dispatches = Dispatches;

    fn manifest(&self) -> Manifest {
        Manifest::new(PLUGIN_ID, env!("CARGO_PKG_VERSION"))
            .description("Claude Code compatible command hooks: confined, timed, audited")
            .requires::<Sessions>()
            .optional::<Sandbox>()
            .optional::<Approval>()
            .optional::<Tools>()
            // What it holds never reaches a hook's environment (issue 23 item 1).
            .optional::<keel_plugin_api::services::credentials::Credentials>()
            // A hook is a command keel runs on its own: no untrusted layer may add one.
            .guard_row()
            // Claude Code's settings carry hooks: `keel trust` records them, and the kernel
            // answers this row about them and nothing else (issue 24 item 4).
            .trusts_project_files(&settings::FILES)
            // No hooks of its own, none from Claude Code's settings, and no settings file to
            // name on stderr (`notice_unused`): no work, so the kernel leaves the row
            // unopened (issue 25 item 3).
            .idle_when_empty(&["hooks", "claude_settings"])
            .idle_while_absent(&settings::FILES)
            .config_type::<HooksConfig>()
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let config: HooksConfig = ctx.config()?;
        let cwd = std::env::current_dir()
            .map_err(|e| invalid(format!("the working directory cannot be read: {e}")))?;
        let root = std::fs::canonicalize(&cwd).unwrap_or(cwd);
        let set = load(&ctx, &config, &root).await?;
        let engine = Engine::new(ctx, ctx.client::<Sessions>()?, set, root, config);
        listen::register(&ctx, engine)
    }
}

keel_plugin_api::export_plugin!(HooksPlugin);
