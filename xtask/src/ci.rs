//! `cargo xtask ci`: the one required CI job, run by `.ci/run` on a clean checkout.
//!
//! Steps, cheapest first so a formatting slip fails in seconds, not after a 20-minute build:
//! `cargo fmt --check`, `cargo clippy -D warnings` on every target, tidy, the `docs/events.md`
//! drift check, then the README's test command (`cargo xtask test`). It stops at the first
//! failing step and names it on its own line, so the end of a long CI log says what broke.
//! tidy, docs and test run in-process (same code as their commands) rather than re-invoking
//! `cargo xtask`, which would only add a nested cargo and a second build lock.

use crate::docs;
use crate::shell;
use crate::shell::Failure;
use crate::shell::Result;
use crate::test;
use crate::tidy;

type Step = (&'static str, fn() -> Result);

const STEPS: &[Step] = &[
    ("fmt", fmt),
    ("clippy", clippy),
    ("tidy", tidy::check_and_report),
    ("docs --check", docs::check),
    ("test", run_tests),
];

/// Entry point for `cargo xtask ci [--checks-only]`. `--checks-only` stops before the test
/// step, so `.ci/run` can call the README's test command (`cargo xtask test`) by its own name.
pub fn run(args: &[String]) -> Result {
    let steps: &[Step] = match args {
        [] => STEPS,
        [flag] if flag == "--checks-only" => &STEPS[..STEPS.len() - 1],
        [other, ..] => return Err(Failure::usage(format!("`ci` does not take `{other}`"))),
    };
    let total = steps.len();
    for (index, (name, step)) in steps.iter().enumerate() {
        println!("\n==> ci step {}/{total}: {name}", index + 1);
        if let Err(failure) = step() {
            eprintln!("xtask ci: step `{name}` failed: {failure}");
            return Err(Failure::with_code(
                failure.code,
                format!("ci failed at step `{name}`"),
            ));
        }
    }
    println!("\n==> ci: all {total} steps passed");
    Ok(())
}

fn fmt() -> Result {
    shell::run(&mut shell::cargo(["fmt", "--all", "--", "--check"]))
}

fn clippy() -> Result {
    shell::run(&mut shell::cargo([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))
}

fn run_tests() -> Result {
    test::run(&[])
}
