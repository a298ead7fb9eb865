//! `cargo xtask build [--release]`: build the whole workspace in one cargo invocation.
//!
//! One `cargo build --workspace` produces the `keel` binary (crate `keel-cli`), every cdylib
//! plugin under `plugins/` and the test plugins under `tests/plugins/`, so everything that loads
//! plugins at run time finds them in the same target directory. Other commands (`dist`, `test`,
//! `bench`, `demo`) reuse [`workspace`] rather than building piecemeal.

use crate::shell;
use crate::shell::Failure;
use crate::shell::Result;

/// Cargo profile to build with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// `target/debug`.
    Debug,
    /// `target/release`.
    Release,
}

impl Profile {
    /// Name of the profile's output folder under the target directory.
    pub fn dir(self) -> &'static str {
        match self {
            Self::Debug => "debug",
            Self::Release => "release",
        }
    }
}

/// Entry point for `cargo xtask build`.
pub fn run(args: &[String]) -> Result {
    let mut profile = Profile::Debug;
    for arg in args {
        match arg.as_str() {
            "--release" => profile = Profile::Release,
            other => {
                return Err(Failure::usage(format!("`build` does not take `{other}`")));
            }
        }
    }
    workspace(profile)
}

/// `cargo build --workspace [--release]`.
pub fn workspace(profile: Profile) -> Result {
    let mut args = vec!["build", "--workspace"];
    if profile == Profile::Release {
        args.push("--release");
    }
    shell::run(&mut shell::cargo(args))
}
