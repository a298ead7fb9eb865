//! The real MCP servers the mcp suites and bench run against (issue 15): the exact versions in
//! `tests/mcp-servers/package.json` + `package-lock.json`, installed with `npm ci` into
//! `<target>/mcp-servers` when missing or when the lock file changed. `cargo xtask test` and
//! `cargo xtask bench` call it, so CI and a newcomer's first `cargo xtask test` have them; the
//! tests fail (never skip) when they are absent. The acp suites' editor stand-in (issue 26
//! item 3: `tests/acp-client`, the official ACP TypeScript SDK) is installed the same way into
//! `<target>/acp-client` ([`install_acp_client`]).

use std::path::PathBuf;
use std::process::Command;

use crate::shell;
use crate::shell::{Failure, Result};

fn target(dir: &str) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| shell::root().join("target"))
        .join(dir)
}

/// `npm ci` into `<target>/mcp-servers` unless the installed lock file is the pinned one.
pub fn install() -> Result {
    install_pinned("tests/mcp-servers", "mcp-servers", "the MCP test servers")
}

/// `npm ci` of `tests/acp-client` into `<target>/acp-client`, likewise.
pub fn install_acp_client() -> Result {
    install_pinned("tests/acp-client", "acp-client", "the ACP test client")
}

/// `npm ci` of the package files in `source` (relative to the workspace root) into
/// `<target>/<dir>` unless the installed lock file is the pinned one.
fn install_pinned(source: &str, dir: &str, what: &str) -> Result {
    let source = shell::root().join(source);
    let dest = target(dir);
    let read =
        |p: PathBuf| std::fs::read(&p).map_err(|e| Failure::new(format!("{}: {e}", p.display())));
    let lock = read(source.join("package-lock.json"))?;
    let installed = dest.join("node_modules").join(".package-lock.json");
    let stamp = dest.join(".installed-lock");
    if installed.is_file() && std::fs::read(&stamp).ok().as_deref() == Some(lock.as_slice()) {
        return Ok(());
    }
    println!("installing {what} (npm ci) into {}", shell::relative(&dest));
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
            "could not install {what} (needs node and npm): {e}"
        ))
    })?;
    std::fs::write(&stamp, lock).map_err(|e| Failure::new(format!("{}: {e}", stamp.display())))
}
