//! MCP calls go through the same B9 pipeline as built-in tools (issue 15 item 1): an approval
//! rule denies one before the server sees it, the firewall fills a secret's alias in its
//! arguments and scrubs the value from what comes back, a slow call hits its deadline and the
//! server is told to cancel, a server killed mid-call is an error result naming it and the
//! turn goes on, a tool-list change reaches the registry.

use std::time::Duration;

use keel_tests::model_server::Reply;
use serde_json::json;

use crate::suite::agent_support::*;
use crate::suite::mcp_support::*;

/// The probe server with its message log at `log`.
fn probe(log: &std::path::Path, extra: &str) -> String {
    node_server(
        "probe",
        &probe_js(),
        &[],
        &format!(
            "env = {{ PROBE_LOG = {} }}\n{extra}",
            lit(&log.display().to_string())
        ),
    )
}

// Issue 15 item 1: an approval deny rule stops an MCP call before it reaches the server.
#[test]
fn an_approval_rule_denies_an_mcp_tool_and_the_server_never_sees_the_call() {
    let server = server(vec![
        Reply::tool_calls(vec![("d1", "mcp__probe__slow", args(json!({"ms": 1})))]),
        Reply::text("ok"),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("probe.log");
    let env = mcp_env(
        &server,
        &probe(&log, ""),
        "[[replace]]\nid = \"approval\"\nconfig = { mode = \"never\", rules = { deny = [\"mcp__probe__slow\"] } }\n",
    );
    let (run, result) = run_json(&env, "call slow", &[]);
    run.expect_code(0);
    let events = stored_events(&env, &session_of(&result));
    let denied = result_of(&events, "d1");
    assert_eq!(denied["is_error"], true, "{denied}");
    let seen = std::fs::read_to_string(&log).unwrap();
    assert!(seen.contains("tools/list"), "the probe ran: {seen}");
    assert!(
        !seen.contains("tools/call"),
        "the denied call reached the server: {seen}"
    );
}

// Issue 15 item 1: the firewall fills the alias in MCP arguments; the value the server echoes
// back is scrubbed to the alias before the model or the log sees it.
#[test]
fn the_firewall_fills_an_alias_in_mcp_arguments_and_scrubs_the_echo() {
    const VALUE: &str = "mcp-canary-71b4e2-value";
    let server = server(vec![
        Reply::tool_calls(vec![(
            "e1",
            "mcp__everything__echo",
            args(json!({"message": "token=sec_MCPCANARY"})),
        )]),
        Reply::text("ok"),
    ]);
    let env = mcp_env(
        &server,
        &node_server("everything", &everything_js(), &["stdio"], ""),
        "",
    );
    set_secret(&env, "MCPCANARY", VALUE);
    let (run, result) = run_json(&env, "echo the token", &[]);
    run.expect_code(0);
    let events = stored_events(&env, &session_of(&result));
    assert_eq!(
        result_of(&events, "e1")["content"],
        "Echo: token=sec_MCPCANARY"
    );
    let reqs = contract_holds(&server);
    assert_eq!(
        tool_message(reqs[1].messages(), "e1")["content"],
        "Echo: token=sec_MCPCANARY"
    );
    for r in server.requests() {
        assert!(
            !r.body.to_string().contains(VALUE),
            "the value reached the model"
        );
    }
    for p in crate::suite::sessions_support::files_under(&env.home().join("sessions")) {
        let text = String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned();
        assert!(!text.contains(VALUE), "the value is in {}", p.display());
    }
    assert!(!run.stdout.contains(VALUE) && !run.stderr.contains(VALUE));
}

// Issue 15 item 3: the server's call_timeout_ms and the pipeline's deadline both end a slow
// call with an error result, and the server receives notifications/cancelled for it.
#[test]
fn a_slow_mcp_call_times_out_and_the_server_is_told_to_cancel() {
    for (id, extra, rows, code) in [
        ("t1", "call_timeout_ms = 300", "", "MCP_TIMEOUT"),
        (
            "t2",
            "",
            "[[replace]]\nid = \"tools\"\nconfig = { default_timeout_ms = 300 }\n",
            "TOOL_TIMEOUT",
        ),
    ] {
        let server = server(vec![
            Reply::tool_calls(vec![(id, "mcp__probe__slow", args(json!({"ms": 20000})))]),
            Reply::text("ok"),
        ]);
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("probe.log");
        let env = mcp_env(&server, &probe(&log, extra), rows);
        let started = std::time::Instant::now();
        let (run, result) = run_json(&env, "be slow", &[]);
        run.expect_code(0);
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "the call was not cut"
        );
        let events = stored_events(&env, &session_of(&result));
        let r = result_of(&events, id);
        assert_eq!(r["error"]["code"], code, "{r}");
        if code == "MCP_TIMEOUT" {
            assert!(
                r["content"]
                    .as_str()
                    .unwrap()
                    .contains("mcp server 'probe'"),
                "{r}"
            );
        }
        assert!(
            wait_for_line(&log, "cancelled-slow", Duration::from_secs(5)),
            "{code}: the server got no notifications/cancelled: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }
}

// Issue 15 item 3: a server killed mid-call gives an error result naming it, the turn
// completes, and a later call works once it is restarted.
#[test]
fn a_server_killed_mid_call_is_an_error_result_and_is_restarted() {
    let marker = format!("keel-mcp-kill-{}", std::process::id());
    let server = server(vec![
        Reply::tool_calls(vec![(
            "k1",
            "mcp__everything__trigger-long-running-operation",
            args(json!({"duration": 20, "steps": 20})),
        )]),
        // Given time to restart (backoff 100 ms, then node's start).
        Reply::tool_calls(vec![(
            "k2",
            "mcp__everything__echo",
            args(json!({"message": "back"})),
        )])
        .delay(Duration::from_secs(3)),
        Reply::text("done"),
    ]);
    let js = everything_js();
    let env = mcp_env(
        &server,
        &node_server(
            "everything",
            &js,
            &["stdio", &marker],
            "restart_backoff_ms = 100",
        ),
        "",
    );
    let kill = || {
        server.wait_for(1, Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(1500));
        let node: Vec<i32> = pids_with(&marker)
            .into_iter()
            .filter(|p| {
                std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| {
                    c.split(|b| *b == 0)
                        .next()
                        .is_some_and(|a0| a0.ends_with(b"node"))
                })
            })
            .collect();
        for p in &node {
            let _ = std::process::Command::new("kill")
                .args(["-9", &p.to_string()])
                .status();
        }
        node.len()
    };
    let (run, result, killed) = std::thread::scope(|s| {
        let killer = s.spawn(kill);
        let (run, result) = run_json(&env, "run long", &[]);
        (run, result, killer.join().unwrap())
    });
    assert!(killed >= 1, "no server process to kill");
    run.expect_code(0);
    let events = stored_events(&env, &session_of(&result));
    let k1 = result_of(&events, "k1");
    assert_eq!(k1["is_error"], true, "{k1}");
    assert_eq!(k1["error"]["code"], "MCP_CALL_FAILED", "{k1}");
    assert!(
        k1["content"]
            .as_str()
            .unwrap()
            .contains("mcp server 'everything'"),
        "{k1}"
    );
    assert_eq!(result_of(&events, "k2")["content"], "Echo: back");
    assert_eq!(last_reason(&events)["kind"], "completed");
}

// Issue 15 item 3: notifications/tools/list_changed updates the registry: a tool the server
// adds can be called in the same turn, and once removed it is unknown again.
#[test]
fn a_tool_list_change_updates_the_registry() {
    let server = server(vec![
        Reply::tool_calls(vec![("a1", "mcp__probe__add_tool", args(json!({})))]),
        Reply::tool_calls(vec![("x1", "mcp__probe__extra", args(json!({})))])
            .delay(Duration::from_millis(500)),
        Reply::tool_calls(vec![("r1", "mcp__probe__remove_tool", args(json!({})))]),
        Reply::tool_calls(vec![("x2", "mcp__probe__extra", args(json!({})))])
            .delay(Duration::from_millis(500)),
        Reply::text("done"),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("probe.log");
    let env = mcp_env(&server, &probe(&log, ""), "");
    let (run, result) = run_json(&env, "change the tools", &["--approval", "never"]);
    run.expect_code(0);
    let events = stored_events(&env, &session_of(&result));
    assert_eq!(result_of(&events, "x1")["content"], "extra ran");
    let gone = result_of(&events, "x2");
    assert_eq!(gone["error"]["code"], "UNKNOWN_TOOL", "{gone}");
    let seen = std::fs::read_to_string(&log).unwrap();
    assert!(
        seen.matches("tools/list").count() >= 3,
        "re-listed on each change: {seen}"
    );
}

// Issue 15 item 1: a secret reaches an MCP server only as a credential reference — the
// `${credential:NAME}` in `env` resolves from `$KEEL_HOME/credentials.toml` when the server
// starts, the server really gets the value (its `get-env` answer holds it), and that value is
// scrubbed before the log or the model sees it.
#[test]
fn a_credential_reference_in_env_reaches_the_server_and_is_scrubbed_on_the_way_back() {
    use std::os::unix::fs::PermissionsExt as _;
    const VALUE: &str = "mcp-cred-5e19d0-value";
    let server = server(vec![
        Reply::tool_calls(vec![("g1", "mcp__everything__get-env", args(json!({})))]),
        Reply::text("ok"),
    ]);
    let env = mcp_env(
        &server,
        &node_server(
            "everything",
            &everything_js(),
            &["stdio"],
            "env = { MCP_PROBE_TOKEN = \"${credential:MCP_PROBE_REF}\" }",
        ),
        "",
    );
    let creds = env.home().join("credentials.toml");
    std::fs::write(&creds, format!("MCP_PROBE_REF = \"{VALUE}\"\n")).unwrap();
    std::fs::set_permissions(&creds, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (run, result) = run_json(&env, "show the env", &[]);
    run.expect_code(0);
    let events = stored_events(&env, &session_of(&result));
    let answer = result_of(&events, "g1")["content"].to_string();
    eprintln!("ANSWER {answer}");
    assert!(answer.contains("MCP_PROBE_TOKEN"), "{answer}");
    assert!(
        !answer.contains("${credential"),
        "the reference was not resolved: {answer}"
    );
    let mut channels = vec![run.stdout.clone(), run.stderr, answer];
    channels.extend(server.requests().iter().map(|r| r.body.to_string()));
    let files = walkdir(&env.home().join("sessions"));
    assert!(
        !files.is_empty(),
        "no session files under {}",
        env.home().display()
    );
    for file in files {
        channels.push(std::fs::read_to_string(file).unwrap_or_default());
    }
    for (i, text) in channels.iter().enumerate() {
        assert!(
            !text.contains(VALUE),
            "channel {i} holds the credential value: {text}"
        );
    }
}

fn walkdir(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walkdir(&p));
        } else {
            out.push(p);
        }
    }
    out
}
