//! The inline viewport: what `keel chat` writes to the terminal. Finished lines (the person's
//! messages, the model's text line by line, tool calls, notes) go into the terminal's own
//! scrollback once and are never redrawn; only the live region below them (the line the
//! model is writing, running tools, an approval question, the status line and the input line)
//! is redrawn, in place: up to its first row, clear to the end of the screen, write it again.
//! So there is no full-screen redraw, and scrolling, copying and tmux keep working. The one
//! exception is a resize: terminals differ in whether they re-wrap what they show, so the frame
//! after one clears the screen and repaints the last finished lines at the new width above the
//! live region, rather than guess where the old region went.
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

/// Finished lines kept to repaint the screen after a resize.
const RECENT: usize = 500;

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
    /// The last finished lines, for a repaint.
    recent: std::collections::VecDeque<Line>,
    /// The next frame repaints the whole screen (the terminal was resized).
    repaint: bool,
}

impl Frame {
    /// A viewport for a terminal of `width` × `height`.
    pub fn new(width: u16, height: u16, color: bool) -> Self {
        Frame {
            width: width.max(1),
            height: height.max(1),
            color,
            drawn: 0,
            recent: std::collections::VecDeque::new(),
            repaint: false,
        }
    }

    /// The terminal was resized. Where the old live region now is depends on whether the
    /// terminal re-wrapped it (some do, some cut lines), so moving up over it is a guess; the
    /// next frame instead clears the screen and repaints it: the last finished lines, wrapped
    /// at the new width, then the live region. The scrollback above is left as it was.
    pub fn resize(&mut self, width: u16, height: u16) {
        self.width = width.max(1);
        self.height = height.max(1);
        self.repaint = true;
    }

    /// The most rows the live region may take (the rest of the screen holds the transcript).
    pub fn live_budget(&self) -> usize {
        usize::from(self.height).saturating_sub(1).max(1)
    }

    /// Bytes that print `commit` into the scrollback and redraw `live` below it.
    pub fn draw(&mut self, commit: &[Line], live: &[Line]) -> String {
        let mut out = String::new();
        let shown = self.fit(live);
        let live_rows: usize = shown.iter().map(|l| rows(&l.text, self.width)).sum();
        if self.repaint {
            self.repaint = false;
            self.remember(commit);
            out.push_str("\x1b[H\x1b[2J");
            let room = usize::from(self.height).saturating_sub(live_rows + 1);
            let mut used = 0;
            let mut tail: Vec<&Line> = Vec::new();
            for line in self.recent.iter().rev() {
                let r = rows(&line.text, self.width);
                if used + r > room {
                    break;
                }
                used += r;
                tail.push(line);
            }
            for line in tail.into_iter().rev() {
                self.push_line(&mut out, line);
            }
        } else {
            if self.drawn > 0 {
                out.push('\r');
                out.push_str(&format!("\x1b[{}A", self.drawn));
            }
            out.push_str("\x1b[J");
            for line in commit {
                self.push_line(&mut out, line);
            }
            self.remember(commit);
        }
        for line in &shown {
            self.push_line(&mut out, line);
        }
        self.drawn = live_rows;
        out
    }

    /// The last lines of `live` that fit the live budget (the input line always).
    fn fit<'a>(&self, live: &'a [Line]) -> Vec<&'a Line> {
        let budget = self.live_budget();
        let mut drawn = 0;
        let mut shown: Vec<&Line> = Vec::new();
        for line in live.iter().rev() {
            let r = rows(&line.text, self.width);
            if drawn + r > budget && !shown.is_empty() {
                break;
            }
            drawn += r;
            shown.push(line);
        }
        shown.reverse();
        shown
    }

    fn remember(&mut self, commit: &[Line]) {
        for line in commit {
            if self.recent.len() == RECENT {
                self.recent.pop_front();
            }
            self.recent.push_back(line.clone());
        }
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

    // A resize repaints the screen: the last finished lines at the new width, then the live
    // region; nothing is moved over by guess.
    #[test]
    fn a_resize_repaints_the_recent_lines_and_the_live_region() {
        let mut f = Frame::new(80, 24, false);
        let done: Vec<Line> = (0..30)
            .map(|i| Line::new(Tone::Plain, format!("line {i}")))
            .collect();
        f.draw(&done, &[Line::new(Tone::Status, "status")]);
        f.resize(40, 5);
        let out = f.draw(
            &[],
            &[
                Line::new(Tone::Status, "status"),
                Line::new(Tone::Plain, "> "),
            ],
        );
        assert!(out.starts_with("\x1b[H\x1b[2J"), "{out:?}");
        // 5 rows: two for the live region, one left free, two for the transcript's tail.
        assert!(out.contains("line 28") && out.contains("line 29") && !out.contains("line 27"));
        assert!(f.draw(&[], &[]).starts_with("\r\x1b[2A"));
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
