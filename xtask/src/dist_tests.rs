//! Unit tests for the dist helpers that map plugin crates to the library files they produce.

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
