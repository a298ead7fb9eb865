//! Capped capture of one output stream: the first and last halves of the cap are kept and the
//! middle is counted, so a chatty command costs bounded memory and the model still sees how
//! it started and how it ended, with a note saying how many bytes were cut.

use std::collections::VecDeque;
use std::io::Read;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, PoisonError};

/// Bytes read per `read(2)`.
const CHUNK: usize = 8192;

/// Head-and-tail buffer of one stream.
#[derive(Debug)]
pub struct Capture {
    head_cap: usize,
    tail_cap: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
}

impl Capture {
    /// A buffer keeping at most `cap` bytes.
    pub fn new(cap: usize) -> Self {
        let head_cap = cap / 2;
        Capture {
            head_cap,
            tail_cap: cap - head_cap,
            head: Vec::new(),
            tail: VecDeque::new(),
            total: 0,
        }
    }

    /// Appends what the stream produced.
    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let room = self.head_cap - self.head.len();
        if room > 0 {
            let n = room.min(bytes.len());
            self.head.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
        }
        if bytes.len() >= self.tail_cap {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - self.tail_cap..]);
            return;
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.tail_cap);
        self.tail.drain(..overflow);
        self.tail.extend(bytes);
    }

    /// Bytes produced but not kept.
    pub fn cut(&self) -> u64 {
        self.total - (self.head.len() + self.tail.len()) as u64
    }

    /// Everything produced, in bytes.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The kept text (lossy UTF-8), with a note where the middle was cut.
    pub fn render(&self) -> String {
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        let cut = self.cut();
        if cut == 0 {
            let mut all = self.head.clone();
            all.extend_from_slice(&tail);
            return String::from_utf8_lossy(&all).into_owned();
        }
        format!(
            "{}\n[… {cut} bytes cut …]\n{}",
            String::from_utf8_lossy(&self.head),
            String::from_utf8_lossy(&tail)
        )
    }
}

/// A capture shared between its reader thread and the call that renders it.
pub type Shared = Arc<Mutex<Capture>>;

/// A fresh shared capture.
pub fn shared(cap: usize) -> Shared {
    Arc::new(Mutex::new(Capture::new(cap)))
}

/// Reads `stream` to its end on a new thread, into `into`; sends `()` on `done` at the end.
///
/// # Errors
/// When the thread cannot be started.
pub fn spawn_reader(
    name: &str,
    mut stream: impl Read + Send + 'static,
    into: Shared,
    done: Sender<()>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name(format!("keel-shell-{name}"))
        .spawn(move || {
            let mut buf = vec![0u8; CHUNK];
            loop {
                match stream.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => into
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(&buf[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            let _ = done.send(());
        })?;
    Ok(())
}

/// The current contents of a shared capture.
pub fn snapshot(c: &Shared) -> (String, u64) {
    let c = c.lock().unwrap_or_else(PoisonError::into_inner);
    (c.render(), c.cut())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn under_the_cap_everything_is_kept() {
        let mut c = Capture::new(10);
        c.push(b"abc");
        c.push(b"defg");
        assert_eq!(c.render(), "abcdefg");
        assert_eq!(c.cut(), 0);
        c.push(b"hij");
        assert_eq!(c.render(), "abcdefghij");
    }

    #[test]
    fn over_the_cap_head_and_tail_are_kept_with_a_note() {
        let mut c = Capture::new(8);
        for chunk in [&b"0123"[..], b"456789", b"ab", b"cdefgh"] {
            c.push(chunk);
        }
        assert_eq!(c.total(), 18);
        assert_eq!(c.cut(), 10);
        assert_eq!(c.render(), "0123\n[… 10 bytes cut …]\nefgh");
        let mut big = Capture::new(4);
        big.push(&[b'x'; 100]);
        assert_eq!(big.render(), "xx\n[… 96 bytes cut …]\nxx");
    }
}
