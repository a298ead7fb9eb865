//! PreCompact through the binary (issue 15 item 3): the `context` row is about to compact a
//! long session, and the hooks row runs the PreCompact hook first — Claude Code's fields on
//! stdin (`trigger: auto`), audited in the log — and the compaction still happens (Claude
//! Code's PreCompact cannot stop one; keel's `context/compact` veto stays a plugin's).

use keel_tests::model_server::{ModelServer, Reply, Window};
use serde_json::{Value, json};

use crate::suite::agent_support::{run_json, session_of, stored_events, work_file};
use crate::suite::context_support::ctx_env_with;
use crate::suite::hooks_support::*;

const WINDOW: u64 = 4000;

#[test]
fn a_pre_compact_hook_runs_before_the_compaction_with_its_trigger() {
    let server = ModelServer::start_windowed(Window::new(WINDOW), Vec::new());
    let record = cmd("record.sh");
    let env = ctx_env_with(
        &server,
        Some((WINDOW, 500)),
        "{ keep_recent_steps = 1 }",
        &format!(
            "[[replace]]\nid = \"hooks\"\nconfig = {{ {} }}\n",
            table(&[on("PreCompact", "*", &record, "")])
        ),
    );
    put(
        &env,
        "record.sh",
        "cat >> \"$CLAUDE_PROJECT_DIR/compact.jsonl\"\necho >> \"$CLAUDE_PROJECT_DIR/compact.jsonl\"\n",
    );
    for k in 0..6 {
        let name = format!("f{k}.txt");
        std::fs::write(env.work().join(&name), format!("file {k} ").repeat(500)).unwrap();
        server.push(Reply::tool_calls(vec![(
            format!("c{k}"),
            "read_file",
            json!({ "path": name }).to_string(),
        )]));
    }
    server.push(Reply::text("done"));
    let (run, result) = run_json(&env, "read the files", &[]);
    run.expect_code(0);
    let events = stored_events(&env, &session_of(&result));
    let replaced = events
        .iter()
        .filter(|e| e["surface_op"].is_object())
        .count();
    assert!(replaced > 0, "the session compacted");

    let text = std::fs::read_to_string(work_file(&env, "compact.jsonl")).unwrap();
    let inputs: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!inputs.is_empty(), "the hook never ran");
    for input in &inputs {
        assert_eq!(input["hook_event_name"], "PreCompact", "{input}");
        assert_eq!(input["trigger"], "auto", "{input}");
        assert_eq!(input["session_id"], session_of(&result), "{input}");
    }
    // Each run is audited, before the replacement it preceded.
    let first_invoked = events
        .iter()
        .position(|e| e["type"] == "hook/invoked" && e["data"]["event"] == "PreCompact")
        .expect("a hook/invoked for PreCompact");
    let first_replacement = events
        .iter()
        .position(|e| e["surface_op"].is_object())
        .unwrap();
    assert!(
        first_invoked < first_replacement,
        "the hook ran after the compaction was appended"
    );
    assert_eq!(
        data_of(&events, "hook/invoked")
            .iter()
            .filter(|d| d["event"] == "PreCompact")
            .count(),
        inputs.len()
    );
}
