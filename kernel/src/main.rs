//! The `keel` binary: tracing to stderr (filter from `KEEL_LOG`) through the output
//! redactions plugins register (SEC-03), then the CLI.

use clap::Parser as _;

fn main() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("KEEL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(keel_kernel::redact::RedactingStderr)
        .with_target(true)
        .init();
    let cli = keel_kernel::cli::Cli::parse();
    std::process::exit(keel_kernel::cli::execute(cli));
}
