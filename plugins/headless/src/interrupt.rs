//! Stopping a run from outside (ARCHITECTURE §11). The kernel owns the process's signals: on
//! SIGINT, SIGTERM or SIGHUP it prints `keel: interrupted (SIG…)` and calls this driver's
//! `interrupt` method with a [`DriverInterrupt`]. [`Stops`] keeps the first request — a run
//! that starts after it sees it at once — and forwards it to the run in flight as one item on
//! its [`Interrupts`]. On it the run aborts the turn, waits for the loop to close it, closes
//! (flushes) the session and returns the request's exit code (128 + the signal's number).
//!
//! The driver installs no signal handler of its own: every signal takes the kernel's one path,
//! and there is no window in which the kernel has seen a signal the driver has not. See
//! `lib.rs` for the disposer that finishes a run the kernel stopped before it returned.

use std::sync::{Mutex, PoisonError};

use futures::StreamExt as _;
use futures::channel::mpsc;
use keel_plugin_api::services::driver::DriverInterrupt;

/// The stream of stop requests a run listens to.
pub struct Interrupts {
    rx: mpsc::UnboundedReceiver<DriverInterrupt>,
    /// Held by [`Interrupts::never`] so the stream stays open.
    _open: Option<mpsc::UnboundedSender<DriverInterrupt>>,
}

impl Interrupts {
    /// A stream fed by hand (tests) or by [`Stops`]: `(sender, stream)`.
    pub fn channel() -> (mpsc::UnboundedSender<DriverInterrupt>, Interrupts) {
        let (tx, rx) = mpsc::unbounded();
        (tx, Interrupts { rx, _open: None })
    }

    /// A stream that never fires.
    pub fn never() -> Interrupts {
        let (tx, rx) = mpsc::unbounded();
        Interrupts {
            rx,
            _open: Some(tx),
        }
    }

    /// Waits for the next stop request (`None` when the source is gone).
    pub async fn next(&mut self) -> Option<DriverInterrupt> {
        self.rx.next().await
    }

    /// A stop request already queued, if any (consumes it).
    pub fn pending(&mut self) -> Option<DriverInterrupt> {
        self.rx.try_recv().ok()
    }
}

/// The driver's stop requests: the first one the kernel made, and the runs listening now.
#[derive(Default)]
pub struct Stops {
    state: Mutex<StopsState>,
}

#[derive(Default)]
struct StopsState {
    requested: Option<DriverInterrupt>,
    /// One per run that listens (a run's stream closes when the run ends).
    live: Vec<mpsc::UnboundedSender<DriverInterrupt>>,
}

impl Stops {
    /// Records `stop` and hands it to every run in flight; only the first request counts (the
    /// process is stopping). Returns whether a run was listening.
    pub fn request(&self, stop: DriverInterrupt) -> bool {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.live.retain(|tx| !tx.is_closed());
        if state.requested.is_none() {
            state.requested = Some(stop.clone());
            for tx in &state.live {
                let _ = tx.unbounded_send(stop.clone());
            }
        }
        !state.live.is_empty()
    }

    /// The stream for a run that starts now; it carries the request already made, if any.
    pub fn listen(&self) -> Interrupts {
        let (tx, interrupts) = Interrupts::channel();
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(stop) = &state.requested {
            let _ = tx.unbounded_send(stop.clone());
        }
        state.live.retain(|tx| !tx.is_closed());
        state.live.push(tx);
        interrupts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stop(signal: &str, exit_code: i32) -> DriverInterrupt {
        DriverInterrupt {
            signal: signal.to_owned(),
            exit_code,
        }
    }

    #[test]
    fn channel_interrupts_are_seen_once() {
        let (tx, mut i) = Interrupts::channel();
        tx.unbounded_send(stop("SIGINT", 130)).unwrap();
        assert_eq!(i.pending(), Some(stop("SIGINT", 130)));
        assert_eq!(i.pending(), None);
    }

    // §11: the first request reaches the run in flight; a later one changes nothing.
    #[test]
    fn surf01_the_first_stop_reaches_the_listening_run_once() {
        let stops = Stops::default();
        let mut run = stops.listen();
        assert_eq!(run.pending(), None);
        assert!(stops.request(stop("SIGTERM", 143)));
        assert!(stops.request(stop("SIGINT", 130)));
        assert_eq!(run.pending(), Some(stop("SIGTERM", 143)));
        assert_eq!(run.pending(), None);
    }

    // A signal that came before the run started listening is not lost: the run sees it first.
    #[test]
    fn surf01_a_stop_before_the_run_listens_is_seen_when_it_does() {
        let stops = Stops::default();
        assert!(!stops.request(stop("SIGHUP", 129)));
        let mut run = stops.listen();
        assert_eq!(run.pending(), Some(stop("SIGHUP", 129)));
    }

    #[test]
    fn a_run_that_ended_no_longer_counts_as_listening() {
        let stops = Stops::default();
        drop(stops.listen());
        assert!(!stops.request(stop("SIGINT", 130)));
    }
}
