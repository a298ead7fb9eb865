//! The real Claude Agent SDK the stream suite parses keel's output with (issue 23 item 13):
//! `claude-agent-sdk` at the pinned [`SDK`] version, pip-installed into a venv at
//! `<target>/claude-sdk-venv` when missing or pinned differently. `cargo xtask test` calls it
//! (and `cargo xtask claude-sdk` alone), so CI and a newcomer's first run have it; the suite
//! fails (never skips) when it is absent, naming this command.

use std::path::PathBuf;
use std::process::Command;

use crate::shell;
use crate::shell::{Failure, Result};

/// The pinned package, as pip takes it.
pub const SDK: &str = "claude-agent-sdk==0.2.189";

/// The venv, `<target>/claude-sdk-venv`.
pub fn venv() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| shell::root().join("target"))
        .join("claude-sdk-venv")
}

/// Creates the venv (python3 -m venv) and installs [`SDK`] unless the stamp says it is there.
pub fn install() -> Result {
    let dest = venv();
    let python = dest.join("bin").join("python");
    let stamp = dest.join(".installed-sdk");
    if python.is_file() && std::fs::read_to_string(&stamp).ok().as_deref() == Some(SDK) {
        return Ok(());
    }
    println!(
        "installing {SDK} into {} (python3 -m venv, pip)",
        shell::relative(&dest)
    );
    if !python.is_file() {
        let mut venv = Command::new("python3");
        venv.arg("-m").arg("venv").arg(&dest);
        shell::run(&mut venv).map_err(|e| {
            Failure::new(format!(
                "could not create the Claude SDK venv (needs python3 with venv; on Debian: apt-get install python3-venv): {e}"
            ))
        })?;
    }
    let mut pip = Command::new(&python);
    pip.args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        SDK,
    ]);
    shell::run(&mut pip).map_err(|e| Failure::new(format!("could not pip install {SDK}: {e}")))?;
    std::fs::write(&stamp, SDK).map_err(|e| Failure::new(format!("{}: {e}", stamp.display())))
}

/// `cargo xtask claude-sdk`.
pub fn run(rest: &[String]) -> Result {
    crate::no_more_args("claude-sdk", rest)?;
    install()
}
