//! The contract case about the two forms of a `load` answer: the default `events` array and,
//! on request (`format: "jsonl"`), `events_jsonl` — the same records as JSON lines text. Both
//! must carry identical records, header and `truncated`, intact and after a torn tail. A
//! `format: "jsonl-file"` request gets either `events_jsonl` or `events_file` (the byte range
//! of the checked lines in the backend's file), again with identical records.

use serde_json::{Value, json};

use crate::cases::{root_in, ses02_events, temp_root};
use crate::fixtures::{append_ok, expect_code, full_header, header, open_turn, turn};
use crate::{Backend, Damage, Failure};

fn load_as(
    store: &dyn crate::ContractStore,
    id: &str,
    format: Option<&str>,
) -> Result<Value, Failure> {
    let mut args = json!({ "session_id": id, "repair": false });
    if let Some(f) = format {
        args["format"] = json!(f);
    }
    store.call("load", args)
}

/// Splits `events_jsonl` into its records, checking that every line ends with a newline.
fn lines(answer: &Value) -> Value {
    let text = answer["events_jsonl"]
        .as_str()
        .unwrap_or_else(|| panic!("no events_jsonl string in {answer}"));
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "last line unterminated"
    );
    let records: Vec<Value> = text
        .split_terminator('\n')
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("line {l:?}: {e}")))
        .collect();
    Value::Array(records)
}

fn same_in_both_forms(store: &dyn crate::ContractStore, id: &str) -> Value {
    let plain = load_as(store, id, None).expect("load");
    let explicit = load_as(store, id, Some("events")).expect("load events");
    assert_eq!(plain, explicit, "format \"events\" is the default");
    let jsonl = load_as(store, id, Some("jsonl")).expect("load jsonl");
    assert!(
        jsonl.get("events").is_none(),
        "jsonl answer also has events"
    );
    assert!(
        plain.get("events_jsonl").is_none(),
        "events answer also has events_jsonl"
    );
    assert_eq!(lines(&jsonl), plain["events"]);
    assert_eq!(jsonl["header"], plain["header"]);
    assert_eq!(jsonl["truncated"], plain["truncated"]);
    let file = load_as(store, id, Some("jsonl-file")).expect("load jsonl-file");
    assert!(file.get("events").is_none(), "jsonl-file answer has events");
    let text = match &file["events_file"] {
        Value::Null => lines(&file),
        range => lines(&json!({ "events_jsonl": read_range(range) })),
    };
    assert_eq!(text, plain["events"], "jsonl-file records");
    assert_eq!(file["header"], plain["header"]);
    assert_eq!(file["truncated"], plain["truncated"]);
    plain
}

/// The text of an `events_file` range `{path, offset, len}`.
fn read_range(range: &Value) -> String {
    use std::os::unix::fs::FileExt;
    let path = range["path"].as_str().expect("events_file.path");
    let offset = range["offset"].as_u64().expect("events_file.offset");
    let len = range["len"].as_u64().expect("events_file.len");
    let file = std::fs::File::open(path).expect("open events_file");
    let mut buf = vec![0; usize::try_from(len).expect("len")];
    file.read_exact_at(&mut buf, offset).expect("read range");
    String::from_utf8(buf).expect("UTF-8 range")
}

/// `events_jsonl` round-trips exactly what `events` carries: every field, a torn tail's cut,
/// an empty session; an unknown format is refused.
pub fn events_jsonl_matches_events(backend: &dyn Backend) {
    let dir = temp_root();
    let root = root_in(&dir);
    let events = ses02_events();
    {
        let store = backend.open(&root);
        append_ok(&*store, "fork-1", Some(full_header("fork-1")), &events, 0);
        append_ok(&*store, "s1", Some(header("s1")), &turn(0), 0);
        append_ok(&*store, "s1", None, &open_turn(8), 8);
        append_ok(&*store, "empty", Some(header("empty")), &[], 0);
    }
    backend.damage(&root, "s1", Damage::TornTail);
    let store = backend.open(&root);
    assert_eq!(
        same_in_both_forms(&*store, "fork-1")["events"],
        json!(events)
    );
    let torn = same_in_both_forms(&*store, "s1");
    assert_eq!(torn["truncated"]["seq"], 10, "{torn}");
    assert_eq!(same_in_both_forms(&*store, "empty")["events"], json!([]));
    expect_code(
        load_as(&*store, "fork-1", Some("yaml")),
        "INVALID_ARGUMENTS",
        "unknown load format",
    );
}
