//! Bad MCP servers are found before any model request (issue 15, "Bad input"): a command that
//! does not exist, a server that prints garbage on stdout, a tool schema that is not JSON
//! Schema, a URL nobody listens on, a malformed entry. Each refuses the run with exit 2 and
//! one stderr line naming the row and the server, and no session is written; an optional
//! server (`required = false`) is one stderr line and the run goes on. And `keel mcp list`
//! (issue 15 item 1) shows servers, states, sandboxing and tools, as text and as JSON.

use keel_tests::model_server::Reply;
use serde_json::Value;

use crate::suite::agent_support::*;
use crate::suite::mcp_support::*;
use crate::suite::sessions_support::files_under;

fn refused(servers: &str, says: &[&str]) {
    let server = server(vec![Reply::text("never asked")]);
    let env = mcp_env(&server, servers, "");
    let (run, _) = run_json(&env, "hello", &[]);
    run.expect_code(2);
    for s in ["row 'mcp'"].iter().chain(says) {
        assert!(
            run.stderr.contains(s),
            "stderr does not say {s:?}:\n{}",
            run.stderr
        );
    }
    assert_eq!(
        run.stderr.trim().lines().count(),
        1,
        "one line: {}",
        run.stderr
    );
    assert!(server.requests().is_empty(), "a model request was made");
    assert!(
        !files_under(&env.home())
            .iter()
            .any(|p| p.to_string_lossy().contains("sessions/")),
        "no session is written"
    );
}

#[test]
fn a_server_command_that_does_not_exist_is_refused_naming_it() {
    refused(
        "[replace.config.servers.ghost]\ncommand = \"keel-no-such-mcp-server\"\n",
        &[
            "mcp server 'ghost'",
            "`keel-no-such-mcp-server` not found on PATH",
        ],
    );
}

#[test]
fn a_server_that_prints_garbage_on_stdout_is_refused() {
    refused(
        &node_server(
            "noisy",
            &probe_js(),
            &["--garbage"],
            "startup_timeout_ms = 3000",
        ),
        &["mcp server 'noisy'"],
    );
}

#[test]
fn a_tool_schema_that_is_not_json_schema_is_refused_naming_the_tool() {
    refused(
        &node_server("badschema", &probe_js(), &["--bad-schema"], ""),
        &[
            "mcp server 'badschema'",
            "tool 'broken'",
            "not valid JSON Schema",
        ],
    );
}

#[test]
fn a_url_nobody_listens_on_is_refused() {
    let url = format!("http://127.0.0.1:{}/mcp", free_port());
    refused(
        &format!(
            "[replace.config.servers.remote]\nurl = {}\nstartup_timeout_ms = 5000\n",
            lit(&url)
        ),
        &["mcp server 'remote'"],
    );
}

#[test]
fn a_malformed_server_entry_is_refused_naming_the_key() {
    refused(
        "[replace.config.servers.both]\ncommand = \"node\"\nurl = \"http://127.0.0.1:1/mcp\"\n",
        &["server 'both'", "not both"],
    );
}

// `required = false`: the failure is said once and the run goes on without its tools.
#[test]
fn an_optional_server_that_fails_is_said_and_the_run_goes_on() {
    let server = server(vec![Reply::text("fine")]);
    let env = mcp_env(
        &server,
        "[replace.config.servers.ghost]\ncommand = \"keel-no-such-mcp-server\"\nrequired = false\n",
        "",
    );
    let (run, _) = run_json(&env, "hello", &[]);
    run.expect_code(0);
    assert!(
        run.stderr.contains("mcp server 'ghost' did not start")
            && run.stderr.contains("not found on PATH"),
        "{}",
        run.stderr
    );
}

// Issue 15 item 1: `keel mcp list [--json]`.
#[test]
fn keel_mcp_list_shows_states_sandboxing_and_tools() {
    let server = server(vec![]);
    let js = everything_js();
    let servers = format!(
        "{}{}[replace.config.servers.off]\ncommand = \"node\"\nenabled = false\n",
        node_server("everything", &js, &["stdio"], ""),
        node_server("loose", &probe_js(), &[], "sandbox = \"none\""),
    );
    let env = mcp_env(&server, &servers, "");
    let json_run = env.keel(&["mcp", "list", "--json", "--profile", "t"]);
    json_run.expect_code(0);
    let v: Value = serde_json::from_str(json_run.stdout.trim()).unwrap();
    let by = |n: &str| {
        v["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == n)
            .cloned()
            .unwrap()
    };
    let every = by("everything");
    assert_eq!(every["state"], "connected");
    assert_eq!(every["transport"], "stdio");
    if sandbox_usable() {
        assert!(
            every["sandbox"].as_str().unwrap().starts_with("bwrap"),
            "{every}"
        );
    }
    let echo = every["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "mcp__everything__echo")
        .cloned()
        .unwrap();
    assert_eq!(echo["mcp_name"], "echo");
    assert_eq!(echo["mutating"], false);
    assert_eq!(by("loose")["sandbox"], "none (sandbox = \"none\")");
    assert!(
        json_run
            .stderr
            .contains("mcp server 'loose' runs unconfined"),
        "{}",
        json_run.stderr
    );
    assert_eq!(by("off")["state"], "disabled");

    let text = env.keel(&["mcp", "list", "--profile", "t"]);
    text.expect_code(0);
    assert!(
        text.stdout.contains("everything: connected (stdio"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.contains("  mcp__everything__echo  [read-only]"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.contains("  mcp__loose__add_tool  [mutating]"),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("off: disabled"), "{}", text.stdout);
}

// Issue 15 item 1: servers are commands keel runs, so the row is guarded: an untrusted project
// layer (a cloned repository's `.keel/config.toml`) cannot add one, and nothing starts.
#[test]
fn an_untrusted_project_layer_cannot_add_an_mcp_server() {
    let server = server(vec![Reply::text("never asked")]);
    let env = mcp_env(&server, "", "");
    let marker = env.work().join("planted-ran");
    let layer = env.file(
        "work/.keel/config.toml",
        &format!(
            "[[replace]]\nid = \"mcp\"\nconfig = {{ servers = {{ planted = {{ command = \"touch\", args = [{}] }} }} }}\n",
            lit(&marker.display().to_string())
        ),
    );
    let (run, _) = run_json(&env, "hello", &[]);
    run.expect_code(2);
    let line = run.one_error("PROJECT_UNTRUSTED");
    assert!(line.contains(&layer.display().to_string()), "{line}");
    assert!(line.contains("mcp"), "{line}");
    assert!(!marker.exists(), "the planted server ran");
    assert!(server.requests().is_empty());
}
