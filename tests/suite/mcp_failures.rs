//! MCP failures that name their cause, through the binary (issue 23 items 8 and 17): a server
//! that exits says its exit code and its last stderr line; `npx -y` under the sandbox's
//! no-network rule says the server runs offline instead of a bare startup timeout; a reply
//! over 16 MiB fails the call at once instead of waiting for the tool deadline.

use std::time::{Duration, Instant};

use serde_json::json;

use keel_tests::model_server::Reply;

use crate::suite::agent_support::*;
use crate::suite::mcp_support::*;

// Issue 23 item 17: a real process that writes a line on stderr and exits 3.
#[test]
fn a_server_that_exits_says_its_exit_code_and_last_stderr_line() {
    let server = server(vec![Reply::text("unreachable")]);
    let servers = "[replace.config.servers.broken]\ncommand = \"sh\"\nargs = [\"-c\", \"echo 'first line' >&2; echo 'fatal: no config at /etc/broken.toml' >&2; exit 3\"]\n";
    let env = mcp_env(&server, servers, "");
    let (run, _) = run_json(&env, "hi", &[]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("exited with code 3"),
        "the exit code is named: {}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("its stderr: fatal: no config at /etc/broken.toml"),
        "its last stderr line is named: {}",
        run.stderr
    );
}

// Issue 23 item 17: `npx -y` of a package that is not installed, confined without network,
// waits for a registry it cannot reach; the reason says so.
#[test]
fn npx_offline_under_the_sandbox_says_it_has_no_network() {
    if !sandbox_usable() {
        eprintln!("skipped: bubblewrap is not usable here (no sandbox row, so no network rule)");
        return;
    }
    let server = server(vec![Reply::text("unreachable")]);
    let servers = "[replace.config.servers.fetched]\ncommand = \"npx\"\nargs = [\"-y\", \"@keel-test/surely-not-installed-mcp-server\"]\nstartup_timeout_ms = 3000\n";
    let env = mcp_env(&server, servers, "");
    let (run, _) = run_json(&env, "hi", &[]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("runs without network") && run.stderr.contains("npx -y"),
        "the offline cause is named: {}",
        run.stderr
    );
}

// Issue 23 item 8: a reply past the 16 MiB message limit fails the call at once with a code,
// well before the call deadline, and the next request says why.
#[test]
fn a_reply_over_16_mib_fails_the_call_at_once() {
    let server = server(vec![
        Reply::tool_calls(vec![(
            "h1",
            "mcp__probe__huge",
            args(json!({ "bytes": 17 * 1024 * 1024 })),
        )]),
        Reply::text("done"),
    ]);
    let servers = node_server(
        "probe",
        &probe_js(),
        &["--huge"],
        "call_timeout_ms = 120000",
    );
    let env = mcp_env(&server, &servers, "");
    let started = Instant::now();
    let (run, result) = run_json(&env, "get it", &[]);
    let took = started.elapsed();
    run.expect_code(0);
    assert!(
        took < Duration::from_secs(60),
        "the call waited for its deadline: {took:?}"
    );
    let events = stored_events(&env, &session_of(&result));
    let r = result_of(&events, "h1");
    assert_eq!(r["is_error"], true, "{r}");
    assert_eq!(r["error"]["code"], "MCP_CALL_FAILED", "{r}");
    let text = r["content"].as_str().unwrap_or_default();
    assert!(text.contains("more than 16 MiB"), "{text}");
}
