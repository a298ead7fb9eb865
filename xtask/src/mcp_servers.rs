//! The real MCP servers the mcp suites and bench run against (issue 15): the exact versions in
//! `tests/mcp-servers/package.json` + `package-lock.json`, installed with `npm ci` into
//! `<target>/mcp-servers` when missing or when the lock file changed. `cargo xtask test` and
//! `cargo xtask bench` call it, so CI and a newcomer's first `cargo xtask test` have them; the
//! tests fail (never skip) when they are absent.

use std::path::PathBuf;
use std::process::Command;

use crate::shell;
use crate::shell::{Failure, Result};

/// Where the pinned package files live, relative to the workspace root.
const SOURCE: &str = "tests/mcp-servers";

fn target() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| shell::root().join("target"))
        .join("mcp-servers")
}

/// `npm ci` into `<target>/mcp-servers` unless the installed lock file is the pinned one.
pub fn install() -> Result {
    let source = shell::root().join(SOURCE);
    let dest = target();
    let read =
        |p: PathBuf| std::fs::read(&p).map_err(|e| Failure::new(format!("{}: {e}", p.display())));
    let lock = read(source.join("package-lock.json"))?;
    let installed = dest.join("node_modules").join(".package-lock.json");
    let stamp = dest.join(".installed-lock");
    if installed.is_file() && std::fs::read(&stamp).ok().as_deref() == Some(lock.as_slice()) {
        return Ok(());
    }
    println!(
        "installing the MCP test servers (npm ci) into {}",
        shell::relative(&dest)
    );
    std::fs::create_dir_all(&dest).map_err(|e| Failure::new(format!("{}: {e}", dest.display())))?;
    let copy = |name: &str| {
        std::fs::copy(source.join(name), dest.join(name))
            .map(|_| ())
            .map_err(|e| Failure::new(format!("{name}: {e}")))
    };
    copy("package.json")?;
    copy("package-lock.json")?;
    let mut npm = Command::new("npm");
    npm.args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(&dest);
    shell::run(&mut npm).map_err(|e| {
        Failure::new(format!(
            "could not install the MCP test servers (needs node and npm): {e}"
        ))
    })?;
    std::fs::write(&stamp, lock).map_err(|e| Failure::new(format!("{}: {e}", stamp.display())))
}
