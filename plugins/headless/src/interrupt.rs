//! SIGINT while a run is in flight: [`SigintWatch`] registers a handler when a run starts
//! (signal-hook's self-pipe iterator, on a std thread of our own, since this cdylib cannot use
//! the kernel's tokio) and removes it when the run ends. Each signal becomes one item on
//! [`Interrupts`], which the run awaits beside `wait_idle`: on the first, it aborts the turn,
//! waits for the loop to close it, closes (flushes) the session and exits 130.
//!
//! signal-hook chains to the handler installed before it, so the kernel's own SIGINT handling
//! still runs; see `lib.rs` for the disposer that covers a kernel that stops the driver first.

use futures::StreamExt as _;
use futures::channel::mpsc;
use signal_hook::consts::SIGINT;
use signal_hook::iterator::{Handle, Signals};

/// The stream of interrupt requests a run listens to.
pub struct Interrupts {
    rx: mpsc::UnboundedReceiver<()>,
    /// Held by [`Interrupts::never`] so the stream stays open.
    _open: Option<mpsc::UnboundedSender<()>>,
}

impl Interrupts {
    /// A stream fed by hand (tests) or by [`SigintWatch`]: `(sender, stream)`.
    pub fn channel() -> (mpsc::UnboundedSender<()>, Interrupts) {
        let (tx, rx) = mpsc::unbounded();
        (tx, Interrupts { rx, _open: None })
    }

    /// A stream that never fires (when no handler could be installed).
    pub fn never() -> Interrupts {
        let (tx, rx) = mpsc::unbounded();
        Interrupts {
            rx,
            _open: Some(tx),
        }
    }

    /// Waits for the next interrupt (`false` when the source is gone).
    pub async fn next(&mut self) -> bool {
        self.rx.next().await.is_some()
    }

    /// Whether an interrupt is already queued (consumes it).
    pub fn pending(&mut self) -> bool {
        self.rx.try_recv().is_ok()
    }
}

/// A registered SIGINT handler; dropping it unregisters the handler and ends its thread.
pub struct SigintWatch {
    handle: Handle,
}

impl SigintWatch {
    /// Registers the handler and starts the thread that forwards signals.
    ///
    /// # Errors
    /// When the handler cannot be registered or the thread cannot start.
    pub fn start() -> std::io::Result<(SigintWatch, Interrupts)> {
        let mut signals = Signals::new([SIGINT])?;
        let handle = signals.handle();
        let (tx, rx) = Interrupts::channel();
        let spawned = std::thread::Builder::new()
            .name("keel-headless-sigint".to_owned())
            .spawn(move || {
                for _ in signals.forever() {
                    if tx.unbounded_send(()).is_err() {
                        break;
                    }
                }
                // `signals` drops here: the action is unregistered.
            });
        if let Err(e) = spawned {
            handle.close();
            return Err(e);
        }
        Ok((SigintWatch { handle }, rx))
    }
}

impl Drop for SigintWatch {
    fn drop(&mut self) {
        self.handle.close();
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    #[test]
    fn surf01_sigint_reaches_the_run_while_the_watch_is_registered() {
        let (watch, mut interrupts) = SigintWatch::start().unwrap();
        assert!(!interrupts.pending());
        signal_hook::low_level::raise(SIGINT).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !interrupts.pending() {
            assert!(Instant::now() < deadline, "the interrupt never arrived");
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(watch);
    }

    #[test]
    fn channel_interrupts_are_seen_once() {
        let (tx, mut i) = Interrupts::channel();
        tx.unbounded_send(()).unwrap();
        assert!(i.pending());
        assert!(!i.pending());
    }
}
