//! Ids in a session through the binary (issue 11 items 6 and 10): message ids stay unique across
//! `keel resume`s, and tool-call ids a server numbers per response (`call_0` in every answer, as
//! llama.cpp and others do) may repeat in later steps — pairing is by (step, id), the requests
//! keep the tool-call contract (ARCHITECTURE §7, TOOL-06), and a SIGKILL + resume mid-way still
//! closes the open call (B7, SES-06).

use std::collections::HashSet;

use keel_tests::model_server::Reply;
use serde_json::{Value, json};

use crate::suite::agent_support::*;

/// `keel sessions show ID --json --profile t`: exit 0, nothing recovered (the log is valid as
/// stored); returns the answer.
fn show_valid(env: &keel_tests::Env, id: &str) -> Value {
    let run = env.keel(&["sessions", "show", id, "--json", "--profile", "t"]);
    run.expect_code(0);
    let v: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(v["recovered"], json!([]), "{}", run.stdout);
    v
}

/// The tool messages right after the assistant message of request `messages` that carries
/// calls for the `nth` time, as `(tool_call_id, content)`.
fn results_of_batch(messages: &Value, nth: usize) -> Vec<(String, String)> {
    let list = messages.as_array().unwrap();
    let at = list
        .iter()
        .enumerate()
        .filter(|(_, m)| m["role"] == "assistant" && m["tool_calls"].as_array().is_some())
        .nth(nth)
        .map(|(i, _)| i)
        .unwrap_or_else(|| panic!("no batch {nth} in {messages}"));
    list[at + 1..]
        .iter()
        .take_while(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

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

/// Issue 11 item 10, TOOL-06: a server that numbers calls per response answers `call_0` (and
/// `call_1`) in every step. The run completes, every request pairs each tool message with its
/// own step's call, and the stored session is valid.
#[test]
fn item10_a_call_id_reused_in_every_step_pairs_by_step() {
    let server = server(vec![
        Reply::tool_calls(vec![
            (
                "call_0",
                "write_file",
                args(json!({"path": "a.txt", "content": "alpha"})),
            ),
            (
                "call_1",
                "write_file",
                args(json!({"path": "b.txt", "content": "beta"})),
            ),
        ]),
        Reply::tool_calls(vec![(
            "call_0",
            "read_file",
            args(json!({"path": "a.txt"})),
        )]),
        Reply::tool_calls(vec![(
            "call_0",
            "read_file",
            args(json!({"path": "b.txt"})),
        )]),
        Reply::text("done"),
    ]);
    let env = agent_env(&server, "");
    let (run, result) = run_json(&env, "write then read", &[]);
    run.expect_code(0);
    assert_eq!(result["result"], "done");
    assert_eq!(
        std::fs::read_to_string(work_file(&env, "b.txt")).unwrap(),
        "beta"
    );
    let reqs = contract_holds(&server);
    assert_eq!(reqs.len(), 4);
    // The last request holds three batches; each tool message answers its own step's call.
    let last = reqs[3].messages();
    let first = results_of_batch(last, 0);
    assert_eq!(
        first.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(),
        ["call_0", "call_1"]
    );
    let second = results_of_batch(last, 1);
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].0, "call_0");
    assert!(second[0].1.contains("alpha"), "{second:?}");
    let third = results_of_batch(last, 2);
    assert_eq!(third[0].0, "call_0");
    assert!(third[0].1.contains("beta"), "{third:?}");
    // The stored log: one tool/call and one tool/result per (step, id), in the right steps.
    let id = session_of(&result);
    let stored = show_valid(&env, &id);
    let events = stored["events"].as_array().unwrap();
    let pairs = |kind: &str| -> Vec<(u64, String)> {
        events
            .iter()
            .filter(|e| e["type"] == kind)
            .map(|e| {
                (
                    e["data"]["step"].as_u64().unwrap(),
                    e["data"]["call_id"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let expected: Vec<(u64, String)> = [(0, "call_0"), (0, "call_1"), (1, "call_0"), (2, "call_0")]
        .iter()
        .map(|(s, c)| (*s, (*c).to_owned()))
        .collect();
    assert_eq!(pairs("tool/call"), expected);
    assert_eq!(pairs("tool/result"), expected);
    assert_eq!(last_reason(events)["kind"], "completed");
}

/// Issue 11 item 10, B7/SES-06: SIGKILL while the second `call_0` runs, then `keel resume`:
/// recovery closes that step's `call_0` (outcome unknown), not the first step's, and the next
/// requests — which reuse `call_0` again — keep the contract.
#[test]
fn item10_sigkill_during_a_reused_call_id_then_resume_closes_the_right_step() {
    let server = server(vec![
        Reply::tool_calls(vec![(
            "call_0",
            "write_file",
            args(json!({"path": "a.txt", "content": "alpha"})),
        )]),
        Reply::tool_calls(vec![(
            "call_0",
            "shell",
            args(json!({"command": "echo $$ > started.pid; sleep 30"})),
        )]),
        Reply::tool_calls(vec![(
            "call_0",
            "read_file",
            args(json!({"path": "a.txt"})),
        )]),
        Reply::text("carrying on"),
    ]);
    let env = agent_env(&server, "");
    let id = sigkill_while_the_tool_runs(&env);
    env.keel(&["resume", &id, "--profile", "t", "what happened?"])
        .expect_code(0);
    let reqs = contract_holds(&server);
    assert_eq!(reqs.len(), 4);
    // The first request after the resume: step 0's call_0 has its real result, step 1's the
    // closer.
    let resumed = reqs[2].messages();
    let first = results_of_batch(resumed, 0);
    assert_eq!(first.len(), 1);
    assert!(!first[0].1.contains("TOOL_OUTCOME_UNKNOWN"), "{first:?}");
    let second = results_of_batch(resumed, 1);
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].0, "call_0");
    assert!(second[0].1.contains("TOOL_OUTCOME_UNKNOWN"), "{second:?}");
    // After it, the resumed turn's own call_0 pairs with its own result.
    let third = results_of_batch(reqs[3].messages(), 2);
    assert!(third[0].1.contains("alpha"), "{third:?}");
    let stored = show_valid(&env, &id);
    let events = stored["events"].as_array().unwrap();
    let closer = events
        .iter()
        .find(|e| e["data"]["error"]["code"] == "TOOL_OUTCOME_UNKNOWN")
        .expect("a closer for the killed call");
    assert_eq!(closer["data"]["step"], 1);
    assert_eq!(closer["data"]["call_id"], "call_0");
    assert_eq!(last_reason(events)["kind"], "completed");
}
