//! Reading a session file: the header line (its version checked from the raw JSON before
//! anything else, SES-09), then one envelope per line with `seq` equal to its position.
//!
//! The only defect that is not corruption is a torn tail: the **last** line is incomplete (no
//! newline), unparsable, or out of sequence. Every earlier line is followed by a valid one, so
//! it was committed by a later fsynced batch and cannot be torn; a defect there (including any
//! line before the last `turn/end`) is `SESSION_CORRUPT`, naming the file and line.
//!
//! Each line is checked on its raw text ([`crate::line::check_line`]: the envelope shape and
//! full JSON syntax of `data`, without building a `Value`); the committed lines are then handed
//! over verbatim ([`Scan::body`]) or, for callers of the `events` form, parsed ([`values`]).

use std::path::Path;

use keel_plugin_api::services::session::{FORMAT_VERSION, SessionHeader};
use serde_json::Value;

use crate::error::JsonlError;
use crate::line::check_line;

/// A torn last line that a load cuts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Torn {
    /// The seq the torn record would have had (= number of events kept).
    pub seq: u64,
    /// Why the line is not a committed record.
    pub reason: String,
    /// Its 1-based line number.
    pub line: usize,
}

/// A parsed session file.
#[derive(Debug, Clone)]
pub struct Scan {
    /// The header (line 1).
    pub header: SessionHeader,
    /// Byte offset of the first event line (just after the header's newline).
    pub body_start: usize,
    /// Number of committed events (checked envelopes, seq 0.. in order).
    pub count: u64,
    /// Byte length up to the end of the last committed line.
    pub committed_len: u64,
    /// The torn last line, when there is one.
    pub torn: Option<Torn>,
}

/// Checks the header line's version from the raw JSON, then its shape and id.
pub fn header(path: &Path, id: &str, line: &[u8]) -> Result<SessionHeader, JsonlError> {
    let corrupt = |detail: String| JsonlError::Corrupt {
        path: path.to_owned(),
        line: 1,
        detail,
    };
    let raw: Value =
        serde_json::from_slice(line).map_err(|e| corrupt(format!("header is not JSON: {e}")))?;
    match raw.get("version") {
        Some(v) if v.as_u64() == Some(u64::from(FORMAT_VERSION)) => {}
        Some(v) => {
            return Err(JsonlError::Unsupported {
                path: path.to_owned(),
                found: v.to_string(),
                expected: FORMAT_VERSION,
            });
        }
        None => return Err(corrupt("header has no version".into())),
    }
    let header: SessionHeader =
        serde_json::from_value(raw).map_err(|e| corrupt(format!("invalid header: {e}")))?;
    if header.id != id {
        return Err(corrupt(format!(
            "header id '{}' is not the file's id '{id}'",
            header.id
        )));
    }
    Ok(header)
}

/// Parses a whole session file.
pub fn scan(path: &Path, id: &str, bytes: &[u8]) -> Result<Scan, JsonlError> {
    let Some(header_end) = bytes.iter().position(|&b| b == b'\n') else {
        // Materialisation is atomic, so a header without its newline is damage, not a tear;
        // still check the version first so a foreign format is reported as such.
        header(path, id, bytes)?;
        return Err(JsonlError::Corrupt {
            path: path.to_owned(),
            line: 1,
            detail: "header line has no newline".into(),
        });
    };
    let header = header(path, id, &bytes[..header_end])?;
    let body_start = header_end + 1;
    let lines = split_lines(bytes, body_start);
    let parsed = parallel(&lines, |l| check_line(&bytes[l.start..l.end]));
    let mut count = 0_u64;
    for (i, (line, result)) in lines.iter().zip(parsed).enumerate() {
        let expected = count;
        let defect = match result {
            _ if !line.terminated => Some("incomplete last line (no newline)".to_owned()),
            Ok(seq) if seq == expected => {
                count += 1;
                None
            }
            Ok(seq) => Some(format!("seq {seq} where {expected} was expected")),
            Err(reason) => Some(reason),
        };
        if let Some(reason) = defect {
            let line_no = i + 2;
            if i + 1 < lines.len() {
                return Err(JsonlError::Corrupt {
                    path: path.to_owned(),
                    line: line_no,
                    detail: format!("{reason}, followed by more lines"),
                });
            }
            return Ok(Scan {
                header,
                body_start,
                count,
                committed_len: line.start as u64,
                torn: Some(Torn {
                    seq: expected,
                    reason,
                    line: line_no,
                }),
            });
        }
    }
    Ok(Scan {
        header,
        body_start,
        count,
        committed_len: bytes.len() as u64,
        torn: None,
    })
}

/// One line of the body: `bytes[start..end]`, and whether a newline follows it.
struct Line {
    start: usize,
    end: usize,
    terminated: bool,
}

fn split_lines(bytes: &[u8], mut offset: usize) -> Vec<Line> {
    let mut lines = Vec::with_capacity(bytes.len().saturating_sub(offset) / 100);
    while offset < bytes.len() {
        match bytes[offset..].iter().position(|&b| b == b'\n') {
            Some(n) => {
                lines.push(Line {
                    start: offset,
                    end: offset + n,
                    terminated: true,
                });
                offset += n + 1;
            }
            None => {
                lines.push(Line {
                    start: offset,
                    end: bytes.len(),
                    terminated: false,
                });
                offset = bytes.len();
            }
        }
    }
    lines
}

impl Scan {
    /// The committed event lines of the scanned `bytes`, verbatim (each ends with a newline).
    pub fn body<'a>(&self, bytes: &'a [u8]) -> &'a [u8] {
        &bytes[self.body_start..self.committed_len as usize]
    }
}

/// Parses checked event lines (`body`: newline-terminated) into `Value`s, for the `events`
/// form of a load answer.
///
/// # Errors
/// The first line that does not parse (cannot happen for a body that [`scan`] checked).
pub fn values(body: &[u8]) -> Result<Vec<Value>, String> {
    let lines = split_lines(body, 0);
    parallel(&lines, |l| {
        serde_json::from_slice::<Value>(&body[l.start..l.end])
    })
    .into_iter()
    .collect::<Result<_, _>>()
    .map_err(|e| format!("unparsable record: {e}"))
}

/// Runs `f` over every line, on up to 4 threads for large files (a cold load is parse-bound).
fn parallel<T: Send>(lines: &[Line], f: impl Fn(&Line) -> T + Sync) -> Vec<T> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    if threads < 2 || lines.len() < 50_000 {
        return lines.iter().map(&f).collect();
    }
    let chunk = lines.len().div_ceil(threads);
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> = lines
            .chunks(chunk)
            .map(|part| s.spawn(move || part.iter().map(f).collect::<Vec<_>>()))
            .collect();
        let mut all = Vec::with_capacity(lines.len());
        for (h, part) in handles.into_iter().zip(lines.chunks(chunk)) {
            match h.join() {
                Ok(results) => all.extend(results),
                // A parser thread cannot panic on input; if it did, redo its part here.
                Err(_) => all.extend(part.iter().map(f)),
            }
        }
        all
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = r#"{"type":"session","version":0,"id":"s","created_at":1,"cwd":"/"}"#;

    fn ev(seq: u64, kind: &str) -> String {
        format!(r#"{{"seq":{seq},"time":1,"type":"{kind}","data":{{}}}}"#)
    }

    fn file(lines: &[String], tail: &str) -> Vec<u8> {
        let mut s = format!("{HEADER}\n");
        for l in lines {
            s.push_str(l);
            s.push('\n');
        }
        s.push_str(tail);
        s.into_bytes()
    }

    #[test]
    fn clean_file_has_no_torn_tail() {
        let bytes = file(&[ev(0, "turn/start"), ev(1, "turn/end")], "");
        let s = scan(Path::new("/x/s.jsonl"), "s", &bytes).unwrap();
        assert_eq!(s.count, 2);
        assert_eq!(values(s.body(&bytes)).unwrap().len(), 2);
        assert_eq!(s.committed_len, bytes.len() as u64);
        assert!(s.torn.is_none());
    }

    #[test]
    fn a_parsable_last_line_without_newline_is_torn() {
        let bytes = file(&[ev(0, "turn/start")], &ev(1, "turn/end"));
        let s = scan(Path::new("/x/s.jsonl"), "s", &bytes).unwrap();
        assert_eq!(s.count, 1);
        let torn = s.torn.unwrap();
        assert_eq!((torn.seq, torn.line), (1, 3));
        assert_eq!(
            &bytes[s.committed_len as usize..],
            ev(1, "turn/end").as_bytes()
        );
    }

    #[test]
    fn an_empty_line_in_the_middle_is_corrupt() {
        let bytes = file(&[ev(0, "turn/start"), String::new(), ev(1, "turn/end")], "");
        let e = scan(Path::new("/x/s.jsonl"), "s", &bytes).unwrap_err();
        assert!(matches!(e, JsonlError::Corrupt { line: 3, .. }), "{e}");
    }

    #[test]
    fn foreign_version_wins_over_a_broken_header() {
        let bytes = br#"{"type":"session","version":7,"id":"s","bogus":true}"#;
        let e = scan(Path::new("/x/s.jsonl"), "s", bytes).unwrap_err();
        assert!(matches!(e, JsonlError::Unsupported { .. }), "{e}");
    }
}
