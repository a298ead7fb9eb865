//! The held stream (issue 26 item 1): a scripted [`Reply`](super::Reply) that sends its first
//! text or reasoning pieces, then keeps the stream open until the test releases it, then sends
//! the rest. Tests of streaming use it to prove that a piece reached keel's output (stdout, a
//! pty, an ACP client) while the model was still "generating": they wait for
//! [`Hold::wait_reached`], read keel's output for the piece, and only then [`Hold::release`].
//!
//! A held answer never carries a `Content-Length`: a well-formed stream goes out with
//! `Transfer-Encoding: chunked` (the part before the hold one chunk, the rest another, then the
//! last-chunk; keep-alive as usual), a fault close-delimited (`Connection: close`, the body ends
//! when the socket does). The hold point counts *pieces*: OpenAI chunks whose delta carries
//! `content` or `reasoning_content`, Anthropic `content_block_delta`s of `text_delta` or
//! `thinking_delta`. When the reply has fewer pieces than asked, the stream holds before its
//! last byte. A request with `stream: false` ignores the hold. A hold nobody releases lets go by itself after [`MAX_HOLD`], so a failed test
//! does not leave the server's thread waiting for ever.

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The longest a stream stays held without a [`Hold::release`].
pub const MAX_HOLD: Duration = Duration::from_secs(60);

/// The test's handle on a held stream: where the server is, and the release. Clones share one
/// hold.
#[derive(Debug, Clone, Default)]
pub struct Hold {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    state: Mutex<HoldState>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct HoldState {
    /// When the part before the hold had been written and flushed.
    reached: Option<Instant>,
    released: bool,
}

impl Hold {
    /// A hold not reached and not released.
    pub fn new() -> Hold {
        Hold::default()
    }

    /// Lets the server send the rest of the stream (also before the hold is reached: then the
    /// stream does not stop at all).
    pub fn release(&self) {
        let mut s = self.lock();
        s.released = true;
        self.inner.changed.notify_all();
    }

    /// When the server had flushed the part before the hold (`None`: not yet).
    pub fn reached(&self) -> Option<Instant> {
        self.lock().reached
    }

    /// Waits until the server flushed the part before the hold and returns when it did; panics
    /// after `timeout`.
    pub fn wait_reached(&self, timeout: Duration) -> Instant {
        let deadline = Instant::now() + timeout;
        let mut s = self.lock();
        loop {
            if let Some(at) = s.reached {
                return at;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "model server: the held stream was not reached within {timeout:?}"
            );
            s = self
                .inner
                .changed
                .wait_timeout(s, left)
                .expect("model server hold")
                .0;
        }
    }

    /// The server's side: marks the hold reached and waits for the release (at most
    /// [`MAX_HOLD`]).
    fn hold_here(&self) {
        let deadline = Instant::now() + MAX_HOLD;
        let mut s = self.lock();
        s.reached = Some(Instant::now());
        self.inner.changed.notify_all();
        while !s.released {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            s = match self.inner.changed.wait_timeout(s, left) {
                Ok((s, _)) => s,
                Err(_) => return,
            };
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HoldState> {
        self.inner.state.lock().expect("model server hold")
    }
}

/// A reply's hold: the handle and how many pieces go out before it.
#[derive(Debug, Clone)]
pub(super) struct Held {
    pub(super) hold: Hold,
    pub(super) after: usize,
}

/// Where `body` (rendered SSE) holds: the byte offset just past its `after`-th piece (0 when
/// `after` is 0; the body's length less one when it has fewer pieces and is not empty).
pub(super) fn hold_point(body: &[u8], after: usize) -> usize {
    if after == 0 {
        return 0;
    }
    let mut seen = 0;
    let mut at = 0;
    while let Some(end) = find(&body[at..], b"\n\n").map(|i| at + i + 2) {
        if is_piece(&body[at..end]) {
            seen += 1;
            if seen == after {
                return end;
            }
        }
        at = end;
    }
    body.len().saturating_sub(1)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Whether one SSE event carries a text or reasoning piece (OpenAI or Anthropic).
fn is_piece(event: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(event) else {
        return false;
    };
    let Some(v) = text
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .and_then(|d| serde_json::from_str::<Value>(d).ok())
    else {
        return false;
    };
    let delta = &v["choices"][0]["delta"];
    let openai = ["content", "reasoning_content"]
        .iter()
        .any(|k| delta[k].as_str().is_some_and(|s| !s.is_empty()));
    let anthropic = v["type"] == "content_block_delta"
        && matches!(
            v["delta"]["type"].as_str(),
            Some("text_delta" | "thinking_delta")
        );
    openai || anthropic
}

/// The HTTP head of a held SSE answer: `200`, chunked for a whole stream (`chunked`), else
/// close-delimited; keep-alive when `keep`.
fn write_head(
    out: &mut impl Write,
    headers: &[(String, String)],
    chunked: bool,
    keep: bool,
) -> std::io::Result<()> {
    let mut head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
                    Cache-Control: no-cache\r\nrequest-id: req_keel_mock\r\n"
        .to_owned();
    if chunked {
        head.push_str("Transfer-Encoding: chunked\r\n");
    }
    head.push_str(if keep {
        "Connection: keep-alive\r\n"
    } else {
        "Connection: close\r\n"
    });
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    out.write_all(head.as_bytes())?;
    out.flush()
}

/// Writes `body` around the hold: the part before it, flushed; the wait for the release; the
/// rest. `chunked` frames each part as one chunk and ends with the last-chunk.
fn write_body(
    out: &mut impl Write,
    body: &[u8],
    held: &Held,
    chunked: bool,
) -> std::io::Result<()> {
    let cut = hold_point(body, held.after);
    let part = |out: &mut dyn Write, bytes: &[u8]| -> std::io::Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        if chunked {
            out.write_all(format!("{:x}\r\n", bytes.len()).as_bytes())?;
            out.write_all(bytes)?;
            out.write_all(b"\r\n")?;
        } else {
            out.write_all(bytes)?;
        }
        out.flush()
    };
    part(out, &body[..cut])?;
    held.hold.hold_here();
    part(out, &body[cut..])?;
    if chunked {
        out.write_all(b"0\r\n\r\n")?;
    }
    out.flush()
}

/// Writes a held SSE answer, head and body: a `whole` (well-formed) stream chunked, a fault
/// close-delimited; `keep` promises keep-alive (only for a whole stream the client keeps).
pub(super) fn send(
    out: &mut impl Write,
    headers: &[(String, String)],
    body: &[u8],
    held: &Held,
    whole: bool,
    keep: bool,
) -> std::io::Result<()> {
    write_head(out, headers, whole, whole && keep)?;
    write_body(out, body, held, whole)
}

/// The held stream's side of the script's vocabulary.
impl super::Reply {
    /// Holds the stream after its first `after` pieces until `hold` is released (modifier; a
    /// well-formed stream then goes out chunked, a fault close-delimited).
    #[must_use]
    pub fn held(mut self, hold: &Hold, after: usize) -> super::Reply {
        self.hold = Some(Held {
            hold: hold.clone(),
            after,
        });
        self
    }

    /// [`Reply::text`](super::Reply::text) held after its first piece; the handle releases it.
    pub fn text_held(text: impl Into<String>) -> (super::Reply, Hold) {
        let hold = Hold::new();
        (super::Reply::text(text).held(&hold, 1), hold)
    }
}
