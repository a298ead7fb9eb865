//! The inline viewport: what `keel chat` writes to the terminal. Finished lines (the person's
//! messages, the model's text line by line, tool calls, notes) go into the terminal's own
//! scrollback once and are never redrawn; only the live region below them (the line the
//! model is writing, running tools, an approval question, the status line and the input line)
//! is redrawn, in place: up to its first row, clear to the end of the screen, write it again.
//! So there is no full-screen redraw, and scrolling, copying and tmux keep working.
//!
//! Every frame ends with a line break and the terminal's cursor stays hidden on the row below
//! the live region; the input line draws its own cursor (reverse video). This keeps each
//! frame a whole line for the kernel's output guard, which forwards whole lines at once and a
//! partial one only after a short idle wait (SEC-03: everything goes through the redactions).
//!
//! [`Frame`] builds bytes only; the chat loop writes them. In plain mode (`NO_COLOR`,
//! `TERM=dumb`, stdout not a terminal) there is no live region and no escape sequence: finished
//! lines are printed as they come and the model's text as it streams.

use unicode_width::{UnicodeWidthChar as _, UnicodeWidthStr as _};

/// How a line is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    /// The model's text.
    Plain,
    /// Notes, hints, reasoning.
    Dim,
    /// The person's message.
    User,
    /// A tool call.
    Tool,
    /// A call that succeeded.
    Good,
    /// A failure, a denial.
    Bad,
    /// A question that waits for a key.
    Ask,
    /// The status line.
    Status,
}

impl Tone {
    fn sgr(self) -> &'static str {
        match self {
            Tone::Plain => "",
            Tone::Dim | Tone::Status => "\x1b[2m",
            Tone::User => "\x1b[1m",
            Tone::Tool => "\x1b[36m",
            Tone::Good => "\x1b[32m",
            Tone::Bad => "\x1b[31m",
            Tone::Ask => "\x1b[1;33m",
        }
    }
}

/// One line of the transcript or the live region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// The text (no control characters).
    pub text: String,
    /// How it is shown.
    pub tone: Tone,
    /// A cursor drawn at this character (the input line).
    pub cursor: Option<usize>,
}

impl Line {
    /// A line without a cursor.
    pub fn new(tone: Tone, text: impl Into<String>) -> Self {
        Line {
            text: clean(&text.into()),
            tone,
            cursor: None,
        }
    }
}

/// Replaces control characters (a model's or a tool's ESC, a tab) so nothing but the
/// viewport's own sequences reaches the terminal.
pub fn clean(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\t' => ' ',
            c if c.is_control() => '\u{fffd}',
            c => c,
        })
        .collect()
}

/// Rows `text` takes at `width` columns (at least one).
pub fn rows(text: &str, width: u16) -> usize {
    let width = usize::from(width.max(1));
    text.width().div_ceil(width).max(1)
}

/// Splits `text` (one line, no newline) at the last space that leaves a head of at most
/// `width` columns, or hard at `width` when there is none: `(head, rest)`.
pub fn wrap_once(text: &str, width: u16) -> Option<(String, String)> {
    let width = usize::from(width.max(1));
    if text.width() <= width {
        return None;
    }
    let mut used = 0;
    let mut cut = 0;
    let mut last_space = None;
    for (i, c) in text.char_indices() {
        let w = c.width().unwrap_or(0);
        if used + w > width {
            break;
        }
        used += w;
        cut = i + c.len_utf8();
        if c == ' ' {
            last_space = Some(i);
        }
    }
    let (head, rest) = match last_space {
        Some(space) if space > 0 => (&text[..space], &text[space + 1..]),
        _ => (&text[..cut], &text[cut..]),
    };
    Some((head.to_owned(), rest.to_owned()))
}

/// The live region's bookkeeping and the frames that redraw it.
#[derive(Debug)]
pub struct Frame {
    /// Terminal columns.
    pub width: u16,
    /// Terminal rows.
    pub height: u16,
    /// Colours on.
    pub color: bool,
    /// Rows the live region took when it was last drawn (the cursor is on the row below).
    drawn: usize,
}

impl Frame {
    /// A viewport for a terminal of `width` × `height`.
    pub fn new(width: u16, height: u16, color: bool) -> Self {
        Frame {
            width: width.max(1),
            height: height.max(1),
            color,
            drawn: 0,
        }
    }

    /// The terminal was resized: the next frame measures with the new size. The live region
    /// drawn at the old width may have been re-wrapped by the terminal, so the next frame
    /// clears from its first row as the new width counts it and, to be safe, the whole screen
    /// below the old start.
    pub fn resize(&mut self, width: u16, height: u16, last_live: &[Line]) {
        self.width = width.max(1);
        self.height = height.max(1);
        let reflowed: usize = last_live.iter().map(|l| rows(&l.text, self.width)).sum();
        self.drawn = self.drawn.max(reflowed).min(usize::from(self.height) - 1);
    }

    /// The most rows the live region may take (the rest of the screen holds the transcript).
    pub fn live_budget(&self) -> usize {
        usize::from(self.height).saturating_sub(1).max(1)
    }

    /// Bytes that print `commit` into the scrollback and redraw `live` below it.
    pub fn draw(&mut self, commit: &[Line], live: &[Line]) -> String {
        let mut out = String::new();
        if self.drawn > 0 {
            out.push('\r');
            out.push_str(&format!("\x1b[{}A", self.drawn));
        }
        out.push_str("\x1b[J");
        for line in commit {
            self.push_line(&mut out, line);
        }
        let mut drawn = 0;
        let budget = self.live_budget();
        // The last lines win when the region would not fit (the input line is last).
        let mut shown: Vec<&Line> = Vec::new();
        for line in live.iter().rev() {
            let r = rows(&line.text, self.width);
            // The last line (the input) is drawn even when it alone is too tall.
            if drawn + r > budget && !shown.is_empty() {
                break;
            }
            drawn += r;
            shown.push(line);
        }
        for line in shown.into_iter().rev() {
            self.push_line(&mut out, line);
        }
        self.drawn = drawn;
        out
    }

    /// Bytes that clear the live region for good (at exit), the cursor shown again.
    pub fn close(&mut self) -> String {
        let mut out = String::new();
        if self.drawn > 0 {
            out.push('\r');
            out.push_str(&format!("\x1b[{}A", self.drawn));
        }
        out.push_str("\x1b[J\x1b[?25h");
        self.drawn = 0;
        out
    }

    fn push_line(&self, out: &mut String, line: &Line) {
        let sgr = if self.color { line.tone.sgr() } else { "" };
        out.push_str(sgr);
        match line.cursor {
            Some(at) => {
                let mut chars = line.text.chars();
                let head: String = chars.by_ref().take(at).collect();
                let under = chars.next();
                let tail: String = chars.collect();
                out.push_str(&head);
                out.push_str("\x1b[7m");
                out.push(under.unwrap_or(' '));
                out.push_str("\x1b[27m");
                out.push_str(&tail);
            }
            None => out.push_str(&line.text),
        }
        if !sgr.is_empty() {
            out.push_str("\x1b[0m");
        }
        out.push_str("\x1b[K\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_goes_up_over_the_old_region_and_ends_on_a_new_line() {
        let mut f = Frame::new(10, 24, false);
        let live = [
            Line::new(Tone::Status, "status"),
            Line::new(Tone::Plain, "> "),
        ];
        let first = f.draw(&[], &live);
        assert!(!first.contains("\x1b[2A"));
        assert!(first.ends_with("\r\n"));
        let second = f.draw(&[Line::new(Tone::Plain, "done")], &live);
        assert!(second.starts_with("\r\x1b[2A\x1b[J"), "{second:?}");
        assert!(second.contains("done\x1b[K\r\n"));
        // A 25-column line takes three rows of ten.
        f.draw(&[], &[Line::new(Tone::Plain, "x".repeat(25))]);
        assert!(f.draw(&[], &[]).starts_with("\r\x1b[3A"));
    }

    #[test]
    fn the_live_region_keeps_its_last_lines_when_the_screen_is_short() {
        let mut f = Frame::new(80, 3, false);
        let live: Vec<Line> = (0..5)
            .map(|i| Line::new(Tone::Plain, format!("l{i}")))
            .collect();
        let out = f.draw(&[], &live);
        assert!(out.contains("l3") && out.contains("l4") && !out.contains("l2"));
    }

    #[test]
    fn control_characters_never_reach_the_terminal() {
        let line = Line::new(Tone::Plain, "a\x1b[2Jb\tc");
        assert_eq!(line.text, "a\u{fffd}[2Jb c");
    }

    #[test]
    fn wrapping_prefers_the_last_space() {
        assert_eq!(wrap_once("short", 10), None);
        assert_eq!(
            wrap_once("hello brave new world", 12),
            Some(("hello brave".into(), "new world".into()))
        );
        assert_eq!(
            wrap_once("abcdefghij", 4),
            Some(("abcd".into(), "efghij".into()))
        );
    }

    #[test]
    fn colour_is_off_when_asked() {
        let mut f = Frame::new(80, 24, false);
        let out = f.draw(&[Line::new(Tone::Bad, "no")], &[]);
        assert!(!out.contains("\x1b[31m"));
        let mut f = Frame::new(80, 24, true);
        assert!(
            f.draw(&[Line::new(Tone::Bad, "no")], &[])
                .contains("\x1b[31m")
        );
    }
}
