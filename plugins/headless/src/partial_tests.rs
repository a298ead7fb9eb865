//! The `stream_event` lines of `--include-partial-messages` (issue 26 item 1).

use serde_json::{Value, json};

use super::*;

const ROOT: Origin<'static> = Origin {
    session_id: "s1",
    parent_tool_use_id: None,
    model: "m",
};

fn piece(attempt: u32, index: u32, reasoning: bool, text: &str) -> Piece {
    Piece {
        session_id: "s1".into(),
        turn: 0,
        step: attempt.into(),
        attempt,
        index,
        reasoning,
        text: text.into(),
    }
}

fn events(lines: &[String]) -> Vec<Value> {
    lines
        .iter()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            assert_eq!(v["type"], "stream_event");
            assert_eq!(v["session_id"], "s1");
            assert!(v["uuid"].as_str().is_some_and(|u| u.len() == 36), "{v}");
            v["event"].clone()
        })
        .collect()
}

fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e["delta"]["type"].as_str() {
            Some(d) if e["type"] == "content_block_delta" => d.to_owned(),
            _ => e["type"].as_str().unwrap().to_owned(),
        })
        .collect()
}

#[test]
fn a_message_opens_streams_its_blocks_and_closes_with_the_answer() {
    let mut p = Partial::default();
    let mut lines = p.piece(&piece(0, 0, true, "hmm "), ROOT);
    lines.extend(p.piece(&piece(0, 1, false, "Hel"), ROOT));
    lines.extend(p.piece(&piece(0, 1, false, "lo there"), ROOT));
    let answer = json!({"type": "assistant/message", "seq": 5, "data": {"turn": 0, "step": 0,
        "message": {"content": "Hello"}, "usage": {"input_tokens": 3, "output_tokens": 2}}});
    lines.extend(p.event("s1", &answer.to_string(), ROOT));
    let ev = events(&lines);
    assert_eq!(
        kinds(&ev),
        [
            "message_start",
            "content_block_start",
            "thinking_delta",
            "content_block_stop",
            "content_block_start",
            "text_delta",
            "text_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    assert_eq!(ev[0]["message"]["model"], "m");
    assert_eq!(ev[1]["content_block"]["type"], "thinking");
    assert_eq!(ev[2]["delta"]["thinking"], "hmm ");
    assert_eq!(ev[4]["content_block"], json!({"type": "text", "text": ""}));
    // "Hel" waits for the rest of its word; the last word waits for the block's end.
    assert_eq!(
        ev[5],
        json!({"type": "content_block_delta", "index": 1,
               "delta": {"type": "text_delta", "text": "Hello "}})
    );
    assert_eq!(ev[6]["delta"]["text"], "there");
    assert_eq!(ev[8]["delta"]["stop_reason"], "end_turn");
    assert_eq!(ev[8]["usage"]["output_tokens"], 2);
    // Every line has its own uuid.
    let mut uuids: Vec<String> = lines
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["uuid"].to_string())
        .collect();
    uuids.dedup();
    assert_eq!(uuids.len(), lines.len());
    // Nothing is open any more: a later event adds nothing.
    assert!(p.event("s1", &answer.to_string(), ROOT).is_empty());
}

#[test]
fn a_retry_closes_the_failed_attempt_and_opens_a_new_message() {
    let mut p = Partial::default();
    let first = events(&p.piece(&piece(0, 0, false, "partial "), ROOT));
    assert_eq!(kinds(&first)[0], "message_start");
    let second = events(&p.piece(&piece(1, 0, false, "again "), ROOT));
    assert_eq!(
        kinds(&second),
        [
            "content_block_stop",
            "message_stop",
            "message_start",
            "content_block_start",
            "text_delta"
        ]
    );
    assert_ne!(first[0]["message"]["id"], second[2]["message"]["id"]);
    let end = json!({"type": "step/end", "seq": 9, "data": {"turn": 0, "step": 1}});
    assert_eq!(
        kinds(&events(&p.event("s1", &end.to_string(), ROOT))),
        ["content_block_stop", "message_stop"]
    );
}

#[test]
fn a_childs_lines_carry_the_parent_call_and_other_events_close_nothing() {
    let mut p = Partial::default();
    let child = Origin {
        parent_tool_use_id: Some("agent_1"),
        ..ROOT
    };
    let line = &p.piece(&piece(0, 0, false, "x"), child)[0];
    let v: Value = serde_json::from_str(line).unwrap();
    assert_eq!(v["parent_tool_use_id"], "agent_1");
    let other = json!({"type": "tool/result", "seq": 3, "data": {}});
    assert!(p.event("s1", &other.to_string(), ROOT).is_empty());
    assert!(p.event("s1", "not json", ROOT).is_empty());
    assert!(p.event("nobody", &other.to_string(), ROOT).is_empty());
}

// SEC-03: a word split across pieces (a secret the model repeats) is printed in one line, so
// the kernel's output redactions see it whole; a word over the cap is not held.
#[test]
fn a_word_split_across_pieces_is_printed_whole() {
    let mut p = Partial::default();
    let mut lines = p.piece(&piece(0, 0, false, "the key is sk-te"), ROOT);
    lines.extend(p.piece(&piece(0, 0, false, "st-4c1d-can"), ROOT));
    lines.extend(p.piece(&piece(0, 0, false, "ary, right"), ROOT));
    let end = json!({"type": "step/end", "seq": 9, "data": {}});
    lines.extend(p.event("s1", &end.to_string(), ROOT));
    let texts: Vec<String> = events(&lines)
        .iter()
        .filter_map(|e| e["delta"]["text"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(texts, ["the key is ", "sk-test-4c1d-canary, ", "right"]);
    let long = "x".repeat(MAX_HELD + 1);
    let lines = Partial::default().piece(&piece(0, 0, false, &long), ROOT);
    assert_eq!(events(&lines)[2]["delta"]["text"], long.as_str());
}
