//! The `keel` binary: first the start-up clock (`boot`), then the process hardening
//! (non-dumpable, before any plugin runs), then the output guard on descriptors 1 and 2 (SEC-03:
//! everything the process prints passes the redactions plugins register), tracing to stderr
//! (one `keel: warning: ROW: …` line per warning or error, tracing's format only with
//! `KEEL_LOG`: `log_lines`), then the CLI.
//! Every way out goes through `finish`, so no buffered line is lost.

use keel_output_guard::OutputGuard;

fn main() {
    // Issue 25 item 1: start-up is measured from here (plus what came before `main`).
    keel_cli::boot::mark();
    let hardening = keel_cli::hardening::harden();
    let (guard, mut warnings) = OutputGuard::install();
    warnings.extend(hardening);
    keel_cli::log_lines::install();
    keel_cli::boot::started();
    for warning in warnings {
        tracing::warn!("{warning}");
    }
    // A panic that escapes the CLI has had its message printed through the guard; it still
    // ends the process with Rust's panic code, after the guard forwarded that message.
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let code = std::panic::catch_unwind(|| keel_cli::execute(argv)).unwrap_or(101);
    guard.finish();
    std::process::exit(code);
}
