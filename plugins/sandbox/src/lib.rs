//! `sandbox`: the `keel.sandbox` service (ARCHITECTURE §9, requirements B10, SBX-04…09, FS-06).
//!
//! One policy root for the whole assembly: the row's `mode` (default `workspace-write`) and
//! `network` switch (default off in confined modes), the workspace root derived from the
//! session's cwd, and the writable roots derived from both by the one shared function. The
//! `shell` tool asks `confine` for the argv to spawn; the file tools ask `check_path` before
//! they mutate. The runner chain (bubblewrap, then Landlock through the `keel-landlock`
//! launcher) is probed once, in the background from activation on; the first usable runner
//! confines, and when none is, confined `confine` calls fail with `SANDBOX_UNAVAILABLE` rather
//! than running unconfined (SBX-06). Escalation (SBX-08) lives in [`escalation`]; what
//! `keel doctor` prints about the runners is the row's own answer ([`doctor`]).

pub mod bwrap;
pub mod doctor;
pub mod escalation;
pub mod landlock;
pub mod policy;
pub mod runner;
pub mod supervise;

#[cfg(test)]
mod run_tests;
#[cfg(test)]
mod test_dirs;

use std::path::PathBuf;
use std::sync::Arc;

use keel_plugin_api::codes::ContractCode;
use keel_plugin_api::events::Typed;
use keel_plugin_api::events::tools::{Guard, PreExecute, ToolsResult};
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::doctor::{Doctor, service_name as doctor_service};
use keel_plugin_api::services::sandbox::{
    CallRef, CheckPathRequest, ConfineRequest, Confined, Enforcement, ModeAnswer, PathVerdict,
    Policy, PolicyRequest, RunnerFailureRule, Sandbox, SandboxCode, SandboxMode, SandboxProvider,
    SandboxStatus, SetModeRequest, StatusRequest,
};
use keel_plugin_api::services::tools::PreDecision;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

pub use policy::Rules;
pub use runner::{Chosen, Runner, RunnerKind};

/// The plugin id.
pub const PLUGIN_ID: &str = "sandbox";

/// The row config.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SandboxConfig {
    /// The mode calls get unless they name one.
    #[serde(default = "default_mode")]
    pub mode: SandboxMode,
    /// Whether confined processes may use the network.
    #[serde(default)]
    pub network: bool,
    /// The bubblewrap binary.
    #[serde(default = "default_bwrap")]
    #[schemars(length(min = 1))]
    pub bwrap: String,
    /// The runner chain, tried in order (SBX-04): the first usable one confines.
    #[serde(default = "default_runners")]
    #[schemars(length(min = 1), extend("uniqueItems" = true))]
    pub runners: Vec<RunnerKind>,
    /// The Landlock launcher; empty = `keel-landlock` beside the `keel` binary.
    #[serde(default)]
    pub landlock: String,
    /// Refuse a runner that enforces only part of the policy on this host (SBX-07): with no
    /// runner left, confined commands fail with `SANDBOX_UNAVAILABLE`.
    #[serde(default)]
    pub require_full_enforcement: bool,
}

fn default_runners() -> Vec<RunnerKind> {
    vec![RunnerKind::Bwrap, RunnerKind::Landlock]
}

fn default_mode() -> SandboxMode {
    SandboxMode::WorkspaceWrite
}
fn default_bwrap() -> String {
    "bwrap".to_owned()
}

/// The service's state: the rules and the probed runner.
#[derive(Debug, Clone)]
pub struct State {
    /// Mode, network, temp dir.
    pub rules: Rules,
    /// The usable bwrap program, or why there is none (probed in the background).
    pub runner: Runner,
    /// `set_mode`'s override of the row's mode for this process (`keel run --sandbox`; the
    /// headless driver is one-shot, so this is the run's mode).
    pub override_mode: Arc<std::sync::Mutex<Option<SandboxMode>>>,
    /// Approved escalations, one per call (SBX-08).
    pub grants: Arc<escalation::Grants>,
    /// The launcher that supervises unconfined commands (B12: no orphans when keel is killed),
    /// when it is installed.
    pub supervisor: Option<String>,
}

impl State {
    /// `set_mode`: the override of the row's mode for this process.
    ///
    /// # Errors
    /// `INVALID_MODE` for a name that is not a mode.
    pub fn set_mode(&self, mode: &str) -> Result<SandboxMode> {
        let mode = SandboxMode::parse(mode).ok_or_else(|| {
            Error::coded(
                SandboxCode::InvalidMode,
                format!(
                    "unknown sandbox mode '{mode}' (read-only, workspace-write, danger-full-access)"
                ),
            )
        })?;
        *self
            .override_mode
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(mode);
        Ok(mode)
    }

    /// `check_path`, in the mode the request may use.
    ///
    /// # Errors
    /// `ESCALATION_NOT_APPROVED`, `SANDBOX_IO`.
    pub fn check_path(&self, mut req: CheckPathRequest) -> Result<PathVerdict> {
        req.mode = Some(self.enforced_mode(self.effective_mode(), req.mode, req.call.as_ref())?);
        self.rules
            .check_path(&req.path, &req.cwd, req.access, req.mode)
            .map_err(|e| {
                Error::coded(
                    SandboxCode::Io,
                    format!("cannot resolve {}: {e}", req.path.display()),
                )
            })
    }

    /// `confine`, in the mode the request may use.
    ///
    /// # Errors
    /// As [`State::confine`], and `ESCALATION_NOT_APPROVED`.
    pub fn confine_call(&self, mut req: ConfineRequest) -> Result<Confined> {
        req.mode = Some(self.enforced_mode(self.effective_mode(), req.mode, req.call.as_ref())?);
        self.confine(&req)
    }

    /// `status`.
    pub fn status(&self, mode: Option<SandboxMode>) -> SandboxStatus {
        let verdict = self.runner.get();
        SandboxStatus {
            mode: mode.unwrap_or(self.rules.mode),
            network: self.rules.network,
            runner: verdict.as_ref().ok().map(|c| c.kind.as_str().to_owned()),
            enforcement: verdict
                .as_ref()
                .map_or(Enforcement::None, |c| c.enforcement),
            unavailable_reason: verdict.as_ref().err().cloned(),
        }
    }

    /// The mode in force for calls that name none: `set_mode`'s override, else the row's.
    pub fn effective_mode(&self) -> SandboxMode {
        self.override_mode
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .unwrap_or(self.rules.mode)
    }

    /// The mode an enforcing call runs in (SBX-08): a wider one only with the call's grant.
    fn enforced_mode(
        &self,
        effective: SandboxMode,
        asked: Option<SandboxMode>,
        call: Option<&keel_plugin_api::services::sandbox::CallRef>,
    ) -> Result<SandboxMode> {
        self.grants
            .mode_for(effective, asked, call)
            .map_err(|(code, message)| Error::coded(code, message))
    }

    /// `confine`: the runner's argv, the argv unchanged in `danger-full-access`, or
    /// `SANDBOX_UNAVAILABLE` (SBX-06: never a pass-through in a confined mode).
    ///
    /// # Errors
    /// `INVALID_ARGUMENTS` for an empty argv; `SANDBOX_UNAVAILABLE`.
    pub fn confine(&self, req: &ConfineRequest) -> Result<Confined> {
        if req.argv.is_empty() {
            return Err(Error::coded(
                ContractCode::InvalidArguments,
                "argv must not be empty",
            ));
        }
        let policy = self.rules.policy(&req.cwd, req.mode);
        if !policy.mode.is_confined() {
            // Unfenced, but still supervised when the launcher is there: a keel killed
            // outright takes the command's whole group with it.
            return Ok(match &self.supervisor {
                Some(launcher) => landlock::supervised(launcher, &req.argv),
                None => Confined {
                    argv: req.argv.clone(),
                    enforcement: Enforcement::None,
                    runner: "none".to_owned(),
                    mode: policy.mode,
                    denial_signatures: Vec::new(),
                    runner_failure: RunnerFailureRule::default(),
                    shielded: Vec::new(),
                },
            });
        }
        match self.runner.get() {
            Ok(chosen) if chosen.kind == RunnerKind::Landlock => {
                match landlock::unenforceable(&policy) {
                    Some(why) => Err(Error::coded(
                        SandboxCode::Unavailable,
                        format!("nothing was run: {why}"),
                    )),
                    None => Ok(chosen.confined(&policy, &req.argv)),
                }
            }
            Ok(chosen) => Ok(self.supervise(chosen.confined(&policy, &req.argv))),
            Err(why) => Err(Error::coded(
                SandboxCode::Unavailable,
                format!(
                    "no usable sandbox runner for {} mode, so nothing was run: {why}",
                    policy.mode.as_str()
                ),
            )),
        }
    }
}

impl State {
    /// bubblewrap under the launcher as supervisor (issue 23 item 7), when it is installed: a
    /// subreaper outside the sandbox that takes every descendant down when keel dies, however
    /// narrow the window between keel's fork and bwrap's own parent-death signal was.
    fn supervise(&self, mut confined: Confined) -> Confined {
        let Some(launcher) = &self.supervisor else {
            return confined;
        };
        let mut argv = landlock::supervisor_prefix(launcher);
        argv.append(&mut confined.argv);
        confined.argv = argv;
        confined.runner_failure = landlock::with_launcher_failure(confined.runner_failure);
        confined
    }
}

/// The service over the shared state.
struct Service(Arc<State>);

impl SandboxProvider for Service {
    async fn policy(&self, r: PolicyRequest) -> Result<Policy> {
        let mode = r.mode.or(Some(self.0.effective_mode()));
        Ok(self.0.rules.policy(&r.cwd, mode))
    }

    async fn confine(&self, r: ConfineRequest) -> Result<Confined> {
        self.0.confine_call(r)
    }

    async fn check_path(&self, r: CheckPathRequest) -> Result<PathVerdict> {
        self.0.check_path(r)
    }

    async fn set_mode(&self, r: SetModeRequest) -> Result<ModeAnswer> {
        Ok(ModeAnswer {
            mode: self.0.set_mode(&r.mode)?,
        })
    }

    async fn status(&self, r: StatusRequest) -> Result<SandboxStatus> {
        Ok(self.0.status(r.mode.or(Some(self.0.effective_mode()))))
    }
}

/// SBX-08 on the tool pipeline (see [`escalation`]): a widening call becomes the pipeline's
/// one ask and a pending grant; the guard stage, reached only after an `allowed-once`, turns it
/// into a grant; the call's result drops it.
fn listen_for_escalations(ctx: Context, state: &Arc<State>) -> Result<()> {
    let asking = Arc::clone(state);
    ctx.async_waterfall::<PreExecute, _, _>(ListenerOptions::default(), move |exec, next| {
        let state = Arc::clone(&asking);
        async move {
            let args: Value = exec.args.parse().unwrap_or(Value::Null);
            let req = match escalation::plan(state.effective_mode(), &args) {
                escalation::Plan::PassOn => return next.run(exec).await,
                escalation::Plan::Deny(reason) => {
                    return Typed::new(&PreDecision::Deny { reason });
                }
                escalation::Plan::Ask(req) => req,
            };
            let call = call_of(&exec.session_id, &exec.call_id);
            let downstream = next.run(exec).await?;
            // A decision outside the vocabulary passes on: the pipeline refuses it.
            let Some(ask) = downstream
                .get()
                .ok()
                .and_then(|d| escalation::decision(&req, &d))
            else {
                return Ok(downstream);
            };
            state.grants.pend(call, req.mode);
            Typed::new(&ask)
        }
    })?;
    let approving = Arc::clone(state);
    ctx.on_serial::<Guard, _, _>(ListenerOptions::default(), move |exec| {
        approving
            .grants
            .approve(&call_of(&exec.session_id, &exec.call_id));
        async { Ok(None) }
    })?;
    let releasing = Arc::clone(state);
    ctx.on::<ToolsResult>(ListenerOptions::default(), move |outcome| {
        releasing
            .grants
            .release(&call_of(&outcome.exec.session_id, &outcome.exec.call_id));
        Ok(())
    })?;
    Ok(())
}

fn call_of(session_id: &RString, call_id: &RString) -> CallRef {
    CallRef {
        session_id: session_id.to_string(),
        call_id: call_id.to_string(),
    }
}

/// `$KEEL_HOME`, created (0700) when missing: a runner can only mask what exists, and a missing
/// home inside a writable root would be the model's to create.
fn keel_home(ctx: &Context) -> Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt as _;
    let home = ctx.keel_home()?;
    if !home.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&home)
            .map_err(|e| {
                Error::coded(
                    SandboxCode::Io,
                    format!("cannot create KEEL_HOME {}: {e}", home.display()),
                )
            })?;
    }
    Ok(home)
}

/// The plugin value.
#[derive(Default)]
struct SandboxPlugin;

impl Plugin for SandboxPlugin {
    type Dispatches = ();

    fn manifest(&self) -> Manifest {
        Manifest::new(PLUGIN_ID, env!("CARGO_PKG_VERSION"))
            .description("sandbox policy root: bwrap confinement for shell, containment for files")
            .provides::<Sandbox>()
            .provides_named(&doctor_service(PLUGIN_ID), false)
            .guard_row()
            .config_type::<SandboxConfig>()
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let config: SandboxConfig = ctx.config()?;
        let runner = Runner::spawn(
            config
                .runners
                .iter()
                .map(|kind| match kind {
                    RunnerKind::Bwrap => (*kind, config.bwrap.clone()),
                    RunnerKind::Landlock => (
                        *kind,
                        landlock::launcher_path(&config.landlock)
                            .to_string_lossy()
                            .into_owned(),
                    ),
                })
                .collect(),
            config.network,
            config.require_full_enforcement,
        );
        let state = Arc::new(State {
            rules: Rules {
                mode: config.mode,
                network: config.network,
                tmpdir: std::env::var_os("TMPDIR").map(PathBuf::from),
                keel_home: Some(keel_home(&ctx)?),
                home: std::env::var_os("HOME").map(PathBuf::from),
            },
            runner,
            override_mode: Arc::default(),
            grants: Arc::default(),
            supervisor: Some(landlock::launcher_path(&config.landlock))
                .filter(|p| p.is_file())
                .map(|p| p.to_string_lossy().into_owned()),
        });
        listen_for_escalations(ctx, &state)?;
        ctx.serve_named::<Doctor, _>(
            &doctor_service(PLUGIN_ID),
            doctor::SandboxDoctor {
                config,
                state: Arc::clone(&state),
            },
        )?;
        ctx.serve::<Sandbox, _>(Service(state))?;
        Ok(())
    }
}

keel_plugin_api::export_plugin!(SandboxPlugin);
