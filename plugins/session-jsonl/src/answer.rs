//! The `load` answer of the JSONL store (`SessionStore::load`), in the form the request asks:
//!
//! - `events` (default): the checked lines parsed into an array of records;
//! - `jsonl`: `events_jsonl`, the checked lines verbatim as one string;
//! - `jsonl-file`: `events_file: {path, offset, len}`, the byte range of the checked, committed
//!   lines in the session file itself (a torn tail lies past it, cut or not), so a caller in
//!   the same process reads them straight from the file instead of through a 100 MiB JSON
//!   string. A path that is not UTF-8 cannot be named in JSON; then the `jsonl` form is used.

use keel_plugin_api::services::session::{EventsFile, LoadStored, StoredLog, TornTail};

use crate::args::{self, LoadFormat};
use crate::error::JsonlError;
use crate::scan;
use crate::store::JsonlStore;

/// Answers one `load` call: the header, the events in the asked form, and `truncated`, the
/// torn tail `{seq, reason, path, line, bytes}` — what a repair cuts (or cut, with `repair`):
/// the file, the line number and its bytes.
///
/// # Errors
/// The request's and the load's errors ([`JsonlStore::load`]).
pub fn load(store: &JsonlStore, request: LoadStored) -> Result<StoredLog, JsonlError> {
    let a = args::load(request)?;
    let (path, mut bytes, scan) = store.check(&a.session_id, a.repair)?;
    let torn_bytes = (bytes.len() as u64).saturating_sub(scan.committed_len);
    let truncated = scan.torn.as_ref().map(|t| TornTail {
        seq: t.seq,
        reason: t.reason.clone(),
        path: path.to_string_lossy().into_owned(),
        line: Some(t.line as u64),
        bytes: Some(torn_bytes),
        rows: None,
    });
    let mut answer = StoredLog {
        header: scan.header.clone(),
        events: None,
        events_jsonl: None,
        events_file: None,
        truncated,
    };
    let file_path = path.to_str().filter(|_| a.format == LoadFormat::JsonlFile);
    match (a.format, file_path) {
        (LoadFormat::JsonlFile, Some(file_path)) => {
            let offset = scan.body_start as u64;
            answer.events_file = Some(EventsFile {
                path: file_path.to_owned(),
                offset,
                len: scan.committed_len - offset,
            });
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
            answer.events_jsonl = Some(text);
        }
        (LoadFormat::Events, _) => {
            let events = scan::values(scan.body(&bytes)).map_err(|detail| JsonlError::Corrupt {
                path: path.clone(),
                line: 0,
                detail,
            })?;
            answer.events = Some(events);
        }
    }
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::FileExt;
    use std::sync::Arc;

    use keel_plugin_api::services::session::{
        AppendBatch, EventRecord, FORMAT_VERSION, HeaderKind, SessionHeader,
    };
    use keel_session_store_kit::Backend;
    use serde_json::json;

    use super::*;
    use crate::store::JsonlOptions;

    fn header(id: &str) -> SessionHeader {
        SessionHeader {
            kind: HeaderKind::Session,
            version: FORMAT_VERSION,
            id: id.to_owned(),
            created_at: 1,
            cwd: "/".into(),
            parent_session: None,
            seed_length: None,
            parent_call_id: None,
            origin: None,
            delegation_depth: 0,
        }
    }

    fn ev(seq: u64, kind: &str) -> EventRecord {
        serde_json::from_value(json!({"seq": seq, "time": 1, "type": kind, "data": {"n": seq}}))
            .unwrap()
    }

    fn range(answer: &StoredLog) -> Vec<EventRecord> {
        let f = answer.events_file.as_ref().unwrap();
        let file = std::fs::File::open(&f.path).unwrap();
        let mut buf = vec![0; f.len as usize];
        file.read_exact_at(&mut buf, f.offset).unwrap();
        let text = String::from_utf8(buf).unwrap();
        assert!(text.is_empty() || text.ends_with('\n'));
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn batch(id: &str, events: &[EventRecord]) -> AppendBatch {
        AppendBatch {
            session_id: id.into(),
            header: Some(header(id)),
            events: events.iter().cloned().map(Arc::new).collect(),
            expected_next_seq: 0,
        }
    }

    #[test]
    fn file_range_holds_the_events_and_excludes_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let store = JsonlStore::new(dir.path(), JsonlOptions { fsync: false });
        let events: Vec<EventRecord> = (0..3).map(|i| ev(i, "x")).collect();
        Backend::append(&store, batch("s", &events)).unwrap();
        Backend::append(&store, batch("e", &[])).unwrap();
        let path = store.session_path("s");
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(br#"{"seq":3,"time":1,"ty"#);
        std::fs::write(&path, &bytes).unwrap();
        for repair in [false, true] {
            let load = |format: LoadFormat| {
                let request = LoadStored {
                    session_id: "s".into(),
                    repair,
                    format,
                };
                Backend::load(&store, request).unwrap()
            };
            let (file, plain) = (load(LoadFormat::JsonlFile), load(LoadFormat::Events));
            assert!(file.events.is_none() && file.events_jsonl.is_none());
            assert_eq!(Some(range(&file)), plain.events);
            assert_eq!(plain.events.as_ref(), Some(&events));
            assert_eq!(file.header, plain.header);
            let torn = file.truncated.unwrap();
            assert_eq!((torn.seq, torn.line, torn.bytes), (3, Some(5), Some(21)));
            assert_eq!(torn.path, path.to_string_lossy());
        }
        let e = LoadStored {
            session_id: "e".into(),
            repair: false,
            format: LoadFormat::JsonlFile,
        };
        assert!(range(&Backend::load(&store, e).unwrap()).is_empty());
    }
}
