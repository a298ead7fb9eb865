//! Unit tests of the stubs: bounded text, cold references, exact head and tail.

use serde_json::json;

use super::*;

fn ev(seq: u64, kind: &str, data: Value) -> EventRecord {
    EventRecord {
        seq,
        time: 0,
        kind: kind.into(),
        data,
        ignorable: false,
        surface_op: None,
        source_event_seqs: None,
    }
}

fn group(seq: u64, content: &str) -> [EventRecord; 2] {
    [
        ev(
            seq,
            "assistant/message",
            json!({"message": {"content": "", "tool_calls": [{"id": format!("c{seq}"), "name": "read_file", "arguments": "{\"path\":\"f\"}"}]}}),
        ),
        ev(
            seq + 2,
            "tool/result",
            json!({"call_id": format!("c{seq}"), "content": content}),
        ),
    ]
}

#[test]
fn a_sink_stub_names_the_newest_refs_and_stays_bounded() {
    let events: Vec<EventRecord> = (0..40)
        .flat_map(|k| group(10 + 3 * k, "x".repeat(8000).as_str()))
        .collect();
    let sunk = sunk_from(&events, &[]);
    assert_eq!(sunk.count(), 40);
    assert_eq!(sunk.items[0].what, "read_file {\"path\":\"f\"}");
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    let stub = sink_event(&seqs, &sunk).unwrap();
    let data: Value = stub.data.as_ref().unwrap().parse().unwrap();
    let text = data["message"]["content"].as_str().unwrap();
    assert!(text.contains("cold:129 read_file"), "{text}");
    assert!(
        !text.contains("cold:12 "),
        "only the newest are named: {text}"
    );
    assert!(text.contains("…and 35 more"), "{text}");
    assert!(text.len() < STUB_BYTES as usize, "{}", text.len());
    assert_eq!(data["context"]["count"], 40);
    assert_eq!(data["context"]["bytes"], 320_000);
    assert_eq!(
        stub.surface_op,
        Some(SurfaceOp::Replace {
            op: ReplaceTag::Replace,
            start: 10,
            end: 129
        })
    );
}

#[test]
fn an_earlier_stub_in_a_run_carries_its_count_on() {
    let mut events = vec![ev(
        50,
        "assistant/message",
        json!({"message": {"content": "[keel context: …]"}, "context": {"strategy": "sink", "count": 7, "bytes": 700}}),
    )];
    events.extend(group(20, "abc"));
    let sunk = sunk_from(&events, &[]);
    assert_eq!((sunk.count(), sunk.bytes()), (8, 703));
}

#[test]
fn a_capped_result_in_a_run_sinks_its_original_and_few_items_need_no_tail_line() {
    let [call, _] = group(10, "unused");
    let mut capped = ev(
        20,
        "tool/result",
        json!({"call_id": "c10", "content": "head…tail", "context": {"strategy": "cap", "ref": 12, "bytes": 99}}),
    );
    capped.surface_op = None;
    let original = ev(
        12,
        "tool/result",
        json!({"call_id": "c10", "content": "the whole original"}),
    );
    let sunk = sunk_from(&[call, capped], std::slice::from_ref(&original));
    assert_eq!(sunk.items.len(), 1);
    assert_eq!(sunk.items[0].seq, 12);
    assert_eq!(sunk.items[0].content, "the whole original");
    assert_eq!(sunk.items[0].what, "read_file {\"path\":\"f\"}");
    assert_eq!(sunk.earlier_count, 0);
    let stub = sink_event(&[10, 20], &sunk).unwrap();
    let text = stub.data.unwrap().as_str().to_owned();
    assert!(!text.contains("more (coldcontext_search"), "{text}");
}

#[test]
fn long_arguments_are_clipped_on_a_char_boundary() {
    let args = format!("{{\"pp\":\"{}\"}}", "é".repeat(100));
    let call = ev(
        1,
        "assistant/message",
        json!({"message": {"content": "", "tool_calls": [{"id": "c", "name": "t", "arguments": args}]}}),
    );
    let result = ev(3, "tool/result", json!({"call_id": "c", "content": "x"}));
    let what = &sunk_from(&[call, result], &[]).items[0].what;
    // "t " + 80 bytes of the arguments, backed off to a boundary: `{"pp":"` is 7, then é's
    // (byte 80 is inside the 37th).
    assert_eq!(what, &format!("t {{\"pp\":\"{}…", "é".repeat(36)));
    let short = ev(
        1,
        "assistant/message",
        json!({"message": {"content": "", "tool_calls": [{"id": "c", "name": "t", "arguments": "{}"}]}}),
    );
    let result = ev(3, "tool/result", json!({"call_id": "c", "content": "x"}));
    assert_eq!(sunk_from(&[short, result], &[]).items[0].what, "t {}");
}

#[test]
fn head_and_tail_back_off_to_char_boundaries_and_the_omitted_count_is_exact() {
    // One ASCII byte before and one after the two-byte characters put both cut points inside
    // one: cap/2 = 2048 and len − cap/4 = 6002 − 1024 = 4978 are both inside an `é`.
    let content = format!("x{}y", "é".repeat(3000));
    let original = ev(
        4,
        "tool/result",
        json!({"call_id": "c", "content": content}),
    );
    let capped = cap_event(&original, 4096).unwrap().unwrap();
    let data: Value = capped.data.as_ref().unwrap().parse().unwrap();
    let text = data["content"].as_str().unwrap();
    let head = text.split("\n\n[keel context:").next().unwrap();
    let tail = text.rsplit("]\n\n").next().unwrap();
    assert_eq!(head.len(), 2047, "the head backs off to 2047");
    assert_eq!(tail.len(), 1023, "the tail starts at 4979");
    assert!(content.starts_with(head) && content.ends_with(tail));
    let omitted = content.len() - head.len() - tail.len();
    assert!(
        text.contains(&format!(
            "[keel context: {omitted} bytes of this 6002-byte result"
        )),
        "{text}"
    );
}

#[test]
fn a_capped_result_keeps_an_exact_head_and_tail_on_char_boundaries() {
    let content = format!("{}{}{}", "é".repeat(3000), "MIDDLE", "ü".repeat(3000));
    let original = ev(
        9,
        "tool/result",
        json!({"call_id": "c", "content": content, "is_error": true}),
    );
    let capped = cap_event(&original, 4096).unwrap().unwrap();
    let data: Value = capped.data.as_ref().unwrap().parse().unwrap();
    let text = data["content"].as_str().unwrap();
    assert!(content.starts_with(text.split("\n\n[keel context:").next().unwrap()));
    assert!(content.ends_with(text.rsplit("]\n\n").next().unwrap()));
    assert!(!text.contains("MIDDLE"));
    assert!(
        text.contains("\"ref\":\"cold:9\",\"offset\":2048"),
        "{text}"
    );
    assert_eq!(data["is_error"], true);
    assert_eq!(capped.source_event_seqs, Some(vec![9]));
    let small = ev(
        9,
        "tool/result",
        json!({"call_id": "c", "content": "short"}),
    );
    assert!(cap_event(&small, 4096).unwrap().is_none());
}

#[test]
fn sizes_read_like_sizes() {
    assert_eq!(size(312), "312 B");
    assert_eq!(size(8192), "8.0 KiB");
    assert_eq!(size(3 * 1_048_576), "3.0 MiB");
}
