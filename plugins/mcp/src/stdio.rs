//! The stdio transport (issue 23 items 8 and 17): the server's child process, JSON-RPC lines
//! on its stdin and stdout, and what ended it.
//!
//! rmcp's own child transport drops a message longer than its line cap (16 MiB) and keeps the
//! connection open, so the call that message answered waits for its deadline (600 s by
//! default). Here stdout is read through [`Capped`]: the first message past
//! [`MAX_MESSAGE_BYTES`] ends the connection at once, and the reason is kept in the
//! connection's [`Fault`], so the pending call fails with `MCP_CALL_FAILED` naming the limit
//! and the server is restarted. When the server's stdout closes, the child's exit status is
//! kept there too, so "it went away" says its exit code (or signal) beside its last stderr line.
//!
//! The child is owned by a reaper task, not by the transport: a server that dies before the
//! handshake fails rmcp's *send* (a broken pipe), which never reaches `receive`, so only a task
//! that waits on the child sees its status whichever side noticed first. Dropping or closing the
//! transport tells the reaper to kill the child; an exit it caused itself is not a fault.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::{oneshot, watch};

/// The longest message a server may send (one JSON-RPC line), bytes: rmcp's own cap, which the
/// streamable HTTP client applies too.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// How long a server whose stdout closed gets to exit before its status is given up on.
const EXIT_WAIT: Duration = Duration::from_millis(500);

/// What one connection's start and transport saw that a failure reason should name: why the
/// transport ended (empty while it is open), and whether the server runs without network.
#[derive(Debug, Default)]
pub struct Fault {
    why: Mutex<Option<String>>,
    offline: AtomicBool,
}

impl Fault {
    /// Keeps the first reason.
    pub fn set(&self, why: String) {
        let mut slot = self.why.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() {
            *slot = Some(why);
        }
    }

    /// The reason, if the transport saw one.
    pub fn get(&self) -> Option<String> {
        self.why
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Clears both (a new connection).
    pub fn clear(&self) {
        *self.why.lock().unwrap_or_else(PoisonError::into_inner) = None;
        self.offline.store(false, Ordering::SeqCst);
    }

    /// Notes that the sandbox runs this server without network access.
    pub fn set_offline(&self) {
        self.offline.store(true, Ordering::SeqCst);
    }

    /// Whether the sandbox runs this server without network access.
    pub fn offline(&self) -> bool {
        self.offline.load(Ordering::SeqCst)
    }
}

/// A reader that fails once a line grows past `max` bytes, keeping why in `fault`.
pub struct Capped<R> {
    inner: R,
    line: usize,
    max: usize,
    fault: Arc<Fault>,
    failed: bool,
}

impl<R> Capped<R> {
    /// `inner` capped at `max` bytes per line.
    pub fn new(inner: R, max: usize, fault: Arc<Fault>) -> Self {
        Capped {
            inner,
            line: 0,
            max,
            fault,
            failed: false,
        }
    }

    fn too_long() -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, "message over the size limit")
    }

    /// Accounts for `fresh` bytes; false when a line is now over the cap.
    fn account(&mut self, fresh: &[u8]) -> bool {
        let mut pieces = fresh.split(|b| *b == b'\n');
        // The first piece continues the current line; every later one starts a new line.
        if let Some(first) = pieces.next() {
            self.line += first.len();
        }
        for piece in pieces {
            if self.line > self.max {
                return false;
            }
            self.line = piece.len();
        }
        self.line <= self.max
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Capped<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.failed {
            return Poll::Ready(Err(Capped::<R>::too_long()));
        }
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let fresh = buf.filled()[before..].to_vec();
                if this.account(&fresh) {
                    Poll::Ready(Ok(()))
                } else {
                    // Nothing of a failed read is handed on.
                    buf.set_filled(before);
                    this.failed = true;
                    this.fault.set(format!(
                        "it sent a message of more than {} MiB (the limit of one MCP message); \
                         the connection was closed",
                        this.max / (1024 * 1024)
                    ));
                    Poll::Ready(Err(Capped::<R>::too_long()))
                }
            }
            other => other,
        }
    }
}

/// A stdio server: the transport over its pipes; the child itself lives in a reaper task that
/// kills it when the transport is closed or dropped.
pub struct Stdio {
    transport: AsyncRwTransport<RoleClient, Capped<ChildStdout>, ChildStdin>,
    pid: Option<u32>,
    exited: watch::Receiver<bool>,
    kill: Option<oneshot::Sender<()>>,
}

impl Stdio {
    /// The transport over `child`'s piped stdin and stdout. Must be called inside a tokio
    /// runtime (the reaper is spawned on it).
    ///
    /// # Errors
    /// stdin or stdout was not piped.
    pub fn new(mut child: Child, fault: Arc<Fault>) -> io::Result<Self> {
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| io::Error::other("stdout was not piped"))?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| io::Error::other("stdin was not piped"))?;
        let capped = Capped::new(stdout, MAX_MESSAGE_BYTES, Arc::clone(&fault));
        // The cap is ours (it fails the connection); rmcp's would drop the line silently.
        let transport = AsyncRwTransport::new(capped, stdin).with_max_line_length(usize::MAX);
        let pid = child.id();
        let (kill, killed) = oneshot::channel::<()>();
        let (exit_tx, exited) = watch::channel(false);
        tokio::spawn(reap(child, fault, killed, exit_tx));
        Ok(Stdio {
            transport,
            pid,
            exited,
            kill: Some(kill),
        })
    }

    /// The child's pid.
    pub fn id(&self) -> Option<u32> {
        self.pid
    }

    /// Resolves once the child has ended (whoever ended it); for a failure reason that needs
    /// its exit status after the transport itself is gone.
    pub fn exit_watch(&self) -> ExitWatch {
        ExitWatch(self.exited.clone())
    }

    /// Waits up to [`EXIT_WAIT`] for the reaper to have recorded how the child ended.
    async fn note_exit(&mut self) {
        self.exit_watch().wait().await;
    }
}

/// A handle that tells when a [`Stdio`]'s child has ended.
#[derive(Clone)]
pub struct ExitWatch(watch::Receiver<bool>);

impl ExitWatch {
    /// Waits up to [`EXIT_WAIT`] for the child to end; its status (when it ended on its own)
    /// is in the connection's [`Fault`] by then.
    pub async fn wait(mut self) {
        let _ = tokio::time::timeout(EXIT_WAIT, self.0.wait_for(|ended| *ended)).await;
    }
}

/// Owns the child: records how it ended on its own in `fault`, or kills it when the transport
/// asks (or is dropped) without calling that a fault.
async fn reap(
    mut child: Child,
    fault: Arc<Fault>,
    killed: oneshot::Receiver<()>,
    exited: watch::Sender<bool>,
) {
    tokio::select! {
        status = child.wait() => {
            if let Ok(status) = status {
                fault.set(describe_exit(status));
            }
        }
        _ = killed => {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }
    let _ = exited.send(true);
}

/// "it exited with code 3", "it was killed by signal 9".
pub fn describe_exit(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("it exited with code {code}"),
        (None, Some(sig)) => format!("it was killed by signal {sig}"),
        (None, None) => format!("it ended ({status})"),
    }
}

impl Transport<RoleClient> for Stdio {
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.transport.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message = self.transport.receive().await;
        if message.is_none() {
            self.note_exit().await;
        }
        message
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let closed = self.transport.close().await;
        if let Some(kill) = self.kill.take() {
            let _ = kill.send(());
        }
        closed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt as _;

    #[test]
    fn a_line_past_the_cap_fails_the_reader_and_says_why() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let fault = Arc::new(Fault::default());
            let ok = b"{\"a\":1}\n{\"b\":2}\n".to_vec();
            let mut r = Capped::new(&ok[..], 8, Arc::clone(&fault));
            let mut out = Vec::new();
            r.read_to_end(&mut out).await.unwrap();
            assert_eq!(out, ok);
            assert_eq!(fault.get(), None);

            let long = b"{\"a\":1}\n0123456789\n".to_vec();
            let mut r = Capped::new(&long[..], 8, Arc::clone(&fault));
            let e = r.read_to_end(&mut Vec::new()).await.unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData);
            assert!(
                fault
                    .get()
                    .unwrap()
                    .contains("the limit of one MCP message")
            );
        });
    }
}
