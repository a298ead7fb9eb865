//! Stop signals while a driver or command runs (ARCHITECTURE §11; issue 10 items 7 and 8).
//! SIGINT, SIGTERM and SIGHUP take one path, parameterised by the signal:
//!
//! 1. the first one prints `keel: interrupted (SIG…)` — once, here, whoever stops the work —
//!    and, for a driver, calls its `interrupt` (`keel.driver`): the headless driver aborts the
//!    turn (the loop stops running tool bodies; `tool-shell` terminates their process groups,
//!    SBX-01), waits for the turn to close, flushes and closes the session, and returns;
//! 2. the work gets [`GRACE`] to return; a second signal of any kind cuts the wait short;
//! 3. either way the caller then tears every row down (a driver stopped mid-run has its
//!    session finished by its own disposer; running process trees are stopped and joined,
//!    SBX-02) and keel exits 128 + the first signal's number (130, 143, 129) through `main`,
//!    so the output guard drains.
//!
//! Teardown itself is not cut short by more signals (each disposer is bounded by its own
//! deadline); SIGKILL remains the way not to wait, and the next load repairs the session.
//!
//! The handlers are installed when the work starts and stay for the rest of the process (a
//! signal during teardown is absorbed, not fatal); before that, the default actions apply.

use std::future::poll_fn;
use std::task::Poll;
use std::time::Duration;

use tokio::signal::unix::{Signal, SignalKind, signal};

/// How long the work may take to stop cleanly after the first signal.
pub(super) const GRACE: Duration = Duration::from_secs(10);

/// A signal that stops keel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stop {
    /// `SIGINT`, `SIGTERM`, `SIGHUP`.
    pub name: &'static str,
    number: i32,
}

impl Stop {
    /// 128 + the signal's number.
    pub fn exit_code(self) -> i32 {
        128 + self.number
    }
}

/// The installed handlers for the three stop signals.
pub(super) struct StopSignals {
    streams: Vec<(Stop, Signal)>,
}

impl StopSignals {
    /// Installs the handlers (on the current tokio runtime).
    ///
    /// # Errors
    /// When a handler cannot be registered.
    pub fn install() -> std::io::Result<StopSignals> {
        let kinds = [
            ("SIGINT", SignalKind::interrupt()),
            ("SIGTERM", SignalKind::terminate()),
            ("SIGHUP", SignalKind::hangup()),
        ];
        let mut streams = Vec::with_capacity(kinds.len());
        for (name, kind) in kinds {
            let stop = Stop {
                name,
                number: kind.as_raw_value(),
            };
            streams.push((stop, signal(kind)?));
        }
        Ok(StopSignals { streams })
    }

    /// A stop signal that already arrived, without waiting.
    pub fn try_recv(&mut self) -> Option<Stop> {
        let waker = futures::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        self.streams
            .iter_mut()
            .find_map(|(stop, stream)| match stream.poll_recv(&mut cx) {
                Poll::Ready(Some(())) => Some(*stop),
                _ => None,
            })
    }

    /// The next stop signal, whichever comes first.
    pub async fn recv(&mut self) -> Stop {
        poll_fn(|cx| {
            for (stop, stream) in &mut self.streams {
                if let Poll::Ready(Some(())) = stream.poll_recv(cx) {
                    return Poll::Ready(*stop);
                }
            }
            Poll::Pending
        })
        .await
    }
}

/// Steps 1 and 2: `first` arrived while `work` ran; `interrupt` asks the work to stop (the
/// driver's `interrupt`, or nothing for a command). Returns the exit code.
pub(super) async fn stop<W, I>(first: Stop, work: W, interrupt: I, signals: &mut StopSignals) -> i32
where
    W: Future,
    I: Future<Output = bool>,
{
    keel_output_guard::redact::eprintln(format_args!("keel: interrupted ({})", first.name));
    let stopped = async {
        interrupt.await;
        work.await;
    };
    tokio::select! {
        () = stopped => {}
        again = signals.recv() => {
            keel_output_guard::redact::eprintln(format_args!(
                "keel: {} while stopping: not waiting for the driver any longer",
                again.name
            ));
        }
        () = tokio::time::sleep(GRACE) => {
            keel_output_guard::redact::eprintln(format_args!(
                "keel: the driver did not stop within {} s",
                GRACE.as_secs()
            ));
        }
    }
    first.exit_code()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    // §11: exit 128 + n for each stop signal.
    #[test]
    fn each_stop_signal_exits_128_plus_its_number() {
        rt().block_on(async {
            let signals = StopSignals::install().unwrap();
            let codes: Vec<(&str, i32)> = signals
                .streams
                .iter()
                .map(|(s, _)| (s.name, s.exit_code()))
                .collect();
            assert_eq!(codes, [("SIGINT", 130), ("SIGTERM", 143), ("SIGHUP", 129)]);
        });
    }

    // Work that stops once interrupted ends the wait at once, without the grace.
    #[test]
    fn work_that_stops_when_asked_ends_the_wait_before_the_grace() {
        rt().block_on(async {
            let mut signals = StopSignals::install().unwrap();
            let first = signals.streams[1].0;
            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
            let started = std::time::Instant::now();
            let interrupt = async move {
                let _ = tx.send(());
                true
            };
            let work = async move {
                let _ = rx.await;
            };
            let code = stop(first, work, interrupt, &mut signals).await;
            assert_eq!(code, 143);
            assert!(started.elapsed() < GRACE);
        });
    }
}
