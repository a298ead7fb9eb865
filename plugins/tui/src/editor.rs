//! The input line of `keel chat`: its text and cursor, multi-line editing and the history. It
//! is pure (keys in, [`Action`]s out) so every binding is tested without a terminal; the
//! terminal module maps crossterm's key events onto [`Key`].
//!
//! Why not rustyline or reedline: both take the terminal over while a line is read, so text
//! streamed by the model (and approval questions) could not be drawn above the line while the
//! person types, and typing while a turn runs (a steer) would have to wait for the prompt. Here
//! the chat loop owns the terminal and the editor is a value it draws.

/// One key, as the editor understands it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    /// A printable character.
    Char(char),
    /// Enter: submit (a line ending in `\` continues on the next line instead).
    Enter,
    /// Alt-Enter, Shift-Enter or Ctrl-J: a new line inside the message.
    Newline,
    /// Backspace.
    Backspace,
    /// Delete (the character under the cursor).
    Delete,
    /// Cursor left.
    Left,
    /// Cursor right.
    Right,
    /// Start of the line (Home, Ctrl-A).
    Home,
    /// End of the line (End, Ctrl-E).
    End,
    /// Up: the line above, or the previous history entry on the first line.
    Up,
    /// Down: the line below, or the next history entry on the last line.
    Down,
    /// Ctrl-C.
    Interrupt,
    /// Ctrl-D: end of input on an empty line, else delete.
    Eof,
    /// Ctrl-U: delete to the start of the line.
    KillStart,
    /// Ctrl-K: delete to the end of the line.
    KillEnd,
    /// Ctrl-W: delete the word before the cursor.
    KillWord,
    /// Pasted text (bracketed paste): inserted as is, newlines included.
    Paste(String),
}

/// What a key asks the chat to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Only the line changed (redraw).
    Edited,
    /// The person submitted this message (never blank).
    Submit(String),
    /// Ctrl-C; `cleared` when it only emptied a non-empty line.
    Interrupt {
        /// The line had text, now dropped.
        cleared: bool,
    },
    /// Ctrl-D on an empty line.
    Eof,
}

/// The line being edited, and the history it browses.
#[derive(Debug, Default)]
pub struct Editor {
    text: Vec<char>,
    cursor: usize,
    history: Vec<String>,
    /// The history entry shown (index into `history`), while browsing.
    browsing: Option<usize>,
    /// What was typed before browsing started.
    draft: Vec<char>,
}

impl Editor {
    /// An empty line over `history` (oldest first).
    pub fn new(history: Vec<String>) -> Self {
        Editor {
            history,
            ..Editor::default()
        }
    }

    /// The text as lines (at least one).
    pub fn lines(&self) -> Vec<String> {
        self.text
            .iter()
            .collect::<String>()
            .split('\n')
            .map(str::to_owned)
            .collect()
    }

    /// The cursor as (line, column in characters).
    pub fn cursor(&self) -> (usize, usize) {
        let before = self.text.get(..self.cursor).unwrap_or_default();
        let line = before.iter().filter(|c| **c == '\n').count();
        let col = before.iter().rev().take_while(|c| **c != '\n').count();
        (line, col)
    }

    /// Whether the line is empty.
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// Applies `key`.
    pub fn key(&mut self, key: Key) -> Action {
        match key {
            Key::Char(c) => self.insert(&[c]),
            Key::Paste(text) => {
                let chars: Vec<char> = text
                    .replace("\r\n", "\n")
                    .replace('\r', "\n")
                    .chars()
                    .collect();
                self.insert(&chars);
            }
            Key::Newline => self.insert(&['\n']),
            Key::Enter => return self.enter(),
            Key::Backspace => {
                if self.cursor > 0 {
                    self.cursor -= 1;
                    self.text.remove(self.cursor);
                }
            }
            Key::Delete => self.delete(),
            Key::Left => self.cursor = self.cursor.saturating_sub(1),
            Key::Right => self.cursor = (self.cursor + 1).min(self.text.len()),
            Key::Home => self.cursor = self.line_start(),
            Key::End => self.cursor = self.line_end(),
            Key::Up => self.up(),
            Key::Down => self.down(),
            Key::Interrupt => {
                let cleared = !self.text.is_empty();
                self.clear();
                return Action::Interrupt { cleared };
            }
            Key::Eof => {
                if self.text.is_empty() {
                    return Action::Eof;
                }
                self.delete();
            }
            Key::KillStart => {
                let start = self.line_start();
                self.text.drain(start..self.cursor);
                self.cursor = start;
            }
            Key::KillEnd => {
                let end = self.line_end();
                self.text.drain(self.cursor..end);
            }
            Key::KillWord => {
                let mut start = self.cursor;
                while start > 0 && self.text.get(start - 1).is_some_and(|c| c.is_whitespace()) {
                    start -= 1;
                }
                while start > 0 && self.text.get(start - 1).is_some_and(|c| !c.is_whitespace()) {
                    start -= 1;
                }
                self.text.drain(start..self.cursor);
                self.cursor = start;
            }
        }
        Action::Edited
    }

    fn insert(&mut self, chars: &[char]) {
        for (i, c) in chars.iter().enumerate() {
            self.text.insert(self.cursor + i, *c);
        }
        self.cursor += chars.len();
        self.browsing = None;
    }

    fn delete(&mut self) {
        if self.cursor < self.text.len() {
            self.text.remove(self.cursor);
        }
    }

    fn clear(&mut self) {
        self.text.clear();
        self.cursor = 0;
        self.browsing = None;
    }

    /// Enter: a trailing `\` becomes a line break; otherwise a non-blank text is submitted
    /// and remembered in the history.
    fn enter(&mut self) -> Action {
        if self.cursor == self.text.len() && self.text.last() == Some(&'\\') {
            self.text.pop();
            self.cursor -= 1;
            self.insert(&['\n']);
            return Action::Edited;
        }
        let text: String = self.text.iter().collect();
        if text.trim().is_empty() {
            self.clear();
            return Action::Edited;
        }
        if self.history.last() != Some(&text) {
            self.history.push(text.clone());
        }
        self.clear();
        Action::Submit(text)
    }

    fn line_start(&self) -> usize {
        let mut i = self.cursor;
        while i > 0 && self.text.get(i - 1) != Some(&'\n') {
            i -= 1;
        }
        i
    }

    fn line_end(&self) -> usize {
        let mut i = self.cursor;
        while i < self.text.len() && self.text.get(i) != Some(&'\n') {
            i += 1;
        }
        i
    }

    fn up(&mut self) {
        let start = self.line_start();
        if start > 0 {
            // The line above, same column where it is long enough.
            let col = self.cursor - start;
            self.cursor = start - 1;
            let above = self.line_start();
            self.cursor = (above + col).min(start - 1);
            return;
        }
        let next = match self.browsing {
            None if self.history.is_empty() => return,
            None => {
                self.draft = self.text.clone();
                self.history.len() - 1
            }
            Some(0) => return,
            Some(i) => i - 1,
        };
        self.show(next);
    }

    fn down(&mut self) {
        let end = self.line_end();
        if end < self.text.len() {
            let col = self.cursor - self.line_start();
            self.cursor = end + 1;
            let below_end = self.line_end();
            self.cursor = (end + 1 + col).min(below_end);
            return;
        }
        match self.browsing {
            None => {}
            Some(i) if i + 1 < self.history.len() => self.show(i + 1),
            Some(_) => {
                self.text = std::mem::take(&mut self.draft);
                self.cursor = self.text.len();
                self.browsing = None;
            }
        }
    }

    fn show(&mut self, index: usize) {
        if let Some(entry) = self.history.get(index) {
            self.text = entry.chars().collect();
            self.cursor = self.text.len();
            self.browsing = Some(index);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(e: &mut Editor, text: &str) {
        for c in text.chars() {
            e.key(Key::Char(c));
        }
    }

    #[test]
    fn enter_submits_and_remembers_blank_lines_do_not() {
        let mut e = Editor::new(Vec::new());
        assert_eq!(e.key(Key::Enter), Action::Edited);
        typed(&mut e, "  ");
        assert_eq!(e.key(Key::Enter), Action::Edited);
        typed(&mut e, "hello");
        assert_eq!(e.key(Key::Enter), Action::Submit("hello".into()));
        assert!(e.is_empty());
        e.key(Key::Up);
        assert_eq!(e.lines(), ["hello"]);
    }

    // Multi-line editing: a trailing backslash, Alt-Enter and a paste all make line breaks.
    #[test]
    fn a_message_spans_lines() {
        let mut e = Editor::new(Vec::new());
        typed(&mut e, "one\\");
        assert_eq!(e.key(Key::Enter), Action::Edited);
        typed(&mut e, "two");
        e.key(Key::Newline);
        e.key(Key::Paste("three\r\nfour".into()));
        assert_eq!(e.lines(), ["one", "two", "three", "four"]);
        assert_eq!(e.cursor(), (3, 4));
        e.key(Key::Up);
        assert_eq!(e.cursor(), (2, 4));
        e.key(Key::Home);
        assert_eq!(e.cursor(), (2, 0));
        assert_eq!(
            e.key(Key::Enter),
            Action::Submit("one\ntwo\nthree\nfour".into())
        );
    }

    #[test]
    fn history_browses_back_and_returns_to_the_draft() {
        let mut e = Editor::new(vec!["first".into(), "second".into()]);
        typed(&mut e, "dra");
        e.key(Key::Up);
        assert_eq!(e.lines(), ["second"]);
        e.key(Key::Up);
        assert_eq!(e.lines(), ["first"]);
        e.key(Key::Up);
        assert_eq!(e.lines(), ["first"]);
        e.key(Key::Down);
        e.key(Key::Down);
        assert_eq!(e.lines(), ["dra"]);
    }

    #[test]
    fn ctrl_c_clears_first_and_ctrl_d_ends_only_an_empty_line() {
        let mut e = Editor::new(Vec::new());
        typed(&mut e, "ab");
        e.key(Key::Left);
        assert_eq!(e.key(Key::Eof), Action::Edited);
        assert_eq!(e.lines(), ["a"]);
        assert_eq!(e.key(Key::Interrupt), Action::Interrupt { cleared: true });
        assert_eq!(e.key(Key::Interrupt), Action::Interrupt { cleared: false });
        assert_eq!(e.key(Key::Eof), Action::Eof);
    }

    #[test]
    fn kills_delete_what_they_name() {
        let mut e = Editor::new(Vec::new());
        typed(&mut e, "git commit -m");
        e.key(Key::KillWord);
        assert_eq!(e.lines(), ["git commit "]);
        e.key(Key::Home);
        e.key(Key::Right);
        e.key(Key::KillEnd);
        assert_eq!(e.lines(), ["g"]);
        e.key(Key::End);
        e.key(Key::KillStart);
        assert!(e.is_empty());
    }
}
