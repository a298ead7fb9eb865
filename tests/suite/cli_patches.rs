//! `--patch NAME` (issue 23 item 15): a bare name is found through the config search path as
//! `--profile` finds a profile — `profiles/patches/<name>.toml` in each config root, then in the
//! user config root `$KEEL_HOME` — from whatever directory keel runs in; a path stays a path; a
//! name found nowhere is `CONFIG_MISSING_PATCH` naming it and every file searched.

use keel_tests::{Env, workspace_root};

const PROFILE: &str = "[[insert]]\nid = \"drv\"\nplugin = \"proof-driver\"\n";

/// A patch inserting a row with id `row`.
fn patch_adding(row: &str) -> String {
    format!("[[insert]]\nid = \"{row}\"\nplugin = \"proof-driver\"\n")
}

// Issue 23 item 15: from the work directory (not a config root), a name resolves in the config
// root, a user patch resolves in `$KEEL_HOME`, and a path is read as a path.
#[test]
fn issue23_item15_a_patch_name_resolves_through_the_search_path_from_any_directory() {
    let env = Env::new();
    env.profile("p", PROFILE);
    let shipped = env.file(
        "config/profiles/patches/extra.toml",
        &patch_adding("from-root"),
    );
    let user = env.file(
        "home/profiles/patches/mine.toml",
        &patch_adding("from-home"),
    );
    let dump = env.keel(&[
        "config",
        "dump",
        "--explain",
        "--profile",
        "p",
        "--patch",
        "extra",
        "--patch",
        "mine",
    ]);
    dump.expect_code(0);
    for needle in [
        "id = \"from-root\"".to_owned(),
        "id = \"from-home\"".to_owned(),
        shipped.display().to_string(),
        user.display().to_string(),
    ] {
        assert!(
            dump.stdout.contains(&needle),
            "no {needle:?} in:\n{}",
            dump.stdout
        );
    }

    // A relative path is still a path (relative to the working directory), not a name.
    env.file("work/local.toml", &patch_adding("from-path"));
    let dump = env.keel(&[
        "config",
        "dump",
        "--profile",
        "p",
        "--patch",
        "./local.toml",
    ]);
    dump.expect_code(0);
    assert!(
        dump.stdout.contains("id = \"from-path\""),
        "{}",
        dump.stdout
    );

    // The checkout's shipped patch, by name, from the work directory.
    let dump = env.keel(&["config", "dump", "--explain", "--patch", "anthropic"]);
    dump.expect_code(0);
    let anthropic = workspace_root().join("profiles/patches/anthropic.toml");
    assert!(
        dump.stdout.contains(&anthropic.display().to_string()),
        "{}",
        dump.stdout
    );
    assert!(dump.stdout.contains("llm-anthropic"), "{}", dump.stdout);
}

// Issue 23 item 15: an unknown name names itself and every candidate, in search order: each
// config root's `profiles/patches/<name>.toml`, then `$KEEL_HOME`'s.
#[test]
fn issue23_item15_an_unknown_patch_name_names_every_file_searched() {
    let env = Env::new();
    env.profile("p", PROFILE);
    let run = env.keel(&["run", "--profile", "p", "--patch", "nosuch", "task"]);
    let line = run.one_error("CONFIG_MISSING_PATCH");
    assert!(line.contains("'nosuch'"), "{line}");
    let searched = [
        env.path().join("config/profiles/patches/nosuch.toml"),
        workspace_root().join("profiles/patches/nosuch.toml"),
        env.home().join("profiles/patches/nosuch.toml"),
    ]
    .map(|p| p.display().to_string());
    let mut at = 0;
    for candidate in &searched {
        let found = line[at..]
            .find(candidate.as_str())
            .unwrap_or_else(|| panic!("{candidate} not named (in order) in: {line}"));
        at += found + candidate.len();
    }
}
