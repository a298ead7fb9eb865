//! Where start-up goes (issue 25 item 1): the process's origin, measured from exec, and the
//! `keel::boot` debug lines that place each start-up phase on that clock.
//!
//! [`mark`] is the first line of `main`. It keeps `main`'s instant and, when `KEEL_LOG` is set
//! (the only way any boot figure is printed), what the process spent before `main`: on Linux
//! the CPU time and run-queue wait of its only thread so far, from `/proc/self/schedstat` in
//! nanoseconds (exec, the dynamic linker, relocations and std's set-up). That misses time the
//! process slept before `main` (a binary read from a cold disk), which the agent bench's
//! outside measurement includes; `/proc/self/stat`'s start time would include it but counts
//! 10 ms clock ticks, too coarse for a 10 ms budget. Elsewhere the pre-`main` part is 0.
//!
//! Every line printed with `KEEL_LOG` carries `+MS` since exec after its timestamp
//! (`log_lines`), so the kernel's per-row `row active` lines and a model adapter's
//! `first request` line sit on the same clock as the CLI's phases.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Log target of the start-up lines: `KEEL_LOG=keel::boot=debug` prints them.
pub const TARGET: &str = "keel::boot";

/// `main`'s first instant and the time before it.
#[derive(Debug, Clone, Copy)]
struct Origin {
    main: Instant,
    pre_main: Duration,
}

static ORIGIN: OnceLock<Origin> = OnceLock::new();

/// Records the origin; the first call wins. Call it first thing in `main`.
pub fn mark() {
    let main = Instant::now();
    let pre_main = if std::env::var_os("KEEL_LOG").is_some() {
        schedstat().unwrap_or(Duration::ZERO)
    } else {
        Duration::ZERO
    };
    let _ = ORIGIN.set(Origin { main, pre_main });
}

/// Time since exec: since `main` plus the estimate of what came before it (zero when `mark`
/// did not run, or ran without `KEEL_LOG`).
pub fn since_exec() -> Duration {
    ORIGIN
        .get()
        .map_or(Duration::ZERO, |o| o.main.elapsed() + o.pre_main)
}

/// The estimate of exec → `main` (zero without [`mark`] or `KEEL_LOG`).
pub fn pre_main() -> Duration {
    ORIGIN.get().map_or(Duration::ZERO, |o| o.pre_main)
}

/// Logs the first two phases, once the log is installed: exec → `main`, and `main`'s own
/// set-up (hardening, output guard, log).
pub fn started() {
    let Some(origin) = ORIGIN.get() else {
        return;
    };
    tracing::debug!(target: TARGET, at_us = micros(origin.pre_main), took_us = micros(origin.pre_main), "exec → main (CPU and run-queue wait before main)");
    phase(
        "process set-up (hardening, output guard, log)",
        origin.main.elapsed(),
    );
}

/// Microseconds since exec, saturating.
pub fn since_exec_us() -> u64 {
    micros(since_exec())
}

/// Microseconds of `d`, saturating.
pub fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Logs that start-up reached `phase`, `took` after the previous step began.
pub fn phase(phase: &str, took: Duration) {
    tracing::debug!(target: TARGET, at_us = since_exec_us(), took_us = micros(took), "{phase}");
}

/// Logs that start-up reached `phase`.
pub fn at(phase: &str) {
    tracing::debug!(target: TARGET, at_us = since_exec_us(), "{phase}");
}

/// CPU time plus run-queue wait of the calling process's main thread, from
/// `/proc/self/schedstat` (`<on-cpu ns> <waiting ns> <slices>`).
fn schedstat() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/self/schedstat").ok()?;
    let mut fields = text.split_ascii_whitespace();
    let on_cpu: u64 = fields.next()?.parse().ok()?;
    let waiting: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_nanos(on_cpu.saturating_add(waiting)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_origin_is_before_now_and_grows() {
        mark();
        let a = since_exec();
        std::thread::sleep(Duration::from_millis(2));
        let b = since_exec();
        assert!(b >= a + Duration::from_millis(2), "{a:?} then {b:?}");
        assert!(b >= pre_main());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn schedstat_reads_this_process() {
        let t = schedstat().expect("/proc/self/schedstat");
        assert!(t > Duration::ZERO);
    }
}
