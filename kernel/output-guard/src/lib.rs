//! The output guard (SEC-03 for output nobody routed): file descriptors 1 and 2 of the `keel`
//! process become pipes that a forwarder thread per stream drains, redacts with [`redact`] and
//! writes to the real stdout/stderr.
//!
//! Why at the descriptor level: a `cdylib` plugin links its own copy of `std`, so its
//! `println!`, its panic messages and the output of a child it starts with inherited stdio never
//! pass through the kernel's writers. The kernel owns the process's streams (ARCHITECTURE §1),
//! so it owns the descriptors too. The kernel's own writers redact as well; a second pass is
//! harmless (a replacement contains no needle).
//!
//! Complete lines are forwarded as soon as they arrive; a partial line (a prompt, a progress
//! bar's `\r`) after [`IDLE_FLUSH`] without more bytes, or once it exceeds [`MAX_PENDING`].
//! [`OutputGuard::finish`] restores the real descriptors and forwards what is still in the
//! pipes; only an abrupt end (a signal, `abort`, another `exit`) can lose the last bytes in
//! flight.
//!
//! [`redact`]: crate::redact

pub mod redact;

use std::fs::File;
use std::io::{IsTerminal as _, Write as _};
use std::os::fd::{AsFd, AsRawFd as _, BorrowedFd, IntoRawFd as _, OwnedFd};
use std::sync::OnceLock;
use std::thread::JoinHandle;
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::io::Errno;
use rustix::pipe::{PipeFlags, pipe_with};

/// How long a partial line waits for the rest before it is forwarded as is.
pub const IDLE_FLUSH: Duration = Duration::from_millis(20);

/// A partial line longer than this is forwarded without waiting for its newline.
pub const MAX_PENDING: usize = 64 * 1024;

/// The two streams the guard owns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Descriptor 1.
    Stdout,
    /// Descriptor 2.
    Stderr,
}

impl Stream {
    /// The stream's descriptor as it is now.
    fn current(self) -> BorrowedFd<'static> {
        match self {
            Stream::Stdout => rustix::stdio::stdout(),
            Stream::Stderr => rustix::stdio::stderr(),
        }
    }

    /// Makes `fd` the stream's descriptor (`dup2`).
    fn put(self, fd: impl AsFd) -> rustix::io::Result<()> {
        match self {
            Stream::Stdout => rustix::stdio::dup2_stdout(fd),
            Stream::Stderr => rustix::stdio::dup2_stderr(fd),
        }
    }
}

/// The installed guard; [`finish`](OutputGuard::finish) it before the process exits.
#[derive(Debug)]
pub struct OutputGuard {
    streams: Vec<Guarded>,
    /// Dropping the write end wakes every forwarder to drain and stop.
    stop: Option<OwnedFd>,
}

/// Whether each stream was a terminal before the guard replaced it with a pipe.
static TERMINAL: OnceLock<[bool; 2]> = OnceLock::new();

/// Whether `stream` is (or, once the guard is installed, was) a terminal: a driver asks this to
/// decide on progress output, since its own check would see the guard's pipe.
pub fn is_terminal(stream: Stream) -> bool {
    match TERMINAL.get() {
        Some(terminal) => terminal[stream as usize],
        None => stream.current().is_terminal(),
    }
}

#[derive(Debug)]
struct Guarded {
    stream: Stream,
    /// A duplicate of the real descriptor, restored by `finish`.
    original: OwnedFd,
    forwarder: JoinHandle<()>,
}

impl OutputGuard {
    /// Routes descriptors 1 and 2 through the redactions. A stream that cannot be guarded (it
    /// was closed at start, or the process is out of descriptors) keeps its real descriptor and
    /// is named in the returned warnings; the other stream is still guarded.
    pub fn install() -> (Self, Vec<String>) {
        reopen_closed_standard_fds();
        let _ = TERMINAL.set([
            Stream::Stdout.current().is_terminal(),
            Stream::Stderr.current().is_terminal(),
        ]);
        let mut warnings = Vec::new();
        let (stop_rx, stop_tx) = match pipe_with(PipeFlags::CLOEXEC) {
            Ok(pair) => pair,
            Err(e) => {
                warnings.push(format!("output is not guarded: cannot create a pipe: {e}"));
                return (
                    Self {
                        streams: Vec::new(),
                        stop: None,
                    },
                    warnings,
                );
            }
        };
        let mut streams = Vec::new();
        for stream in [Stream::Stdout, Stream::Stderr] {
            match guard(stream, &stop_rx) {
                Ok(guarded) => streams.push(guarded),
                Err(e) => warnings.push(format!("{stream:?} is not guarded: {e}")),
            }
        }
        let guard = Self {
            streams,
            stop: Some(stop_tx),
        };
        (guard, warnings)
    }

    /// Flushes the kernel's buffered output, gives the real descriptors back, and waits until
    /// each forwarder has written what was in its pipe.
    pub fn finish(mut self) {
        let _ = std::io::stdout().lock().flush();
        let _ = std::io::stderr().lock().flush();
        for guarded in &self.streams {
            let _ = guarded.stream.put(&guarded.original);
        }
        self.stop = None;
        for guarded in self.streams.drain(..) {
            let _ = guarded.forwarder.join();
        }
    }
}

/// Puts a descriptor in place of one of the standard three.
type Reopen = fn(&OwnedFd) -> rustix::io::Result<()>;

/// Puts `/dev/null` on any of descriptors 0, 1 and 2 that the process started without
/// (`keel … >&-`). Otherwise the next descriptor opened — the guard's own pipe, or later a
/// session file — would take that number, and whatever is printed would land in it.
fn reopen_closed_standard_fds() {
    let closed = |fd: BorrowedFd<'_>| matches!(rustix::io::fcntl_getfd(fd), Err(Errno::BADF));
    let slots: [(BorrowedFd<'_>, Reopen); 3] = [
        (rustix::stdio::stdin(), |fd| rustix::stdio::dup2_stdin(fd)),
        (Stream::Stdout.current(), |fd| Stream::Stdout.put(fd)),
        (Stream::Stderr.current(), |fd| Stream::Stderr.put(fd)),
    ];
    for (fd, put) in slots {
        if !closed(fd) {
            continue;
        }
        let Ok(null) = File::options().read(true).write(true).open("/dev/null") else {
            return;
        };
        let null = OwnedFd::from(null);
        if null.as_raw_fd() == fd.as_raw_fd() {
            // The lowest free number was this very slot: keep it open for good.
            let _ = null.into_raw_fd();
        } else {
            let _ = put(&null);
        }
    }
}

/// Puts a pipe in place of `stream`'s descriptor and starts its forwarder.
fn guard(stream: Stream, stop: &OwnedFd) -> std::io::Result<Guarded> {
    let original = rustix::io::fcntl_dupfd_cloexec(stream.current(), 3)?;
    let (rx, tx) = pipe_with(PipeFlags::CLOEXEC)?;
    rustix::io::ioctl_fionbio(&rx, true)?;
    let out = File::from(original.try_clone()?);
    let stop = stop.try_clone()?;
    let forwarder = std::thread::Builder::new()
        .name(format!("keel-{stream:?}-guard").to_lowercase())
        .spawn(move || forward(&rx, &stop, out, Some(stream)))?;
    // From here on, whatever the process writes to the stream passes the forwarder.
    stream.put(&tx)?;
    Ok(Guarded {
        stream,
        original,
        forwarder,
    })
}

/// Why the forwarder woke up.
enum Wake {
    /// Bytes (or the end of input) wait in the pipe.
    Data,
    /// `finish` asked it to drain and stop.
    Stop,
    /// A partial line waited [`IDLE_FLUSH`] for its end.
    Idle,
    /// `poll` failed.
    Broken,
}

/// The forwarder loop: read what arrives, forward whole lines redacted, flush a partial line
/// after [`IDLE_FLUSH`]; when told to stop, drain what is buffered and return. If it must end
/// unasked (end of input, a failing `poll` or `read`), it first puts the real descriptor back
/// on `stream`: nobody would drain the pipe, and a writer would block once it filled.
fn forward(rx: &OwnedFd, stop: &OwnedFd, mut out: File, stream: Option<Stream>) {
    let mut lines = LineRedactor::default();
    let mut buf = vec![0_u8; 16 * 1024];
    let idle = Timespec::try_from(IDLE_FLUSH).ok();
    loop {
        let wake = {
            let mut fds = [
                PollFd::new(rx, PollFlags::IN),
                PollFd::new(stop, PollFlags::IN),
            ];
            let timeout = if lines.has_pending() {
                idle.as_ref()
            } else {
                None
            };
            match poll(&mut fds, timeout) {
                Ok(_) if !fds[1].revents().is_empty() => Wake::Stop,
                Ok(_) if !fds[0].revents().is_empty() => Wake::Data,
                Ok(_) => Wake::Idle,
                Err(Errno::INTR) => continue,
                Err(_) => Wake::Broken,
            }
        };
        match wake {
            Wake::Idle => emit(&mut out, &lines.flush()),
            Wake::Data => {
                if drain(rx, &mut buf, &mut lines, &mut out, false) {
                    break;
                }
            }
            Wake::Stop => {
                drain(rx, &mut buf, &mut lines, &mut out, true);
                emit(&mut out, &lines.flush());
                return;
            }
            Wake::Broken => break,
        }
    }
    // Ending unasked.
    if let Some(stream) = stream {
        let _ = stream.put(&out);
    }
    drain(rx, &mut buf, &mut lines, &mut out, true);
    emit(&mut out, &lines.flush());
}

/// Reads what the pipe holds (all of it when `to_the_end`, else one read); `true` at end of
/// input or on an error that ends the stream.
fn drain(
    rx: &OwnedFd,
    buf: &mut [u8],
    lines: &mut LineRedactor,
    out: &mut File,
    to_the_end: bool,
) -> bool {
    loop {
        match rustix::io::read(rx, &mut *buf) {
            Ok(0) => return true,
            Ok(n) => {
                let chunk = buf.get(..n).unwrap_or_default();
                emit(out, &lines.push(chunk));
                if !to_the_end {
                    return false;
                }
            }
            Err(Errno::INTR) => {}
            Err(Errno::AGAIN) => return false,
            Err(_) => return true,
        }
    }
}

/// Writes to the real descriptor. A reader that went away (`keel … | head -1`) must not stall
/// the writers, so a failed write drops the bytes and the forwarder keeps draining.
fn emit(out: &mut File, bytes: &[u8]) {
    if !bytes.is_empty() {
        let _ = out.write_all(bytes);
    }
}

/// Splits a byte stream into lines and redacts each batch of whole lines; keeps the partial
/// tail until its newline, a flush, or [`MAX_PENDING`].
#[derive(Debug, Default)]
pub struct LineRedactor {
    pending: Vec<u8>,
}

impl LineRedactor {
    /// Adds `chunk`; returns the redacted bytes ready to forward.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        self.pending.extend_from_slice(chunk);
        match self.pending.iter().rposition(|&b| b == b'\n') {
            Some(last) => {
                let rest = self.pending.split_off(last + 1);
                let whole = std::mem::replace(&mut self.pending, rest);
                let mut ready = redact::apply_bytes(&whole).into_owned();
                if self.pending.len() > MAX_PENDING {
                    ready.extend_from_slice(&self.flush());
                }
                ready
            }
            None if self.pending.len() > MAX_PENDING => self.flush(),
            None => Vec::new(),
        }
    }

    /// Whether a partial line is waiting.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// The partial line, redacted, and nothing pending after it.
    pub fn flush(&mut self) -> Vec<u8> {
        let tail = std::mem::take(&mut self.pending);
        redact::apply_bytes(&tail).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sec03_whole_lines_pass_at_once_and_a_partial_line_waits_for_its_end() {
        let mut lines = LineRedactor::default();
        assert_eq!(lines.push(b"first line\nsecond "), b"first line\n");
        assert!(lines.has_pending());
        assert_eq!(lines.push(b"half"), b"");
        assert_eq!(lines.push(b" done\nthird"), b"second half done\n");
        assert_eq!(lines.flush(), b"third");
        assert!(!lines.has_pending());
        assert_eq!(lines.flush(), b"");
    }

    #[test]
    fn a_partial_line_longer_than_the_limit_is_forwarded_without_its_newline() {
        let mut lines = LineRedactor::default();
        let long = vec![b'x'; MAX_PENDING + 1];
        assert_eq!(lines.push(&long).len(), MAX_PENDING + 1);
        assert!(!lines.has_pending());
        let mut tail = b"end\n".to_vec();
        tail.extend_from_slice(&long);
        assert_eq!(lines.push(&tail).len(), 4 + MAX_PENDING + 1);
    }

    /// The forwarder on its own pipes: a partial line goes out after the idle time, whole
    /// lines at once, and what is still in the pipe when stop is signalled is not lost.
    #[test]
    fn the_forwarder_flushes_idle_partial_lines_and_drains_on_stop() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        let out = File::create(&path).unwrap();
        let (rx, tx) = pipe_with(PipeFlags::CLOEXEC).unwrap();
        rustix::io::ioctl_fionbio(&rx, true).unwrap();
        let (stop_rx, stop_tx) = pipe_with(PipeFlags::CLOEXEC).unwrap();
        let forwarder = std::thread::spawn(move || forward(&rx, &stop_rx, out, None));
        let read = || std::fs::read_to_string(&path).unwrap();
        let mut tx = File::from(tx);
        tx.write_all(b"prompt> ").unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while read() != "prompt> " {
            assert!(
                std::time::Instant::now() < deadline,
                "partial line never forwarded"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        tx.write_all(b"answer\nlast words without a newline")
            .unwrap();
        // Stop while the write end is still open (a child may hold it): the forwarder drains
        // what is there and returns without waiting for end of input.
        drop(stop_tx);
        forwarder.join().unwrap();
        assert_eq!(read(), "prompt> answer\nlast words without a newline");
        drop(tx);
    }

    /// End of input before any stop (every writer gone): the forwarder forwards the rest,
    /// partial line included, and returns on its own.
    #[test]
    fn the_forwarder_ends_by_itself_at_end_of_input_and_loses_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        let (rx, tx) = pipe_with(PipeFlags::CLOEXEC).unwrap();
        rustix::io::ioctl_fionbio(&rx, true).unwrap();
        let (stop_rx, _stop_tx) = pipe_with(PipeFlags::CLOEXEC).unwrap();
        let out = File::create(&path).unwrap();
        let forwarder = std::thread::spawn(move || forward(&rx, &stop_rx, out, None));
        let mut tx = File::from(tx);
        tx.write_all(b"one\ntwo, unfinished").unwrap();
        drop(tx);
        forwarder.join().unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "one\ntwo, unfinished"
        );
    }

    #[test]
    fn bytes_that_are_not_utf8_pass_unchanged() {
        let mut lines = LineRedactor::default();
        assert_eq!(lines.push(b"\xff\xfe raw\n"), b"\xff\xfe raw\n");
    }
}
