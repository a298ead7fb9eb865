//! Tidy as a test: the real workspace must pass `cargo xtask tidy` (so `cargo xtask test` enforces
//! the kernel/plugin separation of ARCHITECTURE §1.1), plus unit tests of each rule.

use super::check;
use super::hand_written_dispatch;
use super::has_module_doc;
use super::is_test_file;
use super::kernel_plugin_deps;
use crate::shell;

#[test]
fn workspace_is_tidy() {
    let (checked, problems) = check(&shell::root()).unwrap();
    assert!(
        checked > 0,
        "found no .rs files under {}",
        shell::root().display()
    );
    assert_eq!(problems, Vec::new(), "run `cargo xtask tidy` for details");
}

#[test]
fn module_doc_must_be_the_first_non_empty_line() {
    assert!(has_module_doc("\n\n//! Owns things.\nfn f() {}\n"));
    assert!(has_module_doc("\u{feff}//! With a byte-order mark.\n"));
    assert!(!has_module_doc("// a plain comment\n//! too late\n"));
    assert!(!has_module_doc("#![allow(dead_code)]\n//! too late\n"));
    assert!(!has_module_doc(""));
}

#[test]
fn test_files_are_exempt_from_the_budget() {
    assert!(is_test_file("kernel/src/bus_tests.rs"));
    assert!(is_test_file("kernel/tests/assembly.rs"));
    assert!(is_test_file("plugins/session/src/tests/recovery.rs"));
    assert!(!is_test_file("kernel/src/bus.rs"));
    assert!(!is_test_file("plugins/tests_helper/src/lib.rs"));
}

const WORKSPACE: &str = r#"
[workspace]
members = ["kernel"]

[workspace.dependencies]
keel-plugin-api = { path = "plugin-api" }
keel-kernel = { path = "kernel" }
session-backend = { path = "plugins/session" }
"#;

#[test]
fn kernel_may_depend_on_the_plugin_api() {
    let kernel = r#"
[package]
name = "keel-kernel"

[dependencies]
keel-plugin-api.workspace = true
serde = { workspace = true }

[dev-dependencies]
keel-plugin-api = { path = "../plugin-api" }
"#;
    assert_eq!(kernel_plugin_deps(kernel, WORKSPACE), Vec::<String>::new());
}

#[test]
fn kernel_plugin_dependencies_are_caught_in_every_form() {
    let cases = [
        "[dependencies]\nkeel-plugin-session = { path = \"../plugins/session\" }\n",
        "[dev-dependencies]\n\"keel-plugin-tools\".workspace = true\n",
        "[dependencies]\nsess = { package = \"keel-plugin-session\", version = \"0.1\" }\n",
        "[dependencies]\nstore = { path = \"../plugins/session-jsonl\" }\n",
        "[dependencies.store]\npath = \"../plugins/session\"\n",
        "[target.'cfg(unix)'.dependencies]\nkeel-plugin-sandbox = \"0.1\"\n",
        "[dependencies]\nsession-backend = { workspace = true }\n",
        "[dependencies]\nsession-backend.workspace = true\n",
    ];
    for kernel in cases {
        let found = kernel_plugin_deps(kernel, WORKSPACE);
        assert_eq!(found.len(), 1, "{kernel} → {found:?}");
    }
}

#[test]
fn non_dependency_tables_are_ignored() {
    let kernel = "[package]\nname = \"keel-plugin-lookalike\"\n\n[features]\nx = []\n";
    assert_eq!(kernel_plugin_deps(kernel, WORKSPACE), Vec::<String>::new());
}

// Issue 12 Done-when: no hand-written method match remains in provider or consumer code.
#[test]
fn a_hand_written_method_match_is_refused() {
    let old = "//! p\nasync fn call(method: String) {\n    match method.as_str() {\n        other => Err(Error::new(\"UNKNOWN_METHOD\", other)),\n    }\n}\n";
    let found = hand_written_dispatch(old).unwrap_or_default();
    assert!(found.contains("contract!"), "{found}");
    let typed =
        "//! p\n// a comment may say \"UNKNOWN_METHOD\" or CallHandle\nimpl LlmProvider for S {}\n";
    assert_eq!(hand_written_dispatch(typed), None);
}
