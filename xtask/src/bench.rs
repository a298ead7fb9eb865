//! `cargo xtask bench [--quick] [-- ARGS]`: the kernel benchmarks (ARCHITECTURE §12).
//!
//! Benchmarks are a bench target (`tests/benches/kernel.rs` in crate `keel-tests`), never timed
//! tests. The release build comes first because the benches load the release `keel` plugins and
//! binary; `--quick` forwards `--quick` to the harness for a short smoke run. The bench file is
//! checked before building so a missing target fails in a second, not after a release build.

use crate::build;
use crate::build::Profile;
use crate::shell;
use crate::shell::Failure;
use crate::shell::Result;

/// Entry point for `cargo xtask bench`.
pub fn run(args: &[String]) -> Result {
    let mut quick = false;
    let mut harness: Vec<String> = Vec::new();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "--quick" => quick = true,
            "--" => harness.extend(iter.by_ref().cloned()),
            other => return Err(Failure::usage(format!("`bench` does not take `{other}`"))),
        }
    }

    let bench = shell::root()
        .join("tests")
        .join("benches")
        .join("kernel.rs");
    if !bench.is_file() {
        return Err(Failure::new(format!(
            "no benchmark target yet: {} does not exist (bench `kernel` of crate keel-tests)",
            shell::relative(&bench)
        )));
    }

    build::workspace(Profile::Release)?;
    let mut cmd = shell::cargo(["bench", "-p", "keel-tests", "--bench", "kernel"]);
    if quick || !harness.is_empty() {
        cmd.arg("--");
    }
    if quick {
        cmd.arg("--quick");
    }
    cmd.args(&harness);
    shell::run(&mut cmd)
}
