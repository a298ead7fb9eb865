//! Layer-order, empty-is-absent and shadowing tests for [`Store`] (B13, SEC-07, SEC-08).

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::sync::Arc;

use keel_plugin_api::services::credentials::{CredentialCode, Source};

use super::*;

struct Fixture {
    home: tempfile::TempDir,
    cwd: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        Fixture {
            home: tempfile::tempdir().unwrap(),
            cwd: tempfile::tempdir().unwrap(),
        }
    }
    fn store(&self, env: &[(&str, &str)]) -> Store {
        let map: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Store::with_env(
            self.home.path().to_path_buf(),
            Arc::new(move |n: &str| map.get(n).cloned().filter(|v| !v.is_empty())),
        )
    }
    fn cwd(&self) -> Option<&Path> {
        Some(self.cwd.path())
    }
    fn file(&self, text: &str) {
        std::fs::write(self.home.path().join("credentials.toml"), text).unwrap();
    }
    fn cwd_env(&self, text: &str) {
        std::fs::write(self.cwd.path().join(".env"), text).unwrap();
    }
    fn home_env(&self, text: &str) {
        std::fs::write(self.home.path().join(".env"), text).unwrap();
    }
}

fn got(store: &Store, f: &Fixture, r: &str) -> Option<(String, Source)> {
    store.resolve(r, f.cwd()).unwrap()
}

#[test]
fn sec_08_layer_order_env_file_cwd_home() {
    let f = Fixture::new();
    f.home_env("K=home\n");
    let s = f.store(&[]);
    assert_eq!(got(&s, &f, "K"), Some(("home".into(), Source::DotenvHome)));
    f.cwd_env("K=cwd\n");
    assert_eq!(got(&s, &f, "K"), Some(("cwd".into(), Source::DotenvCwd)));
    f.file("K = \"file\"\n");
    assert_eq!(got(&s, &f, "K"), Some(("file".into(), Source::File)));
    let s = f.store(&[("K", "env")]);
    assert_eq!(got(&s, &f, "K"), Some(("env".into(), Source::Env)));
    assert_eq!(got(&s, &f, "OTHER"), None);
}

#[test]
fn sec_07_empty_is_absent_in_every_layer() {
    let f = Fixture::new();
    f.home_env("K=home\n");
    f.cwd_env("K=\n");
    f.file("K = \"\"\n");
    let s = f.store(&[("K", "")]);
    assert_eq!(got(&s, &f, "K"), Some(("home".into(), Source::DotenvHome)));
    f.home_env("K=\"\"\n");
    assert_eq!(got(&s, &f, "K"), None);
    let d = s.describe("K", f.cwd()).unwrap();
    assert!(!d.configured && d.source.is_none() && d.writable);
}

#[test]
fn sec_07_rotation_applies_to_the_next_call() {
    let f = Fixture::new();
    let s = f.store(&[]);
    s.set("K", "one").unwrap();
    assert_eq!(got(&s, &f, "K").unwrap().0, "one");
    s.set("K", "two").unwrap();
    assert_eq!(got(&s, &f, "K").unwrap().0, "two");
}

#[test]
fn sec_08_shadowed_write_is_rejected_and_reported_in_advance() {
    let f = Fixture::new();
    let s = f.store(&[("K", "env")]);
    let d = s.describe("K", f.cwd()).unwrap();
    assert_eq!(d.source, Some(Source::Env));
    assert!(d.configured && !d.writable);
    let e = s.set("K", "file").unwrap_err();
    assert_eq!(e.code, CredentialCode::Shadowed.code());
    assert!(!e.message.contains("env\""), "{}", e.message);
    assert!(!f.home.path().join("credentials.toml").exists());
}

#[test]
fn sec_08_set_writes_0600_and_remove_deletes() {
    let f = Fixture::new();
    let s = f.store(&[]);
    s.set("A_B1", "v").unwrap();
    let p = f.home.path().join("credentials.toml");
    assert_eq!(
        std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(s.describe("A_B1", None).unwrap().source, Some(Source::File));
    s.remove("A_B1").unwrap();
    s.remove("A_B1").unwrap();
    assert_eq!(s.resolve("A_B1", None).unwrap(), None);
    assert_eq!(
        s.set("A", "").unwrap_err().code,
        CredentialCode::InvalidValue.code()
    );
}

#[test]
fn sec_07_invalid_references_are_refused() {
    let f = Fixture::new();
    let s = f.store(&[]);
    for bad in ["", "lower", "1ABC", "A-B", "A B", "É"] {
        assert_eq!(
            s.resolve(bad, None).unwrap_err().code,
            CredentialCode::InvalidReference.code(),
            "{bad}"
        );
        assert_eq!(
            s.set(bad, "v").unwrap_err().code,
            CredentialCode::InvalidReference.code(),
            "{bad}"
        );
    }
    assert!(s.resolve("_A9", None).unwrap().is_none());
}

#[test]
fn malformed_lower_layer_only_fails_when_reached() {
    let f = Fixture::new();
    f.cwd_env("NOT VALID LINE\n");
    f.file("K = \"file\"\n");
    let s = f.store(&[]);
    assert_eq!(got(&s, &f, "K").unwrap().1, Source::File);
    let e = s.resolve("OTHER", f.cwd()).unwrap_err();
    assert_eq!(e.code, CredentialCode::File.code());
    assert!(e.message.contains(".env"), "{}", e.message);
}

#[test]
fn sec_11_list_names_only_with_winning_sources() {
    let f = Fixture::new();
    f.file("A = \"1\"\nE = \"\"\n");
    f.cwd_env("B=2\nA=3\n");
    f.home_env("C=4\n");
    let s = f.store(&[("C", "x")]);
    let list = s.list(f.cwd()).unwrap();
    assert_eq!(
        list,
        vec![
            ("A".to_owned(), Source::File),
            ("B".to_owned(), Source::DotenvCwd),
            ("C".to_owned(), Source::Env),
        ]
    );
}

#[test]
fn sec_09_real_environment_is_read_not_written() {
    // The real process environment: PATH is set in any test run; nothing is written to it.
    let f = Fixture::new();
    let s = Store::new(f.home.path().to_path_buf());
    assert_eq!(
        s.resolve("PATH", None).unwrap().map(|(_, src)| src),
        Some(Source::Env)
    );
    f.file("KEEL_CRED_TEST_ONLY_IN_FILE = \"v\"\n");
    assert_eq!(
        s.resolve("KEEL_CRED_TEST_ONLY_IN_FILE", None)
            .unwrap()
            .map(|(_, src)| src),
        Some(Source::File)
    );
    assert!(std::env::var_os("KEEL_CRED_TEST_ONLY_IN_FILE").is_none());
}
