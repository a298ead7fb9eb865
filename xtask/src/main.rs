//! `cargo xtask`: keel's project automation, in Rust instead of shell scripts.
//!
//! This file owns argument dispatch and the help text only; each command lives in its own module
//! (`build`, `dist`, `install`, `test`, `bench`, `docs`, `tidy`, `ci`, `demo`, `compat`, `new_plugin`) and shares process plumbing
//! from `shell`. Decision: no argument-parsing crate — a handful of commands with one or two flags each
//! do not pay for a dependency, and xtask must build before anything else does. `cargo xtask` is
//! an alias in `.cargo/config.toml`; `.ci/run` calls `cargo xtask ci`.

mod bench;
mod build;
mod ci;
mod compat;
mod demo;
mod dist;
mod docs;
mod errors_doc;
mod install;
mod mcp_servers;
mod new_plugin;
mod python_deps;
mod shell;
mod test;
mod tidy;
mod tidy_codes;
mod tidy_decisions;
mod tidy_kernel;
mod tidy_readme;

use std::process::ExitCode;

use shell::Failure;
use shell::Result;

const USAGE: &str = "\
usage: cargo xtask <command> [options]

commands:
  build [--release]      build the workspace: the `keel` binary and every cdylib plugin
  dist [--out DIR] [--build-dir DIR]
                         release build into a relocatable layout (default dist/), locked per
                         profile and per profile with each shipped patch; --build-dir lays out
                         an existing build (target/debug) instead of building release
  install [--prefix DIR] [--build-dir DIR]
                         the dist layout in PREFIX/lib/keel (default ~/.local), locked, and
                         PREFIX/bin/keel linking to it; says whether PREFIX/bin is on PATH
  test [-- ARGS]         build, then run every test (nextest when installed) and the doctests
  bench [--quick]        release build, then the kernel and session benchmarks (tests/benches/)
  docs [--check]         generate docs/events.md from the event catalog; --check fails on drift
  tidy                   repository rules: `//!` headers, kernel/plugin separation, file budgets
  ci [--checks-only]     fmt --check, clippy -D warnings, tidy, docs --check, then `test`
  new-plugin NAME [--dir DIR]
                         write a new out-of-tree plugin crate (tool, typed config, listener, tests)
  demo [TASK]            build, then run the offline `demo` profile in target/xtask-demo/work
  compat [--keep]        keel against a real llama.cpp server and a small model (not in CI; minutes)
  claude-sdk             pip install the pinned claude-agent-sdk into target/claude-sdk-venv
  help                   this message
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect();
    match dispatch(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("xtask: error: {failure}");
            if failure.usage {
                eprint!("\n{USAGE}");
            }
            ExitCode::from(failure.code)
        }
    }
}

fn dispatch(args: &[String]) -> Result {
    let Some((command, rest)) = args.split_first() else {
        print!("{USAGE}");
        return Ok(());
    };
    match command.as_str() {
        "build" => build::run(rest),
        "dist" => dist::run(rest),
        "install" => install::run(rest),
        "test" => test::run(rest),
        "bench" => bench::run(rest),
        "docs" => docs::run(rest),
        "tidy" => tidy::run(rest),
        "ci" => ci::run(rest),
        "demo" => demo::run(rest),
        "compat" => compat::run(rest),
        "claude-sdk" => python_deps::run(rest),
        "new-plugin" => new_plugin::run(rest),
        "help" | "-h" | "--help" => {
            print!("{USAGE}");
            Ok(())
        }
        other => Err(Failure::usage(format!("unknown command `{other}`"))),
    }
}

/// Fails with a usage error when a command received arguments it does not take.
fn no_more_args(command: &str, rest: &[String]) -> Result {
    match rest.first() {
        None => Ok(()),
        Some(arg) => Err(Failure::usage(format!("`{command}` does not take `{arg}`"))),
    }
}
