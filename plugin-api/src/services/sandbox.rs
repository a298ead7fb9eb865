//! The sandbox seam (requirements B10, SBX-04…09, FS-06; ARCHITECTURE §9): one policy root that
//! both the `shell` tool (process confinement) and the file tools (path containment) consult.
//!
//! The shared pieces live here so every consumer agrees on them: the modes, the ONE function
//! that derives the writable roots ([`writable_roots`], SBX-05), the `[sandbox: …]` denial
//! marker, and the runner-failure classification rule (SBX-09) a consumer applies to a confined
//! child's exit.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

crate::contract! {
    /// The `sandbox` plugin's service. A call's `mode` overrides the row's (a wider one than
    /// the effective mode only with an approved escalation for the call, SBX-08).
    pub contract Sandbox = "keel.sandbox", version 1;
    provider SandboxProvider;
    client SandboxClient;
    /// The policy for a working directory (`workspace_root` is the canonical `cwd`).
    fn policy(PolicyRequest) -> Policy;
    /// The argv to spawn instead. In `danger-full-access` the argv comes back unchanged with
    /// enforcement `none`. In a confined mode without a usable runner the call fails with
    /// `SANDBOX_UNAVAILABLE` — never a silent pass-through (SBX-06).
    fn confine(ConfineRequest) -> Confined;
    /// The path is canonicalised freshly (deepest existing ancestor, FS-06). Reads are always
    /// allowed; writes only under a writable root in `workspace-write`, never in `read-only`,
    /// always in `danger-full-access`.
    fn check_path(CheckPathRequest) -> PathVerdict;
    /// Sets the row's mode for this process (the headless driver's `--sandbox`); an unknown
    /// mode is `INVALID_MODE`.
    fn set_mode(SetModeRequest) -> ModeAnswer;
    /// The effective mode and which runner confines (for reports).
    fn status(StatusRequest) -> SandboxStatus;
}

crate::error_codes! {
    /// The sandbox (`keel.sandbox`, B10, SBX-04…09).
    pub enum SandboxCode in "sandbox" {
        /// No usable runner for a confined mode (SBX-06), or a runner failed to start the
        /// child (SBX-09). Consumers surface this code as is, never behind a generic error.
        Unavailable = "SANDBOX_UNAVAILABLE", by "`keel.sandbox` `confine`; `tool-shell`; the headless driver", retry Never;
        /// A request for a wider mode than the effective one without an approved escalation
        /// for that call (SBX-08).
        EscalationNotApproved = "ESCALATION_NOT_APPROVED", by "`keel.sandbox` `confine`, `check_path`", retry Changed;
        /// A mode name that is not `read-only`, `workspace-write` or `danger-full-access`.
        InvalidMode = "INVALID_MODE", by "`keel.sandbox` `set_mode`", retry Changed;
        /// A path could not be resolved, or `KEEL_HOME` could not be created.
        Io = "SANDBOX_IO", by "`keel.sandbox`", retry Once;
    }
}

/// What `policy` takes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyRequest {
    /// The session's working directory.
    pub cwd: PathBuf,
    /// The mode to look at (default: the effective one).
    #[serde(default)]
    pub mode: Option<SandboxMode>,
}

/// What `set_mode` takes: the user's text, checked by the provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetModeRequest {
    /// `read-only`, `workspace-write` or `danger-full-access`.
    pub mode: String,
}

/// What `set_mode` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModeAnswer {
    /// The mode now in effect.
    pub mode: SandboxMode,
}

/// What `status` takes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusRequest {
    /// The mode to report on (default: the effective one).
    #[serde(default)]
    pub mode: Option<SandboxMode>,
}

/// What `status` answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxStatus {
    /// The mode.
    pub mode: SandboxMode,
    /// Whether confined processes may use the network.
    pub network: bool,
    /// The runner that confines (`bwrap`, `landlock`), none while probing or when none works.
    pub runner: Option<String>,
    /// How completely it fences.
    pub enforcement: Enforcement,
    /// Why no runner is usable.
    pub unavailable_reason: Option<String>,
}

/// The three modes (B10). They govern file effects; network is a separate row switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Nothing may be written (except `/dev/null`).
    ReadOnly,
    /// Writes only under the writable roots (the default).
    WorkspaceWrite,
    /// No fence at all.
    DangerFullAccess,
}

impl SandboxMode {
    /// Every mode, from the most confined.
    pub const ALL: [SandboxMode; 3] = [
        SandboxMode::ReadOnly,
        SandboxMode::WorkspaceWrite,
        SandboxMode::DangerFullAccess,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::DangerFullAccess => "danger-full-access",
        }
    }

    /// Parses a wire name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "read-only" => Some(SandboxMode::ReadOnly),
            "workspace-write" => Some(SandboxMode::WorkspaceWrite),
            "danger-full-access" => Some(SandboxMode::DangerFullAccess),
            _ => None,
        }
    }

    /// Whether processes in this mode must run under a runner.
    pub fn is_confined(self) -> bool {
        self != SandboxMode::DangerFullAccess
    }
}

/// What `policy` answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// The effective mode.
    pub mode: SandboxMode,
    /// Canonical workspace root (from the session's cwd).
    pub workspace_root: PathBuf,
    /// [`writable_roots`] of the mode and root.
    pub writable_roots: Vec<PathBuf>,
    /// Whether confined processes may use the network.
    pub network: bool,
    /// keel's own paths ([`super::protected::protected_paths`]): runners mask the hidden ones
    /// and bind the read-only ones read-only, whatever the mode's writable roots say.
    #[serde(default)]
    pub protected: Vec<super::protected::Protected>,
    /// The user's private files ([`super::protected::private_paths`] of `$HOME`): runners
    /// mask them for every confined process (issue 23 item 4). Empty in
    /// `danger-full-access`.
    #[serde(default)]
    pub private: Vec<PathBuf>,
}

/// Where a fresh resolution failed: the ancestor that could not be resolved, and why.
#[derive(Debug)]
pub struct ResolveError {
    /// The path whose resolution failed (an existing ancestor, or the joined input when no
    /// prefix resolves at all).
    pub path: PathBuf,
    /// The OS error (`InvalidInput` when nothing of the path resolves).
    pub error: std::io::Error,
}

/// `path` (absolute, or relative to `cwd`) resolved afresh (FS-06): symlinks resolved in the
/// deepest existing ancestor, the missing tail appended lexically (`.` dropped, `..` applied to
/// the canonical base). The one resolution both the sandbox's `check_path` and the file tools
/// use, so a target and its check can never disagree.
///
/// # Errors
/// An existing ancestor that cannot be resolved for a reason other than absence.
pub fn resolve_fresh(cwd: &Path, path: &Path) -> Result<PathBuf, ResolveError> {
    use std::path::Component;
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        cwd.join(path)
    };
    let components: Vec<Component<'_>> = joined.components().collect();
    // The longest prefix that canonicalises; everything after it does not exist (yet).
    for split in (1..=components.len()).rev() {
        let prefix: PathBuf = components[..split].iter().collect();
        match std::fs::canonicalize(&prefix) {
            Ok(mut base) => {
                let mut tail: Vec<&std::ffi::OsStr> = Vec::new();
                for c in &components[split..] {
                    match c {
                        Component::Normal(name) => tail.push(name),
                        Component::ParentDir => {
                            if tail.pop().is_none() {
                                // `base` is canonical, so its parent is the real parent.
                                base.pop();
                            }
                        }
                        Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
                    }
                }
                base.extend(tail);
                return Ok(base);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) => {}
            Err(error) => {
                return Err(ResolveError {
                    path: prefix,
                    error,
                });
            }
        }
    }
    Err(ResolveError {
        error: std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "cannot resolve {} against {}",
                path.display(),
                cwd.display()
            ),
        ),
        path: joined,
    })
}

/// SBX-05 / B10, the single derivation both shell and file enforcement use:
/// `read-only` ⇒ `[]`; `workspace-write` ⇒ `dedup(realpath([workspace_root, /tmp, tmpdir]))`;
/// `danger-full-access` ⇒ `["/"]` (everything). A temp dir that does not exist is left out; a
/// workspace root that cannot be resolved is kept as given.
pub fn writable_roots(
    mode: SandboxMode,
    workspace_root: &Path,
    tmpdir: Option<&Path>,
) -> Vec<PathBuf> {
    match mode {
        SandboxMode::ReadOnly => Vec::new(),
        SandboxMode::DangerFullAccess => vec![PathBuf::from("/")],
        SandboxMode::WorkspaceWrite => {
            let root = std::fs::canonicalize(workspace_root)
                .unwrap_or_else(|_| workspace_root.to_path_buf());
            let mut roots = vec![root];
            let temps = [Some(Path::new("/tmp")), tmpdir];
            for t in temps.into_iter().flatten() {
                if let Ok(real) = std::fs::canonicalize(t)
                    && !roots.contains(&real)
                {
                    roots.push(real);
                }
            }
            roots
        }
    }
}

/// The marker every denial carries, shared by shell and file tools (SBX-08, B10).
pub fn denial_marker(mode: SandboxMode) -> String {
    format!("[sandbox: file access denied under {} mode]", mode.as_str())
}

/// What `confine` takes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfineRequest {
    /// The command to confine, program first.
    pub argv: Vec<String>,
    /// The session's working directory: the workspace root derives from it (the child may
    /// still be spawned in a subdirectory).
    pub cwd: PathBuf,
    /// The mode this call asks for. Narrower than (or equal to) the effective mode: used as
    /// is. Wider: only with an approved escalation for `call` (SBX-08), else
    /// `ESCALATION_NOT_APPROVED`.
    #[serde(default)]
    pub mode: Option<SandboxMode>,
    /// The tool call this is for (needed to use an escalation grant).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<CallRef>,
}

/// The tool call a `confine` / `check_path` request serves: escalation grants are per call.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CallRef {
    /// Session id.
    pub session_id: String,
    /// Call id.
    pub call_id: String,
}

/// The argument naming the mode a call asks to be escalated to (SBX-08). Shell and file tools
/// share it; it must come with [`JUSTIFICATION_ARG`].
pub const SANDBOX_PERMISSIONS_ARG: &str = "sandbox_permissions";
/// Why the model asks for the wider mode; shown to the approver.
pub const JUSTIFICATION_ARG: &str = "justification";

/// SBX-08's ladder: `read-only` → {`workspace-write`, `danger-full-access`},
/// `workspace-write` → {`danger-full-access`}. Only a strictly wider request is an escalation.
pub fn is_wider(current: SandboxMode, requested: SandboxMode) -> bool {
    fn rank(m: SandboxMode) -> u8 {
        match m {
            SandboxMode::ReadOnly => 0,
            SandboxMode::WorkspaceWrite => 1,
            SandboxMode::DangerFullAccess => 2,
        }
    }
    rank(requested) > rank(current)
}

/// A call's escalation request, read from its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EscalationRequest {
    /// The mode asked for.
    pub mode: SandboxMode,
    /// Why.
    pub justification: String,
}

impl EscalationRequest {
    /// Reads [`SANDBOX_PERMISSIONS_ARG`] and [`JUSTIFICATION_ARG`] from a call's arguments:
    /// `Ok(None)` when neither is there.
    ///
    /// # Errors
    /// One without the other, an empty justification, or an unknown mode: the message is the
    /// call's result.
    pub fn from_args(args: &serde_json::Value) -> Result<Option<Self>, String> {
        let perms = args.get(SANDBOX_PERMISSIONS_ARG).filter(|v| !v.is_null());
        let why = args.get(JUSTIFICATION_ARG).filter(|v| !v.is_null());
        match (perms, why) {
            (None, None) => Ok(None),
            (Some(_), None) | (None, Some(_)) => Err(format!(
                "'{SANDBOX_PERMISSIONS_ARG}' and '{JUSTIFICATION_ARG}' must come together"
            )),
            (Some(p), Some(w)) => {
                let mode = p.as_str().and_then(SandboxMode::parse).ok_or_else(|| {
                    format!(
                        "'{SANDBOX_PERMISSIONS_ARG}' must be \"workspace-write\" or \
                         \"danger-full-access\", not {p}"
                    )
                })?;
                let justification = w.as_str().map(str::trim).unwrap_or_default();
                if justification.is_empty() {
                    return Err(format!("'{JUSTIFICATION_ARG}' must be a non-empty string"));
                }
                Ok(Some(EscalationRequest {
                    mode,
                    justification: justification.to_owned(),
                }))
            }
        }
    }

    /// The approver's question (B10): `escalate sandbox to <mode>: <justification>`.
    pub fn reason(&self) -> String {
        format!(
            "escalate sandbox to {}: {}",
            self.mode.as_str(),
            self.justification
        )
    }
}

/// The JSON Schema properties a tool adds to its parameters to accept an escalation.
pub fn escalation_parameters() -> serde_json::Value {
    serde_json::json!({
        SANDBOX_PERMISSIONS_ARG: {
            "type": "string",
            "enum": ["workspace-write", "danger-full-access"],
            "description": "Only when a previous attempt was denied by the sandbox: the wider \
                sandbox mode to run this one call in. Needs a justification; the user approves \
                it first."
        },
        JUSTIFICATION_ARG: {
            "type": "string",
            "description": "Why this call needs the wider sandbox mode (shown to the user)."
        }
    })
}

/// The hint a denial carries when a wider mode exists (B10): `what` is `command` (shell) or
/// `operation` (file tools).
pub fn escalation_marker(current: SandboxMode, what: &str) -> Option<String> {
    let wider = match current {
        SandboxMode::ReadOnly => "\"workspace-write\" or \"danger-full-access\"",
        SandboxMode::WorkspaceWrite => "\"danger-full-access\"",
        SandboxMode::DangerFullAccess => return None,
    };
    Some(format!(
        "[sandbox: escalation available — retry this exact {what} once with \
         {SANDBOX_PERMISSIONS_ARG} {wider} + {JUSTIFICATION_ARG}; the user approves it first]"
    ))
}

/// How completely a confined run is fenced (SBX-07).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Enforcement {
    /// Every rule of the mode holds.
    Full,
    /// Some rules hold (older Landlock ABIs); consumers needing a hard boundary refuse this.
    Partial,
    /// Not confined (`danger-full-access`).
    None,
}

/// When a confined child's exit means the runner failed, not the child (SBX-09).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunnerFailureRule {
    /// When set, only these exit codes can be runner failures.
    #[serde(default)]
    pub allowed_exit_codes: Option<Vec<i32>>,
    /// A stderr line starting with one of these proves a runner failure.
    #[serde(default)]
    pub fatal_signatures: Vec<String>,
    /// Exact stderr lines removed before looking (notices that prove nothing).
    #[serde(default)]
    pub informational_lines: Vec<String>,
}

impl RunnerFailureRule {
    /// SBX-09: a non-zero exit, inside the exit-code gate, and a fatal signature at the start
    /// of one stderr line once the informational lines are removed. A signal is not a runner
    /// failure (the child was killed).
    pub fn is_runner_failure(&self, exit_code: Option<i32>, stderr: &str) -> bool {
        let Some(code) = exit_code.filter(|c| *c != 0) else {
            return false;
        };
        if let Some(allowed) = &self.allowed_exit_codes
            && !allowed.contains(&code)
        {
            return false;
        }
        stderr
            .lines()
            .filter(|l| !self.informational_lines.iter().any(|i| i == l))
            .any(|l| {
                self.fatal_signatures
                    .iter()
                    .any(|s| l.trim_start().starts_with(s.as_str()))
            })
    }
}

/// What `confine` answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Confined {
    /// Spawn exactly this.
    pub argv: Vec<String>,
    /// How completely it is fenced.
    pub enforcement: Enforcement,
    /// Which runner wraps it: `bwrap`, or `none` in `danger-full-access`.
    pub runner: String,
    /// The effective mode.
    pub mode: SandboxMode,
    /// stderr fragments that mean the fence refused a file access (backend-specific).
    #[serde(default)]
    pub denial_signatures: Vec<String>,
    /// How to tell a runner failure from the child's own failure.
    #[serde(default)]
    pub runner_failure: RunnerFailureRule,
    /// The paths the runner keeps out of reach in every mode (keel's own files, the user's
    /// private ones): a denial that names one is no case for escalation (issue 23 item 8).
    #[serde(default)]
    pub shielded: Vec<PathBuf>,
}

impl Confined {
    /// The shielded path a denial line of `stderr` names, if one does: the fence refused that
    /// path, and no wider mode would open it.
    pub fn shielded_in<'a>(&'a self, stderr: &str) -> Option<&'a Path> {
        stderr
            .lines()
            .filter(|l| {
                self.denial_signatures
                    .iter()
                    .any(|d| l.contains(d.as_str()))
            })
            .find_map(|line| {
                self.shielded
                    .iter()
                    .find(|p| line.contains(p.to_string_lossy().as_ref()))
                    .map(PathBuf::as_path)
            })
    }
}

/// File access kinds for `check_path`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    /// Reading.
    Read,
    /// Creating, replacing, deleting.
    Write,
}

/// What `check_path` takes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckPathRequest {
    /// Absolute, or relative to `cwd`.
    pub path: PathBuf,
    /// The session's working directory (the workspace root derives from it).
    pub cwd: PathBuf,
    /// What the caller is about to do.
    pub access: Access,
    /// The mode this call asks for (as in [`ConfineRequest::mode`]).
    #[serde(default)]
    pub mode: Option<SandboxMode>,
    /// The tool call this is for (needed to use an escalation grant).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<CallRef>,
}

/// What `check_path` answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathVerdict {
    /// Whether the access may proceed.
    pub allowed: bool,
    /// On denial: why, with the [`denial_marker`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The freshly resolved target the verdict is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;

    // SBX-08: the ladder is strict; equal or narrower is no escalation.
    #[test]
    fn sbx08_only_strictly_wider_modes_escalate() {
        use SandboxMode::*;
        assert!(is_wider(ReadOnly, WorkspaceWrite));
        assert!(is_wider(ReadOnly, DangerFullAccess));
        assert!(is_wider(WorkspaceWrite, DangerFullAccess));
        for (a, b) in [
            (ReadOnly, ReadOnly),
            (WorkspaceWrite, WorkspaceWrite),
            (WorkspaceWrite, ReadOnly),
            (DangerFullAccess, WorkspaceWrite),
            (DangerFullAccess, DangerFullAccess),
        ] {
            assert!(!is_wider(a, b), "{a:?} -> {b:?}");
        }
        assert!(escalation_marker(DangerFullAccess, "command").is_none());
        let hint = escalation_marker(WorkspaceWrite, "command").unwrap();
        assert!(
            hint.contains("sandbox_permissions \"danger-full-access\""),
            "{hint}"
        );
    }

    // SBX-08: `sandbox_permissions` and `justification` come together.
    #[test]
    fn sbx08_permissions_and_justification_come_together() {
        use serde_json::json;
        assert_eq!(
            EscalationRequest::from_args(&json!({"command": "x"})),
            Ok(None)
        );
        for lone in [
            json!({"sandbox_permissions": "danger-full-access"}),
            json!({"justification": "needs $HOME"}),
        ] {
            let e = EscalationRequest::from_args(&lone).unwrap_err();
            assert!(e.contains("must come together"), "{e}");
        }
        let blank = json!({"sandbox_permissions": "danger-full-access", "justification": " "});
        assert!(EscalationRequest::from_args(&blank).is_err());
        let bad = json!({"sandbox_permissions": "root", "justification": "x"});
        assert!(
            EscalationRequest::from_args(&bad)
                .unwrap_err()
                .contains("root")
        );
        let ok =
            json!({"sandbox_permissions": "danger-full-access", "justification": "write ~/.cache"});
        let req = EscalationRequest::from_args(&ok).unwrap().unwrap();
        assert_eq!(
            req.reason(),
            "escalate sandbox to danger-full-access: write ~/.cache"
        );
    }

    // SBX-05 / B10: one derivation; read-only has none; workspace-write dedups realpaths.
    #[test]
    fn sbx05_writable_roots_by_mode() {
        let ws = Path::new(env!("CARGO_MANIFEST_DIR"));
        assert!(writable_roots(SandboxMode::ReadOnly, ws, None).is_empty());
        let roots = writable_roots(SandboxMode::WorkspaceWrite, ws, Some(Path::new("/tmp/")));
        let tmp = std::fs::canonicalize("/tmp").unwrap();
        assert_eq!(roots, vec![std::fs::canonicalize(ws).unwrap(), tmp]);
        let missing = writable_roots(
            SandboxMode::WorkspaceWrite,
            ws,
            Some(Path::new("/no/such/tmp")),
        );
        assert_eq!(missing.len(), 2);
        assert_eq!(
            writable_roots(SandboxMode::DangerFullAccess, ws, None),
            vec![PathBuf::from("/")]
        );
    }

    // SBX-09: a child exiting 1 is not a runner failure; a fatal line is; notices are ignored.
    #[test]
    fn sbx09_runner_failure_needs_exit_and_fatal_line() {
        let rule = RunnerFailureRule {
            allowed_exit_codes: Some(vec![1]),
            fatal_signatures: vec!["bwrap: ".into()],
            informational_lines: vec!["bwrap: partial enforcement".into()],
        };
        assert!(!rule.is_runner_failure(Some(1), ""));
        assert!(!rule.is_runner_failure(Some(1), "grep: no match\n"));
        assert!(!rule.is_runner_failure(Some(1), "bwrap: partial enforcement\n"));
        assert!(!rule.is_runner_failure(Some(0), "bwrap: Can't mount proc\n"));
        assert!(!rule.is_runner_failure(Some(2), "bwrap: Can't mount proc\n"));
        assert!(!rule.is_runner_failure(None, "bwrap: Can't mount proc\n"));
        assert!(rule.is_runner_failure(Some(1), "x\nbwrap: Can't mount proc on /newroot\n"));
    }

    #[test]
    fn modes_round_trip() {
        for m in [
            SandboxMode::ReadOnly,
            SandboxMode::WorkspaceWrite,
            SandboxMode::DangerFullAccess,
        ] {
            assert_eq!(SandboxMode::parse(m.as_str()), Some(m));
            assert_eq!(serde_json::to_value(m).unwrap(), m.as_str());
        }
        assert_eq!(SandboxMode::parse("yolo"), None);
        assert_eq!(
            denial_marker(SandboxMode::ReadOnly),
            "[sandbox: file access denied under read-only mode]"
        );
    }
}
