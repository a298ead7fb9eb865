//! One stderr line per message (ARCHITECTURE §11: `keel: …` lines are a contract, one line
//! each). Text keel quotes from outside — a provider's error body, a plugin's message, a
//! path — may hold newlines, carriage returns or terminal escapes; printed as they are, one
//! failure would span several lines (or rewrite the terminal). The kernel's CLI lines and the
//! drivers' lines all pass [`one_line`], so the rule lives in one place; the session log keeps
//! the text as it came.

use std::borrow::Cow;
use std::fmt::Write as _;

/// The most characters [`one_line`] keeps; the rest is cut with a marker saying how much.
pub const MAX_LINE_CHARS: usize = 2000;

/// Whether [`escape_controls`] rewrites `c`: control characters (C0, DEL, C1) and the Unicode
/// line and paragraph separators.
fn needs_escape(c: char) -> bool {
    c.is_control() || c == '\u{2028}' || c == '\u{2029}'
}

/// `text` with every control character written as an escape: `\n`, `\r`, `\t`, and `\u{XXXX}`
/// for the rest (ESC, NUL, DEL, C1, U+2028/U+2029). Backslashes are left alone, so ordinary
/// paths stay readable; the result is for people, the original stays where it was recorded.
#[must_use]
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if needs_escape(c) => {
                let _ = write!(out, "\\u{{{:04x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// `text` as one printable line: surrounding whitespace trimmed, control characters escaped
/// ([`escape_controls`]), and at most [`MAX_LINE_CHARS`] characters kept, the cut marked
/// `… (N more characters)`.
#[must_use]
pub fn one_line(text: &str) -> Cow<'_, str> {
    let trimmed = text.trim();
    let escaped = escape_controls(trimmed);
    let Some((cut, _)) = escaped.char_indices().nth(MAX_LINE_CHARS) else {
        return escaped;
    };
    let more = escaped[cut..].chars().count();
    Cow::Owned(format!("{}… ({more} more characters)", &escaped[..cut]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        assert!(matches!(one_line("keel: error[X]: fine"), Cow::Borrowed(_)));
        assert!(matches!(escape_controls("a\\nb"), Cow::Borrowed(_)));
        assert_eq!(one_line("a\\nb"), "a\\nb");
    }

    #[test]
    fn newlines_and_terminal_escapes_are_escaped_and_the_ends_trimmed() {
        assert_eq!(
            one_line("  line one\nline two\r\n\tthree\u{1b}[31mred\0\u{7f}\u{85}\u{2028}end\n\n"),
            "line one\\nline two\\r\\n\\tthree\\u{001b}[31mred\\u{0000}\\u{007f}\\u{0085}\\u{2028}end"
        );
        assert_eq!(one_line("\n\n"), "");
        assert_eq!(one_line(" padded "), "padded");
        assert!(!one_line("a\nb\rc\u{2029}d").chars().any(needs_escape));
    }

    #[test]
    fn long_text_is_cut_with_a_marker_counting_what_was_left_out() {
        let long = "é".repeat(MAX_LINE_CHARS + 5);
        let line = one_line(&long);
        assert_eq!(
            line,
            format!("{}… (5 more characters)", "é".repeat(MAX_LINE_CHARS))
        );
        let exact = "x".repeat(MAX_LINE_CHARS);
        assert_eq!(one_line(&exact), exact);
        // The escapes count: a text of newlines doubles in length before the cut.
        let newlines = format!("a{}b", "\n".repeat(MAX_LINE_CHARS));
        let line = one_line(&newlines);
        assert!(line.ends_with(&format!("… ({} more characters)", MAX_LINE_CHARS + 2)));
        assert!(!line.contains('\n'));
    }
}
