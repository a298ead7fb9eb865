//! The secret firewall inside a child (issue 16 item 1: "approval, firewall, sandbox and hooks
//! apply inside children exactly as in the parent"; approval and hooks are in
//! `subagent_faults`). A child that reads keel's own model key sends its model only the
//! credential's marker, and neither the parent's requests nor any session file carries it.

use keel_tests::model_server::{ModelServer, Reply};
use serde_json::json;

use crate::suite::agent_support::*;
use crate::suite::subagent_support::*;

#[test]
fn sec01_a_child_reading_the_adapter_key_sends_its_model_only_the_marker() {
    let marker = format!("[credential {KEY_REF}]");
    let server = ModelServer::start_routed(
        vec![(
            "[peek]",
            vec![
                Reply::tool_calls(vec![("k1", "read_file", args(json!({"path": "leak.txt"})))]),
                Reply::text(format!("the key is {KEY_VALUE}")),
            ],
        )],
        vec![
            Reply::tool_calls(vec![agent_call("p1", "[peek] read leak.txt", json!({}))]),
            Reply::text("done"),
        ],
    );
    let env = sub_env(&server, "", "");
    env.file("work/leak.txt", KEY_VALUE);
    let (run, result) = run_json(&env, "delegate", &[]);
    run.expect_code(0);
    let child = server.routed(Some("[peek]"));
    assert_eq!(child.len(), 2);
    let seen = tool_message(child[1].messages(), "k1")["content"].to_string();
    assert!(seen.contains(&marker), "{seen}");
    for (i, r) in server.requests().iter().enumerate() {
        assert!(
            !r.body.to_string().contains(KEY_VALUE),
            "request {i} carries the key"
        );
    }
    // The child's answer, as the parent read it, is scrubbed too.
    let parent_next = server.routed(None).pop().unwrap();
    let answer = tool_message(parent_next.messages(), "p1")["content"].to_string();
    assert!(answer.contains(&marker), "{answer}");
    let (_, kid, _) = spawned(&env, &session_of(&result)).remove(0);
    for id in [session_of(&result), kid] {
        let log =
            std::fs::read_to_string(crate::suite::sessions_support::jsonl_file(&env, &id)).unwrap();
        assert!(!log.contains(KEY_VALUE), "session {id} stores the key");
    }
    assert!(!run.stdout.contains(KEY_VALUE) && !run.stderr.contains(KEY_VALUE));
}
