//! The terminal side of `keel chat`: which mode to run in, raw mode on and off, and the input
//! thread that turns crossterm's events (or, in plain mode, stdin's lines) into [`Ui`] items.
//!
//! Raw mode turns Ctrl-C into a key, not a SIGINT: the kernel's signal path (which ends the
//! process) is for `keel run`; in the terminal Ctrl-C stops the running turn and the session
//! goes on. The input thread polls with a short timeout and stops when the chat ends, so no
//! thread is left blocked in a read.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use crate::editor::Key;
use crate::ui::{Tap, Ui};

/// How the chat draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The inline viewport with keys in raw mode; `color` unless `NO_COLOR`.
    Terminal {
        /// Colours on.
        color: bool,
    },
    /// Lines in, lines out, no escape sequences.
    Plain,
}

/// The mode for these streams and this environment: the viewport needs stdin and stdout to be
/// terminals and a `TERM` that is not `dumb`; `NO_COLOR` (any non-empty value, as
/// no-color.org says) asks for plain text.
pub fn mode(stdin_tty: bool, stdout_tty: bool, term: Option<&str>, no_color: Option<&str>) -> Mode {
    let dumb = term.is_none_or(|t| t.is_empty() || t == "dumb");
    let no_color = no_color.is_some_and(|v| !v.is_empty());
    if !stdin_tty || !stdout_tty || dumb || no_color {
        Mode::Plain
    } else {
        Mode::Terminal { color: true }
    }
}

/// The terminal's size (columns, rows), 80×24 when it cannot be read or is not set (a pty
/// nobody sized says 0×0).
pub fn size() -> (u16, u16) {
    match crossterm::terminal::size() {
        Ok((w, h)) if w > 0 && h > 0 => (w, h),
        _ => (80, 24),
    }
}

/// Raw mode while it lives; restored on drop (every way out of the chat).
pub struct RawMode(bool);

impl RawMode {
    /// Turns raw mode on and bracketed paste on.
    pub fn enable() -> std::io::Result<RawMode> {
        crossterm::terminal::enable_raw_mode()?;
        Ok(RawMode(true))
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        if self.0 {
            let _ = crossterm::terminal::disable_raw_mode();
        }
    }
}

/// The input thread; dropping it stops the thread and waits for it.
pub struct Input {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Input {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Input {
    /// Reads crossterm events into `tap` until dropped.
    pub fn keys(tap: Tap) -> std::io::Result<Input> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("keel-tui-keys".to_owned())
            .spawn(move || {
                while !stopping.load(Ordering::SeqCst) {
                    match crossterm::event::poll(Duration::from_millis(50)) {
                        Ok(false) => continue,
                        Ok(true) => {}
                        Err(_) => break,
                    }
                    let Ok(event) = crossterm::event::read() else {
                        break;
                    };
                    let ui = match event {
                        Event::Key(k) => key(k).map(Ui::Key),
                        Event::Paste(text) => Some(Ui::Key(Key::Paste(text))),
                        Event::Resize(w, h) => Some(Ui::Resize(w, h)),
                        _ => None,
                    };
                    if let Some(ui) = ui
                        && !tap.send(ui)
                    {
                        break;
                    }
                }
            })?;
        Ok(Input {
            stop,
            thread: Some(thread),
        })
    }

    /// Reads stdin's lines into `tap` (plain mode). The thread blocks in `read_line`, so it is
    /// not joined: it ends at end of input, or when a line finds the chat gone.
    pub fn lines(tap: Tap) -> std::io::Result<Input> {
        let stop = Arc::new(AtomicBool::new(false));
        std::thread::Builder::new()
            .name("keel-tui-lines".to_owned())
            .spawn(move || {
                let stdin = std::io::stdin();
                loop {
                    let mut line = String::new();
                    match stdin.read_line(&mut line) {
                        Ok(0) | Err(_) => {
                            tap.send(Ui::Line(None));
                            break;
                        }
                        Ok(_) => {
                            let line = line.trim_end_matches(['\n', '\r']).to_owned();
                            if !tap.send(Ui::Line(Some(line))) {
                                break;
                            }
                        }
                    }
                }
            })?;
        Ok(Input { stop, thread: None })
    }
}

/// The editor's key for a crossterm key event (`None`: not one the chat uses).
pub fn key(k: KeyEvent) -> Option<Key> {
    if k.kind == KeyEventKind::Release {
        return None;
    }
    let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
    let alt = k.modifiers.contains(KeyModifiers::ALT);
    let shift = k.modifiers.contains(KeyModifiers::SHIFT);
    Some(match k.code {
        KeyCode::Char('c') if ctrl => Key::Interrupt,
        KeyCode::Char('d') if ctrl => Key::Eof,
        KeyCode::Char('a') if ctrl => Key::Home,
        KeyCode::Char('e') if ctrl => Key::End,
        KeyCode::Char('u') if ctrl => Key::KillStart,
        KeyCode::Char('k') if ctrl => Key::KillEnd,
        KeyCode::Char('w') if ctrl => Key::KillWord,
        KeyCode::Char('j') if ctrl => Key::Newline,
        KeyCode::Char(_) if ctrl => return None,
        KeyCode::Char(c) => Key::Char(c),
        KeyCode::Enter if alt || shift => Key::Newline,
        KeyCode::Enter => Key::Enter,
        KeyCode::Backspace => Key::Backspace,
        KeyCode::Delete => Key::Delete,
        KeyCode::Left => Key::Left,
        KeyCode::Right => Key::Right,
        KeyCode::Home => Key::Home,
        KeyCode::End => Key::End,
        KeyCode::Up => Key::Up,
        KeyCode::Down => Key::Down,
        KeyCode::Tab => Key::Char(' '),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_for_no_color_dumb_terminals_and_pipes() {
        let tty = |term, nc| mode(true, true, term, nc);
        assert_eq!(tty(Some("xterm"), None), Mode::Terminal { color: true });
        assert_eq!(tty(Some("xterm"), Some("")), Mode::Terminal { color: true });
        assert_eq!(tty(Some("xterm"), Some("1")), Mode::Plain);
        assert_eq!(tty(Some("dumb"), None), Mode::Plain);
        assert_eq!(tty(None, None), Mode::Plain);
        assert_eq!(mode(true, false, Some("xterm"), None), Mode::Plain);
        assert_eq!(mode(false, true, Some("xterm"), None), Mode::Plain);
    }

    #[test]
    fn ctrl_keys_map_to_the_editor() {
        let k = |code, m| key(KeyEvent::new(code, m));
        assert_eq!(
            k(KeyCode::Char('c'), KeyModifiers::CONTROL),
            Some(Key::Interrupt)
        );
        assert_eq!(k(KeyCode::Char('d'), KeyModifiers::CONTROL), Some(Key::Eof));
        assert_eq!(k(KeyCode::Enter, KeyModifiers::ALT), Some(Key::Newline));
        assert_eq!(k(KeyCode::Enter, KeyModifiers::NONE), Some(Key::Enter));
        assert_eq!(k(KeyCode::Char('x'), KeyModifiers::CONTROL), None);
    }
}
