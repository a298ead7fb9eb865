//! The contract cases about damaged or unwritable storage: torn tails, corruption before the
//! last `turn/end`, foreign format versions, failed writes and a read-only root. Each refusal
//! is followed by a byte comparison of the data files.

use std::path::Path;

use serde_json::{Value, json};

use crate::cases::{events_of, names_a_data_file, root_in, temp_root};
use crate::fixtures::{
    append, append_ok, event, expect_code, header, load, load_ok, open_turn, turn,
};
use crate::{Backend, Damage, snapshot};

/// A torn record after the last `turn/end` is cut: reported on every load, physically removed
/// only with `repair`, and the log continues at the cut.
pub fn torn_tail_after_last_turn_end_is_cut(backend: &dyn Backend) {
    let dir = temp_root();
    let root = root_in(&dir);
    let mut kept = turn(0);
    kept.extend(open_turn(8));
    {
        let store = backend.open(&root);
        append_ok(&*store, "s1", Some(header("s1")), &turn(0), 0);
        append_ok(&*store, "s1", None, &open_turn(8), 8);
    }
    backend.damage(&root, "s1", Damage::TornTail);
    let damaged = snapshot(backend, &root);
    let store = backend.open(&root);
    let loaded = load_ok(&*store, "s1", false);
    assert_eq!(loaded["events"], json!(kept));
    assert_eq!(loaded["truncated"]["seq"], 10, "{loaded}");
    assert!(loaded["truncated"]["reason"].is_string(), "{loaded}");
    // What a repair cuts is said: the data file, and how much (issue 10 item 12).
    let torn = &loaded["truncated"];
    assert!(
        names_a_data_file(backend, &root, torn["path"].as_str().unwrap_or_default()),
        "{torn}"
    );
    let amount = torn["bytes"].as_u64().or(torn["rows"].as_u64());
    assert!(amount.is_some_and(|n| n > 0), "no bytes or rows: {torn}");
    assert_eq!(
        snapshot(backend, &root),
        damaged,
        "load without repair changed the data"
    );
    let repaired = load_ok(&*store, "s1", true);
    assert_eq!(repaired["events"], json!(kept));
    assert_eq!(
        repaired["truncated"], loaded["truncated"],
        "the repair cut what was reported"
    );
    assert_ne!(
        snapshot(backend, &root),
        damaged,
        "repair left the torn record"
    );
    let fresh = backend.open(&root);
    assert_eq!(load_ok(&*fresh, "s1", false)["truncated"], Value::Null);
    append_ok(
        &*fresh,
        "s1",
        None,
        &[event(10, "turn/end", json!({ "reason": "x" }))],
        10,
    );
    assert_eq!(events_of(&load_ok(&*fresh, "s1", false)).len(), 11);
}

fn assert_refused_untouched(backend: &dyn Backend, root: &Path, code: &str, what: &str) {
    let before = snapshot(backend, root);
    let store = backend.open(root);
    for repair in [false, true] {
        let f = expect_code(load(&*store, "s1", repair), code, what);
        assert!(
            names_a_data_file(backend, root, &f.message),
            "{what}: message does not name the file: {}",
            f.message
        );
        assert_eq!(
            snapshot(backend, root),
            before,
            "{what}: refused load changed the data"
        );
    }
    let f = expect_code(append(&*store, "s1", None, &turn(16), 16), code, what);
    assert!(
        names_a_data_file(backend, root, &f.message),
        "{}",
        f.message
    );
    assert_eq!(
        snapshot(backend, root),
        before,
        "{what}: refused append changed the data"
    );
}

fn two_closed_turns(backend: &dyn Backend, root: &Path) {
    let store = backend.open(root);
    append_ok(&*store, "s1", Some(header("s1")), &turn(0), 0);
    append_ok(&*store, "s1", None, &turn(8), 8);
}

/// An unparsable record before the last `turn/end` is corruption: refused, data untouched.
pub fn defect_before_last_turn_end_is_corrupt(backend: &dyn Backend) {
    let dir = temp_root();
    let root = root_in(&dir);
    two_closed_turns(backend, &root);
    backend.damage(&root, "s1", Damage::Garble { seq: 3 });
    assert_refused_untouched(backend, &root, "SESSION_CORRUPT", "garbled record");
}

/// A missing record (seq gap) before the last `turn/end` is corruption too.
pub fn gap_before_last_turn_end_is_corrupt(backend: &dyn Backend) {
    let dir = temp_root();
    let root = root_in(&dir);
    two_closed_turns(backend, &root);
    backend.damage(&root, "s1", Damage::DropRecord { seq: 9 });
    assert_refused_untouched(backend, &root, "SESSION_CORRUPT", "seq gap");
}

/// Another format version is "unsupported", never "corrupt" (SES-09); `list` still works and
/// reports the session as unreadable.
pub fn ses09_wrong_header_version_is_unsupported(backend: &dyn Backend) {
    let dir = temp_root();
    let root = root_in(&dir);
    two_closed_turns(backend, &root);
    {
        let store = backend.open(&root);
        append_ok(&*store, "ok", Some(header("ok")), &turn(0), 0);
    }
    backend.damage(&root, "s1", Damage::HeaderVersion(1));
    assert_refused_untouched(backend, &root, "SESSION_UNSUPPORTED", "header version 1");
    let store = backend.open(&root);
    let f = expect_code(load(&*store, "s1", true), "SESSION_UNSUPPORTED", "version");
    assert!(
        f.message.contains('1') && f.message.contains('0'),
        "{}",
        f.message
    );
    let listed = store.call("list", Value::Null).expect("list");
    let ids: Vec<&Value> = listed["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .map(|s| &s["id"])
        .collect();
    assert_eq!(ids, vec!["ok"], "{listed}");
    assert_eq!(listed["unreadable"][0]["session_id"], "s1", "{listed}");
    assert_eq!(
        listed["unreadable"][0]["code"], "SESSION_UNSUPPORTED",
        "{listed}"
    );
    let path = listed["unreadable"][0]["path"].as_str().unwrap_or_default();
    assert!(names_a_data_file(backend, &root, path), "{listed}");
}

/// A write that fails midway stores nothing of its batch (first append: no session at all),
/// and the same batch succeeds on retry.
pub fn failed_write_keeps_nothing(backend: &dyn Backend) {
    let dir = temp_root();
    let root = root_in(&dir);
    let store = backend.open(&root);
    append_ok(&*store, "other", Some(header("other")), &turn(0), 0);
    let before = snapshot(backend, &root);
    store.fail_next_write();
    expect_code(
        append(&*store, "s1", Some(header("s1")), &turn(0), 0),
        "SESSION_IO",
        "first",
    );
    assert_eq!(backend.stored_sessions(&root), vec!["other".to_owned()]);
    assert_eq!(
        snapshot(backend, &root),
        before,
        "failed first append left data behind"
    );
    expect_code(
        load(&*store, "s1", false),
        "SESSION_NOT_FOUND",
        "after failed first append",
    );
    append_ok(&*store, "s1", Some(header("s1")), &turn(0), 0);
    let before = snapshot(backend, &root);
    store.fail_next_write();
    expect_code(
        append(&*store, "s1", None, &turn(8), 8),
        "SESSION_IO",
        "second batch",
    );
    assert_eq!(
        snapshot(backend, &root),
        before,
        "failed append left part of its batch"
    );
    assert_eq!(load_ok(&*store, "s1", false)["events"], json!(turn(0)));
    append_ok(&*store, "s1", None, &turn(8), 8);
    let reopened = backend.open(&root);
    assert_eq!(events_of(&load_ok(&*reopened, "s1", true)).len(), 16);
}

/// Runs `f` on a thread without the capabilities that let root ignore file modes, so a
/// read-only directory is read-only even when the tests run as root.
fn as_unprivileged<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    use rustix::thread::{CapabilitySet, capabilities, set_capabilities};
    std::thread::scope(|s| {
        s.spawn(|| {
            if let Ok(mut caps) = capabilities(None) {
                let bypass = CapabilitySet::DAC_OVERRIDE
                    | CapabilitySet::DAC_READ_SEARCH
                    | CapabilitySet::FOWNER;
                caps.effective.remove(bypass);
                set_capabilities(None, caps).expect("drop DAC capabilities on this thread");
            }
            f()
        })
        .join()
        .expect("unprivileged thread")
    })
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", path.display()));
}

/// A read-only root: writes fail with `SESSION_IO` naming the path, and the stored data is
/// untouched and still loads afterwards.
pub fn read_only_root_is_a_clear_io_error(backend: &dyn Backend) {
    let dir = temp_root();
    let root = root_in(&dir);
    two_closed_turns(backend, &root);
    let files = backend.data_files(&root);
    let before = snapshot(backend, &root);
    for f in &files {
        set_mode(f, 0o400);
    }
    set_mode(&root, 0o500);
    let root_text = root.display().to_string();
    as_unprivileged(|| {
        let probe = root.join("probe");
        assert!(
            std::fs::write(&probe, b"x").is_err(),
            "the root is still writable"
        );
        let store = backend.open(&root);
        let attempts = [
            (
                "new session",
                append(&*store, "s2", Some(header("s2")), &turn(0), 0),
            ),
            (
                "existing session",
                append(&*store, "s1", None, &turn(16), 16),
            ),
            ("claim", store.call("claim", json!({ "session_id": "s3" }))),
        ];
        for (what, result) in attempts {
            let f = expect_code(result, "SESSION_IO", what);
            assert!(
                f.message.contains(&root_text),
                "{what}: path not named: {}",
                f.message
            );
        }
    });
    set_mode(&root, 0o700);
    for f in &files {
        set_mode(f, 0o600);
    }
    assert_eq!(
        snapshot(backend, &root),
        before,
        "read-only root: data changed"
    );
    let store = backend.open(&root);
    let mut all = turn(0);
    all.extend(turn(8));
    assert_eq!(load_ok(&*store, "s1", false)["events"], json!(all));
}
