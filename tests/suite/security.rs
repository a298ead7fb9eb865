//! Security through the binary (issue 5, partial): sandbox escapes are blocked with a clear
//! result and nothing is written outside the workspace (SBX-04/05/06, FS-06); a secret set with
//! `keel secrets set` reaches the command that uses its alias and no output channel (SEC-01/02/03);
//! the firewall's path fact is called by the real pipeline (SEC-06).

use std::process::Stdio;

use keel_tests::model_server::Reply;
use serde_json::json;

use crate::suite::agent_support::*;

fn outside(name: &str) -> std::path::PathBuf {
    outside_workspace("escape", name)
}

#[test]
fn sbx_escapes_through_shell_and_fs_tools_are_blocked() {
    if !sandbox_usable() {
        eprintln!("skipped: bubblewrap is not usable on this machine");
        return;
    }
    let (o_shell, o_abs, o_dots, o_link) = (
        outside("shell"),
        outside("abs"),
        outside("dots"),
        outside("link"),
    );
    let home = o_link.parent().unwrap().to_path_buf();
    let server = server(vec![
        Reply::tool_calls(vec![
            (
                "s1",
                "shell",
                args(json!({"command": format!("echo escaped > {}", o_shell.display())})),
            ),
            (
                "s2",
                "write_file",
                args(json!({"path": o_abs.display().to_string(), "content": "x"})),
            ),
            (
                "s3",
                "write_file",
                args(
                    json!({"path": format!("../../../../../../..{}", o_dots.display()), "content": "x"}),
                ),
            ),
            (
                "s4",
                "write_file",
                args(
                    json!({"path": format!("out/{}", o_link.file_name().unwrap().to_string_lossy()), "content": "x"}),
                ),
            ),
            (
                "s5",
                "write_file",
                args(json!({"path": "inside.txt", "content": "fine"})),
            ),
        ]),
        Reply::text("done"),
    ]);
    let env = agent_env(&server, "");
    // A symlink inside the workspace pointing out of it, made before the run.
    std::os::unix::fs::symlink(&home, work_file(&env, "out")).unwrap();
    let (run, _) = run_json(&env, "try to escape", &[]);
    run.expect_code(0);
    for p in [&o_shell, &o_abs, &o_dots, &o_link] {
        let escaped = p.exists();
        let _ = std::fs::remove_file(p);
        assert!(
            !escaped,
            "{} was written outside the workspace",
            p.display()
        );
    }
    assert_eq!(
        std::fs::read_to_string(work_file(&env, "inside.txt")).unwrap(),
        "fine"
    );
    let reqs = contract_holds(&server);
    let shell = tool_message(reqs[1].messages(), "s1");
    assert!(
        shell["content"].as_str().unwrap().contains("SHELL_EXIT"),
        "{shell}"
    );
    for id in ["s2", "s3", "s4"] {
        let m = tool_message(reqs[1].messages(), id);
        assert!(
            m["content"].as_str().unwrap().contains("FS_SANDBOX_DENIED"),
            "{id}: {m}"
        );
    }
}

/// FS-06 / SBX-05: a symlink the model makes during the run (inside the workspace, pointing
/// at `$HOME`) leads nowhere: neither `write_file` nor `shell` writes through it.
#[test]
fn sbx_a_symlink_made_during_the_run_does_not_lead_out() {
    if !sandbox_usable() {
        eprintln!("skipped: bubblewrap is not usable on this machine");
        return;
    }
    let (via_fs, via_shell) = (outside("made-fs"), outside("made-shell"));
    let home = via_fs.parent().unwrap().display().to_string();
    let name = |p: &std::path::Path| p.file_name().unwrap().to_string_lossy().into_owned();
    let server = server(vec![
        Reply::tool_calls(vec![(
            "m1",
            "shell",
            args(json!({"command": format!("ln -s {home} made-link && ls -d made-link")})),
        )]),
        Reply::tool_calls(vec![
            (
                "m2",
                "write_file",
                args(json!({"path": format!("made-link/{}", name(&via_fs)), "content": "x"})),
            ),
            (
                "m3",
                "shell",
                args(json!({"command": format!("echo x > made-link/{}", name(&via_shell))})),
            ),
        ]),
        Reply::text("done"),
    ]);
    let env = agent_env(&server, "");
    let (run, _) = run_json(&env, "link out", &[]);
    run.expect_code(0);
    assert!(
        std::fs::symlink_metadata(work_file(&env, "made-link")).is_ok_and(|m| m.is_symlink()),
        "the link was made inside the workspace"
    );
    for p in [&via_fs, &via_shell] {
        let escaped = p.exists();
        let _ = std::fs::remove_file(p);
        assert!(!escaped, "{} was written through the link", p.display());
    }
    let reqs = contract_holds(&server);
    let m2 = tool_message(reqs[2].messages(), "m2")["content"].to_string();
    assert!(m2.contains("FS_SANDBOX_DENIED"), "{m2}");
    let m3 = tool_message(reqs[2].messages(), "m3")["content"].to_string();
    assert!(m3.contains("[sandbox: file access denied"), "{m3}");
}

/// Network is off in confined modes; the same command reaches the listener with
/// `--sandbox danger-full-access` (the control that proves the probe works).
#[test]
fn sbx_network_is_off_in_workspace_write() {
    if !sandbox_usable() {
        eprintln!("skipped: bubblewrap is not usable on this machine");
        return;
    }
    // A listener that records what reaches it (a second model server, used as a target).
    let target = keel_tests::model_server::ModelServer::start(vec![]);
    let probe = format!(
        "printf 'GET /probe HTTP/1.0\\r\\n\\r\\n' > /dev/tcp/127.0.0.1/{}",
        target.addr().port()
    );
    let reached = |mode: &str| {
        let server = server(vec![
            Reply::tool_calls(vec![("n1", "shell", args(json!({ "command": probe })))]),
            Reply::text("done"),
        ]);
        let env = agent_env(&server, "");
        let (run, _) = run_json(&env, "call home", &["--sandbox", mode]);
        run.expect_code(0);
        std::thread::sleep(std::time::Duration::from_millis(100));
        target
            .requests()
            .iter()
            .filter(|r| r.path == "/probe")
            .count()
    };
    assert_eq!(
        reached("workspace-write"),
        0,
        "the sandboxed shell reached the network"
    );
    assert_eq!(
        reached("danger-full-access"),
        1,
        "the probe itself works unconfined"
    );
}

#[test]
fn sbx_read_only_mode_denies_writes_in_the_workspace() {
    if !sandbox_usable() {
        eprintln!("skipped: bubblewrap is not usable on this machine");
        return;
    }
    let server = server(vec![
        Reply::tool_calls(vec![
            (
                "r1",
                "write_file",
                args(json!({"path": "a.txt", "content": "x"})),
            ),
            ("r2", "shell", args(json!({"command": "echo x > b.txt"}))),
        ]),
        Reply::text("done"),
    ]);
    let env = agent_env(&server, "");
    let (run, _) = run_json(&env, "write", &["--sandbox", "read-only"]);
    run.expect_code(0);
    assert!(!work_file(&env, "a.txt").exists());
    assert!(!work_file(&env, "b.txt").exists());
    let reqs = contract_holds(&server);
    assert!(
        tool_message(reqs[1].messages(), "r1")["content"]
            .as_str()
            .unwrap()
            .contains("FS_SANDBOX_DENIED")
    );
}

/// The canary (SEC-01/02/03): the command really receives the value; no channel carries it.
/// On both session backends (the SQLite files are read as bytes: database and WAL).
#[test]
fn sec01_sec03_canary_secret_reaches_the_tool_and_no_output_channel() {
    canary("");
    canary(
        "[[disable]]\nid = \"session-store\"\n\n[[insert]]\nid = \"session-store\"\nplugin = \"session-sqlite\"\n",
    );
}

fn canary(backend_rows: &str) {
    const VALUE: &str = "canary-9f3e1c-value";
    let b64 = "Y2FuYXJ5LTlmM2UxYy12YWx1ZQ"; // base64 of VALUE, unpadded prefix
    let server = server(vec![
        Reply::tool_calls(vec![(
            "c1",
            "shell",
            args(json!({"command":
                "printf %s sec_CANARY > used.txt; echo sec_CANARY; printf %s sec_CANARY | base64; cat used.txt"})),
        )]),
        // The model repeats the value it was told (it should never have been able to).
        Reply::text(format!("the secret is {VALUE}")),
    ]);
    let marker = std::env::temp_dir().join(format!("keel-canary-marker-{}", std::process::id()));
    // A plugin that logs the value on every tool call (SEC-03: tracing lines are redacted).
    let logger = format!(
        "[[insert]]\nid = \"proof-hooks\"\nplugin = \"proof-agent-hooks\"\nconfig = {{ seam = \"tools/pre-execute\", action = \"log\", text = \"{VALUE}\", marker = \"{}\" }}\n",
        marker.display()
    );
    let env = agent_env(&server, &format!("{backend_rows}\n{logger}"));
    set_secret(&env, "CANARY", VALUE);
    let list = env.keel(&["secrets", "list", "--profile", "t"]);
    list.expect_code(0);
    assert!(list.stdout.contains("CANARY") && !list.stdout.contains(VALUE));

    let run = env.keel_with(
        &[
            "run",
            "--profile",
            "t",
            "--output-format",
            "stream-json",
            // The user pastes the value itself (SEC-03: session events are scrubbed before
            // they are written).
            &format!("use the canary, it is {VALUE}"),
        ],
        &[("KEEL_LOG", std::ffi::OsStr::new("trace"))],
    );
    run.expect_code(0);
    // The command really received the value.
    assert_eq!(
        std::fs::read_to_string(work_file(&env, "used.txt")).unwrap(),
        VALUE
    );
    // The model saw the alias, and only the alias.
    let reqs = contract_holds(&server);
    assert!(
        reqs[0].body.to_string().contains("sec_CANARY"),
        "the prompt lists the alias"
    );
    let mut channels: Vec<(String, String)> = vec![
        ("stdout".into(), run.stdout.clone()),
        ("stderr (trace)".into(), run.stderr),
    ];
    for (i, r) in server.requests().iter().enumerate() {
        channels.push((format!("request {i}"), r.body.to_string()));
        channels.push((format!("request {i} headers"), format!("{:?}", r.headers)));
    }
    let stored = crate::suite::sessions_support::files_under(&env.home().join("sessions"));
    assert!(!stored.is_empty(), "no session files to check");
    for p in stored {
        channels.push((
            p.display().to_string(),
            String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned(),
        ));
    }
    for (name, text) in &channels {
        assert!(!text.contains(VALUE), "the value leaked into {name}");
        assert!(!text.contains(b64), "the value's base64 leaked into {name}");
    }
    // Each channel really carried the text, as the alias.
    assert!(
        run.stdout.contains("the secret is sec_CANARY"),
        "stdout shows the alias: {}",
        run.stdout
    );
    assert!(
        channels[1].1.contains("proof-agent-hooks saw: sec_CANARY"),
        "the plugin's line was written, redacted"
    );
    // The plugin's own println!/eprintln! (its std, not the kernel's) reached both streams,
    // redacted by the output guard.
    for (name, text) in &channels[..2] {
        assert!(
            text.contains("proof-agent-hooks printed: sec_CANARY"),
            "the plugin's direct print reached {name}, redacted"
        );
    }
    let user = reqs[0].messages()[1]["content"].to_string();
    assert!(user.contains("it is sec_CANARY"), "{user}");
    let scrubbed = tool_message(reqs[1].messages(), "c1");
    assert!(
        scrubbed["content"].as_str().unwrap().contains("sec_CANARY"),
        "{scrubbed}"
    );
}

/// SEC-02/03: a secret set by another process while a run is going is filled and scrubbed
/// from the run's next tool call on (the firewall re-reads a changed store; one `stat` per
/// call otherwise).
#[test]
fn sec03_a_secret_set_during_the_run_is_filled_and_scrubbed_from_then_on() {
    const VALUE: &str = "late-secret-77e2b-value";
    let server = server(vec![
        // Runs until the test has set the secret (it then creates `ready`), 60 s at most.
        Reply::tool_calls(vec![(
            "w1",
            "shell",
            args(json!({"command":
                "for i in $(seq 600); do [ -f ready ] && break; sleep 0.1; done"})),
        )]),
        Reply::tool_calls(vec![(
            "w2",
            "shell",
            args(json!({"command": "printf %s sec_LATE > late.txt; echo got sec_LATE"})),
        )]),
        Reply::text("done"),
    ]);
    let env = agent_env(&server, "");
    let child = env
        .command(&["run", "--profile", "t", "--output-format", "json", "go"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while server.completions().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    set_secret(&env, "LATE", VALUE);
    std::fs::write(work_file(&env, "ready"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(work_file(&env, "late.txt")).unwrap(),
        VALUE,
        "the alias was filled"
    );
    let reqs = contract_holds(&server);
    let w2 = tool_message(reqs[2].messages(), "w2")["content"].to_string();
    assert!(w2.contains("got sec_LATE") && !w2.contains(VALUE), "{w2}");
    for channel in [&out.stdout, &out.stderr] {
        assert!(!String::from_utf8_lossy(channel).contains(VALUE));
    }
}

/// SEC-06: the firewall's path fact is on the real execution chain: a denied path makes
/// `read_file` fail with the firewall's reason, and the file's content never reaches the model.
#[test]
fn sec06_a_denied_path_fails_read_file_with_the_firewall_reason() {
    let server = server(vec![
        Reply::tool_calls(vec![(
            "k1",
            "read_file",
            args(json!({"path": ".ssh/id_test"})),
        )]),
        Reply::text("denied"),
    ]);
    let env = agent_env(&server, "");
    env.file("work/.ssh/id_test", "PRIVATE-KEY-MATERIAL-41\n");
    let (run, _) = run_json(&env, "read my key", &[]);
    run.expect_code(0);
    let reqs = contract_holds(&server);
    let m = tool_message(reqs[1].messages(), "k1");
    let content = m["content"].as_str().unwrap();
    assert!(
        content.contains("TOOL_DENIED") && content.contains("firewall"),
        "{m}"
    );
    assert!(!reqs[1].body.to_string().contains("PRIVATE-KEY-MATERIAL-41"));
}

/// SEC-04/SEC-06: each of the firewall's facts is asked by the real chain and its denial is
/// the call's result before anything runs: `check_tool` (deny_tools), `check_path` (a shell
/// `workdir` under `~/.ssh`-style denied paths), `check_network` (a URL host outside
/// allow_hosts). A control call to an allowed host reaches the listener, so the denial is the
/// firewall's and not the sandbox's (the run is unconfined).
#[test]
fn sec06_the_chain_asks_check_tool_check_path_and_check_network() {
    let target = keel_tests::model_server::ModelServer::start(vec![]);
    let port = target.addr().port();
    // The URL names the host the firewall checks; bash's /dev/tcp makes the request to the
    // loopback listener, so a call that runs is seen there.
    let fetch = |host: &str, path: &str| {
        format!(
            "echo fetching http://{host}:{port}/{path}; \
             printf 'GET /{path} HTTP/1.0\\r\\nHost: {host}\\r\\n\\r\\n' > /dev/tcp/127.0.0.1/{port}"
        )
    };
    let server = server(vec![
        Reply::tool_calls(vec![
            ("f1", "glob", args(json!({"pattern": "*"}))),
            (
                "f2",
                "shell",
                args(json!({"command": "touch x", "workdir": ".ssh"})),
            ),
            (
                "f3",
                "shell",
                args(json!({"command": fetch("exfil.example", "denied")})),
            ),
            (
                "f4",
                "shell",
                args(json!({"command": fetch("allowed.example", "control")})),
            ),
        ]),
        Reply::text("done"),
    ]);
    let env = agent_env(
        &server,
        "[[replace]]\nid = \"firewall\"\nconfig = { deny_tools = [\"glob\"], allow_hosts = [\"allowed.example\"] }\n",
    );
    std::fs::create_dir_all(work_file(&env, ".ssh")).unwrap();
    let (run, _) = run_json(
        &env,
        "probe the firewall",
        &["--sandbox", "danger-full-access"],
    );
    run.expect_code(0);
    let reqs = contract_holds(&server);
    for (id, why) in [
        ("f1", "tool 'glob' is denied"),
        ("f2", ".ssh"),
        ("f3", "host 'exfil.example' is not in allow_hosts"),
    ] {
        let m = tool_message(reqs[1].messages(), id)["content"].to_string();
        assert!(
            m.contains("TOOL_DENIED") && m.contains("firewall:") && m.contains(why),
            "{id}: {m}"
        );
    }
    assert!(!work_file(&env, ".ssh/x").exists(), "the denied shell ran");
    let paths: Vec<String> = target.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(
        paths,
        vec!["/control".to_owned()],
        "only the allowed host was reached"
    );
}

/// Approval rules by tool name and argument pattern: deny > ask > allow; an allow rule spares
/// the mode's ask; the denial is the call's result; `config dump --explain` names the layer
/// that set the rules.
#[test]
fn approval_rules_deny_ask_allow_by_tool_and_pattern() {
    let server = server(vec![
        Reply::tool_calls(vec![
            (
                "a1",
                "shell",
                args(json!({"command": "echo hi > allowed.txt"})),
            ),
            (
                "a2",
                "write_file",
                args(json!({"path": "secret.txt", "content": "x"})),
            ),
            (
                "a3",
                "write_file",
                args(json!({"path": "other.txt", "content": "x"})),
            ),
        ]),
        Reply::text("done"),
    ]);
    let env = agent_env(
        &server,
        r#"[[replace]]
id = "approval"
config = { mode = "ask", rules = { allow = ["shell(echo *)"], deny = ["write_file(secret*)"] } }
"#,
    );
    let (run, result) = run_json(&env, "three calls", &[]);
    run.expect_code(0);
    assert!(
        work_file(&env, "allowed.txt").is_file(),
        "the allow rule spared the ask"
    );
    assert!(!work_file(&env, "secret.txt").exists());
    assert!(!work_file(&env, "other.txt").exists());
    let reqs = contract_holds(&server);
    let denied = tool_message(reqs[1].messages(), "a2");
    assert!(
        denied["content"]
            .as_str()
            .unwrap()
            .contains("write_file(secret*)"),
        "{denied}"
    );
    let asked = tool_message(reqs[1].messages(), "a3");
    assert!(
        asked["content"]
            .as_str()
            .unwrap()
            .contains("APPROVAL_UNAVAILABLE"),
        "{asked}"
    );
    // Only the call that asked has an audit pair.
    let events = stored_events(&env, &session_of(&result));
    let asked_ids: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["type"] == "approval/asked")
        .map(|e| &e["data"]["call_id"])
        .collect();
    assert_eq!(asked_ids, [&json!("a3")]);
    let dump = env.keel(&["config", "dump", "--profile", "t", "--explain"]);
    dump.expect_code(0);
    assert!(dump.stdout.contains("rules"), "{}", dump.stdout);
    assert!(dump.stdout.contains("row 'approval'"), "{}", dump.stdout);
}
