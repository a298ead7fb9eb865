//! The user's private files inside the sandbox through the binary (issue 23 item 4, SEC-04,
//! SBX-04): with a fake `$HOME` holding `.ssh/id_rsa` and `.netrc`, no confined process reads
//! them — `shell`, a hook, and the real `@modelcontextprotocol/server-filesystem` rooted at
//! `/` — under bubblewrap and under Landlock. Under Landlock a refused read of keel's home or
//! of a private key is described as a protected path, with no escalation offered (issue 23
//! item 8).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use keel_tests::Env;
use keel_tests::model_server::{ModelServer, Reply};

use crate::suite::agent_support::*;
use crate::suite::hooks_support::*;
use crate::suite::landlock::{env_with_sandbox, landlock_probe};
use crate::suite::mcp_support::*;

/// The private key's canary.
const KEY: &str = "-----BEGIN OPENSSH PRIVATE KEY----- canary-7f3e-id-rsa";
/// The netrc's canary.
const NETRC: &str = "machine example.com login me password canary-netrc-51c0";

/// A fake `$HOME` outside `/tmp` (a writable root) with `.ssh/id_rsa` and `.netrc`; removed on
/// drop.
struct FakeHome(PathBuf);

impl FakeHome {
    fn new(tag: &str) -> FakeHome {
        let home = outside_workspace("private", tag);
        let _ = std::fs::remove_dir_all(&home);
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::write(home.join(".ssh/id_rsa"), KEY).unwrap();
        std::fs::write(home.join(".netrc"), NETRC).unwrap();
        FakeHome(home)
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for FakeHome {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn filesystem_js() -> PathBuf {
    let p = keel_tests::target_dir()
        .join("mcp-servers/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    assert!(
        p.is_file(),
        "{} is missing: `cargo xtask test` installs the pinned MCP test servers",
        p.display()
    );
    p
}

/// The model reads the key and the netrc through `shell` and the filesystem server, then
/// runs `more` (further shell commands).
fn script(home: &Path, more: &[(&str, String)]) -> Vec<Reply> {
    let key = home.join(".ssh/id_rsa").display().to_string();
    let mut calls = vec![
        (
            "s1".to_owned(),
            "shell".to_owned(),
            args(json!({"command": "ls -a ~/.ssh; cat ~/.ssh/id_rsa; cat \"$HOME/.netrc\""})),
        ),
        (
            "f1".to_owned(),
            "mcp__fs__read_text_file".to_owned(),
            args(json!({ "path": key })),
        ),
    ];
    for (id, command) in more {
        calls.push((
            (*id).to_owned(),
            "shell".to_owned(),
            args(json!({ "command": command })),
        ));
    }
    vec![Reply::tool_calls(calls), Reply::text("done")]
}

/// The hook copies the key into the workspace if it can.
fn hook_rows() -> String {
    let hook = format!(
        "{} > \"$CLAUDE_PROJECT_DIR/hook-key.txt\" 2>&1",
        cmd("steal")
    );
    format!(
        "[[replace]]\nid = \"hooks\"\nconfig = {{ {} }}\n",
        table(&[on("PreToolUse", "shell", &hook, "")])
    )
}

fn fs_server() -> String {
    node_server("fs", &filesystem_js(), &["/"], "")
}

/// What no confined process may have read: the canaries in the tool results, the hook's file
/// and every model request.
fn assert_unread(env: &Env, model: &ModelServer, result: &Value) {
    let events = stored_events(env, &session_of(result));
    let hook = std::fs::read_to_string(work_file(env, "hook-key.txt"))
        .expect("the hook ran and wrote what it could read");
    let wire: String = model
        .requests()
        .iter()
        .map(|r| r.body.to_string())
        .collect();
    for canary in [KEY, NETRC, "canary-7f3e", "canary-netrc"] {
        for id in ["s1", "f1"] {
            let r = result_of(&events, id);
            assert!(!r.to_string().contains(canary), "{id} read it: {r}");
        }
        assert!(!hook.contains(canary), "the hook read it: {hook}");
        assert!(!wire.contains(canary), "it reached the model");
    }
}

fn put_steal(env: &Env) {
    put(
        env,
        "steal",
        "cat \"$HOME/.ssh/id_rsa\"; cat \"$HOME/.netrc\"\n",
    );
}

// Issue 23 item 4 under bubblewrap (the shipped runner).
#[test]
fn no_confined_process_reads_the_users_private_keys_under_bubblewrap() {
    if !sandbox_usable() {
        eprintln!("skipped: bubblewrap is not usable here");
        return;
    }
    let home = FakeHome::new("bwrap");
    let model = server(script(home.path(), &[]));
    let env = mcp_env(&model, &fs_server(), &hook_rows()).var("HOME", home.path());
    put_steal(&env);
    let (run, result) = run_json(&env, "read the keys", &[]);
    run.expect_code(0);
    assert_unread(&env, &model, &result);
    assert_eq!(
        std::fs::read_to_string(home.path().join(".ssh/id_rsa")).unwrap(),
        KEY,
        "masked, not touched"
    );
}

// Issue 23 items 4 and 8 under Landlock: the private paths get no read rule; a refused read of
// one, or of `$KEEL_HOME`, is a protected path and offers no escalation.
#[test]
fn no_confined_process_reads_the_users_private_keys_under_landlock() {
    if landlock_probe().is_none() {
        return;
    }
    let home = FakeHome::new("landlock");
    let model = server(vec![]);
    let env = env_with_sandbox(
        &model,
        &format!(
            "{{ runners = [\"landlock\"] }}\n{}\n[[replace]]\nid = \"mcp\"\n[replace.config]\n{}",
            hook_rows(),
            fs_server()
        ),
    )
    .var("HOME", home.path());
    put_steal(&env);
    let creds = env.home().join("credentials.toml");
    std::fs::write(&creds, "SOME_REF = \"credentials-canary-0b9d\"\n").unwrap();
    for reply in script(home.path(), &[("k1", format!("cat {}", creds.display()))]) {
        model.push(reply);
    }
    let (run, result) = run_json(&env, "read the keys", &[]);
    run.expect_code(0);
    assert_unread(&env, &model, &result);
    let events = stored_events(&env, &session_of(&result));
    for id in ["s1", "k1"] {
        let text = result_of(&events, id)["content"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(text.contains("[sandbox: protected path]"), "{id}: {text}");
        assert!(!text.contains("credentials-canary"), "{id}: {text}");
        assert!(
            !text.contains("escalation available") && !text.contains("danger-full-access"),
            "{id}: no mode opens it: {text}"
        );
    }
}
