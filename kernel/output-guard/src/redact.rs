//! Output redactions (SEC-03 at the kernel's edge): the process's stderr and stdout belong to
//! the kernel, so the kernel applies the redactions plugins register (a plugin that holds
//! sensitive values registers each one and its simple encodings) to every tracing line and to
//! everything plugins write through `write_output`.
//!
//! The kernel stays feature-blind: it replaces byte strings it was given and knows nothing of
//! what they are. Redactions are kept per row for the life of the process — a row that unloads
//! during shutdown must not let the last lines through — and a row's new set replaces its old.
//!
//! Lines are one line (§11, issue 11 item 9): the CLI's `keel: …` lines pass
//! [`one_line`] after the redactions, and a tracing event's embedded line breaks are escaped.
//! Drivers escape their lines themselves ([`one_line`] too) before the kernel sees them, so a
//! needle that holds control characters is also registered in its escaped form.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{PoisonError, RwLock};

use aho_corasick::{AhoCorasick, MatchKind};
use keel_plugin_api::sdk::line::{escape_controls, one_line};

/// Needles shorter than this are ignored: replacing a 2-byte string everywhere would wreck
/// every line and protect nothing.
const MIN_NEEDLE: usize = 4;

#[derive(Default)]
struct Redactions {
    by_row: BTreeMap<String, Vec<(String, String)>>,
    matcher: Option<(AhoCorasick, Vec<String>)>,
}

static REDACTIONS: RwLock<Option<Redactions>> = RwLock::new(None);

/// Replaces `row`'s redactions with `pairs` (`(needle, replacement)`).
///
/// # Errors
/// The matcher could not be built (pathological sizes); the previous set stays in force.
pub fn set(row: &str, pairs: Vec<(String, String)>) -> Result<(), String> {
    let mut guard = REDACTIONS.write().unwrap_or_else(PoisonError::into_inner);
    let all = guard.get_or_insert_with(Redactions::default);
    let mut by_row = all.by_row.clone();
    let mut pairs: Vec<(String, String)> = pairs
        .into_iter()
        .filter(|(needle, _)| needle.len() >= MIN_NEEDLE)
        .collect();
    // A needle with a newline, as a driver's escaped line carries it.
    let escaped: Vec<(String, String)> = pairs
        .iter()
        .filter_map(|(needle, with)| match escape_controls(needle) {
            Cow::Owned(e) => Some((e, with.clone())),
            Cow::Borrowed(_) => None,
        })
        .collect();
    pairs.extend(escaped);
    by_row.insert(row.to_owned(), pairs);
    let (needles, replacements): (Vec<String>, Vec<String>) =
        by_row.values().flatten().cloned().unzip();
    let matcher = if needles.is_empty() {
        None
    } else {
        let ac = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(&needles)
            .map_err(|e| format!("cannot build the output redactions: {e}"))?;
        Some((ac, replacements))
    };
    *all = Redactions { by_row, matcher };
    Ok(())
}

/// `text` with every registered needle replaced.
pub fn apply(text: &str) -> Cow<'_, str> {
    let guard = REDACTIONS.read().unwrap_or_else(PoisonError::into_inner);
    match guard.as_ref().and_then(|r| r.matcher.as_ref()) {
        Some((ac, replacements)) if ac.is_match(text) => {
            Cow::Owned(ac.replace_all(text, replacements))
        }
        _ => Cow::Borrowed(text),
    }
}

/// `bytes` with every registered needle replaced (the output guard's pass over raw streams,
/// which need not be UTF-8).
pub fn apply_bytes(bytes: &[u8]) -> Cow<'_, [u8]> {
    let guard = REDACTIONS.read().unwrap_or_else(PoisonError::into_inner);
    match guard.as_ref().and_then(|r| r.matcher.as_ref()) {
        Some((ac, replacements)) if ac.is_match(bytes) => {
            Cow::Owned(ac.replace_all_bytes(bytes, replacements))
        }
        _ => Cow::Borrowed(bytes),
    }
}

/// Writes `text` to stdout (`1`) or stderr (anything else), redacted, and flushes.
///
/// # Errors
/// The stream's I/O error.
pub fn write(stream: u8, text: &str) -> std::io::Result<()> {
    keel_plugin_api::sdk::write_stream(stream, &apply(text))
}

/// `eprintln!` through the redactions, as one line (the CLI's own messages quote plugin errors,
/// whose text may hold newlines): redacted first, so a needle spanning a newline still matches.
pub fn eprintln(line: impl std::fmt::Display) {
    let text = line.to_string();
    let line = one_line(&apply(&text)).into_owned();
    let _ = keel_plugin_api::sdk::write_stream(2, &format!("{line}\n"));
}

/// One tracing event as one line: its line breaks escaped, the final newline kept. Other
/// control characters are left alone (the fmt layer's own colours use ESC, and it escapes
/// those in field values itself).
fn flatten_event(text: &str) -> Cow<'_, str> {
    let (body, end) = text
        .strip_suffix('\n')
        .map_or((text, ""), |body| (body, "\n"));
    if !body.contains(['\n', '\r']) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(format!(
        "{}{end}",
        body.replace('\n', "\\n").replace('\r', "\\r")
    ))
}

/// The tracing writer: each formatted event goes to stderr redacted, as one line. The fmt layer
/// formats a whole event before writing it, so a needle never straddles two writes.
#[derive(Debug, Clone, Copy, Default)]
pub struct RedactingStderr;

impl Write for RedactingStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        std::io::stderr()
            .lock()
            .write_all(flatten_event(&apply(&text)).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().lock().flush()
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for RedactingStderr {
    type Writer = RedactingStderr;
    fn make_writer(&'a self) -> Self::Writer {
        RedactingStderr
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // One test owns the process-wide set (tests in this binary run in parallel).
    #[test]
    fn sec03_registered_needles_are_replaced_per_row_and_short_ones_ignored() {
        assert_eq!(apply("nothing registered"), "nothing registered");
        set(
            "vault",
            vec![
                ("s3cr3t-value".into(), "sec_api".into()),
                ("czNjcjN0LXZhbHVl".into(), "sec_api".into()),
                ("ab".into(), "x".into()),
            ],
        )
        .unwrap();
        assert_eq!(
            apply("key=s3cr3t-value b64=czNjcjN0LXZhbHVl ab"),
            "key=sec_api b64=sec_api ab"
        );
        assert!(matches!(apply("clean line"), Cow::Borrowed(_)));
        assert_eq!(
            apply_bytes(b"\xff s3cr3t-value\n").as_ref(),
            b"\xff sec_api\n"
        );
        // Issue 11 item 9: a needle with a newline is also caught as a driver's escaped line
        // quotes it.
        set(
            "pem",
            vec![("-----BEGIN KEY-----\nMIIEv\n".into(), "[key]".into())],
        )
        .unwrap();
        let quoted = one_line("error: -----BEGIN KEY-----\nMIIEv\n!").into_owned();
        assert_eq!(apply(&quoted), "error: [key]!");
        assert_eq!(apply("raw -----BEGIN KEY-----\nMIIEv\n"), "raw [key]");
        set("pem", vec![]).unwrap();
        // A row's new set replaces its old one; other rows' sets stay.
        set("other", vec![("another-one".into(), "[x]".into())]).unwrap();
        set("vault", vec![]).unwrap();
        assert_eq!(apply("s3cr3t-value another-one"), "s3cr3t-value [x]");
    }

    #[test]
    fn issue11_item9_a_tracing_event_with_line_breaks_is_written_as_one_line() {
        assert!(matches!(flatten_event("WARN x: plain\n"), Cow::Borrowed(_)));
        assert_eq!(
            flatten_event("WARN x: agent stopped: one\ntwo\r\n"),
            "WARN x: agent stopped: one\\ntwo\\r\n"
        );
        assert_eq!(flatten_event("no end\nnewline"), "no end\\nnewline");
        assert_eq!(
            flatten_event("\u{1b}[33mWARN\u{1b}[0m\n"),
            "\u{1b}[33mWARN\u{1b}[0m\n"
        );
    }
}
