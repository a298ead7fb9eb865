//! Process plumbing every command shares: the workspace root, the failure type, and running a
//! child command with its command line echoed first.
//!
//! Decision: children inherit stdout/stderr (output streams through unbuffered, so a 40-minute
//! test run shows progress) and every command line is printed as `$ cargo …` before it runs, so a
//! CI log can be replayed by hand. Failures are values carrying the exit code to return, because
//! the workspace lints forbid `unwrap`/`panic` and `demo` must hand back the child's own code.
//! Rejected: shelling out through `sh -c` (quoting bugs, and nothing here needs a shell).

use std::ffi::OsStr;
use std::fmt;
use std::path::Path;
use std::path::PathBuf;
use std::process::Command;
use std::process::Stdio;

/// Why a command failed, and the process exit code `xtask` should end with.
#[derive(Debug)]
pub struct Failure {
    /// Exit code for the `xtask` process (1 for ordinary failures, 2 for usage errors).
    pub code: u8,
    /// One line naming what failed.
    pub message: String,
    /// Whether `main` should print the usage text after the message.
    pub usage: bool,
}

impl Failure {
    /// An ordinary failure: exit code 1.
    pub fn new(message: impl Into<String>) -> Self {
        Self::with_code(1, message)
    }

    /// A failure that ends `xtask` with `code` (0 is turned into 1: a failure never succeeds).
    pub fn with_code(code: u8, message: impl Into<String>) -> Self {
        Self {
            code: code.max(1),
            message: message.into(),
            usage: false,
        }
    }

    /// A usage error (unknown command or flag): exit code 2.
    pub fn usage(message: impl Into<String>) -> Self {
        Self {
            code: 2,
            message: message.into(),
            usage: true,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Result of an xtask step.
pub type Result<T = ()> = std::result::Result<T, Failure>;

/// The workspace root: the parent of this crate's manifest directory.
pub fn root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// Cargo's target directory: `CARGO_TARGET_DIR` when set (relative to the root), else `target/`.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => root().join(dir),
        _ => root().join("target"),
    }
}

/// A `cargo` command (the same cargo that runs xtask) with the workspace root as working dir.
pub fn cargo<I, S>(args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let program = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(program);
    cmd.args(args).current_dir(root());
    cmd
}

/// Prints `$ <command line>`, runs the command with inherited stdio and fails on non-zero exit.
pub fn run(cmd: &mut Command) -> Result {
    let code = run_status(cmd)?;
    if code == 0 {
        Ok(())
    } else {
        Err(Failure::new(format!(
            "`{}` failed (exit code {code})",
            display(cmd)
        )))
    }
}

/// Like [`run`], but returns the child's exit code instead of failing on a non-zero one
/// (a child killed by a signal reports 128 + the signal number, as shells do).
pub fn run_status(cmd: &mut Command) -> Result<i32> {
    let line = display(cmd);
    println!("$ {line}");
    let status = cmd
        .status()
        .map_err(|err| Failure::new(format!("cannot start `{line}`: {err}")))?;
    if let Some(code) = status.code() {
        return Ok(code);
    }
    Ok(signal_code(&status))
}

#[cfg(unix)]
fn signal_code(status: &std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status.signal().map_or(1, |sig| 128 + sig)
}

#[cfg(not(unix))]
fn signal_code(_status: &std::process::ExitStatus) -> i32 {
    1
}

/// Whether a probe command (e.g. `cargo nextest --version`) runs and succeeds; its output is
/// discarded.
pub fn probe(cmd: &mut Command) -> bool {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// The command line as a user would type it: `cargo` for the running cargo, paths under the
/// root shown relative to it, arguments with spaces quoted.
pub fn display(cmd: &Command) -> String {
    let program = Path::new(cmd.get_program());
    let is_cargo = std::env::var_os("CARGO").is_some_and(|cargo| Path::new(&cargo) == program);
    let mut line = if is_cargo {
        "cargo".to_owned()
    } else {
        relative(program)
    };
    for arg in cmd.get_args() {
        line.push(' ');
        line.push_str(&quote(&arg.to_string_lossy()));
    }
    line
}

/// `path` relative to the workspace root when it lies inside it, else as given.
pub fn relative(path: &Path) -> String {
    let root = root();
    path.strip_prefix(&root)
        .unwrap_or(path)
        .display()
        .to_string()
}

fn quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain {
        arg.to_owned()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// Prints a warning line on stderr; the command carries on.
pub fn warn(message: impl fmt::Display) {
    eprintln!("warning: {message}");
}
