//! Unit tests for the dist helpers: plugin crates to the library files they produce, and the
//! directory flags `dist` and `install` share.

use super::library_file;
use super::package_name;

#[test]
fn package_name_reads_the_package_table_only() {
    let manifest = r#"
[lib]
name = "not_this"

[package]
version.workspace = true
name = "keel-plugin-llm-openai"

[dependencies]
name = "nor-this"
"#;
    assert_eq!(
        package_name(manifest).as_deref(),
        Some("keel-plugin-llm-openai")
    );
}

#[test]
fn package_name_accepts_single_quotes_and_reports_absence() {
    assert_eq!(
        package_name("[package]\nname='keel-plugin-x'\n").as_deref(),
        Some("keel-plugin-x")
    );
    assert_eq!(package_name("[workspace]\nmembers = []\n"), None);
}

#[cfg(target_os = "linux")]
#[test]
fn library_file_follows_the_loader_naming() {
    assert_eq!(
        library_file("keel-plugin-foo-bar"),
        "libkeel_plugin_foo_bar.so"
    );
}

// Issue 23 item 14: `dist` and `install` share their directory flags; both spellings work, a
// flag another command owns is a usage error, and a build dir without `keel` is refused.
#[test]
fn dir_flags_take_both_spellings_and_refuse_what_they_do_not_know() {
    let args = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let [out, build] = super::dir_flags("dist", ["--out", "--build-dir"], &args(&["--out=/x/d"]))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.as_deref(), Some(std::path::Path::new("/x/d")));
    assert!(build.is_none());
    let err = super::dir_flags("dist", ["--out", "--build-dir"], &args(&["--prefix", "/p"]))
        .err()
        .map(|e| (e.usage, e.message));
    assert_eq!(
        err,
        Some((true, "`dist` does not take `--prefix`".to_owned()))
    );
    let err = super::dir_flags("install", ["--prefix"], &args(&["--prefix"]))
        .err()
        .map(|e| e.message);
    assert_eq!(err.as_deref(), Some("`--prefix` needs a directory"));
    let empty = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = empty.path().to_string_lossy().into_owned();
    let err = super::dir_flags("install", ["--build-dir"], &args(&["--build-dir", &dir]))
        .err()
        .map(|e| e.message);
    assert!(
        err.as_deref().is_some_and(|m| m.contains("no keel there")),
        "{err:?}"
    );
}
