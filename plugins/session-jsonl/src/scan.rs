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

use keel_plugin_api::services::session::{EventRecord, FORMAT_VERSION, SessionHeader};
use keel_session_store_kit::KitError;
use serde_json::Value;

use crate::error::JsonlError;
use crate::line::check_line;

/// Below this many body bytes a session file is checked on the calling thread.
const PARALLEL_BYTES: usize = 1 << 20;

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
            return Err(KitError::Unsupported {
                path: path.to_owned(),
                found: v.to_string(),
                expected: FORMAT_VERSION,
            }
            .into());
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
    let parts = check_parts(bytes, body_start);
    let total: u64 = parts.iter().map(|p| p.lines).sum();
    let mut base = 0_u64;
    for part in parts {
        let Some(defect) = part.defect else {
            base += part.lines;
            continue;
        };
        let index = base + defect.index;
        let line_no = usize::try_from(index)
            .unwrap_or(usize::MAX)
            .saturating_add(2);
        if index + 1 < total {
            return Err(JsonlError::Corrupt {
                path: path.to_owned(),
                line: line_no,
                detail: format!("{}, followed by more lines", defect.reason),
            });
        }
        return Ok(Scan {
            header,
            body_start,
            count: index,
            committed_len: defect.start as u64,
            torn: Some(Torn {
                seq: index,
                reason: defect.reason,
                line: line_no,
            }),
        });
    }
    Ok(Scan {
        header,
        body_start,
        count: total,
        committed_len: bytes.len() as u64,
        torn: None,
    })
}

/// The first defective line of a part: its index within the part, where it starts, and why.
struct Defect {
    index: u64,
    start: usize,
    reason: String,
}

/// What checking one newline-aligned part of the body found.
struct Part {
    /// Lines in the part (a last line without newline counts).
    lines: u64,
    defect: Option<Defect>,
}

/// Checks the body `bytes[body_start..]` in newline-aligned parts, on up to 4 threads for
/// large files (a cold load is parse-bound). Each part's first line index is known before it
/// is checked (newlines are counted first), so the workers check `seq` against the line's
/// position themselves and return only their first defect: no per-line results, and no large
/// allocation on a worker thread.
fn check_parts(bytes: &[u8], body_start: usize) -> Vec<Part> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    let body_len = bytes.len() - body_start;
    let n = if body_len < PARALLEL_BYTES {
        1
    } else {
        threads
    };
    let mut bounds = Vec::with_capacity(n + 1);
    bounds.push(body_start);
    for i in 1..n {
        let target = (body_start + body_len * i / n).max(bounds[i - 1]);
        let end = bytes[target..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(bytes.len(), |k| target + k + 1);
        bounds.push(end);
    }
    bounds.push(bytes.len());
    let mut bases = Vec::with_capacity(n);
    let mut base = 0_u64;
    for w in bounds.windows(2) {
        bases.push(base);
        let part = &bytes[w[0]..w[1]];
        base += part.iter().filter(|&&b| b == b'\n').count() as u64;
        base += u64::from(part.last().is_some_and(|&b| b != b'\n'));
    }
    let check = |i: usize| check_part(bytes, bounds[i], bounds[i + 1], bases[i]);
    if n == 1 {
        return vec![check(0)];
    }
    std::thread::scope(|s| {
        let check = &check;
        let handles: Vec<_> = (0..n).map(|i| s.spawn(move || check(i))).collect();
        handles
            .into_iter()
            .enumerate()
            // A checker thread cannot panic on input; if it did, redo its part here.
            .map(|(i, h)| h.join().unwrap_or_else(|_| check(i)))
            .collect()
    })
}

/// Checks the lines of `bytes[start..end]`, the first of which is body line `base` (0-based):
/// each must end with a newline, pass [`check_line`] and carry `seq` equal to its index.
/// Stops at the first defect.
fn check_part(bytes: &[u8], start: usize, end: usize, base: u64) -> Part {
    let mut offset = start;
    let mut index = 0_u64;
    while offset < end {
        let (line_end, terminated) = match bytes[offset..end].iter().position(|&b| b == b'\n') {
            Some(k) => (offset + k, true),
            None => (end, false),
        };
        let expected = base + index;
        let reason = match check_line(&bytes[offset..line_end]) {
            _ if !terminated => Some("incomplete last line (no newline)".to_owned()),
            Ok(seq) if seq == expected => None,
            Ok(seq) => Some(format!("seq {seq} where {expected} was expected")),
            Err(reason) => Some(reason),
        };
        if let Some(reason) = reason {
            // Count the lines after this one too: whether any follow decides torn vs corrupt.
            let after = &bytes[(line_end + 1).min(end)..end];
            let more = after.iter().filter(|&&b| b == b'\n').count() as u64
                + u64::from(after.last().is_some_and(|&b| b != b'\n'));
            return Part {
                lines: index + 1 + more,
                defect: Some(Defect {
                    index,
                    start: offset,
                    reason,
                }),
            };
        }
        index += 1;
        offset = line_end + 1;
    }
    Part {
        lines: index,
        defect: None,
    }
}

/// One line of the body: `bytes[start..end]`.
struct Line {
    start: usize,
    end: usize,
}

fn split_lines(bytes: &[u8], mut offset: usize) -> Vec<Line> {
    let mut lines = Vec::with_capacity(bytes.len().saturating_sub(offset) / 100);
    while offset < bytes.len() {
        match bytes[offset..].iter().position(|&b| b == b'\n') {
            Some(n) => {
                lines.push(Line {
                    start: offset,
                    end: offset + n,
                });
                offset += n + 1;
            }
            None => {
                lines.push(Line {
                    start: offset,
                    end: bytes.len(),
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
pub fn values(body: &[u8]) -> Result<Vec<EventRecord>, String> {
    let lines = split_lines(body, 0);
    parallel(&lines, |l| {
        serde_json::from_slice::<EventRecord>(&body[l.start..l.end])
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
    fn large_files_are_checked_in_parts_with_the_same_verdicts() {
        let lines: Vec<String> = (0..20_000).map(|i| ev(i, "turn/start")).collect();
        let bytes = file(&lines, "");
        assert!(bytes.len() > PARALLEL_BYTES);
        let s = scan(Path::new("/x/s.jsonl"), "s", &bytes).unwrap();
        assert_eq!((s.count, s.torn.is_none()), (20_000, true));
        assert_eq!(values(s.body(&bytes)).unwrap().len(), 20_000);
        // A torn tail (a complete line without newline) at the end of the last part.
        let torn = file(&lines, &ev(20_000, "x"));
        let s = scan(Path::new("/x/s.jsonl"), "s", &torn).unwrap();
        assert_eq!(
            (s.count, s.torn.map(|t| (t.seq, t.line))),
            (20_000, Some((20_000, 20_002)))
        );
        // A seq gap in a later part is corruption, named by its line in the whole file.
        let mut gap = lines.clone();
        gap[15_000] = ev(15_001, "x");
        let e = scan(Path::new("/x/s.jsonl"), "s", &file(&gap, "")).unwrap_err();
        assert!(matches!(e, JsonlError::Corrupt { line: 15_002, .. }), "{e}");
        // The same defect on the last line is a torn tail.
        let mut last = lines;
        last[19_999] = "{".to_owned();
        let s = scan(Path::new("/x/s.jsonl"), "s", &file(&last, "")).unwrap();
        assert_eq!((s.count, s.torn.map(|t| t.line)), (19_999, Some(20_001)));
    }

    #[test]
    fn foreign_version_wins_over_a_broken_header() {
        let bytes = br#"{"type":"session","version":7,"id":"s","bogus":true}"#;
        let e = scan(Path::new("/x/s.jsonl"), "s", bytes).unwrap_err();
        assert!(
            matches!(e, JsonlError::Kit(KitError::Unsupported { .. })),
            "{e}"
        );
    }
}
