//! The trust records and the guarded-change diff of `trust.rs`: what needs trust, what a
//! record holds for, and that bad trust files are named.

use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

/// What a plugin might declare (`Manifest::trusts_project_files`): the kernel knows no
/// product, so these are any project files.
fn declared() -> Vec<String> {
    vec![
        ".acme/settings.json".to_owned(),
        ".acme/settings.local.json".to_owned(),
    ]
}

fn row(id: &str, plugin: &str, config: Value) -> RowState {
    RowState {
        id: id.to_owned(),
        plugin: plugin.to_owned(),
        config,
    }
}

fn project(before: Vec<RowState>, after: Vec<RowState>) -> ProjectLayer {
    ProjectLayer {
        path: PathBuf::from("/w/.keel/config.toml"),
        dir: PathBuf::from("/w"),
        digest: "d1".to_owned(),
        before,
        after,
        trust: TrustState::Untrusted,
    }
}

fn guards(plugin: &str) -> Option<Guarded> {
    match plugin {
        "sandbox" => Some(Guarded::Row),
        "llm-openai" => Some(Guarded::Keys(vec!["base_url".into(), "api_key_ref".into()])),
        "tools" => Some(Guarded::None),
        _ => None,
    }
}

fn base() -> Vec<RowState> {
    vec![
        row("sandbox", "sandbox", json!({})),
        row("llm", "llm-openai", json!({"model": "m"})),
        row("tools", "tools", json!({})),
    ]
}

// Issue 10 item 1: what an untrusted project layer may and may not change.
#[test]
fn guarded_changes_name_rows_and_keys_and_ignore_the_rest() {
    // Unguarded keys and unguarded rows: nothing needs trust.
    let mut after = base();
    after[1].config = json!({"model": "other"});
    after[2].config = json!({"max_parallel": 2});
    assert_eq!(
        guarded_changes(&project(base(), after), guards),
        Vec::<String>::new()
    );

    // A guarded row's config, a guarded key (added), a disabled row, a swapped plugin.
    let after = vec![
        row("sandbox", "sandbox", json!({"mode": "danger-full-access"})),
        row(
            "llm",
            "llm-openai",
            json!({"model": "m", "base_url": "http://evil"}),
        ),
        row("tools", "other-plugin", json!({})),
    ];
    let mut before = base();
    before.push(row("firewall", "firewall", json!({})));
    assert_eq!(
        guarded_changes(&project(before, after), guards),
        [
            "changes row 'sandbox'",
            "llm.base_url",
            "swaps row 'tools' from plugin tools to other-plugin",
            "disables row 'firewall'",
        ]
    );

    // Inserted rows: a guarded plugin always; a key-guarded one only with a guarded key set.
    let mut after = base();
    after.push(row("sandbox-2", "sandbox", json!({})));
    after.push(row("llm-2", "llm-openai", json!({"model": "x"})));
    after.push(row(
        "llm-3",
        "llm-openai",
        json!({"api_key_ref": "AWS_SECRET"}),
    ));
    after.push(row("t2", "tools", json!({})));
    assert_eq!(
        guarded_changes(&project(base(), after), guards),
        [
            "inserts row 'sandbox-2' (plugin sandbox)",
            "llm-3.api_key_ref"
        ]
    );

    // A guarded key removed (back to the plugin's default) is a change too.
    let mut before = base();
    before[1].config = json!({"model": "m", "base_url": "http://mine"});
    assert_eq!(
        guarded_changes(&project(before, base()), guards),
        ["llm.base_url"]
    );
}

// Issue 10 item 1: a record holds for exactly the bytes it was made from.
#[test]
fn trust_records_follow_the_file_content() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let layer_dir = work.path().join(".keel");
    std::fs::create_dir_all(&layer_dir).unwrap();
    std::fs::write(layer_dir.join("config.toml"), "# v1\n").unwrap();
    let dir = work.path().canonicalize().unwrap();
    let v1 = blake3::hash(b"# v1\n").to_hex().to_string();
    let v2 = blake3::hash(b"# v2\n").to_hex().to_string();

    assert_eq!(
        state(home.path(), &dir, &v1).unwrap(),
        TrustState::Untrusted
    );
    let recorded = record(home.path(), work.path(), &declared()).unwrap();
    assert_eq!(recorded, vec![(dir.join(".keel/config.toml"), v1.clone())]);
    assert_eq!(state(home.path(), &dir, &v1).unwrap(), TrustState::Trusted);
    let mode = std::fs::metadata(home.path().join(TRUST_FILE))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    assert_eq!(state(home.path(), &dir, &v2).unwrap(), TrustState::Changed);

    assert!(revoke(home.path(), work.path()).unwrap());
    assert!(!revoke(home.path(), work.path()).unwrap());
    assert_eq!(
        state(home.path(), &dir, &v1).unwrap(),
        TrustState::Untrusted
    );
}

// Bad input: no layer to trust, a malformed trust file, another format version.
#[test]
fn bad_trust_input_names_the_file() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let e = record(home.path(), work.path(), &declared()).unwrap_err();
    assert!(e.to_string().contains("nothing to trust"), "{e}");

    let dir = work.path();
    std::fs::write(home.path().join(TRUST_FILE), "{not json").unwrap();
    let e = state(home.path(), dir, "d").unwrap_err();
    assert_eq!(e.code(), "TRUST_FILE");
    assert!(e.to_string().contains(TRUST_FILE), "{e}");

    std::fs::write(
        home.path().join(TRUST_FILE),
        r#"{"version": 9, "projects": {}}"#,
    )
    .unwrap();
    let e = state(home.path(), dir, "d").unwrap_err();
    assert!(e.to_string().contains("format version 9"), "{e}");
}

// Issue 15, issue 24 item 4: a declared project file is trusted file by file, by its bytes,
// like the layer; `--trust-project` vouches for every one; a row can ask only about the files
// its plugin declared.
#[test]
fn declared_files_are_trusted_by_their_own_digest() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(work.path().join(".acme")).unwrap();
    let settings = work.path().join(".acme/settings.json");
    let local = work.path().join(".acme/settings.local.json");
    std::fs::write(&settings, "{}").unwrap();
    let ask = |p: &std::path::Path, vouched| {
        file_state(home.path(), "hooks", &declared(), p, vouched).unwrap()
    };

    assert_eq!(ask(&settings, false), TrustState::Untrusted);
    assert_eq!(ask(&settings, true), TrustState::Vouched);
    let recorded = record(home.path(), work.path(), &declared()).unwrap();
    let dir = work.path().canonicalize().unwrap();
    assert_eq!(recorded.len(), 1, "only the file present: {recorded:?}");
    assert_eq!(recorded[0].0, dir.join(".acme/settings.json"));
    assert_eq!(ask(&settings, false), TrustState::Trusted);

    // A file that appeared after the record is not trusted by it; a changed one no longer is.
    std::fs::write(&local, "{\"hooks\":{}}").unwrap();
    assert_eq!(ask(&local, false), TrustState::Changed);
    std::fs::write(&settings, "{\"hooks\":{}}").unwrap();
    assert_eq!(ask(&settings, false), TrustState::Changed);
    record(home.path(), work.path(), &declared()).unwrap();
    assert_eq!(ask(&settings, false), TrustState::Trusted);
    assert_eq!(ask(&local, false), TrustState::Trusted);

    let other = work.path().join("hooks.json");
    std::fs::write(&other, "{}").unwrap();
    let e = file_state(home.path(), "hooks", &declared(), &other, true).unwrap_err();
    assert_eq!(e.code(), "UNDECLARED_TRUST_FILE");
    assert!(e.to_string().contains("row 'hooks'"), "{e}");
    let e = file_state(
        home.path(),
        "hooks",
        &declared(),
        &work.path().join(".acme/x/settings.json"),
        false,
    );
    assert!(e.is_err(), "a nested path is not the project's file");
    let gone = file_state(
        home.path(),
        "hooks",
        &declared(),
        &work.path().join("none/.acme/settings.json"),
        true,
    );
    assert!(gone.is_err(), "a missing file is an error, never trusted");
}

// Issue 24 item 4: a row whose plugin declares nothing (or other files) cannot have a file
// trusted, recorded or vouched, whatever `keel trust` recorded for another plugin; and a
// declaration that climbs out of the project is never read.
#[test]
fn an_undeclared_file_is_refused_naming_the_row_and_the_path() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(work.path().join(".acme")).unwrap();
    let settings = work.path().join(".acme/settings.json");
    std::fs::write(&settings, "{}").unwrap();
    record(home.path(), work.path(), &declared()).unwrap();

    let e = file_state(home.path(), "fence", &[], &settings, true).unwrap_err();
    assert_eq!(e.code(), "UNDECLARED_TRUST_FILE");
    let text = e.to_string();
    assert!(
        text.contains("row 'fence'") && text.contains(".acme/settings.json"),
        "{text}"
    );
    assert!(text.contains("declares: none"), "{text}");
    let others = vec![".other/file.json".to_owned()];
    let e = file_state(home.path(), "fence", &others, &settings, false).unwrap_err();
    assert!(e.to_string().contains(".other/file.json"), "{e}");

    assert!(!valid_rel("../outside.json") && !valid_rel("/etc/passwd") && !valid_rel(""));
    assert!(valid_rel(".acme/settings.json"));
    let climbing = vec!["../outside.json".to_owned()];
    let e = record(home.path(), work.path(), &climbing);
    let recorded = e.map(|r| r.len()).unwrap_or(0);
    assert_eq!(recorded, 0, "a climbing declaration is never recorded");
}

// A record written before issue 15 (no `files`) still reads and still trusts its layer.
#[test]
fn an_older_record_without_files_still_reads() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().canonicalize().unwrap();
    let old = serde_json::json!({"version": 1, "projects": {
        dir.to_string_lossy(): {"digest": "abc", "trusted_at_ms": 1}
    }});
    std::fs::write(home.path().join(TRUST_FILE), old.to_string()).unwrap();
    assert_eq!(
        state(home.path(), &dir, "abc").unwrap(),
        TrustState::Trusted
    );
}

// Only a record or the flag lets security change; each state says which it is.
#[test]
fn only_trusted_and_vouched_allow_and_each_state_names_itself() {
    let all = [
        TrustState::Trusted,
        TrustState::Vouched,
        TrustState::Untrusted,
        TrustState::Changed,
    ];
    let allows: Vec<bool> = all.iter().map(TrustState::allows).collect();
    assert_eq!(allows, [true, true, false, false]);
    assert!(all[0].describe().contains("keel trust"));
    assert!(all[1].describe().contains("--trust-project"));
    assert!(all[2].describe().starts_with("untrusted (never"));
    assert!(all[3].describe().contains("changed since"));
}

// An unreadable trust file or project file is an error naming it, never "no record" or
// "nothing there" (issue 15: a read error must not quietly change what is trusted).
#[test]
fn unreadable_trust_and_project_files_are_errors() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(TRUST_FILE)).unwrap();
    let e = state(home.path(), work.path(), "d").unwrap_err();
    assert_eq!(e.code(), "TRUST_FILE");

    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(work.path().join(".acme/settings.json")).unwrap();
    std::fs::create_dir_all(work.path().join(".keel")).unwrap();
    std::fs::write(work.path().join(".keel/config.toml"), "# layer\n").unwrap();
    let e = record(home.path(), work.path(), &declared()).unwrap_err();
    assert!(e.to_string().contains("settings.json"), "{e}");
    assert!(!home.path().join(TRUST_FILE).exists(), "nothing recorded");
}
