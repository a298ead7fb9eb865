//! The `agent` tool end to end (issue 16 item 1; SES-13, SUB-05): children run in parallel
//! against their own scripts, their answers come back in call order, their logs are their own
//! sessions with the lineage in the header; a fork sees the parent's completed turns only; the
//! caps answer at once with their codes.

use std::time::Duration;

use keel_tests::model_server::{ModelServer, Reply};
use serde_json::{Value, json};

use crate::suite::agent_support::*;
use crate::suite::subagent_support::*;

/// Three `agent` calls in one assistant message: the children's model requests overlap in
/// time, the results come back in call order, and each child's log is its own session whose
/// header names the parent and the call (SUB-05).
#[test]
fn sub05_three_children_run_in_parallel_and_answer_in_call_order() {
    let delay = Duration::from_millis(400);
    let server = ModelServer::start_routed(
        vec![
            ("[kid-1]", vec![Reply::text("answer one").delay(delay)]),
            ("[kid-2]", vec![Reply::text("answer two").delay(delay)]),
            ("[kid-3]", vec![Reply::text("answer three").delay(delay)]),
        ],
        vec![
            Reply::tool_calls(vec![
                agent_call("c1", "[kid-1] count the files", json!({})),
                agent_call(
                    "c2",
                    "[kid-2] read the readme",
                    json!({"description": "readme"}),
                ),
                agent_call("c3", "[kid-3] list the tests", json!({"mode": "spawn"})),
            ]),
            Reply::text("all three answered"),
        ],
    );
    let env = sub_env(&server, "", "");
    let (run, result) = run_json(&env, "delegate three tasks", &[]);
    run.expect_code(0);
    assert_eq!(result["result"], "all three answered", "{}", run.stderr);
    let parent = session_of(&result);

    // Overlap: every child's request arrived before any child's answer was written.
    let firsts: Vec<_> = ["[kid-1]", "[kid-2]", "[kid-3]"]
        .iter()
        .map(|m| {
            let r = server.routed(Some(m));
            assert_eq!(r.len(), 1, "{m}: one request");
            r[0].clone()
        })
        .collect();
    let last_arrival = firsts.iter().map(|r| r.at).max().unwrap();
    let first_done = firsts.iter().filter_map(|r| r.done).min().unwrap();
    assert!(
        last_arrival < first_done,
        "the children's requests did not overlap: the last arrived {:?} after the first answer",
        last_arrival - first_done.min(last_arrival)
    );

    // The parent's next request: the three tool messages in call order, each the child's text.
    let parent_reqs = contract_holds(&server)
        .into_iter()
        .filter(|r| r.route.is_none())
        .collect::<Vec<_>>();
    assert_eq!(parent_reqs.len(), 2);
    let messages = parent_reqs[1].messages().as_array().unwrap().clone();
    let tools: Vec<(String, String)> = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        tools,
        [
            ("c1", "answer one"),
            ("c2", "answer two"),
            ("c3", "answer three")
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );

    // Each child is its own session, its lineage in the header.
    let children = spawned(&env, &parent);
    assert_eq!(
        children
            .iter()
            .map(|c| c.0.as_str())
            .collect::<Vec<_>>()
            .len(),
        3
    );
    for (call_id, child, data) in &children {
        assert_eq!(data["mode"], "spawn");
        assert_eq!(data["depth"], 1);
        let show = env.keel(&["sessions", "show", child, "--json", "--profile", "t"]);
        show.expect_code(0);
        let shown: Value = serde_json::from_str(show.stdout.trim()).unwrap();
        let h = &shown["header"];
        assert_eq!(h["parent_session"], parent.as_str(), "{shown}");
        assert_eq!(h["parent_call_id"], call_id.as_str(), "{shown}");
        assert_eq!(h["origin"], "subagent", "{shown}");
        assert_eq!(h["delegation_depth"], 1, "{shown}");
        let events = stored_events(&env, child);
        assert_eq!(last_reason(&events)["kind"], "completed");
    }
    let ends = ended(&env, &parent);
    assert_eq!(ends.len(), 3);
    assert!(ends.iter().all(|e| e["outcome"] == "completed"), "{ends:?}");
}

/// SES-13 / SUB-05: a forked child's first request carries the parent's completed turns and
/// not the open one (the turn whose call started it); its header records the seed.
#[test]
fn ses13_a_fork_sees_the_completed_turns_and_not_the_open_one() {
    let server = ModelServer::start(vec![
        Reply::text("the first answer"),
        Reply::tool_calls(vec![agent_call(
            "f1",
            "summarise what we said so far",
            json!({"mode": "fork"}),
        )]),
        Reply::text("a summary from the fork"),
        Reply::text("the parent is done"),
    ]);
    let env = sub_env(&server, "", "");
    let (run, result) = run_json(&env, "the first question", &[]);
    run.expect_code(0);
    let parent = session_of(&result);
    let run = env.keel(&[
        "resume",
        &parent,
        "--profile",
        "t",
        "now delegate a summary",
    ]);
    run.expect_code(0);
    let reqs = contract_holds(&server);
    assert_eq!(reqs.len(), 4);
    let child_messages = reqs[2].messages().as_array().unwrap().clone();
    let texts: Vec<(String, String)> = child_messages
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        texts,
        [
            ("user", "the first question"),
            ("assistant", "the first answer"),
            ("user", "summarise what we said so far"),
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned())),
        "the fork's first request: {}",
        reqs[2].messages()
    );
    // The parent's next request has the fork's answer.
    assert_eq!(
        tool_message(reqs[3].messages(), "f1")["content"],
        "a summary from the fork"
    );
    let children = spawned(&env, &parent);
    assert_eq!(children.len(), 1);
    let (_, child, data) = &children[0];
    assert_eq!(data["mode"], "fork");
    let h = header(&env, child);
    assert_eq!(h["parent_session"], parent.as_str(), "{h}");
    assert_eq!(h["parent_call_id"], "f1", "{h}");
    assert_eq!(h["origin"], "subagent", "{h}");
    let seed = h["seed_length"].as_u64().expect("a fork records its seed");
    let events = stored_events(&env, child);
    // The seed is the parent's first turn, through its turn/end.
    assert_eq!(events[seed as usize - 1]["type"], "turn/end", "{h}");
    assert_eq!(
        events
            .iter()
            .take(seed as usize)
            .filter(|e| e["type"] == "turn/start")
            .count(),
        1
    );
}

/// The concurrency cap answers at once: five parallel calls under `max_concurrent = 4` → four
/// children run, one call is `SUBAGENT_LIMIT` and no fifth child starts.
#[test]
fn five_parallel_calls_under_a_cap_of_four_refuse_one_with_subagent_limit() {
    let markers = ["[lim-1]", "[lim-2]", "[lim-3]", "[lim-4]", "[lim-5]"];
    let server = ModelServer::start_routed(
        markers
            .iter()
            .map(|m| {
                (
                    *m,
                    vec![Reply::text(format!("done {m}")).delay(Duration::from_millis(500))],
                )
            })
            .collect(),
        vec![
            Reply::tool_calls(
                markers
                    .iter()
                    .enumerate()
                    .map(|(i, m)| agent_call(&format!("l{i}"), &format!("{m} work"), json!({})))
                    .collect(),
            ),
            Reply::text("done"),
        ],
    );
    let env = sub_env(&server, "{ max_concurrent = 4 }", "");
    let (run, result) = run_json(&env, "fan out", &[]);
    run.expect_code(0);
    let parent = session_of(&result);
    let reqs = server.routed(None);
    let tools: Vec<String> = reqs[1]
        .messages()
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(tools.len(), 5);
    let refused: Vec<&String> = tools
        .iter()
        .filter(|t| t.starts_with("Error [SUBAGENT_LIMIT]"))
        .collect();
    assert_eq!(refused.len(), 1, "{tools:?}");
    assert!(refused[0].contains("max_concurrent is 4"), "{}", refused[0]);
    assert_eq!(
        tools.iter().filter(|t| t.starts_with("done [lim-")).count(),
        4
    );
    assert_eq!(spawned(&env, &parent).len(), 4);
    let child_requests = server.completions().len() - reqs.len();
    assert_eq!(child_requests, 4, "a refused call starts no child");
}

/// The depth cap (default 2): root → child (depth 1) → grandchild (depth 2), whose own
/// `agent` call is `SUBAGENT_DEPTH`; no great-grandchild starts.
#[test]
fn a_depth_two_child_calling_agent_gets_subagent_depth() {
    let server = ModelServer::start_routed(
        vec![
            (
                "[n1]",
                vec![
                    Reply::tool_calls(vec![agent_call("g1", "[n2] go deeper", json!({}))]),
                    Reply::text("n1 done"),
                ],
            ),
            (
                "[n2]",
                vec![
                    Reply::tool_calls(vec![agent_call("g2", "[n3] deeper still", json!({}))]),
                    Reply::text("n2 could not delegate"),
                ],
            ),
            ("[n3]", vec![Reply::text("unreachable")]),
        ],
        vec![
            Reply::tool_calls(vec![agent_call("g0", "[n1] start", json!({}))]),
            Reply::text("root done"),
        ],
    );
    let env = sub_env(&server, "", "");
    let (run, result) = run_json(&env, "nest", &[]);
    run.expect_code(0);
    assert_eq!(result["result"], "root done");
    let n2 = server.routed(Some("[n2]"));
    assert_eq!(n2.len(), 2);
    let refused = tool_message(n2[1].messages(), "g2");
    let text = refused["content"].as_str().unwrap();
    assert!(text.starts_with("Error [SUBAGENT_DEPTH]"), "{text}");
    assert!(text.contains("max_depth 2"), "{text}");
    assert!(server.routed(Some("[n3]")).is_empty());
    // The tree on disk: root → n1 (depth 1) → n2 (depth 2).
    let root = session_of(&result);
    let (_, n1, _) = spawned(&env, &root).remove(0);
    assert_eq!(header(&env, &n1)["delegation_depth"], 1);
    let (_, n2s, d) = spawned(&env, &n1).remove(0);
    assert_eq!(d["depth"], 2);
    let h = header(&env, &n2s);
    assert_eq!(h["delegation_depth"], 2);
    assert_eq!(h["parent_session"], n1.as_str());
    assert!(spawned(&env, &n2s).is_empty());
}

/// An agent name the config does not have is `SUBAGENT_UNKNOWN` naming the known ones; no
/// child starts.
#[test]
fn an_unknown_agent_name_is_subagent_unknown() {
    let server = ModelServer::start(vec![
        Reply::tool_calls(vec![agent_call("u1", "do it", json!({"agent": "wizard"}))]),
        Reply::text("ok"),
    ]);
    let env = sub_env(
        &server,
        r#"{ agents = { reader = { description = "reads" } } }"#,
        "",
    );
    let (run, result) = run_json(&env, "go", &[]);
    run.expect_code(0);
    let reqs = contract_holds(&server);
    assert_eq!(reqs.len(), 2, "no child request");
    let text = tool_message(reqs[1].messages(), "u1")["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(text.starts_with("Error [SUBAGENT_UNKNOWN]"), "{text}");
    assert!(
        text.contains("'wizard'") && text.contains("known: reader"),
        "{text}"
    );
    // The tool's description lists the named agents.
    let offered = reqs[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "agent")
        .cloned()
        .unwrap();
    assert!(
        offered["function"]["description"]
            .as_str()
            .unwrap()
            .contains("- reader: reads")
    );
    assert!(spawned(&env, &session_of(&result)).is_empty());
}

/// `keel run --ephemeral` writes no session: its children are kept in memory too (their
/// answers still come back), so nothing of the run is on disk afterwards.
#[test]
fn an_ephemeral_parents_children_are_ephemeral_too() {
    let server = ModelServer::start_routed(
        vec![("[e]", vec![Reply::text("in memory")])],
        vec![
            Reply::tool_calls(vec![agent_call("e1", "[e] remember nothing", json!({}))]),
            Reply::text("done"),
        ],
    );
    let env = sub_env(&server, "", "");
    let (run, result) = run_json(&env, "delegate", &["--ephemeral"]);
    run.expect_code(0);
    assert_eq!(result["result"], "done", "{}", run.stderr);
    assert_eq!(server.routed(Some("[e]")).len(), 1, "the child ran");
    let parent_next = server.routed(None).pop().unwrap();
    assert_eq!(
        tool_message(parent_next.messages(), "e1")["content"],
        "in memory"
    );
    let stored: Vec<_> = crate::suite::sessions_support::files_under(&env.home())
        .into_iter()
        .filter(|p| {
            p.extension()
                .is_some_and(|e| e == "jsonl" || e == "sqlite3")
        })
        .collect();
    assert!(stored.is_empty(), "an ephemeral run stored {stored:?}");
}

/// What every agent of the bundled profile is offered: the `agent` tool, and no resident or
/// child-only tool unless a profile turns resident children on (`resident.enabled`).
#[test]
fn the_bundle_offers_the_agent_tool_and_resident_tools_only_when_enabled() {
    let offered = |server: &ModelServer| -> Vec<String> {
        server.completions()[0].body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let server = ModelServer::start(vec![Reply::text("ok")]);
    let env = sub_env(&server, "", "");
    run_json(&env, "hi", &[]).0.expect_code(0);
    let tools = offered(&server);
    assert!(tools.contains(&"agent".to_owned()), "{tools:?}");
    assert!(
        !tools
            .iter()
            .any(|t| t.starts_with("resident_") || t.starts_with("memory_")),
        "{tools:?}"
    );
    let server = ModelServer::start(vec![Reply::text("ok")]);
    let env = sub_env(&server, "{ resident = { enabled = true } }", "");
    run_json(&env, "hi", &[]).0.expect_code(0);
    let tools = offered(&server);
    assert!(tools.contains(&"resident_start".to_owned()), "{tools:?}");
    assert!(
        !tools
            .iter()
            .any(|t| t.starts_with("memory_") || t == "notify_parent"),
        "child-only tools are never a root agent's: {tools:?}"
    );
}
