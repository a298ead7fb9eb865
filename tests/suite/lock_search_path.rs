//! `keel.lock` covers every library on the search path it was made from (issue 10 item 10;
//! KRN-04, KRN-05), not only the locked profile's: `keel lock --profile p` pins each
//! `libkeel_plugin_*` library found there, and a profile with no entry of its own (`q`) is
//! checked against that table before anything is opened. A library changed or added since the
//! lock is refused whichever profile loads it; per-profile graphs stay independent; `keel
//! doctor` says which profile is locked, which only by the library table, and which libraries
//! drifted.

use keel_tests::{Env, Run, plugin_file};

use crate::suite::lock::{
    CONSUMER, DRIVER, PROVIDER, append_byte, digest, dlopened, lib, loads_plugin, lock_path,
    locked, refused_before_opening,
};

/// The doctor line that starts with `what:` (after the status word).
fn doctor_line<'a>(doctor: &'a Run, what: &str) -> &'a str {
    doctor
        .stdout
        .lines()
        .find(|l| {
            l.split_once("  ")
                .is_some_and(|(_, rest)| rest.trim_start().starts_with(what))
        })
        .unwrap_or_else(|| panic!("doctor has no {what:?} line:\n{}", doctor.stdout))
}

#[test]
fn issue10_a_tampered_library_only_an_unlocked_profile_loads_is_refused() {
    let env = locked(&format!("{DRIVER}{PROVIDER}"));
    env.profile("q", &format!("{DRIVER}{PROVIDER}{CONSUMER}"));
    // Control: every library q loads is as it was when p was locked, so q runs.
    env.keel(&["run", "--profile", "q", "counter"])
        .expect_code(0);
    env.clear_trace();

    let consumer = lib(&env, "proof-consumer");
    let consumer_shown = consumer.display().to_string();
    let locked_digest = digest(&consumer);
    append_byte(&consumer);
    let found_digest = digest(&consumer);

    let (run, opened) = dlopened(&env, &["run", "--profile", "q", "counter"]);
    let line = run.one_error("LOCK_DIGEST");
    refused_before_opening(
        &env,
        line,
        &[
            "'proof-consumer'",
            consumer_shown.as_str(),
            &locked_digest,
            &found_digest,
            &lock_path(&env).display().to_string(),
            "keel lock --profile q",
        ],
        &opened,
    );
    env.keel(&["plugins", "list", "--profile", "q"])
        .one_error("LOCK_DIGEST");
    // The locked profile does not load the consumer: it still runs.
    env.keel(&["run", "--profile", "p", "counter"])
        .expect_code(0);

    // doctor: q fails, and the library line names the changed file.
    let doctor = env.keel(&["doctor", "--profile", "q"]);
    doctor.expect_code(1);
    assert!(
        doctor.stdout.contains("error[LOCK_DIGEST]"),
        "{}",
        doctor.stdout
    );
    let libraries = doctor_line(&doctor, "lock libraries:");
    assert!(
        libraries.starts_with("warn")
            && libraries.contains(&format!(
                "changed since the lock: {}",
                plugin_file("proof-consumer")
            )),
        "{libraries}"
    );

    // Restoring the pinned bytes lets q run again.
    std::fs::copy(keel_tests::plugin_lib("proof-consumer"), &consumer).expect("restore");
    env.keel(&["run", "--profile", "q", "counter"])
        .expect_code(0);
}

#[test]
fn issue10_a_library_added_to_the_search_path_after_locking_is_refused() {
    // The consumer is not on the search path when p is locked.
    let env = Env::new().relocate(&["proof-driver", "proof-provider"]);
    env.profile("p", &format!("{DRIVER}{PROVIDER}"));
    env.keel(&["lock", "--profile", "p"]).expect_code(0);
    let text = std::fs::read_to_string(lock_path(&env)).expect("lock");
    let lock: toml::Table = toml::from_str(&text).expect("TOML");
    let table = lock["libraries"].as_table().expect("a library table");
    let mut pinned: Vec<&String> = table.keys().collect();
    pinned.sort_unstable();
    assert_eq!(
        pinned,
        [&plugin_file("proof-driver"), &plugin_file("proof-provider")]
    );
    assert_eq!(
        table[&plugin_file("proof-driver")].as_str(),
        Some(digest(&lib(&env, "proof-driver")).as_str())
    );

    std::fs::copy(
        keel_tests::plugin_lib("proof-consumer"),
        lib(&env, "proof-consumer"),
    )
    .expect("add a library");
    env.profile("q", &format!("{DRIVER}{PROVIDER}{CONSUMER}"));
    let (run, opened) = dlopened(&env, &["run", "--profile", "q", "counter"]);
    let line = run.one_error("LOCK_DIGEST");
    let consumer = lib(&env, "proof-consumer").display().to_string();
    for needle in [
        "'proof-consumer'",
        consumer.as_str(),
        "not on the search path when the lock was made",
    ] {
        assert!(
            line.contains(needle),
            "error does not name {needle}:\n{line}"
        );
    }
    assert!(
        !loads_plugin(&env, &opened),
        "the unpinned library was opened: {opened:?}"
    );
    assert!(env.trace().is_empty(), "a plugin ran: {:?}", env.trace());
    env.keel(&["run", "--profile", "p", "counter"])
        .expect_code(0);
    let doctor = env.keel(&["doctor", "--profile", "p"]);
    doctor.expect_code(0);
    let libraries = doctor_line(&doctor, "lock libraries:");
    assert!(
        libraries.starts_with("warn")
            && libraries.contains(&format!(
                "not pinned (added since the lock): {}",
                plugin_file("proof-consumer")
            )),
        "{libraries}"
    );

    // A directory put in front of the search path later: its (different) provider shadows
    // the pinned one and is refused too.
    let extra = env.path().join("extra-plugins");
    std::fs::create_dir_all(&extra).expect("mkdir");
    let shadow = extra.join(plugin_file("proof-provider"));
    std::fs::copy(keel_tests::plugin_lib("proof-provider"), &shadow).expect("copy");
    append_byte(&shadow);
    std::fs::remove_file(lib(&env, "proof-consumer")).expect("remove");
    env.profile("r", &format!("{DRIVER}{PROVIDER}"));
    let run = env.keel_with(
        &["run", "--profile", "r", "counter"],
        &[("KEEL_PLUGIN_PATH", extra.as_os_str())],
    );
    let line = run.one_error("LOCK_DIGEST");
    assert!(
        line.contains("'proof-provider'") && line.contains(&shadow.display().to_string()),
        "{line}"
    );
    std::fs::remove_file(&shadow).expect("remove");

    // Re-locking pins what is there now and says what changed.
    std::fs::copy(
        keel_tests::plugin_lib("proof-consumer"),
        lib(&env, "proof-consumer"),
    )
    .expect("add a library");
    let relock = env.keel(&["lock", "--profile", "p"]);
    relock.expect_code(0);
    assert!(
        relock.stdout.contains(&format!(
            "new since the last lock, pinned: {}",
            plugin_file("proof-consumer")
        )),
        "{}",
        relock.stdout
    );
    env.keel(&["run", "--profile", "q", "counter"])
        .expect_code(0);
}

#[test]
fn issue10_doctor_says_which_profiles_are_locked() {
    let env = locked(&format!("{DRIVER}{PROVIDER}"));
    env.profile("q", &format!("{DRIVER}{PROVIDER}{CONSUMER}"));
    let shown = lock_path(&env).display().to_string();

    let doctor = env.keel(&["doctor", "--profile", "p"]);
    doctor.expect_code(0);
    let lock = doctor_line(&doctor, "lock:");
    assert!(
        lock.starts_with("ok") && lock.contains(&format!("locked by {shown}")),
        "{lock}"
    );
    let libraries = doctor_line(&doctor, "lock libraries:");
    assert!(
        libraries.starts_with("ok")
            && libraries.contains("all 3 libraries on the search path pinned by"),
        "{libraries}"
    );

    let doctor = env.keel(&["doctor", "--profile", "q"]);
    doctor.expect_code(0);
    let lock = doctor_line(&doctor, "lock:");
    assert!(lock.starts_with("warn"), "{lock}");
    for needle in [
        format!("libraries pinned by {shown}"),
        "graph unlocked: no entry for profile 'q'".to_owned(),
        "keel lock --profile q".to_owned(),
    ] {
        assert!(lock.contains(&needle), "{lock} lacks {needle}");
    }
    let list = env.keel(&["plugins", "list", "--json", "--profile", "q"]);
    list.expect_code(0);
    let list: serde_json::Value = serde_json::from_str(&list.stdout).expect("JSON");
    assert!(
        list["lock"]
            .as_str()
            .is_some_and(|l| l.starts_with("libraries pinned by")),
        "{list}"
    );

    // A lock without the library table (an older keel's) pins nothing for q: q is refused,
    // p (with its own entry) runs, doctor says why.
    let text = std::fs::read_to_string(lock_path(&env)).expect("lock");
    let mut old: toml::Table = toml::from_str(&text).expect("TOML");
    old.remove("libraries").expect("a library table");
    std::fs::write(lock_path(&env), toml::to_string(&old).expect("TOML")).expect("write");
    let line = env
        .keel(&["run", "--profile", "q", "counter"])
        .one_error("LOCK_FILE")
        .to_owned();
    assert!(
        line.contains("no [libraries] table") && line.contains("keel lock --profile q"),
        "{line}"
    );
    env.keel(&["run", "--profile", "p", "counter"])
        .expect_code(0);
    let doctor = env.keel(&["doctor", "--profile", "p"]);
    let libraries = doctor_line(&doctor, "lock libraries:");
    assert!(
        libraries.starts_with("warn") && libraries.contains("has no library table"),
        "{libraries}"
    );
}
