//! `cargo xtask install` puts a locked `keel` where a user can type it (issue 23 item 14), and
//! README's "Running against a real model" works as written from a project directory with that
//! `keel` on `PATH` (the issue's last acceptance line). The install is real (`--build-dir`
//! lays out the debug build the tests already use, so no release build runs), into a temporary
//! prefix; `keel` is then run by its bare name, found on `PATH`, from a directory that is not
//! the checkout, against the loopback model server.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use keel_tests::model_server::{ModelServer, Reply};
use keel_tests::{Run, build_dir};

use crate::suite::ship_support::{lock_entries, shipped_env, xtask};

fn install(prefix: &Path, path: &OsString) -> Run {
    xtask(
        &[
            "install",
            "--prefix",
            &prefix.to_string_lossy(),
            "--build-dir",
            &build_dir().to_string_lossy(),
        ],
        &[("PATH", path)],
    )
}

fn line<'a>(run: &'a Run, needle: &str) -> &'a str {
    run.stdout
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?}:\n{}", run.stdout))
}

#[test]
fn issue23_item14_install_puts_a_locked_keel_on_path_that_runs_from_any_directory() {
    let env = shipped_env(PathBuf::from("keel"));
    let prefix = env.path().join("prefix");
    let bin = prefix.join("bin");
    let tree = prefix.join("lib/keel");
    let system_path = std::env::var_os("PATH").unwrap_or_default();
    let mut with_bin = vec![bin.clone()];
    with_bin.extend(std::env::split_paths(&system_path));
    let with_bin = std::env::join_paths(with_bin).unwrap();

    let first = install(&prefix, &system_path);
    first.expect_code(0);
    assert!(
        first
            .stdout
            .contains(&format!("{} is not on PATH", bin.display())),
        "{}",
        first.stdout
    );
    let link = bin.join("keel");
    let meta = std::fs::symlink_metadata(&link).expect("PREFIX/bin/keel");
    assert!(
        meta.file_type().is_symlink(),
        "{} is not a link",
        link.display()
    );
    assert_eq!(std::fs::read_link(&link).unwrap(), tree.join("bin/keel"));
    for part in ["bin/keel-landlock", "lib", "share/profiles/demo.toml"] {
        assert!(tree.join(part).exists(), "{part} was not installed");
    }
    let entries = lock_entries(&tree);
    for name in ["default", "headless", "demo", "default --patch anthropic"] {
        assert!(
            entries.iter().any(|e| e == name),
            "no {name:?} in {entries:?}"
        );
    }

    // From the project directory, by its bare name on PATH, as a user types it.
    let env = env.var("PATH", &with_bin);
    let version = env.keel(&["--version"]);
    version.expect_code(0);
    assert!(version.stdout.starts_with("keel "), "{}", version.stdout);

    let doctor = env.keel(&["doctor"]);
    let lock = tree.join("bin/keel.lock").display().to_string();
    assert!(
        line(&doctor, "lock:").starts_with("ok") && line(&doctor, "lock:").contains(&lock),
        "{}",
        doctor.stdout
    );
    let dirs: Vec<&str> = doctor
        .stdout
        .lines()
        .filter(|l| l.contains("plugin path:"))
        .collect();
    assert_eq!(dirs.len(), 1, "{}", doctor.stdout);
    assert!(
        dirs[0].starts_with("ok") && dirs[0].contains(&tree.join("lib").display().to_string()),
        "{}",
        doctor.stdout
    );
    assert!(
        line(&doctor, "profile 'default'").starts_with("ok"),
        "{}",
        doctor.stdout
    );

    // The demo profile, offline: the agent's files land in the project directory.
    let demo = env.keel(&["run", "--profile", "demo", "keep notes"]);
    demo.expect_code(0);
    let notes = std::fs::read_to_string(env.work().join("notes.md")).expect("notes.md");
    assert!(
        notes.contains("- secrets never leave the firewall"),
        "{notes}"
    );
    assert!(env.work().join("count.sh").is_file());

    // README, "Running against a real model": the local-server line, as written (default
    // profile, an empty `api_key_ref`), reaches the server with the model it names and no key.
    let server = ModelServer::start(vec![Reply::text("Done.")]);
    let base = format!("llm-openai.base_url={}", server.base_url());
    let run = env.keel(&[
        "run",
        "-c",
        &base,
        "-c",
        "llm-openai.model=local",
        "-c",
        "llm-openai.api_key_ref=",
        "task",
    ]);
    run.expect_code(0);
    let requests = server.completions();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(requests[0].body["model"], "local");
    assert_eq!(
        requests[0].headers.get("authorization"),
        None,
        "no key is sent: {:?}",
        requests[0].headers
    );

    // README's Anthropic line, as written: the shipped patch by name, from the project
    // directory, under the lock install wrote (issue 23 item 15).
    let messages = ModelServer::start(vec![Reply::text("Hello from the Messages API.")]);
    let anthropic = format!("llm-anthropic.base_url={}", messages.anthropic_base_url());
    let run = env.keel_with(
        &["run", "--patch", "anthropic", "-c", &anthropic, "task"],
        &[("ANTHROPIC_API_KEY", "sk-ant-install-5b1e-canary".as_ref())],
    );
    run.expect_code(0);
    assert_eq!(messages.anthropic_requests().len(), 1, "{}", run.stderr);

    // Again: the same layout, locked anew, and now PREFIX/bin is on PATH.
    let again = install(&prefix, &with_bin);
    again.expect_code(0);
    assert!(
        again
            .stdout
            .contains(&format!("{} is on PATH: type `keel`", bin.display())),
        "{}",
        again.stdout
    );
    assert!(
        again.stdout.contains("the lock was written anew"),
        "{}",
        again.stdout
    );
    assert_eq!(lock_entries(&tree), entries);
    env.keel(&["--version"]).expect_code(0);
}

// A `PREFIX/bin/keel` that is not a link install made is never replaced, and nothing is laid
// out before the refusal.
#[test]
fn issue23_item14_install_refuses_to_replace_a_keel_it_did_not_make() {
    let env = shipped_env(PathBuf::from("keel"));
    let prefix = env.path().join("prefix");
    std::fs::create_dir_all(prefix.join("bin")).unwrap();
    let other = prefix.join("bin/keel");
    std::fs::write(&other, "#!/bin/sh\necho another keel\n").unwrap();
    let run = install(&prefix, &std::env::var_os("PATH").unwrap_or_default());
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "refusing to replace {}: it is not a symlink",
            other.display()
        )),
        "{}",
        run.stderr
    );
    assert_eq!(
        std::fs::read_to_string(&other).unwrap(),
        "#!/bin/sh\necho another keel\n"
    );
    assert!(
        !prefix.join("lib").exists(),
        "install laid out a tree anyway"
    );
}
