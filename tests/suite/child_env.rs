//! Child environments through the binary (issue 23 item 1, SBX-03, SEC-09): a `shell`
//! command, a hook and the real `server-everything` MCP server (its `get-env` tool prints its
//! environment) get the allow-list plus what their row names, never keel's environment minus a
//! deny-list. The variables here contain none of KEY, SECRET, TOKEN or PASSWORD: the model's
//! key is `LLM_CRED` (`-c llm-openai.api_key_ref=LLM_CRED`), a deploy passphrase sits beside
//! it, and a credential the run resolved never passes even when a row lists it.

use serde_json::{Value, json};

use keel_tests::model_server::{ModelServer, Reply};

use crate::suite::agent_support::*;
use crate::suite::hooks_support::*;
use crate::suite::mcp_support::*;

/// The model's key, under a name no deny-list recognises.
const LLM_CRED: &str = "llmcred-4c1d-canary-value";
/// Another secret under an ordinary name.
const PASSPHRASE: &str = "passphrase-9e2f-canary-value";
/// The credential an MCP server's `env` names explicitly.
const PAT: &str = "pat-77aa-canary-value";

fn reversed(s: &str) -> String {
    s.chars().rev().collect()
}

/// `keel run` with the model's key under `LLM_CRED`.
fn run(env: &keel_tests::Env) -> (keel_tests::Run, Value) {
    run_json(env, "go", &["-c", "llm-openai.api_key_ref=LLM_CRED"])
}

fn with_vars(env: keel_tests::Env) -> keel_tests::Env {
    env.var("LLM_CRED", LLM_CRED)
        .var("DEPLOY_PASSPHRASE", PASSPHRASE)
        .var("GITHUB_PAT", PAT)
        .var("MY_TOOL_HOME", "/opt/my-tool")
}

/// Every model request, serialised.
fn sent(server: &ModelServer) -> String {
    server
        .requests()
        .iter()
        .map(|r| r.body.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

// Issue 23 item 1: `shell` and a hook see the allow-list and their `pass_env`; a passphrase
// under an ordinary name and the model's key (listed in `pass_env`, but held by the
// credentials row) are absent, reversed or not.
#[test]
fn shell_and_hooks_inherit_only_the_allow_list_and_never_a_held_credential() {
    let probe = "printf 'cred=%s\\n' \"$(printenv LLM_CRED | rev)\"; \
                 printf 'pass=%s\\n' \"$(printenv DEPLOY_PASSPHRASE | rev)\"; \
                 printf 'tool=%s\\n' \"$(printenv MY_TOOL_HOME)\"; \
                 printf 'home=%s\\n' \"$HOME\"";
    let server = server(vec![
        Reply::tool_calls(vec![("c1", "shell", args(json!({"command": probe})))]),
        Reply::text("done"),
    ]);
    let hook = format!("{} > \"$CLAUDE_PROJECT_DIR/hook-env.txt\"", cmd("probe"));
    let env = with_vars(hooks_env_with(
        &server,
        &format!(
            "pass_env = [\"LLM_CRED\", \"MY_TOOL_*\"], {}",
            table(&[on("PreToolUse", "shell", &hook, "")])
        ),
        "[[replace]]\nid = \"tool-shell\"\nconfig = { pass_env = [\"LLM_CRED\", \"MY_TOOL_HOME\"] }\n",
    ));
    put(&env, "probe", &format!("{probe}\n"));
    let (run, result) = run(&env);
    run.expect_code(0);
    let events = stored_events(&env, &session_of(&result));
    let shell_out = result_of(&events, "c1")["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let hook_out = std::fs::read_to_string(work_file(&env, "hook-env.txt"))
        .expect("the hook ran and wrote its environment");
    for (who, out) in [("shell", &shell_out), ("hook", &hook_out)] {
        assert!(
            out.contains("tool=/opt/my-tool"),
            "{who}: pass_env passes: {out}"
        );
        assert!(out.contains("home="), "{who}: {out}");
        assert!(out.contains("cred=\n"), "{who}: the held key leaked: {out}");
        assert!(
            out.contains("pass=\n"),
            "{who}: the passphrase leaked: {out}"
        );
        for canary in [LLM_CRED, PASSPHRASE] {
            assert!(!out.contains(&reversed(canary)), "{who}: {out}");
        }
    }
    let wire = sent(&server);
    for canary in [LLM_CRED, PASSPHRASE] {
        assert!(!wire.contains(&reversed(canary)), "reached the model");
    }
}

// Issue 23 item 1 with the real counterpart: `server-everything`'s `get-env` prints its whole
// environment. Another server's `env = { PAT = "${credential:GITHUB_PAT}" }` is the user's
// deliberate choice for that server only; the model's key and the passphrase reach neither.
#[test]
fn an_mcp_stdio_server_gets_the_allow_list_and_only_its_own_explicit_credential() {
    let server = server(vec![
        Reply::tool_calls(vec![
            ("g1", "mcp__everything__get-env", args(json!({}))),
            ("g2", "mcp__withpat__get-env", args(json!({}))),
        ]),
        Reply::text("done"),
    ]);
    let js = everything_js();
    let servers = format!(
        "{}{}",
        node_server("everything", &js, &["stdio"], ""),
        node_server(
            "withpat",
            &js,
            &["stdio"],
            "env = { PAT = \"${credential:GITHUB_PAT}\" }",
        )
    );
    let env = with_vars(mcp_env(&server, &servers, ""));
    let (run, result) = run(&env);
    run.expect_code(0);
    let events = stored_events(&env, &session_of(&result));
    let printed = |id: &str| -> Value {
        let r = result_of(&events, id);
        let text = r["content"].as_str().unwrap_or_default();
        serde_json::from_str(text).unwrap_or_else(|e| panic!("{id}: {e}: {r}"))
    };
    for id in ["g1", "g2"] {
        let vars = printed(id);
        let names: Vec<&str> = vars
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert!(names.contains(&"PATH"), "{id}: {names:?}");
        for absent in [
            "LLM_CRED",
            "DEPLOY_PASSPHRASE",
            "GITHUB_PAT",
            "MY_TOOL_HOME",
        ] {
            assert!(!names.contains(&absent), "{id}: {absent} leaked: {names:?}");
        }
        assert!(
            !names.iter().any(|n| n.starts_with("KEEL_")),
            "{id}: {names:?}"
        );
        let text = vars.to_string();
        for canary in [LLM_CRED, PASSPHRASE] {
            assert!(!text.contains(canary) && !text.contains(&reversed(canary)));
        }
    }
    assert!(
        printed("g2").get("PAT").is_some(),
        "the explicit credential is set for its own server"
    );
    assert!(printed("g1").get("PAT").is_none());
    let wire = sent(&server);
    assert!(!wire.contains(PAT), "the explicit credential is scrubbed");
    assert!(!wire.contains("DEPLOY_PASSPHRASE"));
}
