//! `cargo xtask test [-- ARGS]`: the README's test command; `.ci/run` reaches it via `ci`.
//!
//! Order matters: integration tests in `tests/` run the built `keel` binary with the built cdylib
//! plugins (ARCHITECTURE §12), and `cargo test` only builds test targets and their dependencies,
//! never sibling cdylibs — so the whole workspace is built first and `KEEL_TEST_BUILT=1` tells
//! the tests the artifacts are fresh. Tests run under cargo-nextest when it is installed (process
//! per test: a test that SIGKILLs a child or leaks a thread cannot poison its neighbours), else
//! under `cargo test`; doctests always run through `cargo test --doc` because nextest skips them.
//! Both runs happen even if the first fails (`--no-fail-fast` in spirit), and any failure fails
//! the command. Extra arguments go to the main run; they reach the doctest run only with the
//! `cargo test` runner, since nextest filter syntax means nothing to `cargo test --doc`.

use crate::build;
use crate::build::Profile;
use crate::shell;
use crate::shell::Failure;
use crate::shell::Result;

/// Entry point for `cargo xtask test`.
pub fn run(args: &[String]) -> Result {
    let extra = match args.split_first() {
        Some((first, rest)) if first == "--" => rest,
        _ => args,
    };
    build::workspace(Profile::Debug)?;
    // The real MCP servers the mcp suites need (issue 15) and the official ACP client the acp
    // suites drive `keel acp` with (issue 26 item 3): missing ones fail those tests.
    crate::mcp_servers::install()?;
    crate::mcp_servers::install_acp_client()?;
    // The real Claude Agent SDK the stream suite parses with (issue 23 item 13).
    crate::python_deps::install()?;

    let nextest = shell::probe(&mut shell::cargo(["nextest", "--version"]));
    let mut failed = Vec::new();

    let mut tests = if nextest {
        shell::cargo(["nextest", "run", "--workspace", "--no-fail-fast"])
    } else {
        println!("cargo-nextest is not installed; running the tests with `cargo test`");
        shell::cargo(["test", "--workspace", "--no-fail-fast"])
    };
    tests.args(extra).env("KEEL_TEST_BUILT", "1");
    if let Err(failure) = shell::run(&mut tests) {
        eprintln!("xtask test: {failure}");
        failed.push("tests");
    }

    let mut doc = shell::cargo(["test", "--workspace", "--doc"]);
    if nextest {
        if !extra.is_empty() {
            println!("(doctests run unfiltered: the extra arguments were for nextest)");
        }
    } else {
        doc.args(extra);
    }
    doc.env("KEEL_TEST_BUILT", "1");
    if let Err(failure) = shell::run(&mut doc) {
        eprintln!("xtask test: {failure}");
        failed.push("doctests");
    }

    if failed.is_empty() {
        Ok(())
    } else {
        Err(Failure::new(format!("failed: {}", failed.join(", "))))
    }
}
