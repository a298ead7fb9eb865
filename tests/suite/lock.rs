//! `keel.lock` (ARCHITECTURE §4.1; KRN-04, KRN-05): `keel lock --profile P` pins a blake3 digest
//! per plugin library and the assembly graph's digest, beside the binary. A later start with a
//! changed library or graph exits 2 naming what differs, before any plugin code runs; a lock in
//! `$KEEL_HOME` is ignored; a malformed lock is named.
//!
//! Every test runs a relocated copy of `keel` (`Env::relocate`), so each has a private lock.
//! "Before any plugin code runs" is checked two ways: the proof plugins' trace file stays empty,
//! and glibc's loader log (`LD_DEBUG=files`) shows the library was never `dlopen`ed.

use std::path::{Path, PathBuf};

use keel_tests::{Env, Run, plugin_file};

pub(crate) const DRIVER: &str = "[[insert]]\nid = \"drv\"\nplugin = \"proof-driver\"\n\n";
pub(crate) const PROVIDER: &str = "[[insert]]\nid = \"prov\"\nplugin = \"proof-provider\"\n\n";
pub(crate) const CONSUMER: &str = "[[insert]]\nid = \"cons\"\nplugin = \"proof-consumer\"\n\n";
const CONSUMER2: &str = "[[insert]]\nid = \"cons2\"\nplugin = \"proof-consumer\"\n\n";

/// A relocated env with the three proof plugins and profile `p` = `rows`, locked.
pub(crate) fn locked(rows: &str) -> Env {
    let env = Env::new().relocate(&["proof-driver", "proof-provider", "proof-consumer"]);
    env.profile("p", rows);
    let run = env.keel(&["lock", "--profile", "p"]);
    run.expect_code(0);
    assert!(
        run.stdout.contains(&lock_path(&env).display().to_string()),
        "`keel lock` does not say where it wrote:\n{}",
        run.stdout
    );
    env
}

pub(crate) fn lock_path(env: &Env) -> PathBuf {
    env.path().join("dist/bin/keel.lock")
}

pub(crate) fn lib(env: &Env, plugin: &str) -> PathBuf {
    env.dist_lib().join(plugin_file(plugin))
}

pub(crate) fn digest(path: &Path) -> String {
    let bytes = std::fs::read(path).expect("read library");
    format!("blake3:{}", blake3::hash(&bytes).to_hex())
}

pub(crate) fn append_byte(path: &Path) {
    use std::io::Write as _;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .expect("open library");
    f.write_all(b"\0").expect("append");
}

/// Runs keel with glibc's loader log on; returns the run and the libraries it `dlopen`ed.
/// A `LOCK_DIGEST` refusal: `line` names every needle, no plugin ran, and no library of the
/// dist tree was opened before the check.
pub(crate) fn refused_before_opening(env: &Env, line: &str, needles: &[&str], opened: &[String]) {
    for needle in needles {
        assert!(
            line.contains(needle),
            "error does not name {needle}:\n{line}"
        );
    }
    assert!(env.trace().is_empty(), "a plugin ran: {:?}", env.trace());
    assert!(
        !loads_plugin(env, opened),
        "plugin libraries were opened before the digest check: {opened:?}"
    );
}

/// Whether the loader log shows a library of the dist tree opened: by its path, or by the
/// `/proc/self/fd/N` name the loader hands `dlopen` for the digested open file (issue 25
/// item 2).
pub(crate) fn loads_plugin(env: &Env, opened: &[String]) -> bool {
    let dist_lib = env.dist_lib().display().to_string();
    opened
        .iter()
        .any(|f| f.starts_with(&dist_lib) || f.starts_with("/proc/self/fd/"))
}

pub(crate) fn dlopened(env: &Env, args: &[&str]) -> (Run, Vec<String>) {
    let dir = env.path().join(format!("ld-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir ld log");
    let prefix = dir.join("log");
    let run = env.keel_with(
        args,
        &[
            ("LD_DEBUG", std::ffi::OsStr::new("files")),
            ("LD_DEBUG_OUTPUT", prefix.as_os_str()),
        ],
    );
    let mut opened = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("read ld log").flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        for line in text.lines().filter(|l| l.contains("dynamically loaded by")) {
            if let Some(file) = line
                .split_once("file=")
                .and_then(|(_, rest)| rest.split_once(" ["))
                .map(|(file, _)| file.to_owned())
            {
                opened.push(file);
            }
        }
    }
    (run, opened)
}

#[test]
fn krn04_lock_writes_plugin_digests_and_the_graph_digest_beside_the_binary() {
    let env = locked(&format!("{DRIVER}{PROVIDER}{CONSUMER}"));
    let path = lock_path(&env);
    let text = std::fs::read_to_string(&path).expect("keel.lock beside the binary");
    // KRN-05: only beside the binary; never in the data dir or the working dir.
    assert!(!env.home().join("keel.lock").exists());
    assert!(!env.work().join("keel.lock").exists());

    let lock: toml::Table = toml::from_str(&text).expect("keel.lock is TOML");
    assert_eq!(lock["version"].as_integer(), Some(1));
    let entry = lock["profiles"]["p"]
        .as_table()
        .expect("an entry for profile p");
    let plugins = entry["plugins"].as_array().expect("plugins");
    let mut names: Vec<&str> = plugins
        .iter()
        .map(|p| p["name"].as_str().expect("name"))
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["proof-consumer", "proof-driver", "proof-provider"]);
    for p in plugins {
        let name = p["name"].as_str().expect("name");
        assert_eq!(
            p["digest"].as_str(),
            Some(digest(&lib(&env, name)).as_str())
        );
        assert_eq!(p["file"].as_str(), Some(plugin_file(name).as_str()));
        assert_eq!(p["version"].as_str(), Some(env!("CARGO_PKG_VERSION")));
        assert!(p["manifest"].as_str().is_some_and(|m| m.contains(name)));
    }
    // The graph digest is the one `plugins list` computes, and the edges are recorded.
    let list = env.keel(&["plugins", "list", "--json", "--profile", "p"]);
    list.expect_code(0);
    let list: serde_json::Value = serde_json::from_str(&list.stdout).expect("JSON");
    assert_eq!(
        entry["graph_digest"].as_str(),
        list["graph_digest"].as_str()
    );
    assert!(
        entry["graph_digest"]
            .as_str()
            .is_some_and(|d| d.starts_with("blake3:") && d.len() == 7 + 64)
    );
    let edges: Vec<&str> = entry["edges"]
        .as_array()
        .expect("edges")
        .iter()
        .filter_map(toml::Value::as_str)
        .collect();
    assert!(edges.contains(&"cons -> prov (proof.counter)"), "{edges:?}");
}

#[test]
fn krn04_a_locked_profile_runs_and_doctor_says_locked() {
    let env = locked(&format!("{DRIVER}{PROVIDER}{CONSUMER}"));
    let run = env.keel(&["run", "--profile", "p", "counter"]);
    run.expect_code(0);
    assert_eq!(run.step("counter")["value"]["row"], "prov");
    assert!(
        env.trace()
            .contains(&"activate cons provider=prov".to_owned())
    );

    let doctor = env.keel(&["doctor", "--profile", "p"]);
    doctor.expect_code(0);
    let lock_line = doctor
        .stdout
        .lines()
        .find(|l| l.contains("lock:"))
        .unwrap_or_else(|| panic!("no lock line:\n{}", doctor.stdout));
    assert!(lock_line.starts_with("ok"), "{lock_line}");
    assert!(lock_line.contains("locked by"), "{lock_line}");
    assert!(
        lock_line.contains(&lock_path(&env).display().to_string()),
        "{lock_line}"
    );
}

#[test]
fn krn04_a_tampered_library_is_refused_before_it_is_opened() {
    let env = locked(&format!("{DRIVER}{PROVIDER}{CONSUMER}"));
    let provider = lib(&env, "proof-provider");
    let provider_shown = provider.display().to_string();

    // Control: a good start does dlopen the provider (so the loader log works here).
    let (run, opened) = dlopened(&env, &["run", "--profile", "p", "counter"]);
    run.expect_code(0);
    let loader_log_works = loads_plugin(&env, &opened);
    if !loader_log_works {
        eprintln!("note: no LD_DEBUG loader log on this system; relying on the trace file only");
    }
    env.clear_trace();

    let locked_digest = digest(&provider);
    append_byte(&provider);
    let found_digest = digest(&provider);
    assert_ne!(locked_digest, found_digest);

    let (run, opened) = dlopened(&env, &["run", "--profile", "p", "counter"]);
    let line = run.one_error("LOCK_DIGEST");
    refused_before_opening(
        &env,
        line,
        &[
            "'proof-provider'",
            &provider_shown,
            &locked_digest,
            &found_digest,
            &lock_path(&env).display().to_string(),
        ],
        &opened,
    );
    if loader_log_works {
        assert!(!loads_plugin(&env, &opened), "{opened:?}");
    }
    // The other commands that assemble refuse too; doctor reports it and exits 1.
    env.keel(&["plugins", "list", "--profile", "p"])
        .one_error("LOCK_DIGEST");
    let doctor = env.keel(&["doctor", "--profile", "p"]);
    doctor.expect_code(1);
    assert!(
        doctor.stdout.contains("error[LOCK_DIGEST]"),
        "{}",
        doctor.stdout
    );

    // A library replaced by garbage gives the digest error, not an open error: the digest is
    // checked first, so dlopen never sees the file.
    std::fs::write(&provider, b"garbage, not ELF").expect("overwrite library");
    env.keel(&["run", "--profile", "p", "counter"])
        .one_error("LOCK_DIGEST");

    // Restoring the locked bytes makes the profile start again.
    std::fs::copy(keel_tests::plugin_lib("proof-provider"), &provider).expect("restore");
    env.keel(&["run", "--profile", "p", "counter"])
        .expect_code(0);
}

#[test]
fn krn04_a_changed_graph_names_the_edge_that_differs() {
    let env = locked(&format!("{DRIVER}{PROVIDER}{CONSUMER}"));
    let lock = lock_path(&env).display().to_string();

    // A second consumer row: same libraries, one more edge.
    env.profile("p", &format!("{DRIVER}{PROVIDER}{CONSUMER}{CONSUMER2}"));
    let run = env.keel(&["run", "--profile", "p", "counter"]);
    let line = run.one_error("LOCK_GRAPH");
    for needle in ["edge 'cons2 -> prov (proof.counter)' is new", "'p'", &lock] {
        assert!(
            line.contains(needle),
            "error does not name {needle}:\n{line}"
        );
    }
    assert!(env.trace().is_empty(), "a plugin ran: {:?}", env.trace());

    // Re-locking accepts the change; removing the row again names the edge that is gone.
    env.keel(&["lock", "--profile", "p"]).expect_code(0);
    env.keel(&["run", "--profile", "p", "counter"])
        .expect_code(0);
    env.clear_trace();
    env.profile("p", &format!("{DRIVER}{PROVIDER}{CONSUMER}"));
    let run = env.keel(&["run", "--profile", "p", "counter"]);
    let line = run.one_error("LOCK_GRAPH");
    assert!(
        line.contains("edge 'cons2 -> prov (proof.counter)' is gone"),
        "{line}"
    );
    assert!(env.trace().is_empty(), "a plugin ran: {:?}", env.trace());
}

#[test]
fn krn04_a_plugin_added_after_locking_is_refused_unopened() {
    let env = locked(&format!("{DRIVER}{PROVIDER}"));
    env.profile("p", &format!("{DRIVER}{PROVIDER}{CONSUMER}"));
    let (run, opened) = dlopened(&env, &["run", "--profile", "p", "counter"]);
    let line = run.one_error("LOCK_GRAPH");
    assert!(
        line.contains("'proof-consumer'") && line.contains("not in the lock"),
        "{line}"
    );
    assert!(
        !loads_plugin(&env, &opened),
        "the unlocked library was opened: {opened:?}"
    );
    assert!(env.trace().is_empty(), "a plugin ran: {:?}", env.trace());
}

#[test]
fn krn04_locks_of_different_profiles_are_independent() {
    let env = locked(&format!("{DRIVER}{PROVIDER}"));
    env.profile("q", &format!("{DRIVER}{PROVIDER}{CONSUMER}"));
    env.keel(&["lock", "--profile", "q"]).expect_code(0);
    let text = std::fs::read_to_string(lock_path(&env)).expect("lock");
    let lock: toml::Table = toml::from_str(&text).expect("TOML");
    assert!(lock["profiles"].get("p").is_some() && lock["profiles"].get("q").is_some());
    // Only q pins the consumer: tampering with it stops q and leaves p running.
    append_byte(&lib(&env, "proof-consumer"));
    env.keel(&["run", "--profile", "p", "counter"])
        .expect_code(0);
    let line = env
        .keel(&["run", "--profile", "q", "counter"])
        .one_error("LOCK_DIGEST")
        .to_owned();
    assert!(line.contains("'proof-consumer'"), "{line}");
}

#[test]
fn krn05_a_lock_in_keel_home_is_ignored() {
    let env = locked(&format!("{DRIVER}{PROVIDER}"));
    // Move the (valid) lock into the data dir, then change a library it pins: if keel read the
    // lock from there it would refuse to start.
    let in_home = env.home().join("keel.lock");
    std::fs::rename(lock_path(&env), &in_home).expect("move lock");
    append_byte(&lib(&env, "proof-provider"));

    let run = env.keel(&["run", "--profile", "p", "counter"]);
    run.expect_code(0);
    assert_eq!(run.error_lines(), Vec::<&str>::new(), "{}", run.stderr);
    let doctor = env.keel(&["doctor", "--profile", "p"]);
    doctor.expect_code(0);
    let lock_line = doctor
        .stdout
        .lines()
        .find(|l| l.contains("lock:"))
        .unwrap_or_else(|| panic!("no lock line:\n{}", doctor.stdout));
    assert!(lock_line.contains("unlocked"), "{lock_line}");
    assert!(
        lock_line.contains("no keel.lock beside the binary"),
        "{lock_line}"
    );
    assert!(
        lock_line.contains(&lock_path(&env).display().to_string()),
        "{lock_line}"
    );

    // Even a malformed file there is never read.
    std::fs::write(&in_home, "this is [ not a lock").expect("write");
    env.keel(&["run", "--profile", "p", "counter"])
        .expect_code(0);
}

#[test]
fn a_malformed_lock_is_named() {
    let env = Env::new().relocate(&["proof-driver", "proof-provider"]);
    env.profile("p", &format!("{DRIVER}{PROVIDER}"));
    let path = lock_path(&env);
    let shown = path.display().to_string();
    let cases = [
        ("version = 1\n\n[profiles.p]\ngraph_digest = 5\n", "line 4"),
        ("this is [ not a lock\n", "line 1"),
        ("version = 99\n", "unsupported lock version 99"),
        ("version = 1\nsurprise = true\n", "surprise"),
    ];
    for (text, why) in cases {
        std::fs::write(&path, text).expect("write lock");
        for args in [
            &["run", "--profile", "p", "counter"][..],
            &["plugins", "list", "--profile", "p"][..],
            &["lock", "--profile", "p"][..],
        ] {
            let run = env.keel(args);
            let line = run.one_error("LOCK_FILE");
            assert!(
                line.contains(&shown) && line.contains(why),
                "{args:?}: {line}"
            );
        }
        assert!(env.trace().is_empty(), "a plugin ran: {:?}", env.trace());
        let doctor = env.keel(&["doctor", "--profile", "p"]);
        doctor.expect_code(1);
        assert!(
            doctor.stdout.contains("error[LOCK_FILE]"),
            "{}",
            doctor.stdout
        );
        // `keel lock` refused to overwrite what it cannot read.
        assert_eq!(std::fs::read_to_string(&path).expect("lock"), text);
    }
}
