//! The `shell` tool as the model sees it (ARCHITECTURE §8: `shell{command, timeout_ms?,
//! workdir?}`), its row config, and the translation of a run's [`Outcome`] into a
//! [`ToolResult`]: exit code, then stdout, then stderr, each labelled; `SHELL_EXIT` for a
//! non-zero exit, `SHELL_TIMEOUT` for a deadline, `SHELL_SPAWN` when nothing could start.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use keel_plugin_api::codes::ContractCode;
use keel_plugin_api::services::tools::{
    ShellCode, ToolCode, ToolDefinition, ToolInvocation, ToolResult,
};
use serde::Deserialize;
use serde_json::json;

use keel_plugin_api::services::sandbox::{
    CallRef, ConfineRequest, Confined, EscalationRequest, SandboxCode, denial_marker,
    escalation_marker, escalation_parameters,
};

use keel_plugin_api::services::secret_env::{SHELL_SCRIPT, SecretEnv};

use crate::confine::{Confiner, pick_shell};
use crate::env::{child_env, with_secrets};
use crate::group::LiveGroups;
use crate::run::{Ending, Outcome, RunSpec, run};

/// The command exited with a non-zero code or was killed by a signal.
pub const SHELL_EXIT: ShellCode = ShellCode::Exit;
/// The command ran past its timeout; its process group was terminated.
pub const SHELL_TIMEOUT: ShellCode = ShellCode::Timeout;
/// The command could not be started (missing workdir, no shell, resources).
pub const SHELL_SPAWN: ShellCode = ShellCode::Spawn;

/// The row config.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShellConfig {
    /// Timeout when the call gives none, ms.
    #[serde(default = "default_timeout_ms")]
    #[schemars(range(min = 1))]
    pub default_timeout_ms: u64,
    /// Largest timeout a call may ask for, ms (larger requests are capped).
    #[serde(default = "max_timeout_ms")]
    #[schemars(range(min = 1))]
    pub max_timeout_ms: u64,
    /// SIGTERM → SIGKILL grace, ms.
    #[serde(default = "grace_ms")]
    pub grace_ms: u64,
    /// Bytes kept per stream (head and tail halves).
    #[serde(default = "max_output_bytes")]
    #[schemars(range(min = 1))]
    pub max_output_bytes: usize,
    /// Variables set in the command's environment (explicit values: they win).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Names passed through from keel's environment beside the base allow-list (`HOME`,
    /// `PATH`, …; an entry ending in `*` is a prefix). A `KEEL_*`, credential-like or held
    /// credential name never passes (issue 23 item 1).
    #[serde(default)]
    #[schemars(inner(regex(pattern = r"^[A-Za-z_][A-Za-z0-9_]*\*?$")))]
    pub pass_env: Vec<String>,
}

fn default_timeout_ms() -> u64 {
    120_000
}
fn max_timeout_ms() -> u64 {
    600_000
}
fn grace_ms() -> u64 {
    2_000
}
fn max_output_bytes() -> usize {
    65_536
}

impl Default for ShellConfig {
    fn default() -> Self {
        ShellConfig {
            default_timeout_ms: default_timeout_ms(),
            max_timeout_ms: max_timeout_ms(),
            grace_ms: grace_ms(),
            max_output_bytes: max_output_bytes(),
            env: BTreeMap::new(),
            pass_env: Vec::new(),
        }
    }
}

/// `shell` arguments.
#[derive(Debug, Deserialize)]
struct ShellArgs {
    command: String,
    #[serde(default)]
    timeout_ms: Option<u64>,
    #[serde(default)]
    workdir: Option<String>,
}

/// The tool: config, the registry of running groups, and where the parent env comes from.
#[derive(Debug)]
pub struct Shell {
    config: ShellConfig,
    groups: Arc<LiveGroups>,
    /// `None`: the process environment at call time. Tests pass a fixed one.
    parent_env: Option<Vec<(OsString, OsString)>>,
}

impl Shell {
    /// A tool taking its parent environment from the process.
    pub fn new(config: ShellConfig, groups: Arc<LiveGroups>) -> Self {
        Shell {
            config,
            groups,
            parent_env: None,
        }
    }

    /// A tool with a fixed parent environment (tests: no process-wide `set_var`).
    pub fn with_parent_env(
        config: ShellConfig,
        groups: Arc<LiveGroups>,
        parent_env: Vec<(OsString, OsString)>,
    ) -> Self {
        Shell {
            config,
            groups,
            parent_env: Some(parent_env),
        }
    }

    /// Runs one call; blocks until the command and its whole group are gone. `cancelled` is
    /// polled while it runs. Never fails: failures are error results with codes.
    pub fn execute(&self, call: &ToolInvocation, cancelled: &dyn Fn() -> bool) -> ToolResult {
        self.execute_with(call, cancelled, None)
    }

    /// [`Shell::execute`] under a sandbox: with a `confiner`, `[shell, -c, command]` is
    /// confined first and exactly the returned argv is spawned; a refusal is an error result
    /// with the sandbox's code and nothing runs (SBX-06).
    pub fn execute_with(
        &self,
        call: &ToolInvocation,
        cancelled: &dyn Fn() -> bool,
        confiner: Option<&dyn Confiner>,
    ) -> ToolResult {
        self.execute_holding(call, cancelled, confiner, &[])
    }

    /// [`Shell::execute_with`] where `held` names the credentials the run holds or resolved:
    /// never inherited by the command, whatever the allow-list says (issue 23 item 1).
    pub fn execute_holding(
        &self,
        call: &ToolInvocation,
        cancelled: &dyn Fn() -> bool,
        confiner: Option<&dyn Confiner>,
        held: &[String],
    ) -> ToolResult {
        if call.name != SHELL_SCRIPT.tool {
            return ToolResult::error(
                ToolCode::UnknownTool,
                format!("this provider has no tool named '{}'", call.name),
            );
        }
        // The firewall's secret variables for this call (issue 10 item 9): the command
        // expands them, so no value is ever part of the source bash parses.
        let mut call_args = call.args.clone();
        let secrets = match SecretEnv::take(&mut call_args) {
            Ok(s) => s,
            Err(e) => return ToolResult::error(ContractCode::InvalidArguments, e),
        };
        let args: ShellArgs = match serde_json::from_value(call_args) {
            Ok(a) => a,
            Err(e) => return ToolResult::error(ContractCode::InvalidArguments, e.to_string()),
        };
        if args.command.trim().is_empty() {
            return ToolResult::error(ContractCode::InvalidArguments, "command must not be empty");
        }
        let cwd = match workdir(Path::new(&call.cwd), args.workdir.as_deref()) {
            Ok(d) => d,
            Err(message) => return ToolResult::error(ShellCode::Spawn, message),
        };
        let timeout_ms = args
            .timeout_ms
            .filter(|t| *t > 0)
            .unwrap_or(self.config.default_timeout_ms)
            .min(self.config.max_timeout_ms);
        let parent = match &self.parent_env {
            Some(env) => env.clone(),
            None => std::env::vars_os().collect(),
        };
        let env = with_secrets(
            child_env(parent, &self.config.pass_env, held, &self.config.env),
            &secrets,
        );
        // SBX-08: the mode asked for travels with the call; the sandbox honours a wider one
        // only with this call's approved grant.
        let escalation = match EscalationRequest::from_args(&call.args) {
            Ok(e) => e,
            Err(message) => return ToolResult::error(ContractCode::InvalidArguments, message),
        };
        let confined = match confiner {
            None => None,
            Some(c) => {
                let shell = pick_shell(&env);
                let request = ConfineRequest {
                    argv: vec![shell.to_owned(), "-c".to_owned(), args.command.clone()],
                    cwd: PathBuf::from(&call.cwd),
                    mode: escalation.as_ref().map(|e| e.mode),
                    call: Some(CallRef {
                        session_id: call.session_id.clone(),
                        call_id: call.call_id.clone(),
                    }),
                };
                match c.confine(request) {
                    Ok(answer) => Some((answer, shell)),
                    Err(e) => return refused(&e),
                }
            }
        };
        let spec = RunSpec {
            command: args.command,
            cwd,
            env,
            timeout: Duration::from_millis(timeout_ms),
            grace: Duration::from_millis(self.config.grace_ms),
            max_output_bytes: self.config.max_output_bytes,
            program: confined.as_ref().map(|(c, shell)| (c.argv.clone(), *shell)),
        };
        match run(&spec, &self.groups, cancelled) {
            Ok(outcome) => match &confined {
                Some((c, _)) => sandboxed(render(&outcome, timeout_ms), &outcome, c),
                None => render(&outcome, timeout_ms),
            },
            Err(e) => ToolResult::error(
                ShellCode::Spawn,
                format!("could not start the command: {e}"),
            ),
        }
    }
}

/// The command's directory: `workdir` resolved against the session's `cwd`, existing.
fn workdir(cwd: &Path, workdir: Option<&str>) -> Result<PathBuf, String> {
    let dir = match workdir {
        Some(w) if !w.is_empty() => cwd.join(w),
        _ => cwd.to_path_buf(),
    };
    match std::fs::metadata(&dir) {
        Ok(m) if m.is_dir() => {
            std::fs::canonicalize(&dir).map_err(|e| format!("{}: {e}", dir.display()))
        }
        Ok(_) => Err(format!("workdir {} is not a directory", dir.display())),
        Err(e) => Err(format!("workdir {} is not usable: {e}", dir.display())),
    }
}

/// The sandbox refused to confine the command: nothing ran.
fn refused(e: &keel_plugin_api::sdk::Error) -> ToolResult {
    ToolResult::with_code(
        &e.code,
        format!(
            "the sandbox refused to run the command; nothing was run: {}",
            e.message
        ),
    )
}

/// A confined run's result: a runner failure becomes `SANDBOX_UNAVAILABLE` (SBX-09), a
/// denial seen in stderr gets the shared marker, and the meta says how it was confined.
fn sandboxed(result: ToolResult, o: &Outcome, c: &Confined) -> ToolResult {
    let mut meta = result.meta.clone().unwrap_or_else(|| json!({}));
    meta["sandbox"] = json!({
        "runner": c.runner,
        "enforcement": c.enforcement,
        "mode": c.mode,
    });
    if o.ending == Ending::Exited && c.runner_failure.is_runner_failure(o.exit_code, &o.stderr) {
        return ToolResult {
            meta: Some(meta),
            ..ToolResult::error(
                SandboxCode::Unavailable,
                format!(
                    "the sandbox runner ({}) failed to start the command; it did not run\n{}",
                    c.runner, result.content
                ),
            )
        };
    }
    let denied = o.exit_code != Some(0)
        && c.denial_signatures
            .iter()
            .any(|d| o.stderr.contains(d.as_str()));
    let content = if denied && let Some(path) = c.shielded_in(&o.stderr) {
        // Issue 23 item 8: keel's own files and the user's private ones are out of reach in
        // every mode (Landlock refuses a read of them too): no escalation would help.
        format!(
            "{}[sandbox: protected path] access to {} was refused: keel keeps it out of reach \
             of every tool (keel's own files, or the user's private keys and credentials); no \
             sandbox mode allows it\n",
            result.content,
            path.display()
        )
    } else if denied {
        let hint = escalation_marker(c.mode, "command")
            .map(|h| format!("{h}\n"))
            .unwrap_or_default();
        format!(
            "{}{} a file access the mode does not allow (a write outside the writable roots) \
             was refused by the sandbox\n{hint}",
            result.content,
            denial_marker(c.mode)
        )
    } else {
        result.content
    };
    ToolResult {
        content,
        meta: Some(meta),
        ..result
    }
}

fn section(label: &str, text: &str) -> String {
    if text.is_empty() {
        format!("--- {label} ---\n(empty)\n")
    } else if text.ends_with('\n') {
        format!("--- {label} ---\n{text}")
    } else {
        format!("--- {label} ---\n{text}\n")
    }
}

fn render(o: &Outcome, timeout_ms: u64) -> ToolResult {
    let status = match (o.exit_code, o.signal) {
        (Some(code), _) => format!("exit code: {code}"),
        (None, Some(sig)) => format!("exit code: none (killed by signal {sig})"),
        (None, None) => String::from("exit code: unknown"),
    };
    let body = format!(
        "{status}\n{}{}",
        section("stdout", &o.stdout),
        section("stderr", &o.stderr)
    );
    let meta = json!({
        "exit_code": o.exit_code,
        "signal": o.signal,
        "duration_ms": u64::try_from(o.duration.as_millis()).unwrap_or(u64::MAX),
        "truncated": o.stdout_cut > 0 || o.stderr_cut > 0,
        "timed_out": o.ending == Ending::TimedOut,
        "timeout_ms": timeout_ms,
        "shell": o.shell,
    });
    let result = match o.ending {
        Ending::TimedOut => ToolResult::error(
            ShellCode::Timeout,
            format!(
                "the command timed out after {timeout_ms} ms; its process group was terminated\n{body}"
            ),
        ),
        Ending::Cancelled => ToolResult::error(
            ToolCode::Aborted,
            format!("the call was cancelled; its process group was terminated\n{body}"),
        ),
        Ending::Exited if o.exit_code == Some(0) => ToolResult::ok(body),
        Ending::Exited => ToolResult::error(ShellCode::Exit, body),
    };
    ToolResult {
        meta: Some(meta),
        ..result
    }
}

/// The definition registered with `keel.tools`.
pub fn definition(config: &ShellConfig) -> ToolDefinition {
    let timeouts = format!(
        "Deadline in milliseconds (default {}, at most {}).",
        config.default_timeout_ms, config.max_timeout_ms
    );
    let mut parameters = json!({
        "type": "object",
        "properties": {
            "command": { "type": "string", "minLength": 1,
                         "description": "The command line, interpreted by bash." },
            "timeout_ms": { "type": "integer", "minimum": 1,
                            "description": timeouts },
            "workdir": { "type": "string",
                         "description": "Directory to run in, absolute or relative to the working directory." }
        },
        "required": ["command"],
        "additionalProperties": false
    });
    if let (Some(props), serde_json::Value::Object(extra)) = (
        parameters["properties"].as_object_mut(),
        escalation_parameters(),
    ) {
        props.extend(extra);
    }
    ToolDefinition {
        name: "shell".into(),
        description: "Run a shell command with `bash -c` (or `/bin/sh -c` where bash is \
            missing) and return its exit code, stdout and stderr. Runs non-interactively: stdin \
            is empty, so never run commands that prompt or wait for input (use flags like `-y`). \
            Relative paths and the default working directory are the session's working \
            directory; `workdir` changes it for this call only (each call starts fresh, `cd` \
            does not persist). Output is capped per stream, keeping the beginning and the end. \
            The command is killed with its whole process group when it exceeds `timeout_ms` \
            (SHELL_TIMEOUT); background jobs (`cmd &`) are killed when the command exits, so \
            do not start servers or daemons expecting them to keep running. A non-zero exit is \
            reported as an error (SHELL_EXIT) with the output. The environment holds only \
            HOME, PATH, USER, SHELL, the temp dir, locale and terminal names and what the \
            profile passes on; no credential is in it."
            .into(),
        parameters,
        parallel_safe: false,
        mutating: true,
        child_only: false,
    }
}
