//! Names a path check does not see, and files a run leaves (issue 23 item 8), through the
//! binary: a hard link in the workspace to `$KEEL_HOME/credentials.toml` is the same file
//! under an innocent name, and `read_file`, `grep` and `edit_file` refuse it by its identity
//! (`FS_SANDBOX_DENIED`), as the context row refuses it as its summary prompt; after a run, the
//! session store holds no `.lock` file.

use keel_tests::model_server::Reply;
use serde_json::json;

use crate::suite::agent_support::*;

/// A value in `credentials.toml` that no row resolves (so nothing would scrub it).
const CANARY: &str = "unresolved-cred-8e41d7-canary";

/// Issue 23 item 8: `creds.txt`, a hard link to `$KEEL_HOME/credentials.toml`, is refused
/// to `read_file` and `edit_file` with `FS_SANDBOX_DENIED` naming a hard link, and `grep`
/// over the workspace finds the ordinary file's match but nothing in the link; the canary
/// reaches no request, and the protected file is unchanged.
#[test]
fn issue23_item8_a_hard_link_to_keels_credentials_is_refused() {
    let server = server(vec![
        Reply::tool_calls(vec![
            ("r1", "read_file", args(json!({"path": "creds.txt"}))),
            (
                "g1",
                "grep",
                args(json!({"pattern": "canary", "path": "."})),
            ),
            (
                "e1",
                "edit_file",
                args(json!({"path": "creds.txt", "old_string": "OTHER", "new_string": "X"})),
            ),
        ]),
        Reply::text("done"),
    ]);
    let env = agent_env(&server, "");
    let creds = env.home().join("credentials.toml");
    std::fs::write(&creds, format!("OTHER_SERVICE = \"{CANARY}\"\n")).unwrap();
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&creds, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    env.file("work/plain.txt", "a plain canary line\n");
    std::fs::hard_link(&creds, env.work().join("creds.txt")).unwrap();
    let (run, _) = run_json(&env, "read the files", &[]);
    run.expect_code(0);
    let reqs = contract_holds(&server);
    assert_eq!(reqs.len(), 2);
    for id in ["r1", "e1"] {
        let m = tool_message(reqs[1].messages(), id)["content"].to_string();
        assert!(m.contains("FS_SANDBOX_DENIED"), "{id}: {m}");
        assert!(m.contains("hard link"), "{id}: {m}");
    }
    let grep = tool_message(reqs[1].messages(), "g1")["content"].to_string();
    assert!(grep.contains("plain.txt"), "grep really searched: {grep}");
    assert!(!grep.contains("creds.txt"), "grep read the link: {grep}");
    for (i, r) in reqs.iter().enumerate() {
        assert!(
            !r.body.to_string().contains(CANARY),
            "request {i} carries the credential"
        );
    }
    assert_eq!(
        std::fs::read_to_string(&creds).unwrap(),
        format!("OTHER_SERVICE = \"{CANARY}\"\n")
    );
}

/// Issue 23 item 8: two runs (a new session and a resumed one) leave session files and no
/// `.lock` file in the sessions directory.
#[test]
fn issue23_item8_no_lock_file_is_left_after_a_run() {
    let server = server(vec![Reply::text("one"), Reply::text("two")]);
    let env = agent_env(&server, "");
    let (run, result) = run_json(&env, "first", &[]);
    run.expect_code(0);
    let session = session_of(&result);
    let again = env.keel(&[
        "resume",
        &session,
        "--profile",
        "t",
        "--output-format",
        "json",
        "second",
    ]);
    again.expect_code(0);
    let files = crate::suite::sessions_support::files_under(&env.home().join("sessions"));
    assert!(!files.is_empty(), "no session files at all");
    let locks: Vec<_> = files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "lock"))
        .collect();
    assert!(locks.is_empty(), "lock files left: {locks:?}");
}

/// Issue 23 item 8: the context row's summary prompt goes to the model verbatim; a hard link
/// in the workspace to `$KEEL_HOME/credentials.toml` named as the prompt is refused before any
/// request (exit 2, one line naming the row and the hard link), like the original.
#[test]
fn issue23_item8_a_hard_linked_summary_prompt_is_refused() {
    let env = keel_tests::Env::new();
    std::fs::create_dir_all(env.home()).unwrap();
    let creds = env.home().join("credentials.toml");
    std::fs::write(&creds, format!("OTHER_SERVICE = \"{CANARY}\"\n")).unwrap();
    let link = env.work().join("summary.md");
    std::fs::hard_link(&creds, &link).unwrap();
    let prompt = format!("context.summarise={{prompt=\"{}\"}}", link.display());
    let run = env.keel(&[
        "run",
        "--profile",
        "demo",
        "-c",
        r#"context.strategies=["summarise"]"#,
        "-c",
        &prompt,
        "tidy the notes",
    ]);
    run.expect_code(2);
    assert!(run.stderr.contains("row 'context'"), "{}", run.stderr);
    assert!(run.stderr.contains("hard link"), "{}", run.stderr);
    assert!(!run.stderr.contains(CANARY), "{}", run.stderr);
}
