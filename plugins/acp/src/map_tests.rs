//! The log → ACP mapping on the log's own JSON shapes (docs/session-format.md).

use std::path::Path;

use agent_client_protocol::v1::schema::{SessionUpdate, StopReason, ToolKind};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::*;

fn seen(streamed: bool) -> Seen<'static> {
    Seen {
        replay: true,
        streamed,
        cwd: Path::new("/work"),
    }
}

fn wire(updates: &[SessionUpdate]) -> Vec<Value> {
    updates
        .iter()
        .map(|u| serde_json::to_value(u).unwrap())
        .collect()
}

#[test]
fn messages_become_chunks_and_a_streamed_step_adds_no_text() {
    let user = updates(
        "user/message",
        &json!({"id": "m1", "content": "hi"}),
        seen(false),
    );
    assert_eq!(
        wire(&user),
        [json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "hi"}})]
    );
    // Live, the editor already shows what it sent.
    let live = Seen {
        replay: false,
        ..seen(false)
    };
    assert!(updates("user/message", &json!({"content": "hi"}), live).is_empty());
    let answer = json!({"turn": 0, "step": 0, "message": {"content": "hello", "tool_calls": [], "reasoning": "think"}});
    let kinds: Vec<Value> = wire(&updates("assistant/message", &answer, seen(false)))
        .into_iter()
        .map(|u| u["sessionUpdate"].clone())
        .collect();
    assert_eq!(
        kinds,
        [json!("agent_thought_chunk"), json!("agent_message_chunk")]
    );
    assert!(updates("assistant/message", &answer, seen(true)).is_empty());
    // Blocks: the text blocks joined; an empty message stands for nothing.
    let blocks = json!({"message": {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}});
    assert_eq!(
        wire(&updates("assistant/message", &blocks, seen(false)))[0]["content"]["text"],
        "ab"
    );
    assert!(
        updates(
            "assistant/message",
            &json!({"message": {"content": ""}}),
            seen(false)
        )
        .is_empty()
    );
}

#[test]
fn a_tool_call_names_its_kind_title_and_location_and_its_result_its_status() {
    let call = json!({"turn": 0, "step": 0, "call_id": "c1", "name": "write_file",
        "arguments": "{\"path\":\"src/a.rs\",\"content\":\"x\"}"});
    let u = wire(&updates("tool/call", &call, seen(false)));
    assert_eq!(u[0]["sessionUpdate"], "tool_call");
    assert_eq!(u[0]["toolCallId"], "c1");
    assert_eq!(u[0]["title"], "write_file: src/a.rs");
    assert_eq!(u[0]["kind"], "edit");
    assert_eq!(u[0]["status"], "in_progress");
    assert_eq!(u[0]["locations"], json!([{"path": "/work/src/a.rs"}]));
    assert_eq!(u[0]["rawInput"]["content"], "x");
    // Arguments that are not JSON are shown as the model's text.
    let bad = json!({"call_id": "c2", "name": "shell", "arguments": "{not json"});
    assert_eq!(
        wire(&updates("tool/call", &bad, seen(false)))[0]["rawInput"],
        "{not json"
    );

    let ok = json!({"call_id": "c1", "content": "wrote 1 byte"});
    let u = wire(&updates("tool/result", &ok, seen(false)));
    assert_eq!(u[0]["sessionUpdate"], "tool_call_update");
    assert_eq!(u[0]["status"], "completed");
    assert_eq!(u[0]["content"][0]["content"]["text"], "wrote 1 byte");
    let failed = json!({"call_id": "c1", "content": "denied", "is_error": true, "error": {"code": "APPROVAL_REJECTED"}});
    let u = wire(&updates("tool/result", &failed, seen(false)));
    assert_eq!(u[0]["status"], "failed");
    assert_eq!(u[0]["rawOutput"]["error"]["code"], "APPROVAL_REJECTED");
}

#[test]
fn kinds_and_plans_and_events_that_stand_for_nothing() {
    assert_eq!(kind_of("read_file"), ToolKind::Read);
    assert_eq!(kind_of("shell"), ToolKind::Execute);
    assert_eq!(kind_of("grep"), ToolKind::Search);
    assert_eq!(kind_of("mcp__x__y"), ToolKind::Other);
    let todo = json!({"todos": [{"content": "a", "status": "completed"}, {"content": "b", "status": "pending"}]});
    let u = wire(&updates("todo/write", &todo, seen(false)));
    assert_eq!(u[0]["sessionUpdate"], "plan");
    assert_eq!(u[0]["entries"][0]["status"], "completed");
    assert_eq!(u[0]["entries"][1]["content"], "b");
    for kind in ["turn/start", "step/end", "request/header", "approval/asked"] {
        assert!(updates(kind, &json!({}), seen(false)).is_empty(), "{kind}");
    }
}

// SURF-03: end_turn only on normal completion; aborted (and anything not correlated) is
// cancelled.
#[test]
fn stop_reasons_follow_the_turn_end() {
    assert_eq!(stop_reason("completed"), StopReason::EndTurn);
    assert_eq!(stop_reason("aborted"), StopReason::Cancelled);
    assert_eq!(stop_reason("unknown"), StopReason::Cancelled);
    assert_eq!(stop_reason("max-turns"), StopReason::MaxTurnRequests);
    assert_eq!(stop_reason("max-steps"), StopReason::MaxTurnRequests);
    assert_eq!(stop_reason("max-tokens"), StopReason::MaxTokens);
    assert_eq!(stop_reason("blocked"), StopReason::Refusal);
}
