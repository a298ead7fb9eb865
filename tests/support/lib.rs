//! Test support for keel's workspace tests: find the built `keel` binary and plugins, build an
//! isolated environment (KEEL_HOME, config roots, trace file, working dir) per test, run the
//! binary, and read back what happened on disk.
//!
//! Tests drive the real binary with the real cdylibs that `cargo xtask test` builds first; they
//! never link the kernel in-process for behaviour they claim about plugins.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::panic,
    reason = "test support"
)]

pub mod bench;
pub mod model_server;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;
use tempfile::TempDir;

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// The cargo target directory.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

/// The debug build directory holding `keel` and the plugin libraries.
pub fn build_dir() -> PathBuf {
    target_dir().join("debug")
}

/// The built `keel` binary. Panics with a hint when it is missing.
///
/// `cargo xtask test` builds the binary and every plugin before the tests and sets
/// `KEEL_TEST_BUILT=1`; under a bare `cargo test` the cdylibs may be stale, which is said once.
pub fn keel_bin() -> PathBuf {
    static WARNED: std::sync::Once = std::sync::Once::new();
    if std::env::var_os("KEEL_TEST_BUILT").is_none() {
        WARNED.call_once(|| {
            eprintln!(
                "note: not run by `cargo xtask test`: plugins in {} may be stale \
                 (cargo test does not rebuild cdylibs)",
                build_dir().display()
            );
        });
    }
    let bin = build_dir().join("keel");
    assert!(
        bin.is_file(),
        "{} is missing: run `cargo xtask test` (it builds the binary and every plugin first)",
        bin.display()
    );
    bin
}

/// File name of a plugin library.
pub fn plugin_file(plugin: &str) -> String {
    format!("libkeel_plugin_{}.so", plugin.replace('-', "_"))
}

/// A built plugin library in the debug dir.
pub fn plugin_lib(plugin: &str) -> PathBuf {
    let p = build_dir().join(plugin_file(plugin));
    assert!(
        p.is_file(),
        "{} is missing: run `cargo xtask test`",
        p.display()
    );
    p
}

/// Whether `line` is a log line of the default format: `keel: warning: ROW: …` or
/// `keel: error: ROW: …` with ROW a row id (or `kernel`). A CLI line such as
/// `keel: warning: user layer …` or `keel: error[CODE]: …` is not.
pub fn is_log_line(line: &str) -> bool {
    let Some(rest) = line
        .strip_prefix("keel: warning: ")
        .or_else(|| line.strip_prefix("keel: error: "))
    else {
        return false;
    };
    rest.split_once(": ").is_some_and(|(row, _)| {
        !row.is_empty()
            && row
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    })
}

/// Outcome of one `keel` invocation.
#[derive(Debug, Clone)]
pub struct Run {
    /// Exit code (-1 when killed by a signal).
    pub code: i32,
    /// Stdout.
    pub stdout: String,
    /// Stderr.
    pub stderr: String,
}

impl Run {
    /// Parses stdout as JSON lines (the proof driver prints one object per step).
    pub fn steps(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .filter(|l| l.starts_with('{'))
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l:?}: {e}")))
            .collect()
    }

    /// The step whose `step` field equals `name` (first match).
    pub fn step(&self, name: &str) -> Value {
        self.steps()
            .into_iter()
            .find(|s| s["step"] == name)
            .unwrap_or_else(|| {
                panic!(
                    "no step {name:?} in output:\n{}\nstderr:\n{}",
                    self.stdout, self.stderr
                )
            })
    }

    /// Asserts the exit code, printing both streams on failure.
    pub fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(
            self.code, code,
            "unexpected exit code\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout, self.stderr
        );
        self
    }

    /// The `keel: error[CODE]: …` lines on stderr.
    pub fn errors(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| l.starts_with("keel: error["))
            .collect()
    }

    /// Asserts a refusal before anything ran: exit 2, nothing on stdout, exactly one
    /// `keel: error[CODE]: …` line with the given code, and no panic anywhere. Returns that line.
    pub fn one_error(&self, code: &str) -> &str {
        assert!(
            !self.stderr.contains("panicked"),
            "keel panicked:\n{}",
            self.stderr
        );
        self.expect_code(2);
        assert_eq!(
            self.stdout, "",
            "an error run printed on stdout; stderr:\n{}",
            self.stderr
        );
        let errors = self.errors();
        assert_eq!(
            errors.len(),
            1,
            "expected exactly one error line, got:\n{}",
            self.stderr
        );
        let line = errors[0];
        assert!(
            line.starts_with(&format!("keel: error[{code}]: ")),
            "expected error code {code}, got: {line}"
        );
        line
    }

    /// The `keel: …` stderr lines the CLI and drivers print: not tracing output, and not the
    /// kernel's and plugins' log lines ([`is_log_line`]).
    pub fn error_lines(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| l.starts_with("keel: ") && !is_log_line(l))
            .collect()
    }

    /// The kernel's and plugins' warnings and errors as the default log format prints them:
    /// `keel: warning: ROW: …` / `keel: error: ROW: …` (issue 23 item 16).
    pub fn log_lines(&self) -> Vec<&str> {
        self.stderr.lines().filter(|l| is_log_line(l)).collect()
    }
}

/// An isolated environment: its own KEEL_HOME, config root, trace file and working dir.
pub struct Env {
    /// Owns the temp dir.
    pub dir: TempDir,
    /// The `keel` binary to run (the build's, or a relocated copy).
    pub bin: PathBuf,
    /// Extra environment for every run.
    pub vars: Vec<(String, String)>,
    /// `$KEEL_HOME` when [`Env::home_outside_tmp`] moved it.
    pub moved_home: Option<TempDir>,
}

impl Default for Env {
    fn default() -> Self {
        Env::new()
    }
}

impl Env {
    /// A fresh environment using the built binary.
    pub fn new() -> Env {
        let dir = tempfile::Builder::new()
            .prefix("keel-test-")
            .tempdir()
            .expect("tempdir");
        for sub in ["home", "config/profiles", "config/bundles", "work"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("mkdir");
        }
        Env {
            dir,
            bin: keel_bin(),
            vars: Vec::new(),
            moved_home: None,
        }
    }

    /// Root of the temp dir.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `$KEEL_HOME`.
    pub fn home(&self) -> PathBuf {
        match &self.moved_home {
            Some(dir) => dir.path().to_path_buf(),
            None => self.path().join("home"),
        }
    }

    /// Moves `$KEEL_HOME` out of `/tmp` (a writable root of the sandbox) to a fresh directory
    /// under `$HOME` or `/var/tmp`: the Landlock runner refuses to confine a command when keel's
    /// home lies inside a writable root, since a grant there would open it.
    pub fn home_outside_tmp(mut self) -> Env {
        let candidates = [
            std::env::var_os("HOME").map(PathBuf::from),
            Some(PathBuf::from("/var/tmp")),
        ];
        let dir = candidates
            .into_iter()
            .flatten()
            .filter_map(|base| base.canonicalize().ok())
            .filter(|base| !base.starts_with("/tmp"))
            .find_map(|base| {
                tempfile::Builder::new()
                    .prefix("keel-test-home-")
                    .tempdir_in(base)
                    .ok()
            })
            .expect("a writable directory outside /tmp for KEEL_HOME");
        self.moved_home = Some(dir);
        self
    }

    /// The working directory keel runs in.
    pub fn work(&self) -> PathBuf {
        self.path().join("work")
    }

    /// The trace file proof plugins append to.
    pub fn trace_file(&self) -> PathBuf {
        self.path().join("trace")
    }

    /// Writes `config/profiles/<name>.toml`; returns its path.
    pub fn profile(&self, name: &str, toml: &str) -> PathBuf {
        let p = self
            .path()
            .join("config/profiles")
            .join(format!("{name}.toml"));
        std::fs::write(&p, toml).expect("write profile");
        p
    }

    /// Writes `config/bundles/<name>.toml`; returns its path.
    pub fn bundle(&self, name: &str, toml: &str) -> PathBuf {
        let p = self
            .path()
            .join("config/bundles")
            .join(format!("{name}.toml"));
        std::fs::write(&p, toml).expect("write bundle");
        p
    }

    /// Writes an arbitrary file under the temp dir; returns its path.
    pub fn file(&self, rel: &str, contents: &str) -> PathBuf {
        let p = self.path().join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(&p, contents).expect("write file");
        p
    }

    /// Adds an environment variable to every run.
    pub fn var(mut self, key: &str, value: impl AsRef<std::ffi::OsStr>) -> Env {
        self.vars.push((
            key.to_owned(),
            value.as_ref().to_string_lossy().into_owned(),
        ));
        self
    }

    /// A `Command` for the binary with this environment (not yet run).
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.args(args)
            .current_dir(self.work())
            .env_remove("KEEL_PLUGIN_PATH")
            .env_remove("KEEL_LOG")
            .env("KEEL_HOME", self.home())
            .env("KEEL_CONFIG_PATH", self.path().join("config"))
            .env("KEEL_PROOF_TRACE", self.trace_file())
            .stdin(Stdio::null());
        for (k, v) in &self.vars {
            cmd.env(k, v);
        }
        cmd
    }

    /// Runs `keel ARGS` to completion.
    pub fn keel(&self, args: &[&str]) -> Run {
        let out = self.command(args).output().expect("spawn keel");
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs `keel ARGS` with extra environment variables for this run only.
    pub fn keel_with(&self, args: &[&str], vars: &[(&str, &std::ffi::OsStr)]) -> Run {
        let mut cmd = self.command(args);
        for (k, v) in vars {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("spawn keel");
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs the proof driver script `script` with profile `profile`.
    pub fn drive(&self, profile: &str, script: &str) -> Run {
        self.keel(&["run", "--profile", profile, script])
    }

    /// Lines of the trace file (empty when nothing traced).
    pub fn trace(&self) -> Vec<String> {
        std::fs::read_to_string(self.trace_file())
            .map(|s| s.lines().map(str::to_owned).collect())
            .unwrap_or_default()
    }

    /// Clears the trace file.
    pub fn clear_trace(&self) {
        let _ = std::fs::remove_file(self.trace_file());
    }

    /// Lays out a relocatable dist tree (`bin/keel`, `lib/<plugins>`) inside this environment
    /// and switches the environment to its binary. Used by lock tests: the lock lives beside
    /// the binary, so each test needs its own binary location.
    pub fn relocate(mut self, plugins: &[&str]) -> Env {
        let bin_dir = self.path().join("dist/bin");
        let lib_dir = self.path().join("dist/lib");
        std::fs::create_dir_all(&bin_dir).expect("mkdir bin");
        std::fs::create_dir_all(&lib_dir).expect("mkdir lib");
        let bin = bin_dir.join("keel");
        std::fs::copy(keel_bin(), &bin).expect("copy keel");
        for p in plugins {
            std::fs::copy(plugin_lib(p), lib_dir.join(plugin_file(p))).expect("copy plugin");
        }
        self.bin = bin;
        self
    }

    /// The `lib/` dir of a relocated tree.
    pub fn dist_lib(&self) -> PathBuf {
        self.path().join("dist/lib")
    }
}

/// Index of the first trace line equal to `line`; panics with the whole trace when absent.
pub fn position(trace: &[String], line: &str) -> usize {
    trace
        .iter()
        .position(|l| l == line)
        .unwrap_or_else(|| panic!("trace has no line {line:?}:\n{}", trace.join("\n")))
}

impl Env {
    /// Runs the proof driver script like [`Env::drive`], but kills `keel` and fails the test
    /// if it has not exited within `limit` (for tests whose failure mode is a hang). The limit
    /// is a generous safety net, never a timing assertion.
    pub fn drive_within(&self, profile: &str, script: &str, limit: std::time::Duration) -> Run {
        self.keel_within(&["run", "--profile", profile, script], limit)
    }

    /// Runs `keel ARGS`, killing it and failing the test if it has not exited within `limit`
    /// (a safety net for tests whose failure mode is a hang, never a timing assertion).
    pub fn keel_within(&self, args: &[&str], limit: std::time::Duration) -> Run {
        let mut child = self
            .command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn keel");
        let mut out = child.stdout.take().expect("stdout");
        let mut err = child.stderr.take().expect("stderr");
        let read_out = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut out, &mut s);
            s
        });
        let read_err = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut err, &mut s);
            s
        });
        let started = std::time::Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait keel") {
                break Some(status);
            }
            if started.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let run = Run {
            code: status.and_then(|s| s.code()).unwrap_or(-1),
            stdout: read_out.join().unwrap_or_default(),
            stderr: read_err.join().unwrap_or_default(),
        };
        assert!(
            status.is_some(),
            "keel did not exit within {limit:?}\n--- stdout\n{}\n--- stderr\n{}",
            run.stdout,
            run.stderr
        );
        run
    }
}
