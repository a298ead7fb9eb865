//! `cargo xtask bench [--quick] [-- ARGS]`: the kernel, session, agent, growth, context, mcp and
//! subagent benchmarks (ARCHITECTURE §12; growth: issue 12; context: issue 14; mcp: issue 15;
//! subagent: issue 16).
//!
//! Benchmarks are bench targets (`tests/benches/{kernel,session,agent,growth,context,mcp,
//! subagent}.rs` in crate `keel-tests`), never timed tests. The release build comes first
//! because the benches load the release `keel` plugins and binary; `--quick` forwards
//! `--quick` to each harness for a short smoke run. The bench files are checked before building so a missing target fails in a
//! second, not after a release build.

use crate::build;
use crate::build::Profile;
use crate::shell;
use crate::shell::Failure;
use crate::shell::Result;

/// The bench targets of crate keel-tests, run in this order with the same harness arguments.
const BENCHES: [&str; 7] = [
    "kernel", "session", "agent", "growth", "context", "mcp", "subagent",
];

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

    for name in BENCHES {
        let bench = shell::root()
            .join("tests")
            .join("benches")
            .join(format!("{name}.rs"));
        if !bench.is_file() {
            return Err(Failure::new(format!(
                "no benchmark target yet: {} does not exist (bench `{name}` of crate keel-tests)",
                shell::relative(&bench)
            )));
        }
    }

    build::workspace(Profile::Release)?;
    crate::mcp_servers::install()?;
    let mut cmd = shell::cargo(["bench", "-p", "keel-tests"]);
    for name in BENCHES {
        cmd.args(["--bench", name]);
    }
    if quick || !harness.is_empty() {
        cmd.arg("--");
    }
    if quick {
        cmd.arg("--quick");
    }
    cmd.args(&harness);
    shell::run(&mut cmd)
}
