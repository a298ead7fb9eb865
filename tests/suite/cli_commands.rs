//! Plugin commands and driver options describe themselves (issue 13 item 2): the `keel` binary
//! builds its command line from the manifests of the assembled profile. Checked through the
//! real binary: which commands `--help` lists per profile, the refusal of a command no plugin
//! provides, a command the kernel has never heard of (`proof-echo`, declared by the proof
//! driver) parsed and handed to its plugin, and run options checked against the driver's
//! declaration and forwarded under their ids.

use keel_tests::{Env, Run};
use serde_json::{Value, json};

/// The command words of a `--help` page.
fn commands(run: &Run) -> Vec<String> {
    run.expect_code(0);
    run.stdout
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

/// A profile with only the proof driver.
fn proof_profile(env: &Env) {
    env.profile(
        "proof",
        "[[insert]]\nid = \"drv\"\nplugin = \"proof-driver\"\n",
    );
}

// Issue 13 item 2: `keel --help` lists what the profile offers: the default profile's session
// and firewall rows add `sessions`, `fork` and `secrets`; without the firewall row there is no
// `secrets`, and a profile without the session plugin has none of them but its own.
#[test]
fn help_lists_the_commands_of_the_assembled_profile() {
    let env = Env::new();
    proof_profile(&env);
    let kernel = [
        "run", "resume", "config", "plugins", "trust", "lock", "doctor", "help",
    ];
    let listed = commands(&env.keel(&["--help"]));
    for c in kernel.iter().chain(&["sessions", "fork", "secrets"]) {
        assert!(listed.iter().any(|l| l == c), "{c} missing from {listed:?}");
    }
    let patch = env.path().join("no-firewall.toml");
    std::fs::write(&patch, "[[disable]]\nid = \"firewall\"\n").unwrap();
    let listed = commands(&env.keel(&["--patch", patch.to_str().unwrap(), "--help"]));
    assert!(listed.iter().any(|l| l == "sessions"), "{listed:?}");
    assert!(!listed.iter().any(|l| l == "secrets"), "{listed:?}");
    let listed = commands(&env.keel(&["--profile", "proof", "--help"]));
    let mut expected: Vec<&str> = kernel.to_vec();
    expected.insert(4, "proof-echo");
    assert_eq!(listed, expected);
}

// Issue 13 item 2: a command no plugin of the profile provides is refused in one line that
// names the profile and the command, exit 2, before any row activates.
#[test]
fn a_command_no_plugin_provides_is_refused_naming_the_profile() {
    let env = Env::new();
    proof_profile(&env);
    let run = env.keel(&["secrets", "list", "--profile", "proof"]);
    let line = run.one_error("NO_COMMAND");
    assert!(
        line.contains("no plugin in profile 'proof' provides `secrets`"),
        "{line}"
    );
    assert!(env.trace().is_empty(), "a row activated: {:?}", env.trace());
}

// Issue 13 item 2: the kernel knows no command: `proof-echo` exists only in the proof driver's
// manifest, yet it parses (typed values, subcommand as `action`, the profile options before or
// after it) and reaches the plugin; its usage errors are clap's, exit 2.
#[test]
fn a_command_the_kernel_never_heard_of_is_parsed_and_handed_over() {
    let env = Env::new();
    proof_profile(&env);
    for args in [
        &[
            "proof-echo",
            "hi",
            "--times",
            "3",
            "loud",
            "--twice",
            "--profile",
            "proof",
        ][..],
        &[
            "--profile",
            "proof",
            "proof-echo",
            "hi",
            "--times",
            "3",
            "loud",
            "--twice",
        ][..],
    ] {
        let run = env.keel(args);
        run.expect_code(0);
        let line: Value = serde_json::from_str(run.stdout.trim()).unwrap();
        assert_eq!(
            line,
            json!({"command": "proof-echo", "profile": "proof",
                   "args": {"word": "hi", "times": 3, "action": "loud", "twice": true}})
        );
    }
    for bad in [
        &[
            "proof-echo",
            "hi",
            "--times",
            "many",
            "quiet",
            "--profile",
            "proof",
        ][..],
        &["proof-echo", "--profile", "proof"][..],
        &["proof-echo", "hi", "--profile", "proof"][..],
    ] {
        let run = env.keel(bad);
        run.expect_code(2);
        assert!(run.stderr.starts_with("error:"), "{bad:?}: {}", run.stderr);
    }
}

// Issue 13 item 2: run options are the driver's: the proof driver's `--proof-level` is in
// `keel run --help` and forwarded under its id (its default too), a value outside its list is
// a usage error, and the headless driver's options are not there.
#[test]
fn run_options_come_from_the_profiles_driver() {
    let env = Env::new();
    proof_profile(&env);
    let help = env.keel(&["run", "--profile", "proof", "--help"]);
    help.expect_code(0);
    assert!(help.stdout.contains("--proof-level"), "{}", help.stdout);
    assert!(!help.stdout.contains("--sandbox"), "{}", help.stdout);
    let options = |run: &Run| -> Value {
        run.expect_code(0);
        let line: Value = serde_json::from_str(run.stdout.lines().next().unwrap()).unwrap();
        line["value"].clone()
    };
    assert_eq!(
        options(&env.keel(&["run", "--profile", "proof", "options"])),
        json!({"proof_level": "low"})
    );
    assert_eq!(
        options(&env.keel(&[
            "run",
            "--proof-level",
            "high",
            "--profile",
            "proof",
            "options"
        ])),
        json!({"proof_level": "high"})
    );
    let bad = env.keel(&[
        "run",
        "--profile",
        "proof",
        "--proof-level",
        "max",
        "options",
    ]);
    bad.expect_code(2);
    assert!(
        bad.stderr.contains("possible values: low, high"),
        "{}",
        bad.stderr
    );
    let foreign = env.keel(&[
        "run",
        "--profile",
        "proof",
        "--sandbox",
        "read-only",
        "options",
    ]);
    foreign.expect_code(2);
    assert!(foreign.stderr.contains("--sandbox"), "{}", foreign.stderr);
    // The default profile's driver (headless) validates its own values.
    let headless = env.keel(&["run", "--sandbox", "wide-open", "task"]);
    headless.expect_code(2);
    assert!(
        headless
            .stderr
            .contains("possible values: read-only, workspace-write, danger-full-access"),
        "{}",
        headless.stderr
    );
}
