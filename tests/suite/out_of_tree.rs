//! Plugins built outside keel's workspace: the greeter example (its own Cargo workspace,
//! depending on `keel-plugin-api` by path, exactly as an outside author would) loads and runs,
//! and a plugin built against another ABI major is refused with one line naming both majors.
//!
//! Both fixtures are built by the test with `cargo build --manifest-path …` into
//! `target/out-of-tree` (a separate target dir, so the fixture's feature set never leaks into
//! the workspace build).

use std::path::PathBuf;
use std::process::Command;

use keel_tests::{Env, position, target_dir, workspace_root};

/// Builds a fixture workspace and returns the directory holding its library.
fn build(manifest: &str) -> PathBuf {
    let out = target_dir().join("out-of-tree");
    let status = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "--workspace", "--manifest-path"])
        .arg(workspace_root().join(manifest))
        .arg("--target-dir")
        .arg(&out)
        .status()
        .expect("run cargo");
    assert!(status.success(), "building {manifest} failed");
    out.join("debug")
}

const DRIVER: &str = r#"
[[insert]]
id = "driver"
plugin = "proof-driver"
"#;

#[test]
fn out_of_tree_plugin_loads_runs_logs_and_disposes() {
    let lib = build("tests/out-of-tree/Cargo.toml");
    let env = Env::new()
        .var("KEEL_PLUGIN_PATH", &lib)
        .var("KEEL_LOG", "keel::plugin=info");
    env.profile(
        "oot",
        &format!("{DRIVER}\n[[insert]]\nid = \"hello\"\nplugin = \"greeter\"\nconfig = {{ greeting = \"ahoy\" }}\n"),
    );
    let run = env.drive("oot", "emit:x,enable:driver");
    run.expect_code(0);
    let trace = env.trace();
    let up = position(&trace, "greeter hello activated");
    let gone = position(&trace, "greeter hello disposed");
    assert!(
        up < gone,
        "activation before disposal:\n{}",
        trace.join("\n")
    );
    // The plugin's own `tracing::info!` reached the kernel's subscriber (stderr).
    assert!(
        run.stderr.contains("greeter is up: ahoy"),
        "forwarded tracing line missing from stderr:\n{}",
        run.stderr
    );
}

#[test]
fn out_of_tree_plugin_config_is_validated_against_its_schema() {
    let lib = build("tests/out-of-tree/Cargo.toml");
    let env = Env::new().var("KEEL_PLUGIN_PATH", &lib);
    env.profile(
        "oot",
        &format!("{DRIVER}\n[[insert]]\nid = \"hello\"\nplugin = \"greeter\"\n"),
    );
    let run = env.drive("oot", "emit:x");
    run.expect_code(2);
    let lines = run.error_lines();
    assert_eq!(lines.len(), 1, "{}", run.stderr);
    assert!(
        lines[0].contains("row 'hello'") && lines[0].contains("greeting"),
        "{}",
        lines[0]
    );
    assert!(
        env.trace().is_empty(),
        "nothing may activate when a row config is invalid"
    );
}

#[test]
fn abi_major_mismatch_is_refused_with_one_line_naming_both_majors() {
    // Issue 12 item 5: the fixture is a plugin built for the previous major (2, before SDK 3; issue 24 item 8).
    let lib = build("tests/fixtures/abi-mismatch/Cargo.toml");
    let env = Env::new().var("KEEL_PLUGIN_PATH", &lib);
    env.profile(
        "mismatch",
        &format!("{DRIVER}\n[[insert]]\nid = \"old\"\nplugin = \"abi-mismatch\"\n"),
    );
    let run = env.drive("mismatch", "emit:x");
    run.expect_code(2);
    let lines = run.error_lines();
    assert_eq!(lines.len(), 1, "exactly one line:\n{}", run.stderr);
    let kernel = keel_plugin_api::abi::ABI_MAJOR;
    assert!(
        lines[0].contains(&format!("plugin ABI 2, kernel ABI {kernel}"))
            && lines[0].contains("libkeel_plugin_abi_mismatch.so")
            && lines[0].contains("row 'old'"),
        "{}",
        lines[0]
    );
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
}

#[test]
fn plugin_owned_tokio_runtime_runs_timers_and_spawns_inside_a_plugin() {
    // Without the plugin runtime, tokio timers in a cdylib panic with "no reactor running"
    // (abi-research.md §3); `ticker` uses `spawn_bridged` and must finish its ticks.
    let lib = build("tests/out-of-tree/Cargo.toml");
    let env = Env::new().var("KEEL_PLUGIN_PATH", &lib);
    env.profile(
        "ticker",
        &format!("{DRIVER}\n[[insert]]\nid = \"tick\"\nplugin = \"ticker\"\n"),
    );
    let run = env.drive("ticker", "emit:x");
    run.expect_code(0);
    assert!(
        env.trace().contains(&"ticker ticks=10".to_owned()),
        "{:?}\n{}",
        env.trace(),
        run.stderr
    );
}

/// Builds the kernel with one more `HostApi` function (as a newer kernel of the same ABI major
/// would have) into the out-of-tree target dir and returns its `keel` binary.
fn newer_kernel() -> PathBuf {
    let out = target_dir().join("out-of-tree");
    let status = Command::new(env!("CARGO"))
        .current_dir(workspace_root())
        .args([
            "build",
            "--quiet",
            "-p",
            "keel-cli",
            "--features",
            "keel-plugin-api/host-api-extension-fixture",
            "--target-dir",
        ])
        .arg(&out)
        .status()
        .expect("run cargo");
    assert!(status.success(), "building the extended kernel failed");
    out.join("debug").join("keel")
}

#[test]
fn asymmetry_rule_a_kernel_that_appended_host_functions_still_loads_older_plugins() {
    // The plugins in target/debug were built against the kernel's HostApi without the extra
    // function; the plugin-side layout check accepts a host table with more fields.
    let mut env = Env::new().var("KEEL_PLUGIN_PATH", keel_tests::build_dir());
    env.bin = newer_kernel();
    env.profile(
        "older-plugins",
        &format!(
            "{DRIVER}\n[[insert]]\nid = \"prov\"\nplugin = \"proof-provider\"\n\
             [[insert]]\nid = \"cons\"\nplugin = \"proof-consumer\"\n"
        ),
    );
    let run = env.drive("older-plugins", "counter");
    run.expect_code(0);
    assert_eq!(
        run.step("counter")["value"]["row"],
        "prov",
        "{}",
        run.stdout
    );
    position(&env.trace(), "activate cons provider=prov");
}

#[test]
fn asymmetry_rule_a_plugin_built_for_a_newer_kernel_is_refused_in_one_line() {
    let lib = build("tests/fixtures/host-api-next/Cargo.toml");
    let env = Env::new().var("KEEL_PLUGIN_PATH", &lib);
    env.profile(
        "newer-plugin",
        &format!("{DRIVER}\n[[insert]]\nid = \"newer\"\nplugin = \"host-api-next\"\n"),
    );
    let run = env.drive("newer-plugin", "emit:x");
    run.expect_code(2);
    assert_eq!(run.error_lines().len(), 1, "{}", run.stderr);
    let line = run.error_lines()[0];
    assert!(
        line.contains("row 'newer'")
            && line.contains("ABI_MISMATCH")
            && line.contains("newer kernel"),
        "{line}"
    );
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
}
