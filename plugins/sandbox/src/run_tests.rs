//! Real runs through bubblewrap (SBX-04…06, SBX-09, B10): writes inside and outside the
//! workspace, a child's own failure versus a runner failure, and the network switch. Tests
//! that need bwrap print why and return when it is not usable on this host.

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use keel_plugin_api::services::sandbox::{ConfineRequest, Confined, Enforcement, SandboxMode};

use crate::{Rules, State, bwrap};

const SANDBOX_UNAVAILABLE: &str = "SANDBOX_UNAVAILABLE";

/// Calls `method` through the real contract dispatch (requests and answers as JSON, the way a
/// client built against another version would send them).
fn handle(
    s: &State,
    method: &str,
    args: serde_json::Value,
) -> keel_plugin_api::sdk::Result<serde_json::Value> {
    use keel_plugin_api::sdk::{ContractClient, ContractHandle};
    use keel_plugin_api::services::sandbox::Sandbox;
    let handle = ContractHandle::serve::<Sandbox, _>(
        "sandbox",
        crate::Service(std::sync::Arc::new(s.clone())),
    );
    let client = ContractClient::<Sandbox>::new(handle, "test");
    futures::executor::block_on(client.__call(method, 1, &args))
}

fn state(mode: SandboxMode, network: bool, runner: Result<String, String>) -> State {
    State {
        rules: Rules {
            mode,
            network,
            tmpdir: None,
            keel_home: None,
            home: None,
        },
        runner: crate::Runner::ready(runner.map(|program| crate::Chosen {
            kind: crate::RunnerKind::Bwrap,
            program,
            enforcement: Enforcement::Full,
        })),
        override_mode: std::sync::Arc::default(),
        grants: std::sync::Arc::default(),
        supervisor: None,
    }
}

/// A usable bwrap state, or `None` (with the reason printed) to skip.
fn bwrap_state(mode: SandboxMode, network: bool) -> Option<State> {
    match bwrap::probe("bwrap", Path::new("/tmp"), network) {
        Ok(()) => Some(state(mode, network, Ok("bwrap".to_owned()))),
        Err(why) => {
            eprintln!("skipped: bwrap is not usable here: {why}");
            None
        }
    }
}

fn confine(s: &State, cwd: &Path, script: &str) -> Confined {
    s.confine(&ConfineRequest {
        argv: vec!["bash".into(), "-c".into(), script.into()],
        cwd: cwd.to_path_buf(),
        mode: None,
        call: None,
    })
    .unwrap()
}

fn run(c: &Confined, cwd: &Path) -> Output {
    let (bin, args) = c.argv.split_first().unwrap();
    Command::new(bin)
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A directory outside every writable root (not under /tmp).
fn outside() -> tempfile::TempDir {
    crate::test_dirs::workspace()
}

// SBX-04 / B10: inside the workspace a write works; outside it fails with EROFS from the OS,
// the exit is non-zero, and that is the child's failure, not the runner's (SBX-09).
#[test]
fn sbx04_bwrap_confines_writes_to_the_workspace() {
    let Some(s) = bwrap_state(SandboxMode::WorkspaceWrite, false) else {
        return;
    };
    let ws = outside();
    let c = confine(&s, ws.path(), "echo ok > inside.txt");
    assert_eq!(c.enforcement, Enforcement::Full);
    assert_eq!(c.runner, "bwrap");
    let o = run(&c, ws.path());
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(ws.path().join("inside.txt")).unwrap(),
        "ok\n"
    );

    let other = outside();
    let target: PathBuf = other.path().join("escape.txt");
    let script = format!("echo no > '{}'", target.display());
    let o = run(&confine(&s, ws.path(), &script), ws.path());
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("Read-only file system"), "{err}");
    assert!(!target.exists());
    assert!(!c.runner_failure.is_runner_failure(o.status.code(), &err));
    assert!(c.denial_signatures.iter().any(|d| err.contains(d.as_str())));
}

// SBX-05 / B10: read-only binds nothing writable, not even the workspace.
#[test]
fn sbx05_read_only_denies_workspace_writes() {
    let Some(s) = bwrap_state(SandboxMode::ReadOnly, false) else {
        return;
    };
    let ws = outside();
    let o = run(&confine(&s, ws.path(), "echo x > f"), ws.path());
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("Read-only file system"),
        "{}",
        stderr(&o)
    );
    assert!(!ws.path().join("f").exists());
}

// SBX-09: a child exiting 1 (grep without a match) is not a sandbox failure; bwrap's own
// fatal error is.
#[test]
fn sbx09_child_exit_1_is_not_a_runner_failure() {
    let Some(s) = bwrap_state(SandboxMode::WorkspaceWrite, false) else {
        return;
    };
    let ws = outside();
    let c = confine(&s, ws.path(), "echo abc | grep zzz");
    let o = run(&c, ws.path());
    assert_eq!(o.status.code(), Some(1));
    assert!(!c.runner_failure.is_runner_failure(Some(1), &stderr(&o)));

    // A runner that cannot even set up the mounts.
    let mut broken = c.clone();
    let at = broken.argv.iter().position(|a| a == "--").unwrap();
    broken.argv.splice(
        at..at,
        ["--bind", "/nonexistent-keel", "/nonexistent-keel"].map(String::from),
    );
    let o = run(&broken, ws.path());
    assert!(
        c.runner_failure
            .is_runner_failure(o.status.code(), &stderr(&o)),
        "{:?} {}",
        o.status,
        stderr(&o)
    );
}

fn connect_script(port: u16) -> String {
    format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected")
}

// B10: with the network off the child cannot reach a port listening on the host's loopback;
// with it on, it can.
#[test]
fn b10_network_off_blocks_loopback_connections() {
    let Some(off) = bwrap_state(SandboxMode::WorkspaceWrite, false) else {
        return;
    };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let ws = outside();
    let o = run(&confine(&off, ws.path(), &connect_script(port)), ws.path());
    assert!(!o.status.success(), "connected with the network off");

    let Some(on) = bwrap_state(SandboxMode::WorkspaceWrite, true) else {
        return;
    };
    let accept = std::thread::spawn(move || {
        let (mut sock, _) = listener.accept().unwrap();
        let mut buf = Vec::new();
        let _ = sock.read_to_end(&mut buf);
    });
    let o = run(&confine(&on, ws.path(), &connect_script(port)), ws.path());
    assert!(o.status.success(), "{}", stderr(&o));
    accept.join().unwrap();
}

// SBX-06: no usable runner → SANDBOX_UNAVAILABLE in confined modes; danger-full-access hands
// the argv back unchanged.
#[test]
fn sbx06_no_runner_fails_closed() {
    let s = state(
        SandboxMode::WorkspaceWrite,
        false,
        Err("bwrap missing".to_owned()),
    );
    let req = ConfineRequest {
        argv: vec!["true".into()],
        cwd: PathBuf::from("/"),
        mode: None,
        call: None,
    };
    let e = s.confine(&req).unwrap_err();
    assert_eq!(e.code, SANDBOX_UNAVAILABLE);
    let danger = s
        .confine(&ConfineRequest {
            mode: Some(SandboxMode::DangerFullAccess),
            ..req
        })
        .unwrap();
    assert_eq!(danger.argv, vec!["true".to_owned()]);
    assert_eq!(danger.enforcement, Enforcement::None);
}

// SBX-05: the service's methods share one policy; unknown modes are refused.
#[test]
fn sbx05_service_methods_share_the_policy() {
    let s = state(SandboxMode::WorkspaceWrite, false, Err("none".to_owned()));
    let ws = outside();
    let p = handle(&s, "policy", serde_json::json!({ "cwd": ws.path() })).unwrap();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    assert_eq!(p["mode"], "workspace-write");
    assert_eq!(p["workspace_root"], root.to_string_lossy().as_ref());
    assert_eq!(p["network"], false);
    let v = handle(
        &s,
        "check_path",
        serde_json::json!({ "path": "../x", "cwd": ws.path(), "access": "write" }),
    )
    .unwrap();
    assert_eq!(v["allowed"], false);
    // A typed request refuses a mode that is not one; `set_mode` takes the user's text.
    let e = handle(
        &s,
        "policy",
        serde_json::json!({ "cwd": "/", "mode": "yolo" }),
    )
    .unwrap_err();
    assert_eq!(e.code, "INVALID_ARGUMENTS");
    let e = handle(&s, "set_mode", serde_json::json!({ "mode": "yolo" })).unwrap_err();
    assert_eq!(e.code, "INVALID_MODE");
    assert_eq!(
        handle(&s, "nope", serde_json::json!({})).unwrap_err().code,
        "UNKNOWN_METHOD"
    );
}

#[test]
fn set_mode_overrides_the_row_mode_for_later_calls() {
    let s = state(SandboxMode::WorkspaceWrite, false, Err("none".into()));
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().to_string_lossy().into_owned();
    let before = handle(&s, "policy", serde_json::json!({"cwd": cwd})).unwrap();
    assert_eq!(before["mode"], "workspace-write");
    handle(&s, "set_mode", serde_json::json!({"mode": "read-only"})).unwrap();
    let after = handle(&s, "policy", serde_json::json!({"cwd": cwd})).unwrap();
    assert_eq!(after["mode"], "read-only");
    let write = handle(
        &s,
        "check_path",
        serde_json::json!({"path": "x.txt", "cwd": cwd, "access": "write"}),
    )
    .unwrap();
    assert_eq!(
        write["allowed"], false,
        "read-only denies writes in the workspace"
    );
    assert!(handle(&s, "set_mode", serde_json::json!({"mode": "bogus"})).is_err());
}

// SBX-08 through the service: a wider mode is refused without the call's grant, honoured with
// it, for that call only; a narrower one needs none.
#[test]
fn sbx08_confine_widens_only_with_the_calls_grant() {
    use keel_plugin_api::services::sandbox::CallRef;
    const ESCALATION_NOT_APPROVED: &str = "ESCALATION_NOT_APPROVED";
    use serde_json::json;
    let s = state(SandboxMode::WorkspaceWrite, false, Ok("bwrap".to_owned()));
    let call = |id: &str| CallRef {
        session_id: "s".into(),
        call_id: id.into(),
    };
    let ask = |id: &str, mode: &str| json!({"argv": ["true"], "cwd": "/", "mode": mode, "call": call(id)});
    let e = handle(&s, "confine", ask("c1", "danger-full-access")).unwrap_err();
    assert_eq!(e.code, ESCALATION_NOT_APPROVED);
    let e = handle(
        &s,
        "check_path",
        json!({"path": "/etc/x", "cwd": "/", "access": "write",
            "mode": "danger-full-access", "call": call("c1")}),
    )
    .unwrap_err();
    assert_eq!(e.code, ESCALATION_NOT_APPROVED);
    s.grants.pend(call("c1"), SandboxMode::DangerFullAccess);
    assert_eq!(
        handle(&s, "confine", ask("c1", "danger-full-access"))
            .unwrap_err()
            .code,
        ESCALATION_NOT_APPROVED,
        "pending is not granted"
    );
    assert!(s.grants.approve(&call("c1")));
    let ok = handle(&s, "confine", ask("c1", "danger-full-access")).unwrap();
    assert_eq!(ok["argv"], json!(["true"]));
    assert_eq!(ok["enforcement"], "none");
    let e = handle(&s, "confine", ask("c2", "danger-full-access")).unwrap_err();
    assert_eq!(e.code, ESCALATION_NOT_APPROVED);
    let narrower = handle(&s, "confine", ask("c2", "read-only")).unwrap();
    assert_eq!(narrower["mode"], "read-only");
}
