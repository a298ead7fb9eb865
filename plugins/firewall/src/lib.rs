//! `firewall`: the secret firewall of requirements SEC-01…SEC-06 (ARCHITECTURE §9). Secrets
//! live encrypted in `$KEEL_HOME/secrets` ([`store`], [`codec`]); the model only sees aliases
//! `sec_NAME`; values are filled into tool arguments inside `tools/execute` ([`fill`]; in
//! bash source as quoted expansions of variables, [`bash`]) and scrubbed, with their simple
//! encodings, from everything going back to the model ([`scrub`], [`hooks`]). The
//! credentials keel resolves are registered here (`register_credential`) and scrubbed the
//! same way, never filled ([`vault`]); a value too short or too common to be a secret is not
//! registered, said once per run on stderr ([`weak`]). The policy facts (the `keel.firewall` contract:
//! `check_tool`, `check_path`, `check_network`, `scan_content`) are owned by this row's config
//! ([`policy`]) and called by this plugin's own `tools/guard` listener on every real call
//! ([`guard`]). `keel secrets` is served here too ([`commands`]).
//!
//! This file is the SDK adapter: manifest, row config, listener registration, services.
//! Listener orders: `tools/execute` −500 (after the checkpoint at −1000, so the flush happens
//! before any value exists in the arguments), `tools/post-execute` −500, `llm/stream` −500,
//! `tools/guard` −500, `system-prompt/assemble` 0. Tracing names aliases only.

pub mod bash;
pub mod codec;
pub mod commands;
pub mod custody;
pub mod error;
pub mod fill;
pub mod guard;
pub mod hooks;
pub mod policy;
pub mod request_scrub;
pub mod scrub;
pub mod store;
pub mod vault;
pub mod weak;

use std::path::PathBuf;
use std::sync::Arc;

use crate::commands::SecretsArgs;
use keel_plugin_api::codes::ContractCode;
use keel_plugin_api::events::Typed;
use keel_plugin_api::events::llm::Stream;
use keel_plugin_api::events::prompt::Assemble;
use keel_plugin_api::events::session::Persist;
use keel_plugin_api::events::tools::{Execute, Guard, PostExecute};
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::command::{
    Command, CommandInvocation, CommandOutcome, CommandProvider, service_name,
};
use keel_plugin_api::services::firewall::{
    CheckNetwork, CheckPath, CheckTool, Findings, Firewall as FirewallService, FirewallProvider,
    RegisterCredential, Registered, ScanContent, Verdict,
};
use keel_plugin_api::services::tools::{GuardDecision, ToolResult};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::error::codes;
use crate::policy::{Policy, PolicyConfig};
use crate::store::SecretStore;
use crate::vault::SharedVault;

/// Order of the firewall's wrappers (inside the checkpoint's −1000).
pub const ORDER: i32 = -500;

/// The row config.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Config {
    /// Secrets directory; default `<KEEL_HOME>/secrets`.
    #[serde(default)]
    #[schemars(length(min = 1))]
    dir: Option<PathBuf>,
    /// Tools never to call (`check_tool`).
    #[serde(default)]
    deny_tools: Vec<Pattern>,
    /// Paths never to touch (`check_path`).
    #[serde(default = "default_deny_paths")]
    deny_paths: Vec<Pattern>,
    /// Paths never to write (`check_path` with `write`).
    #[serde(default)]
    deny_write_paths: Vec<Pattern>,
    /// The hosts network access may reach (`check_network`; empty: any).
    #[serde(default)]
    allow_hosts: Vec<Pattern>,
}

/// A non-empty pattern of the policy config.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(transparent)]
struct Pattern(#[schemars(length(min = 1))] String);

fn default_deny_paths() -> Vec<Pattern> {
    policy::default_deny_paths()
        .into_iter()
        .map(Pattern)
        .collect()
}

fn patterns(list: Vec<Pattern>) -> Vec<String> {
    list.into_iter().map(|p| p.0).collect()
}

/// Serves `keel.firewall`: the policy's facts, the vault's findings and registrations.
struct Facts {
    ctx: Context,
    policy: Arc<Policy>,
    vault: SharedVault,
}

impl FirewallProvider for Facts {
    async fn check_tool(&self, request: CheckTool) -> Result<Verdict> {
        Ok(self.policy.check_tool(&request.name))
    }

    async fn check_path(&self, request: CheckPath) -> Result<Verdict> {
        Ok(self.policy.check_path(&request.path, request.access))
    }

    async fn check_network(&self, request: CheckNetwork) -> Result<Verdict> {
        Ok(self.policy.check_network(&request.host))
    }

    async fn scan_content(&self, request: ScanContent) -> Result<Findings> {
        let findings = self.vault.snapshot().findings(&request.text);
        Ok(Findings { findings })
    }

    async fn register_credential(&self, request: RegisterCredential) -> Result<Registered> {
        if weak::is_weak(&request.value) {
            // Scrubbing it would rewrite every word that contains it (issue 23 item 2): the
            // request still sends it; it is not a secret, and it is not printed either.
            if first_weak_notice(&request.reference) {
                let _ = self.ctx.write_stderr(&format!(
                    "keel: credential {} is too short or too common to be a secret (under {} \
                     bytes, or a placeholder word): it is sent as configured but not scrubbed \
                     from output\n",
                    request.reference,
                    weak::MIN_SECRET_BYTES
                ));
            }
            return Ok(Registered { added: false });
        }
        let added = self
            .vault
            .register_credential(&request.reference, &request.value)?;
        if added {
            publish_redactions(self.ctx, &self.vault);
        }
        Ok(Registered { added })
    }
}

/// Whether this is the first weak registration of `reference` in this process (the notice is
/// said once per run, however often the adapter resolves its key).
fn first_weak_notice(reference: &str) -> bool {
    static SAID: std::sync::Mutex<std::collections::BTreeSet<String>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    SAID.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(reference.to_owned())
}

/// Serves `keel secrets …` (`keel.command.secrets`).
struct Secrets {
    ctx: Context,
    vault: SharedVault,
}

impl CommandProvider for Secrets {
    async fn run(&self, request: CommandInvocation) -> Result<CommandOutcome> {
        if request.command != "secrets" {
            return Err(Error::coded(
                ContractCode::InvalidArguments,
                format!(
                    "keel.command.secrets serves `keel secrets`, not `keel {}`",
                    request.command
                ),
            ));
        }
        let args = request.parse_args::<SecretsArgs>().map_err(|e| {
            Error::coded(
                ContractCode::InvalidArguments,
                format!("`keel secrets`: {e}"),
            )
        })?;
        run_command(self.ctx, self.vault.clone(), args).await
    }
}

/// Runs `keel secrets …` on a thread of its own (it reads stdin and writes files).
async fn run_command(
    ctx: Context,
    vault: SharedVault,
    args: SecretsArgs,
) -> Result<CommandOutcome> {
    let (tx, rx) = futures::channel::oneshot::channel();
    std::thread::Builder::new()
        .name("keel-secrets".into())
        .spawn(move || {
            let (mut out, mut err) = (Vec::new(), Vec::new());
            let mut input = std::io::stdin();
            let exit_code = commands::secrets(
                &vault,
                &args,
                &mut commands::Io {
                    input: &mut input,
                    out: &mut out,
                    err: &mut err,
                },
            );
            // The stored set changed: the kernel redacts the new set from here on.
            publish_redactions(ctx, &vault);
            // Through the kernel's output redactions (SEC-03).
            let _ = ctx.write_stdout(&String::from_utf8_lossy(&out));
            let _ = ctx.write_stderr(&String::from_utf8_lossy(&err));
            let _ = tx.send(exit_code);
        })
        .map_err(|e| Error::coded(codes::SECRETS_IO, format!("cannot start a thread: {e}")))?;
    let exit_code = rx
        .await
        .map_err(|_| Error::coded(codes::SECRETS_IO, "the secrets command thread died"))?;
    Ok(CommandOutcome { exit_code })
}

/// Hands the kernel every scrubbed form of every value, so its tracing lines and printed
/// output carry aliases too (SEC-03). A kernel that cannot redact is logged, not fatal: the
/// firewall's own scrubs still hold.
fn publish_redactions(ctx: Context, vault: &SharedVault) {
    if let Err(e) = ctx.redact(&vault.snapshot().redactions()) {
        tracing::warn!("firewall: the kernel cannot redact output: {e}");
    }
}

/// The vault as of now: re-read first when another process changed the store during this run
/// (one `stat` otherwise), and the kernel's redactions follow.
fn current(ctx: Context, vault: &SharedVault) -> Arc<vault::Vault> {
    match vault.refresh() {
        Ok(true) => publish_redactions(ctx, vault),
        Ok(false) => {}
        Err(e) => tracing::warn!("firewall: the secrets store changed but cannot be read: {e}"),
    }
    vault.snapshot()
}

/// The passphrase of the master key's custody ([`custody::PASSPHRASE_VAR`]), when set; taken
/// out of keel's environment at the first activation, so it lives only in this library's
/// memory (a process-wide static: a library is never unloaded, so a reloaded row finds it).
fn passphrase() -> Option<custody::Passphrase> {
    static HELD: std::sync::OnceLock<Option<custody::Passphrase>> = std::sync::OnceLock::new();
    HELD.get_or_init(|| {
        let value = std::env::var(custody::PASSPHRASE_VAR).ok();
        keel_plugin_api::sdk::environ::remove(custody::PASSPHRASE_VAR);
        value.and_then(custody::Passphrase::new)
    })
    .clone()
}

/// The plugin value.
#[derive(Default)]
struct FirewallPlugin;

impl Plugin for FirewallPlugin {
    type Dispatches = ();

    fn manifest(&self) -> Manifest {
        Manifest::new("firewall", env!("CARGO_PKG_VERSION"))
            .description(
                "secret firewall: encrypted store, alias fill, outbound scrub, policy facts",
            )
            .provides::<FirewallService>()
            .command(commands::secrets_spec())
            .guard_row()
            .config_type::<Config>()
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let config: Config = ctx.config()?;
        let dir = match config.dir {
            Some(d) => d,
            None => ctx.keel_home()?.join("secrets"),
        };
        let policy = Arc::new(Policy::new(
            &PolicyConfig {
                deny_tools: patterns(config.deny_tools),
                deny_paths: patterns(config.deny_paths),
                deny_write_paths: patterns(config.deny_write_paths),
                allow_hosts: patterns(config.allow_hosts),
            },
            &dir,
        )?);
        // The globs are parsed (a bad one failed above); their matchers compile off the start
        // path, and the first check waits for them (issue 25 item 1).
        policy.compile_in_background();
        let store = SecretStore::new(dir).with_passphrase(passphrase());
        if store.seal_master()? {
            tracing::info!("firewall: the master key is now sealed with the passphrase");
        }
        let vault = SharedVault::load(store)?;
        tracing::debug!(aliases = ?vault.snapshot().aliases(), "firewall: secrets loaded");
        publish_redactions(ctx, &vault);

        ctx.serve::<FirewallService, _>(Facts {
            ctx,
            policy: Arc::clone(&policy),
            vault: vault.clone(),
        })?;
        ctx.serve_named::<Command, _>(
            &service_name("secrets"),
            Secrets {
                ctx,
                vault: vault.clone(),
            },
        )?;

        // SEC-06: the facts are called on every real tool call.
        let (p, v) = (policy, vault.clone());
        ctx.on_serial::<Guard, _, _>(ListenerOptions::order(ORDER), move |exec| {
            let args: Value = serde_json::from_str(exec.args.text.as_str()).unwrap_or(Value::Null);
            let denied = guard::decide(
                &p,
                &current(ctx, &v),
                exec.name.as_str(),
                &args,
                exec.cwd.as_str(),
            );
            if let Some(reason) = &denied {
                tracing::info!(
                    tool = exec.name.as_str(),
                    reason = reason.as_str(),
                    "firewall: denied"
                );
            }
            let out = denied
                .map(|reason| Typed::new(&GuardDecision { reason }))
                .transpose();
            async move { out }
        })?;

        // SEC-02 inbound fill; SEC-03 outbound scrub of the whole result (content and meta).
        let v = vault.clone();
        ctx.async_waterfall::<Execute, _, _>(
            ListenerOptions::order(ORDER),
            move |mut exec, next| {
                let vault = v.snapshot();
                let refused = match hooks::fill_args(&vault, exec.name.as_str(), &exec.args) {
                    hooks::Filled::Unchanged => None,
                    hooks::Filled::Args(filled) => {
                        tracing::debug!(tool = exec.name.as_str(), "firewall: aliases filled");
                        exec.args = filled;
                        None
                    }
                    // The body never runs: the message names the alias, never its value.
                    hooks::Filled::Refused(why) => {
                        Some(ToolResult::error(codes::SECRET_UNFILLABLE, why))
                    }
                };
                async move {
                    if let Some(result) = refused {
                        return Typed::new(&result);
                    }
                    let result = next.run(exec).await?;
                    Ok(hooks::scrub_result(&vault, &result).unwrap_or(result))
                }
            },
        )?;

        let v = vault.clone();
        ctx.async_waterfall::<PostExecute, _, _>(
            ListenerOptions::order(ORDER),
            move |mut outcome, next| {
                let vault = v.snapshot();
                // Nothing to scrub: no result or decision is parsed.
                let empty = vault.scrubs_nothing();
                let original = (!empty)
                    .then(|| hooks::result_content(&outcome.result))
                    .flatten();
                if let Some(scrubbed) = hooks::scrub_result(&vault, &outcome.result) {
                    outcome.result = scrubbed;
                }
                let scrubbed = (!empty)
                    .then(|| hooks::result_content(&outcome.result))
                    .flatten();
                async move {
                    let decision = next.run(outcome).await?;
                    if empty {
                        return Ok(decision);
                    }
                    // A decision outside the vocabulary passes on: the pipeline refuses it.
                    let Ok(d) = decision.get() else {
                        return Ok(decision);
                    };
                    Typed::new(&hooks::scrub_post_decision(
                        &vault,
                        d,
                        original.as_deref(),
                        scrubbed.as_deref(),
                    ))
                }
            },
        )?;

        let v = vault.clone();
        let requests = Arc::new(request_scrub::RequestScrubber::default());
        ctx.async_waterfall::<Stream, _, _>(
            ListenerOptions::order(ORDER),
            move |mut call, next| {
                let scrubbed = requests.scrub(&current(ctx, &v), &call);
                let replaced = scrubbed.map(|request| call.set_request(&request));
                async move {
                    if let Some(done) = replaced {
                        done?;
                        tracing::debug!("firewall: scrubbed a model request");
                    }
                    next.run(call).await
                }
            },
        )?;

        let v = vault.clone();
        ctx.waterfall::<Assemble>(ListenerOptions::order(0), move |assembly, next| {
            if let Some(section) = hooks::alias_section(&current(ctx, &v)) {
                // A foreign listener's sections that are not `[PromptSection]` fail assembly.
                let mut sections = assembly.sections.get()?;
                hooks::add_section(&mut sections, section);
                assembly.sections = Typed::new(&sections)?;
            }
            next.run(assembly)
        })?;

        // SEC-03: every session event, whoever appends it (a pasted key in a user message,
        // a value the model guessed), is scrubbed before it is validated and written.
        let v = vault;
        ctx.waterfall::<Persist>(ListenerOptions::order(ORDER), move |batch, next| {
            if let Some(scrubbed) = hooks::scrub_json_text(&v.snapshot(), &batch.data) {
                tracing::debug!("firewall: scrubbed session events before they were written");
                batch.data = scrubbed;
            }
            next.run(batch)
        })?;
        Ok(())
    }
}

keel_plugin_api::export_plugin!(FirewallPlugin);

#[cfg(test)]
mod tests {
    use super::*;

    /// The derived schema keeps the hand-written one's constraints: no unknown key, no empty
    /// pattern or directory.
    #[test]
    fn the_config_schema_refuses_unknown_keys_and_empty_patterns() {
        let schema = schemars::schema_for!(Config).to_value();
        assert_eq!(schema["additionalProperties"], false, "{schema}");
        let text = schema.to_string();
        assert!(text.contains(r#""minLength":1"#), "{schema}");
        let config: Config = serde_json::from_value(serde_json::json!({})).unwrap();
        assert_eq!(patterns(config.deny_paths), policy::default_deny_paths());
    }
}
