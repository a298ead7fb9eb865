//! The real `@modelcontextprotocol/server-everything` through the keel binary (issue 15 item
//! 1, "Real counterparts"): over stdio (under the sandbox) and over streamable HTTP, its tools
//! are in the first model request with their schemas, and echo, get-sum, a long-running
//! operation with progress and a call the server rejects come back as results in the session
//! log and in the next request.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use keel_tests::model_server::{ModelServer, Reply};
use serde_json::{Value, json};

use crate::suite::agent_support::*;
use crate::suite::mcp_support::*;

/// The four calls every transport makes, and the final text.
fn script() -> ModelServer {
    server(vec![
        Reply::tool_calls(vec![
            (
                "e1",
                "mcp__everything__echo",
                args(json!({"message": "hi there"})),
            ),
            (
                "s1",
                "mcp__everything__get-sum",
                args(json!({"a": 2, "b": 3})),
            ),
            (
                "l1",
                "mcp__everything__trigger-long-running-operation",
                args(json!({"duration": 1, "steps": 3})),
            ),
            ("x1", "mcp__everything__get-sum", args(json!({"a": "two"}))),
        ]),
        Reply::text("done"),
    ])
}

/// What both transports must show.
fn check(env: &keel_tests::Env, server: &ModelServer, result: &Value) {
    let reqs = contract_holds(server);
    assert_eq!(reqs.len(), 2, "two model requests");
    // The first request already carries the server's tools, with their schemas.
    let echo = offered_tool(&reqs[0].body, "mcp__everything__echo")
        .unwrap_or_else(|| panic!("echo not offered: {}", reqs[0].body["tools"]));
    assert_eq!(
        echo["parameters"]["properties"]["message"]["type"],
        "string"
    );
    assert!(offered_tool(&reqs[0].body, "mcp__everything__get-sum").is_some());
    assert!(
        offered_tool(&reqs[0].body, "read_file").is_some(),
        "built-ins stay"
    );

    let events = stored_events(env, &session_of(result));
    let content = |id: &str| {
        result_of(&events, id)["content"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(content("e1"), "Echo: hi there");
    assert_eq!(content("s1"), "The sum of 2 and 3 is 5.");
    assert!(
        content("l1").contains("Long running operation completed"),
        "{}",
        content("l1")
    );
    let rejected = result_of(&events, "x1");
    assert_eq!(rejected["is_error"], true, "{rejected}");
    assert_eq!(rejected["error"]["code"], "MCP_TOOL_ERROR");
    assert!(
        rejected["content"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("expected number"),
        "the server's own message: {rejected}"
    );
    // The next request carries the same results.
    for id in ["e1", "s1", "l1", "x1"] {
        assert_eq!(tool_message(reqs[1].messages(), id)["content"], content(id));
    }
}

// Issue 15 item 1: stdio, under the profile's sandbox (the row's default).
#[test]
fn everything_over_stdio_lists_its_tools_first_and_runs_calls_through_the_pipeline() {
    let server = script();
    let js = everything_js();
    let env = mcp_env(&server, &node_server("everything", &js, &["stdio"], ""), "");
    let (run, result) = run_json(&env, "use the mcp tools", &[]);
    run.expect_code(0);
    check(&env, &server, &result);
}

/// server-everything's streamable HTTP transport on a free port; killed on drop.
struct HttpServer(Child, u16);

impl HttpServer {
    fn start() -> Self {
        let port = free_port();
        let mut child = Command::new("node")
            .arg(everything_js())
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start server-everything streamableHttp");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("listening on port") {
                    let _ = tx.send(());
                }
            }
        });
        rx.recv_timeout(Duration::from_secs(30))
            .expect("server-everything said it listens");
        HttpServer(child, port)
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.1)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

// Issue 15 item 1: streamable HTTP.
#[test]
fn everything_over_streamable_http_lists_its_tools_first_and_runs_calls() {
    let http = HttpServer::start();
    let server = script();
    let servers = format!(
        "[replace.config.servers.everything]\nurl = {}\n",
        lit(&http.url())
    );
    let env = mcp_env(&server, &servers, "");
    let (run, result) = run_json(&env, "use the mcp tools", &[]);
    run.expect_code(0);
    check(&env, &server, &result);
}
