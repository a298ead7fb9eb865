//! Decoding the backend's `load` answer (`SessionStore::load`, a [`StoredLog`]) into [`Loaded`].
//!
//! The core asks for `format: "jsonl-file"`. The JSONL backend answers `events_file: {path,
//! offset, len}`, the byte range of its checked record lines, which is read here from the file;
//! other backends answer `events_jsonl`, the records as JSON lines text. Either text is parsed
//! here straight into typed [`EventRecord`]s (in parallel chunks for large sessions) — no
//! generic `Value` per record on the way. A backend that answers only the `events` array is
//! still read as before. The lines of a range are trusted as checked by the backend, exactly
//! as `events_jsonl` is: each is still parsed as a typed record, nothing more.

use keel_plugin_api::services::session::{EventRecord, EventsFile, StoreError, StoredLog};

use crate::error::{Result, SessionError};
use crate::store::Loaded;
use crate::validate;

/// Below this many bytes of JSONL the records are parsed on the calling thread.
const PARALLEL_BYTES: usize = 1 << 20;

/// Decodes a `load` answer: its events as `events_file`, `events_jsonl` or `events`. An
/// `events_file` range is read here (blocking I/O).
///
/// # Errors
/// `SESSION_UNSUPPORTED` / `SESSION_CORRUPT` for the header (as [`validate::parse_header`]),
/// `SESSION_CORRUPT` for a record that is not an [`EventRecord`] or a malformed range,
/// `SESSION_IO` when the range cannot be read.
pub fn load_answer(log: StoredLog) -> Result<Loaded> {
    // The header through the same checks as a stored one (format version → UNSUPPORTED).
    let header = serde_json::to_value(&log.header)
        .map_err(|e| SessionError::corrupt(format!("header: {e}")))
        .and_then(|h| validate::parse_header(&h))?;
    let events = match (log.events_file, log.events_jsonl, log.events) {
        (Some(range), _, _) => parse_jsonl(&read_range(&range)?)?,
        (None, Some(text), _) => parse_jsonl(&text)?,
        (None, None, Some(events)) => events,
        (None, None, None) => Vec::new(),
    };
    Ok(Loaded {
        header,
        events,
        truncated: log.truncated,
    })
}

/// Reads exactly `len` bytes at `offset` of the file, as UTF-8 text.
fn read_range(range: &EventsFile) -> Result<String> {
    use std::os::unix::fs::FileExt;
    let path = &range.path;
    let io = |what: &str, e: std::io::Error| {
        SessionError::new(
            StoreError::Io,
            format!("cannot {what} session file {path}: {e}"),
        )
    };
    let len = usize::try_from(range.len).map_err(|_| {
        SessionError::corrupt(format!("events_file length {} is too large", range.len))
    })?;
    let file = std::fs::File::open(path).map_err(|e| io("open", e))?;
    let mut buf = vec![0; len];
    file.read_exact_at(&mut buf, range.offset)
        .map_err(|e| io("read the records of", e))?;
    String::from_utf8(buf)
        .map_err(|e| SessionError::corrupt(format!("records in {path} are not UTF-8: {e}")))
}

/// Parses JSON lines (one [`EventRecord`] per line, each line ending with `\n`).
///
/// # Errors
/// `SESSION_CORRUPT` naming the first bad line (1-based) and why.
pub fn parse_jsonl(text: &str) -> Result<Vec<EventRecord>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    if threads < 2 || text.len() < PARALLEL_BYTES {
        return parse_part(text, 0);
    }
    // Cut at newlines into `threads` parts of about equal size.
    let mut parts = Vec::with_capacity(threads);
    let mut start = 0;
    for i in 1..=threads {
        let target = (text.len() * i / threads).max(start);
        let end = if i == threads {
            text.len()
        } else {
            text[target..]
                .find('\n')
                .map_or(text.len(), |n| target + n + 1)
        };
        parts.push(&text[start..end]);
        start = end;
    }
    let results: Vec<Result<Vec<EventRecord>>> = std::thread::scope(|s| {
        let mut first_line = 0;
        let handles: Vec<_> = parts
            .iter()
            .map(|part| {
                let base = first_line;
                first_line += part.bytes().filter(|&b| b == b'\n').count();
                s.spawn(move || parse_part(part, base))
            })
            .collect();
        handles
            .into_iter()
            .zip(&parts)
            .map(|(h, part)| h.join().unwrap_or_else(|_| parse_part(part, 0)))
            .collect()
    });
    let mut all = Vec::new();
    for r in results {
        let part = r?;
        if all.is_empty() {
            all = part;
        } else {
            all.extend(part);
        }
    }
    Ok(all)
}

/// Parses one newline-aligned part whose first line is line `base + 1` of the whole text.
fn parse_part(part: &str, base: usize) -> Result<Vec<EventRecord>> {
    let mut out = Vec::with_capacity(part.len() / 128);
    let mut rest = part;
    let mut line_no = base;
    while !rest.is_empty() {
        line_no += 1;
        let (line, next) = match rest.find('\n') {
            Some(n) => (&rest[..n], &rest[n + 1..]),
            None => {
                return Err(SessionError::corrupt(format!(
                    "stored event line {line_no} does not end with a newline"
                )));
            }
        };
        let record = serde_json::from_str::<EventRecord>(line).map_err(|e| {
            SessionError::corrupt(format!("malformed stored event on line {line_no}: {e}"))
        })?;
        out.push(record);
        rest = next;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::user;

    fn jsonl(events: &[EventRecord]) -> String {
        let mut text = String::new();
        for e in events {
            text.push_str(&serde_json::to_string(e).unwrap());
            text.push('\n');
        }
        text
    }

    #[test]
    fn jsonl_parses_like_the_events_array_in_any_chunking() {
        let long = format!("x\ny \"z\" {}", "w".repeat(600));
        let events: Vec<EventRecord> = (0..3000).map(|i| user(i, &long)).collect();
        let text = jsonl(&events);
        assert!(text.len() > PARALLEL_BYTES);
        assert_eq!(parse_part(&text, 0).unwrap(), events);
        assert_eq!(parse_jsonl(&text).unwrap(), events);
        assert!(parse_jsonl("").unwrap().is_empty());
        assert!(parse_jsonl(text.trim_end()).is_err());
        // A bad line deep in a later chunk is named by its line in the whole text.
        let mut broken = jsonl(&events[..2500]);
        broken.push_str("{}\n");
        broken.push_str(&jsonl(&events[2500..]));
        let e = parse_jsonl(&broken).unwrap_err();
        assert!(e.message.contains("line 2501"), "{e}");
    }

    #[test]
    fn answer_prefers_events_jsonl_and_still_reads_events() {
        let header = crate::log::tests::header("s");
        let events: Vec<EventRecord> = (0..3).map(|i| user(i, "hi")).collect();
        let log = |events, events_jsonl, events_file, truncated| StoredLog {
            header: header.clone(),
            events,
            events_jsonl,
            events_file,
            truncated,
        };
        let torn = keel_plugin_api::services::session::TornTail {
            seq: 3,
            reason: "r".into(),
            path: "/p".into(),
            line: None,
            bytes: None,
            rows: None,
        };
        let a = load_answer(log(Some(events.clone()), None, None, None)).unwrap();
        let b = load_answer(log(None, Some(jsonl(&events)), None, Some(torn))).unwrap();
        assert_eq!((a.header.clone(), a.events.clone()), (b.header, b.events));
        assert_eq!((a.truncated, b.truncated.is_some()), (None, true));
        // `events_file`: the byte range of the lines in a file (here after a 7-byte prefix).
        let path = std::env::temp_dir().join(format!("keel-wire-{}.jsonl", std::process::id()));
        let text = jsonl(&events);
        std::fs::write(&path, format!("prefix\n{text}{{\"torn")).unwrap();
        let range = |len| EventsFile {
            path: path.to_string_lossy().into_owned(),
            offset: 7,
            len,
        };
        let c = load_answer(log(None, None, Some(range(text.len() as u64)), None));
        let past_the_end = load_answer(log(None, None, Some(range(1 << 20)), None));
        let _ = std::fs::remove_file(&path);
        assert_eq!(c.unwrap().events, a.events);
        assert!(past_the_end.unwrap_err().is(StoreError::Io));
    }
}
