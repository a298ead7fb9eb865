//! The stdin lines of `--input-format stream-json`, read with a bound (issue 23 item 7).
//!
//! `BufRead::lines` buffers a whole line before it can say anything about it (a 60 MB line
//! took 643 MB) and ends the stream at the first line that is not UTF-8. Here a line is
//! gathered only up to [`MAX_LINE`]; past that the rest of it is read and thrown away in
//! buffer-sized pieces, and the line comes back as [`Line::TooLong`]. A line that is not UTF-8
//! comes back as [`Line::NotUtf8`]. Both are per-line outcomes the run reports by number and
//! skips; only a read error ends the input.

use std::io::BufRead;

/// The longest stdin line accepted, newline excluded: 16 MiB.
pub const MAX_LINE: usize = 16 << 20;

/// One line read.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A UTF-8 line, without its newline.
    Text(String),
    /// Not UTF-8; the error names the first bad byte's offset.
    NotUtf8(String),
    /// Over [`MAX_LINE`]; the number of bytes it had.
    TooLong(u64),
}

impl Line {
    /// Why a skipped line was skipped; `None` for text.
    pub fn refusal(&self) -> Option<String> {
        match self {
            Line::Text(_) => None,
            Line::NotUtf8(why) => Some(format!("not UTF-8 ({why})")),
            Line::TooLong(n) => Some(format!(
                "{n} bytes, over the 16 MiB line limit ({MAX_LINE} bytes)"
            )),
        }
    }
}

/// Reads the next line from `reader`, holding at most [`MAX_LINE`] bytes of it; `Ok(None)` at
/// end of input. A last line without a newline counts.
///
/// # Errors
/// The reader's error.
pub fn next_line(reader: &mut dyn BufRead) -> std::io::Result<Option<Line>> {
    let mut kept: Vec<u8> = Vec::new();
    let mut total: u64 = 0;
    let mut seen_any = false;
    loop {
        let (used, done) = {
            let buf = match reader.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if buf.is_empty() {
                if !seen_any {
                    return Ok(None);
                }
                break;
            }
            seen_any = true;
            let (piece, used, done) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (&buf[..i], i + 1, true),
                None => (buf, buf.len(), false),
            };
            total += piece.len() as u64;
            if total <= MAX_LINE as u64 {
                kept.extend_from_slice(piece);
            } else if !kept.is_empty() {
                // Over the cap: keep nothing more, and give back what was held.
                kept = Vec::new();
            }
            (used, done)
        };
        reader.consume(used);
        if done {
            break;
        }
    }
    if total > MAX_LINE as u64 {
        return Ok(Some(Line::TooLong(total)));
    }
    if kept.last() == Some(&b'\r') {
        kept.pop();
    }
    Ok(Some(match String::from_utf8(kept) {
        Ok(s) => Line::Text(s),
        Err(e) => Line::NotUtf8(e.utf8_error().to_string()),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(input: &[u8]) -> Vec<Line> {
        let mut r = std::io::BufReader::with_capacity(64, input);
        let mut out = Vec::new();
        while let Some(l) = next_line(&mut r).unwrap() {
            out.push(l);
        }
        out
    }

    #[test]
    fn lines_split_on_newlines_and_a_last_line_without_one_counts() {
        assert_eq!(
            all(b"a\nb\r\n\nc"),
            [
                Line::Text("a".into()),
                Line::Text("b".into()),
                Line::Text(String::new()),
                Line::Text("c".into())
            ]
        );
        assert!(all(b"").is_empty());
    }

    #[test]
    fn a_line_that_is_not_utf8_is_one_outcome_and_the_next_line_reads() {
        let got = all(b"ok\n\xff\xfe\nnext\n");
        assert_eq!(got[0], Line::Text("ok".into()));
        assert!(matches!(&got[1], Line::NotUtf8(why) if why.contains("invalid utf-8")));
        assert_eq!(got[2], Line::Text("next".into()));
        assert!(got[1].refusal().unwrap().starts_with("not UTF-8"));
    }

    #[test]
    fn a_line_over_the_cap_is_refused_with_its_size_and_the_next_line_reads() {
        let mut input = vec![b'x'; MAX_LINE + 10];
        input.extend_from_slice(b"\nafter\n");
        let got = all(&input);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0], Line::TooLong(MAX_LINE as u64 + 10));
        assert_eq!(got[1], Line::Text("after".into()));
        let mut exact = vec![b'y'; MAX_LINE];
        exact.push(b'\n');
        assert!(matches!(&all(&exact)[0], Line::Text(s) if s.len() == MAX_LINE));
    }
}
