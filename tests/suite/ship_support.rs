//! Helpers for the shipping suites (issue 23 items 8, 9, 14): lay out a real `cargo xtask dist`
//! tree or a real `cargo xtask install` prefix from the debug build the tests already use
//! (`--build-dir`, so no test waits on a release build or on cargo's lock: the command is the
//! built `xtask` binary itself), and run the shipped `keel` the way a user would — from a
//! project directory, with no `KEEL_CONFIG_PATH` and no `KEEL_PLUGIN_PATH`.

use std::path::{Path, PathBuf};
use std::process::Command;

use keel_tests::{Env, Run, build_dir, workspace_root};

/// The built `xtask` binary (what `cargo xtask` runs), in the workspace root.
pub fn xtask(args: &[&str], vars: &[(&str, &std::ffi::OsStr)]) -> Run {
    let mut command = Command::new(build_dir().join("xtask"));
    command
        .args(args)
        .current_dir(workspace_root())
        .env_remove("KEEL_PLUGIN_PATH")
        .env_remove("KEEL_CONFIG_PATH");
    for (k, v) in vars {
        command.env(k, v);
    }
    let out = command.output().expect("run xtask");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// An environment whose `keel` is `bin` (a shipped binary, or `keel` looked up on `PATH`),
/// with no config root of the test's own: only what the tree ships is found. `KEEL_HOME` lies
/// outside `/tmp` (the Landlock runner refuses a home inside a writable root).
pub fn shipped_env(bin: PathBuf) -> Env {
    let mut env = Env::new().home_outside_tmp().var("KEEL_CONFIG_PATH", "");
    env.bin = bin;
    env
}

/// `cargo xtask dist --out DIR --build-dir target/debug` into `env`'s temp dir; returns DIR.
pub fn dist_into(env: &Env) -> PathBuf {
    let out = env.path().join("dist");
    let run = xtask(
        &[
            "dist",
            "--out",
            &out.to_string_lossy(),
            "--build-dir",
            &build_dir().to_string_lossy(),
        ],
        &[],
    );
    run.expect_code(0);
    out
}

/// The shipped Anthropic patch inside a tree (`share/profiles/patches/anthropic.toml`).
pub fn shipped_patch(tree: &Path) -> PathBuf {
    let patch = tree.join("share/profiles/patches/anthropic.toml");
    assert!(patch.is_file(), "{} was not shipped", patch.display());
    patch
}

/// The lock's entry names (`[profiles]` keys) in the tree's `bin/keel.lock`.
pub fn lock_entries(tree: &Path) -> Vec<String> {
    let path = tree.join("bin/keel.lock");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let lock: toml::Table = toml::from_str(&text).expect("the lock is TOML");
    let mut names: Vec<String> = lock["profiles"]
        .as_table()
        .expect("a [profiles] table")
        .keys()
        .cloned()
        .collect();
    names.sort();
    names
}
