//! Bad input to the `keel` binary: every case exits 2 before any plugin runs, prints exactly one
//! `keel: error[CODE]: …` line on stderr and nothing on stdout, names the culprit (file and line,
//! row, plugin, bundle, facility, JSON pointer, layer), and never panics (ARCHITECTURE §1.4 and
//! §11; KRN-01, KRN-07, CFG-02, CFG-03).
//!
//! Where a case can be reached from several commands, it is checked through each of them: the
//! CLI shares one resolution and assembly path, and this pins that it keeps doing so.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use keel_tests::{Env, Run};

/// `[[insert]]` rows as profile TOML (`(id, plugin)` pairs, in order).
fn inserts(rows: &[(&str, &str)]) -> String {
    rows.iter()
        .map(|(id, plugin)| format!("[[insert]]\nid = \"{id}\"\nplugin = \"{plugin}\"\n\n"))
        .collect()
}

/// The profile file as keel prints it in messages.
fn profile_path(env: &Env, name: &str) -> String {
    env.path()
        .join("config/profiles")
        .join(format!("{name}.toml"))
        .display()
        .to_string()
}

/// Asserts `line` contains every needle.
fn names(line: &str, needles: &[&str]) {
    for n in needles {
        assert!(line.contains(n), "error line does not name {n:?}:\n{line}");
    }
}

/// Runs `run`, `plugins list [--json]` and `lock` on `profile` and checks each gives the same
/// single error line with `code`, that no plugin ran and that no lock was written. `env` must be
/// relocated (`Env::relocate`) so a regression cannot drop a lock beside the shared dev binary.
fn refused_everywhere(env: &Env, profile: &str, code: &str, needles: &[&str]) {
    assert_ne!(env.bin, keel_tests::keel_bin(), "relocate the env first");
    let commands: [&[&str]; 4] = [
        &["run", "--profile", profile, "counter"],
        &["plugins", "list", "--profile", profile],
        &["lock", "--profile", profile],
        &["plugins", "list", "--json", "--profile", profile],
    ];
    let mut first: Option<String> = None;
    for args in commands {
        env.clear_trace();
        let run = env.keel(args);
        let line = run.one_error(code).to_owned();
        names(&line, needles);
        assert_eq!(env.trace(), Vec::<String>::new(), "{args:?}: a plugin ran");
        match &first {
            None => first = Some(line),
            Some(f) => assert_eq!(&line, f, "{args:?} words the error differently"),
        }
    }
    assert!(
        !env.bin.with_file_name("keel.lock").exists(),
        "a refused `keel lock` wrote a lock"
    );
    // `doctor` reports the same problem as a FAIL line on stdout and exits 1.
    let run = env.keel(&["doctor", "--profile", profile]);
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    run.expect_code(1);
    let fail = run
        .stdout
        .lines()
        .find(|l| l.starts_with("FAIL") && l.contains(&format!("error[{code}]")))
        .unwrap_or_else(|| panic!("doctor has no FAIL line for {code}:\n{}", run.stdout));
    names(fail, needles);
}

#[test]
fn malformed_toml_in_a_profile_names_the_file_and_line() {
    let env = Env::new();
    env.profile(
        "broken",
        "description = \"a profile with a typo\"\nbundles = []\n\n[[insert]\nid = \"x\"\n",
    );
    let path = profile_path(&env, "broken");
    for args in [
        &["config", "dump", "--profile", "broken"][..],
        &["run", "--profile", "broken", "x"][..],
    ] {
        let run = env.keel(args);
        names(run.one_error("CONFIG_PARSE"), &[&format!("{path}:4:")]);
    }
}

#[test]
fn malformed_toml_in_a_bundle_names_the_bundle_file_and_line() {
    let env = Env::new();
    let bundle = env.bundle(
        "shaky",
        "[[insert]]\nid = \"drv\"\nplugin = \"proof-driver\"\n\noops = = 1\n",
    );
    env.profile("uses-shaky", "bundles = [\"shaky\"]\n");
    let run = env.keel(&["config", "dump", "--profile", "uses-shaky"]);
    names(
        run.one_error("CONFIG_PARSE"),
        &[&format!("{}:5:", bundle.display())],
    );
}

#[test]
fn unknown_profile_is_named() {
    let env = Env::new();
    let run = env.keel(&["run", "--profile", "no-such-profile", "x"]);
    names(
        run.one_error("CONFIG_UNKNOWN_PROFILE"),
        &["'no-such-profile'", "profiles/no-such-profile.toml"],
    );
    // A profile given as a path that does not exist names the path.
    let missing = env.path().join("elsewhere/gone.toml");
    let missing = missing.display().to_string();
    let run = env.keel(&["config", "dump", "--profile", &missing]);
    names(run.one_error("CONFIG_UNKNOWN_PROFILE"), &[&missing]);
}

#[test]
fn unknown_bundle_names_the_bundle_and_the_referencing_profile() {
    let env = Env::new();
    env.bundle("real", &inserts(&[("drv", "proof-driver")]));
    env.profile(
        "refers",
        "# two bundles, one missing\nbundles = [\"real\", \"ghost\"]\n",
    );
    let run = env.keel(&["config", "dump", "--profile", "refers"]);
    names(
        run.one_error("CONFIG_UNKNOWN_BUNDLE"),
        &["'ghost'", &format!("{}:2", profile_path(&env, "refers"))],
    );
}

#[test]
fn unknown_plugin_names_the_row_and_the_plugin() {
    let env = Env::new().relocate(&["proof-driver"]);
    env.profile(
        "p",
        &inserts(&[("drv", "proof-driver"), ("chat", "no-such-plugin")]),
    );
    refused_everywhere(
        &env,
        "p",
        "UNKNOWN_PLUGIN",
        &[
            "row 'chat'",
            "'no-such-plugin'",
            "libkeel_plugin_no_such_plugin.so",
        ],
    );
}

#[test]
fn krn01_missing_provider_names_the_row_and_the_facility() {
    let env = Env::new().relocate(&["proof-driver", "proof-consumer"]);
    env.profile(
        "p",
        &inserts(&[("drv", "proof-driver"), ("needy", "proof-consumer")]),
    );
    refused_everywhere(
        &env,
        "p",
        "MISSING_PROVIDER",
        &["row 'needy'", "proof-consumer", "'proof.counter'"],
    );
}

#[test]
fn duplicate_exclusive_provider_names_both_rows() {
    let env = Env::new().relocate(&["proof-driver", "proof-provider"]);
    env.profile(
        "p",
        &inserts(&[
            ("drv", "proof-driver"),
            ("first-counter", "proof-provider"),
            ("second-counter", "proof-provider"),
        ]),
    );
    refused_everywhere(
        &env,
        "p",
        "DUPLICATE_PROVIDER",
        &["'proof.counter'", "'first-counter'", "'second-counter'"],
    );
}

#[test]
fn krn07_dependency_cycle_names_both_rows() {
    let env = Env::new().relocate(&["proof-driver", "proof-graph"]);
    env.profile(
        "p",
        &inserts(&[
            ("drv", "proof-driver"),
            ("ring-a", "proof-graph"),
            ("ring-b", "proof-graph"),
        ]),
    );
    refused_everywhere(
        &env,
        "p",
        "DEPENDENCY_CYCLE",
        &["'ring-a'", "'ring-b'", "proof.ring"],
    );
}

/// A directory holding only `libkeel_plugin_fake.so` with the given bytes, for KEEL_PLUGIN_PATH.
fn fake_plugin_dir(env: &Env, bytes: &[u8]) -> PathBuf {
    let dir = env.path().join("fakes");
    std::fs::create_dir_all(&dir).expect("mkdir fakes");
    std::fs::write(dir.join("libkeel_plugin_fake.so"), bytes).expect("write fake plugin");
    dir
}

#[test]
fn a_text_file_named_like_a_plugin_is_refused() {
    let env = Env::new();
    let dir = fake_plugin_dir(&env, b"this is not a shared library\n");
    env.profile(
        "p",
        &inserts(&[("drv", "proof-driver"), ("impostor", "fake")]),
    );
    let file = dir.join("libkeel_plugin_fake.so").display().to_string();
    for args in [
        &["run", "--profile", "p", "counter"][..],
        &["plugins", "list", "--profile", "p"][..],
    ] {
        let run = env.keel_with(args, &[("KEEL_PLUGIN_PATH", dir.as_os_str())]);
        names(run.one_error("PLUGIN_OPEN"), &["row 'impostor'", &file]);
        assert!(env.trace().is_empty(), "a plugin ran: {:?}", env.trace());
    }
}

/// A real ELF shared library of the system that is certainly not a keel plugin.
fn system_shared_library() -> PathBuf {
    let known = [
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/usr/lib/x86_64-linux-gnu/libm.so.6",
        "/lib/aarch64-linux-gnu/libm.so.6",
        "/usr/lib/aarch64-linux-gnu/libm.so.6",
        "/lib64/libm.so.6",
        "/usr/lib64/libm.so.6",
        "/usr/lib/libm.so.6",
    ];
    if let Some(p) = known.iter().map(Path::new).find(|p| is_elf(p)) {
        return p.to_path_buf();
    }
    // Fallback: a plain C library (libm, libz, libdl) that is an ELF file, found in the usual
    // library folders or one level below them.
    let mut dirs: Vec<PathBuf> = ["/lib", "/usr/lib", "/lib64", "/usr/lib64"]
        .iter()
        .map(PathBuf::from)
        .collect();
    for d in dirs.clone() {
        if let Ok(entries) = std::fs::read_dir(&d) {
            dirs.extend(entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
        }
    }
    dirs.iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flat_map(|entries| entries.flatten().map(|e| e.path()))
        .find(|p| {
            let name = p.file_name().and_then(OsStr::to_str).unwrap_or_default();
            ["libm.", "libz.", "libdl."]
                .iter()
                .any(|l| name.starts_with(l))
                && name.contains(".so")
                && is_elf(p)
        })
        .expect("no ELF shared library found on this system")
}

fn is_elf(path: &Path) -> bool {
    use std::io::Read as _;
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && magic == *b"\x7fELF"
}

#[test]
fn a_shared_library_without_the_keel_symbol_is_refused() {
    let env = Env::new();
    let bytes = std::fs::read(system_shared_library()).expect("read system library");
    let dir = fake_plugin_dir(&env, &bytes);
    env.profile(
        "p",
        &inserts(&[("drv", "proof-driver"), ("impostor", "fake")]),
    );
    let file = dir.join("libkeel_plugin_fake.so").display().to_string();
    for args in [
        &["run", "--profile", "p", "counter"][..],
        &["plugins", "list", "--profile", "p"][..],
    ] {
        let run = env.keel_with(args, &[("KEEL_PLUGIN_PATH", dir.as_os_str())]);
        names(
            run.one_error("NOT_A_PLUGIN"),
            &[
                "row 'impostor'",
                &file,
                "not a keel plugin",
                "KEEL_PLUGIN_ABI",
            ],
        );
        assert!(env.trace().is_empty(), "a plugin ran: {:?}", env.trace());
    }
}

#[test]
fn row_config_against_the_schema_names_row_pointer_and_the_layer_that_set_it() {
    let env = Env::new();
    // The proof listener's schema: known keys only, `fail_activation` a boolean, `effects`
    // strings. Each bad value comes from a different layer, and the error must blame that one.
    env.profile(
        "p",
        "[[insert]]\nid = \"drv\"\nplugin = \"proof-driver\"\n\n\
         [[insert]]\nid = \"cfg\"\nplugin = \"proof-listener\"\nconfig = { effects = [\"ok\"] }\n",
    );

    // Set by the profile itself.
    env.profile(
        "typed",
        "[[insert]]\nid = \"drv\"\nplugin = \"proof-driver\"\n\n\
         [[insert]]\nid = \"cfg\"\nplugin = \"proof-listener\"\nconfig = { fail_activation = \"yes\" }\n",
    );
    let run = env.keel(&["run", "--profile", "typed", "x"]);
    names(
        run.one_error("ROW_CONFIG"),
        &[
            "row 'cfg'",
            "proof-listener",
            "/fail_activation",
            &format!("set by profile:typed ({})", profile_path(&env, "typed")),
        ],
    );

    // An unknown key set by `-c` (the pointer names the key, the layer is the `-c`).
    let run = env.keel(&["run", "--profile", "p", "-c", "cfg.bogus=1", "x"]);
    names(
        run.one_error("ROW_CONFIG"),
        &["row 'cfg'", "/bogus", "set by cli (-c cfg.bogus=1)"],
    );

    // A wrong item type set by a `--patch` replace.
    let patch = env.file(
        "patches/bad.toml",
        "[[replace]]\nid = \"cfg\"\nconfig = { effects = [\"ok\", 7] }\n",
    );
    let patch_arg = patch.display().to_string();
    let run = env.keel(&["run", "--profile", "p", "--patch", &patch_arg, "x"]);
    names(
        run.one_error("ROW_CONFIG"),
        &[
            "row 'cfg'",
            "/effects/1",
            &format!("set by patch ({patch_arg})"),
        ],
    );
    assert!(env.trace().is_empty(), "a row activated: {:?}", env.trace());

    // Control: the unpatched profile is valid and runs.
    env.keel(&["run", "--profile", "p", "x"]).expect_code(0);
}

#[test]
fn run_without_a_driver_is_refused_with_no_driver() {
    let env = Env::new();
    env.profile("driverless", &inserts(&[("quiet", "proof-listener")]));
    let run = env.keel(&["run", "--profile", "driverless", "x"]);
    names(run.one_error("NO_DRIVER"), &["'driverless'", "keel.driver"]);
    assert!(env.trace().is_empty(), "a row activated: {:?}", env.trace());
}

// The command seam: `keel sessions` and `keel fork` need a row providing `keel.command.*`;
// without one they are refused before any row activates.
#[test]
fn plugin_commands_without_a_provider_are_refused_with_no_command() {
    let env = Env::new();
    env.profile("bare", &inserts(&[("quiet", "proof-listener")]));
    for (args, service) in [
        (
            &["sessions", "list", "--profile", "bare"][..],
            "keel.command.sessions",
        ),
        (
            &["sessions", "show", "abc", "--profile", "bare"][..],
            "keel.command.sessions",
        ),
        (
            &["fork", "abc", "--at", "3", "--profile", "bare"][..],
            "keel.command.fork",
        ),
    ] {
        let run = env.keel(args);
        names(run.one_error("NO_COMMAND"), &["'bare'", service]);
    }
    assert!(env.trace().is_empty(), "a row activated: {:?}", env.trace());
}

#[test]
fn malformed_c_overrides_are_named() {
    let env = Env::new();
    env.profile("p", &inserts(&[("drv", "proof-driver")]));
    let cases = [
        ("drv.verbose", "missing '='"),
        ("nodot=1", "missing '.'"),
        (".key=1", "empty row id"),
        ("drv.=1", "empty key"),
    ];
    for (arg, why) in cases {
        for cmd in [&["config", "dump"][..], &["run"][..]] {
            let mut args = cmd.to_vec();
            args.extend(["--profile", "p", "-c", arg]);
            let run = env.keel(&args);
            names(
                run.one_error("CONFIG_BAD_OVERRIDE"),
                &[&format!("'-c {arg}'"), why],
            );
        }
    }
}

#[test]
fn a_missing_patch_file_is_named() {
    let env = Env::new();
    env.profile("p", &inserts(&[("drv", "proof-driver")]));
    let gone = env.path().join("patches/never-written.toml");
    let gone = gone.display().to_string();
    let run = env.keel(&["config", "dump", "--profile", "p", "--patch", &gone]);
    names(run.one_error("CONFIG_MISSING_PATCH"), &[&gone]);
}

#[test]
fn an_invalid_row_id_names_the_file_line_and_id() {
    let env = Env::new();
    env.profile(
        "p",
        "[[insert]]\nid = \"drv\"\nplugin = \"proof-driver\"\n\n[[insert]]\nid = \"Bad_Row\"\nplugin = \"proof-listener\"\n",
    );
    let run = env.keel(&["run", "--profile", "p", "x"]);
    names(
        run.one_error("CONFIG_INVALID_ID"),
        &[
            &format!("{}:6:", profile_path(&env, "p")),
            "'Bad_Row'",
            "row id",
        ],
    );
    // The same rule holds in a patch layer.
    let patch = env.file("patches/p.toml", "[[disable]]\nid = \"NOPE\"\n");
    let patch = patch.display().to_string();
    env.profile("q", &inserts(&[("drv", "proof-driver")]));
    let run = env.keel(&["config", "dump", "--profile", "q", "--patch", &patch]);
    names(
        run.one_error("CONFIG_INVALID_ID"),
        &[&format!("{patch}:2:"), "'NOPE'"],
    );
}

#[test]
fn a_missing_working_directory_is_named() {
    let env = Env::new();
    env.profile("p", &inserts(&[("drv", "proof-driver")]));
    let gone = env.path().join("no-such-dir");
    let gone = gone.display().to_string();
    let run = env.keel(&["run", "--profile", "p", "-C", &gone, "x"]);
    names(run.one_error("IO"), &[&gone]);
}

/// Odd inputs: each is refused with one line, and none of them makes keel panic.
#[test]
fn odd_inputs_are_refused_without_panicking() {
    let env = Env::new();
    env.bundle("b", &inserts(&[("drv", "proof-driver")]));
    env.profile("twice", "bundles = [\"b\", \"b\"]\n");
    env.profile(
        "duprow",
        &inserts(&[("drv", "proof-driver"), ("drv", "proof-driver")]),
    );
    env.profile("unknown-key", "wat = 1\n");
    env.profile("only-in-profile", &inserts(&[("drv", "proof-driver")]));
    let bundles_in_patch = env.file("patches/b.toml", "bundles = [\"b\"]\n");
    std::fs::write(
        env.path().join("config/profiles/binary.toml"),
        b"\xff\xfe\x00 not utf-8",
    )
    .expect("write binary profile");
    let bundles_in_patch = bundles_in_patch.display().to_string();
    let cases: Vec<(Vec<&str>, &str, Vec<&str>)> = vec![
        (
            vec!["--profile", "twice"],
            "CONFIG_DUPLICATE_BUNDLE",
            vec!["'b'"],
        ),
        (
            vec!["--profile", "duprow"],
            "CONFIG_DUPLICATE_ROW",
            vec!["'drv'"],
        ),
        (
            vec!["--profile", "unknown-key"],
            "CONFIG_PARSE",
            vec!["unknown-key.toml:1:", "wat"],
        ),
        (
            vec!["--profile", "binary"],
            "CONFIG_IO",
            vec!["binary.toml"],
        ),
        (vec!["--profile", ""], "CONFIG_UNKNOWN_PROFILE", vec!["''"]),
        (
            vec!["--profile", "only-in-profile", "--patch", &bundles_in_patch],
            "CONFIG_PROFILE_ONLY_KEY",
            vec![&bundles_in_patch, "bundles"],
        ),
    ];
    for (args, code, needles) in cases {
        for cmd in [
            &["config", "dump"][..],
            &["run"][..],
            &["plugins", "list"][..],
        ] {
            let mut full = cmd.to_vec();
            full.extend(&args);
            let run: Run = env.keel(&full);
            names(run.one_error(code), &needles);
        }
    }
    // `doctor` reports the same problems on stdout and exits non-zero, also without panicking.
    let run = env.keel(&["doctor", "--profile", "duprow"]);
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    assert_ne!(
        run.code, 0,
        "doctor passed a broken profile:\n{}",
        run.stdout
    );
}
