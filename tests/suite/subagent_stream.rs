//! Child agents in `stream-json` (issue 16 item 1): a CI consumer follows the whole tree. Each
//! durable event of a child — and of a child's child — is a line naming the child's session and
//! the parent's call; the run's own lines keep their shape; the result line comes last.

use std::collections::BTreeMap;

use keel_tests::model_server::{ModelServer, Reply};
use serde_json::{Value, json};

use crate::suite::agent_support::*;
use crate::suite::subagent_support::*;

#[test]
fn issue16_stream_json_follows_every_child_with_its_lineage() {
    let server = ModelServer::start_routed(
        vec![
            ("[a]", vec![Reply::text("from a")]),
            (
                "[b]",
                vec![
                    // b delegates once more: its child's lines name b and b's call.
                    Reply::tool_calls(vec![agent_call("b1", "[c] go deeper", json!({}))]),
                    Reply::text("from b"),
                ],
            ),
            ("[c]", vec![Reply::text("from c")]),
        ],
        vec![
            Reply::tool_calls(vec![
                agent_call("p1", "[a] first", json!({})),
                agent_call("p2", "[b] second", json!({})),
            ]),
            Reply::text("both answered"),
        ],
    );
    let env = sub_env(&server, "", "");
    let run = env.keel(&[
        "run",
        "--profile",
        "t",
        "--output-format",
        "stream-json",
        "delegate",
    ]);
    run.expect_code(0);
    let lines: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let root = lines[0]["session_id"].as_str().unwrap().to_owned();
    assert_eq!(lines.last().unwrap()["type"], "result");

    // Who is who, from the logs: p1 → a, p2 → b, b's b1 → c.
    let kids: BTreeMap<String, String> = spawned(&env, &root)
        .into_iter()
        .map(|(call, child, _)| (call, child))
        .collect();
    let (a, b) = (kids["p1"].clone(), kids["p2"].clone());
    let (_, c, _) = spawned(&env, &b).remove(0);

    let mut by_session: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for l in lines.iter().filter(|l| l["type"] == "event") {
        let session = l["session_id"].as_str().unwrap_or(&root).to_owned();
        by_session.entry(session).or_default().push(l);
    }
    for (child, parent, call) in [(&a, &root, "p1"), (&b, &root, "p2"), (&c, &b, "b1")] {
        let printed = by_session
            .get(child.as_str())
            .unwrap_or_else(|| panic!("no lines for child {child}:\n{}", run.stdout));
        for l in printed {
            assert_eq!(l["parent_session"], parent.as_str(), "{l}");
            assert_eq!(l["parent_call_id"], call, "{l}");
        }
        // Exactly the child's stored log, in seq order, each once.
        let stored: Vec<Value> = stored_events(&env, child);
        let shown: Vec<Value> = printed.iter().map(|l| l["event"].clone()).collect();
        assert_eq!(shown, stored, "child {child}");
    }
    // The run's own lines keep their shape: no lineage keys.
    for l in &by_session[&root] {
        assert!(l.get("parent_call_id").is_none(), "{l}");
    }
    assert_eq!(by_session.len(), 4, "root and three children");
}
