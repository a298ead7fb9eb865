//! The `load` answer of the JSONL store (`StoreMethod::Load`), in the form the request asks:
//!
//! - `events` (default): the checked lines parsed into an array of records;
//! - `jsonl`: `events_jsonl`, the checked lines verbatim as one string;
//! - `jsonl-file`: `events_file: {path, offset, len}`, the byte range of the checked, committed
//!   lines in the session file itself (a torn tail lies past it, cut or not), so a caller in
//!   the same process reads them straight from the file instead of through a 100 MiB JSON
//!   string. A path that is not UTF-8 cannot be named in JSON; then the `jsonl` form is used.

use serde_json::{Map, Value, json};

use crate::args::{self, LoadFormat};
use crate::error::JsonlError;
use crate::scan;
use crate::store::JsonlStore;

/// Answers one `load` call: `{header, events | events_jsonl | events_file, truncated}`, where
/// `truncated` is `null` or the torn tail `{seq, reason, path, line, bytes}` — what a repair
/// cuts (or cut, with `repair`): the file, the line number and its bytes.
///
/// # Errors
/// The request's and the load's errors ([`JsonlStore::load`]).
pub fn load(store: &JsonlStore, args: Value) -> Result<Value, JsonlError> {
    let a = args::load(args)?;
    let (path, mut bytes, scan) = store.check(&a.session_id, a.repair)?;
    let torn_bytes = (bytes.len() as u64).saturating_sub(scan.committed_len);
    let to_json = |e: serde_json::Error| JsonlError::Invalid(format!("encode: {e}"));
    // Built by hand: `json!` would deep-copy the events through `to_value`.
    let mut answer = Map::new();
    let header = serde_json::to_value(&scan.header).map_err(to_json)?;
    answer.insert("header".into(), header);
    let file_path = path.to_str().filter(|_| a.format == LoadFormat::JsonlFile);
    match (a.format, file_path) {
        (LoadFormat::JsonlFile, Some(file_path)) => {
            let offset = scan.body_start as u64;
            let len = scan.committed_len - offset;
            answer.insert(
                "events_file".into(),
                json!({ "path": file_path, "offset": offset, "len": len }),
            );
        }
        (LoadFormat::Jsonl | LoadFormat::JsonlFile, _) => {
            bytes.truncate(scan.committed_len as usize);
            bytes.drain(..scan.body_start);
            // Every kept line was checked as JSON, so this is valid UTF-8.
            let text = String::from_utf8(bytes).map_err(|e| JsonlError::Corrupt {
                path: path.clone(),
                line: 0,
                detail: format!("records are not UTF-8: {e}"),
            })?;
            answer.insert("events_jsonl".into(), Value::String(text));
        }
        (LoadFormat::Events, _) => {
            let events = scan::values(scan.body(&bytes)).map_err(|detail| JsonlError::Corrupt {
                path: path.clone(),
                line: 0,
                detail,
            })?;
            answer.insert("events".into(), Value::Array(events));
        }
    }
    let truncated = match &scan.torn {
        Some(t) => json!({
            "seq": t.seq,
            "reason": t.reason,
            "path": path.to_string_lossy(),
            "line": t.line,
            "bytes": torn_bytes,
        }),
        None => Value::Null,
    };
    answer.insert("truncated".into(), truncated);
    Ok(Value::Object(answer))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::FileExt;

    use keel_plugin_api::services::session::SessionHeader;
    use keel_plugin_api::services::session::{EventRecord, FORMAT_VERSION, HeaderKind};

    use super::*;
    use crate::store::JsonlOptions;

    fn header(id: &str) -> Value {
        serde_json::to_value(SessionHeader {
            kind: HeaderKind::Session,
            version: FORMAT_VERSION,
            id: id.to_owned(),
            created_at: 1,
            cwd: "/".into(),
            parent_session: None,
            seed_length: None,
            origin: None,
            delegation_depth: 0,
        })
        .unwrap()
    }

    fn ev(seq: u64, kind: &str) -> EventRecord {
        serde_json::from_value(json!({"seq": seq, "time": 1, "type": kind, "data": {"n": seq}}))
            .unwrap()
    }

    fn range(answer: &Value) -> Vec<Value> {
        let f = &answer["events_file"];
        let file = std::fs::File::open(f["path"].as_str().unwrap()).unwrap();
        let mut buf = vec![0; f["len"].as_u64().unwrap() as usize];
        file.read_exact_at(&mut buf, f["offset"].as_u64().unwrap())
            .unwrap();
        let text = String::from_utf8(buf).unwrap();
        assert!(text.is_empty() || text.ends_with('\n'));
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn file_range_holds_the_events_and_excludes_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let store = JsonlStore::new(dir.path(), JsonlOptions { fsync: false });
        let events: Vec<EventRecord> = (0..3).map(|i| ev(i, "x")).collect();
        let append = json!({"session_id": "s", "header": header("s"), "events": events,
            "expected_next_seq": 0});
        store.call("append", append).unwrap();
        let empty = json!({"session_id": "e", "header": header("e"), "events": [],
            "expected_next_seq": 0});
        store.call("append", empty).unwrap();
        let path = store.session_path("s");
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(br#"{"seq":3,"time":1,"ty"#);
        std::fs::write(&path, &bytes).unwrap();
        for repair in [false, true] {
            let load = |format: &str| {
                let args = json!({"session_id": "s", "repair": repair, "format": format});
                store.call("load", args).unwrap()
            };
            let (file, plain) = (load("jsonl-file"), load("events"));
            assert!(file.get("events").is_none() && file.get("events_jsonl").is_none());
            assert_eq!(Value::Array(range(&file)), plain["events"]);
            assert_eq!(plain["events"], json!(events));
            assert_eq!(
                (&file["header"], &file["truncated"]["seq"]),
                (&plain["header"], &json!(3))
            );
            let torn = &file["truncated"];
            assert_eq!((&torn["line"], &torn["bytes"]), (&json!(5), &json!(21)));
            assert_eq!(torn["path"], json!(path.to_string_lossy()));
        }
        let e = json!({"session_id": "e", "format": "jsonl-file"});
        assert!(range(&store.call("load", e).unwrap()).is_empty());
    }
}
