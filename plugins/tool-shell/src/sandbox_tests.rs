//! The `shell` tool under a sandbox (SBX-04…09, B10) with hand-built confiners: the confined
//! argv is what runs, a refusal runs nothing, runner failures and denials are told apart from
//! the child's own exit. The bwrap case uses the B10 argv directly (no plugin crate may be a
//! dependency) and is skipped, with a printed reason, where bwrap is unusable.

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use keel_plugin_api::sdk::Error;
use keel_plugin_api::services::sandbox::{
    ConfineRequest, Confined, Enforcement, RunnerFailureRule, SandboxCode, SandboxMode,
};
use keel_plugin_api::services::tools::{ToolInvocation, ToolResult};
use serde_json::json;

use crate::confine::Confiner;
use crate::group::LiveGroups;
use crate::tool::{Shell, ShellConfig};

/// Wraps the argv in `prefix`, with bwrap's failure rule and denial signature.
struct Prefix(Vec<String>);

impl Confiner for Prefix {
    fn confine(&self, request: ConfineRequest) -> Result<Confined, Error> {
        let mut full = self.0.clone();
        full.extend(request.argv);
        Ok(Confined {
            argv: full,
            enforcement: Enforcement::Full,
            runner: "test".into(),
            mode: SandboxMode::WorkspaceWrite,
            denial_signatures: vec!["Read-only file system".into()],
            runner_failure: RunnerFailureRule {
                allowed_exit_codes: Some(vec![1]),
                fatal_signatures: vec!["bwrap: ".into()],
                informational_lines: Vec::new(),
            },
            shielded: vec!["/keel-home".into()],
        })
    }
}

struct Unavailable;

impl Confiner for Unavailable {
    fn confine(&self, _request: ConfineRequest) -> Result<Confined, Error> {
        Err(Error::coded(SandboxCode::Unavailable, "no usable runner"))
    }
}

fn shell() -> Shell {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    let env: Vec<(OsString, OsString)> = vec![("PATH".into(), path)];
    Shell::with_parent_env(ShellConfig::default(), Arc::new(LiveGroups::default()), env)
}

fn run(c: &dyn Confiner, cwd: &Path, command: &str) -> ToolResult {
    let call = ToolInvocation {
        name: "shell".into(),
        call_id: "c1".into(),
        session_id: "s1".into(),
        cwd: cwd.to_string_lossy().into_owned(),
        args: json!({ "command": command }),
        timeout_ms: 0,
    };
    shell().execute_with(&call, &|| false, Some(c))
}

fn code(r: &ToolResult) -> Option<&str> {
    r.error.as_ref().map(|e| e.code.as_str())
}

// SBX-04: exactly the confined argv is spawned, and the meta says how it was confined.
#[test]
fn sbx04_the_confined_argv_is_what_runs() {
    let ws = tempfile::tempdir().unwrap();
    let c = Prefix(vec!["env".into(), "CONFINED=yes".into()]);
    let r = run(&c, ws.path(), "echo $CONFINED");
    assert!(!r.is_error, "{r:?}");
    assert!(r.content.contains("--- stdout ---\nyes\n"), "{}", r.content);
    let meta = r.meta.unwrap();
    assert_eq!(meta["sandbox"]["runner"], "test");
    assert_eq!(meta["sandbox"]["enforcement"], "full");
}

// SBX-06: a refusal is an error result with the sandbox's code, and nothing runs.
#[test]
fn sbx06_unavailable_sandbox_runs_nothing() {
    let ws = tempfile::tempdir().unwrap();
    let r = run(&Unavailable, ws.path(), "touch ran");
    assert_eq!(code(&r), Some(SandboxCode::Unavailable.code()), "{r:?}");
    assert!(!ws.path().join("ran").exists());
}

// SBX-09: a child exiting 1 stays SHELL_EXIT; a fatal runner line becomes SANDBOX_UNAVAILABLE.
#[test]
fn sbx09_child_failure_versus_runner_failure() {
    let ws = tempfile::tempdir().unwrap();
    let c = Prefix(Vec::new());
    let r = run(&c, ws.path(), "echo abc | grep zzz");
    assert_eq!(code(&r), Some("SHELL_EXIT"), "{r:?}");
    let r = run(
        &c,
        ws.path(),
        "echo \"bwrap: Can't mount proc\" >&2; exit 1",
    );
    assert_eq!(code(&r), Some(SandboxCode::Unavailable.code()), "{r:?}");
    let r = run(
        &c,
        ws.path(),
        "echo \"bwrap: Can't mount proc\" >&2; exit 3",
    );
    assert_eq!(code(&r), Some("SHELL_EXIT"), "{r:?}");
}

fn bwrap_usable() -> bool {
    let ok = Command::new("bwrap")
        .args([
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "true",
        ])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipped: bwrap is not usable here");
    }
    ok
}

// B10 / SBX-08 markers: under bwrap a write inside the workspace works; one outside fails
// with the OS's EROFS and the result carries the shared `[sandbox: …]` marker.
#[test]
fn b10_bwrap_denial_carries_the_marker() {
    if !bwrap_usable() {
        return;
    }
    let ws = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    let root = root.to_string_lossy().into_owned();
    let c = Prefix(
        [
            "bwrap",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--bind",
            &root,
            &root,
            "--die-with-parent",
            "--unshare-pid",
            "--new-session",
            "--unshare-net",
            "--",
        ]
        .map(String::from)
        .to_vec(),
    );
    let r = run(&c, ws.path(), "echo in > inside.txt");
    assert!(!r.is_error, "{r:?}");
    assert!(ws.path().join("inside.txt").exists());
    let r = run(
        &c,
        ws.path(),
        &format!("echo out > {root}/../keel-escape.txt"),
    );
    assert_eq!(code(&r), Some("SHELL_EXIT"), "{r:?}");
    assert!(r.content.contains("Read-only file system"), "{}", r.content);
    assert!(
        r.content
            .contains("[sandbox: file access denied under workspace-write mode]"),
        "{}",
        r.content
    );
    assert!(
        !Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("keel-escape.txt")
            .exists()
    );
}
