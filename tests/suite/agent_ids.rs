//! Ids in a session through the binary (issue 11 items 6 and 10): message ids stay unique across
//! `keel resume`s, and tool-call ids a server numbers per response (`call_0` in every answer, as
//! llama.cpp and others do) may repeat in later steps — pairing is by (step, id), the requests
//! keep the tool-call contract (ARCHITECTURE §7, TOOL-06), and a SIGKILL + resume mid-way still
//! closes the open call (B7, SES-06).

use std::collections::HashSet;

use keel_tests::model_server::Reply;

use crate::suite::agent_support::*;

/// LOOP-02, issue 11 item 6: every `user/message` id of a session is distinct after a run and
/// two resumes (each process used to count from 1 again: `msg_S_1` three times).
#[test]
fn item6_message_ids_stay_unique_across_two_resumes() {
    let server = server(vec![
        Reply::text("one"),
        Reply::text("two"),
        Reply::text("three"),
    ]);
    let env = agent_env(&server, "");
    let (run, result) = run_json(&env, "first", &[]);
    run.expect_code(0);
    let id = session_of(&result);
    for prompt in ["second", "third"] {
        env.keel(&["resume", &id, "--profile", "t", prompt])
            .expect_code(0);
    }
    let events = stored_events(&env, &id);
    let ids: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "user/message" || e["type"] == "assistant/message")
        .filter_map(|e| e["data"]["id"].as_str())
        .collect();
    assert_eq!(ids.len(), 3, "one user message per process: {ids:?}");
    let distinct: HashSet<&str> = ids.iter().copied().collect();
    assert_eq!(distinct.len(), ids.len(), "message ids repeat: {ids:?}");
    // The prompts are logged in order under those ids.
    let contents: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "user/message")
        .filter_map(|e| e["data"]["content"].as_str())
        .collect();
    assert_eq!(contents, ["first", "second", "third"]);
}
