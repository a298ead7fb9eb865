//! JSONL-specific behaviour beyond the shared contract: exact byte layout, which defects are
//! torn tails and which are corruption (with file and line), the raw-line version check,
//! atomic materialisation (no temp files, never overwriting), modes, and a second process
//! holding the writer lock.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::panic,
    reason = "tests fail loudly by design"
)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use keel_plugin_api::services::session::{AppendBatch, LoadFormat, LoadStored, SessionRef};
use keel_plugin_session_jsonl::{JsonlOptions, JsonlStore, StoreFailure};
use keel_session_contract::fixtures::{header, open_turn, turn};
use keel_session_store_kit::Backend;
use serde_json::{Value, json};

fn store(root: &Path) -> JsonlStore {
    JsonlStore::new(root, JsonlOptions::default())
}

fn append(
    s: &JsonlStore,
    id: &str,
    hdr: bool,
    events: &[Value],
    at: u64,
) -> Result<Value, StoreFailure> {
    let batch = AppendBatch {
        session_id: id.to_owned(),
        header: hdr.then(|| serde_json::from_value(header(id)).unwrap()),
        events: serde_json::from_value(json!(events)).unwrap(),
        expected_next_seq: at,
    };
    Backend::append(s, batch).map(|a| json!(a))
}

fn load(s: &JsonlStore, id: &str, repair: bool) -> Result<Value, StoreFailure> {
    let request = LoadStored {
        session_id: id.to_owned(),
        repair,
        format: LoadFormat::Events,
    };
    Backend::load(s, request).map(|l| json!(l))
}

/// A session of two closed turns and an open one; returns its file and text.
fn session(root: &Path) -> (std::path::PathBuf, String) {
    let s = store(root);
    append(&s, "s1", true, &turn(0), 0).unwrap();
    append(&s, "s1", false, &turn(8), 8).unwrap();
    append(&s, "s1", false, &open_turn(16), 16).unwrap();
    let path = root.join("s1.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    (path, text)
}

fn replace_line(text: &str, line_no: usize, with: &str) -> String {
    let mut lines: Vec<&str> = text.lines().collect();
    lines[line_no - 1] = with;
    lines.join("\n") + "\n"
}

fn assert_corrupt_at(root: &Path, path: &Path, line: usize) {
    let before = std::fs::read(path).unwrap();
    for repair in [false, true] {
        let f = load(&store(root), "s1", repair).unwrap_err();
        assert_eq!(f.code, "SESSION_CORRUPT", "{}", f.message);
        let at = format!("{}:{line}:", path.display());
        assert!(f.message.contains(&at), "expected {at} in {}", f.message);
        assert_eq!(
            std::fs::read(path).unwrap(),
            before,
            "a refused load changed the file"
        );
    }
}

#[test]
fn the_file_is_a_header_line_then_one_envelope_per_line() {
    let dir = tempfile::tempdir().unwrap();
    let (_, text) = session(dir.path());
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1 + 18);
    let h: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(h, header("s1"));
    for (i, line) in lines[1..].iter().enumerate() {
        let e: Value = serde_json::from_str(line).unwrap();
        assert_eq!(e["seq"], i as u64);
    }
    assert!(text.ends_with('\n'));
}

#[test]
fn garbage_in_the_middle_is_corrupt_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let (path, text) = session(dir.path());
    std::fs::write(&path, replace_line(&text, 6, "{\"seq\":4,\"ti")).unwrap();
    assert_corrupt_at(dir.path(), &path, 6);
}

#[test]
fn garbage_after_the_last_turn_end_followed_by_valid_lines_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let (path, text) = session(dir.path());
    // Line 18 is seq 16 (turn/start of the open turn), after the last turn/end (line 17).
    std::fs::write(&path, replace_line(&text, 18, "garbage")).unwrap();
    assert_corrupt_at(dir.path(), &path, 18);
}

#[test]
fn an_out_of_sequence_line_before_the_end_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let (path, text) = session(dir.path());
    let mut lines: Vec<&str> = text.lines().collect();
    lines.swap(3, 4);
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    assert_corrupt_at(dir.path(), &path, 4);
}

#[test]
fn a_truncated_last_line_without_newline_is_cut_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let (path, text) = session(dir.path());
    // A crash in the middle of writing seq 18: the line is cut short, without its newline.
    let torn = format!("{text}{{\"seq\":18,\"time\":1700000001018,\"type\":\"tool/ca");
    std::fs::write(&path, &torn).unwrap();
    let s = store(dir.path());
    let f = append(&s, "s1", false, &[], 18).unwrap_err();
    assert_eq!(
        f.code, "SESSION_CORRUPT",
        "appending over a torn tail must wait for repair"
    );
    assert!(f.message.contains(":20:"), "{}", f.message);
    let answer = load(&s, "s1", false).unwrap();
    assert_eq!(answer["truncated"]["seq"], 18);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        torn,
        "load without repair wrote"
    );
    let answer = load(&s, "s1", true).unwrap();
    assert_eq!(answer["events"].as_array().unwrap().len(), 18);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        text,
        "repair cut more or less than the torn line"
    );
    let closer =
        json!({ "seq": 18, "time": 1, "type": "turn/end", "data": { "reason": "interrupted" } });
    append(&s, "s1", false, std::slice::from_ref(&closer), 18).unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        format!("{text}{closer}\n")
    );
}

#[test]
fn a_complete_looking_last_line_without_newline_is_torn_too() {
    let dir = tempfile::tempdir().unwrap();
    let (path, text) = session(dir.path());
    let last = json!({ "seq": 18, "time": 1, "type": "turn/end", "data": {} }).to_string();
    std::fs::write(&path, format!("{text}{last}")).unwrap();
    let answer = load(&store(dir.path()), "s1", true).unwrap();
    assert_eq!(answer["truncated"]["seq"], 18);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
}

#[test]
fn a_foreign_version_is_refused_from_the_raw_line_before_its_shape() {
    let dir = tempfile::tempdir().unwrap();
    let (path, text) = session(dir.path());
    let alien = r#"{"type":"session","version":3,"format":"zstd-frames","id":7}"#;
    let bytes = replace_line(&text, 1, alien);
    std::fs::write(&path, &bytes).unwrap();
    let f = load(&store(dir.path()), "s1", true).unwrap_err();
    assert_eq!(f.code, "SESSION_UNSUPPORTED", "{}", f.message);
    assert!(
        f.message.contains(&path.display().to_string()) && f.message.contains("version 3"),
        "{}",
        f.message
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), bytes);
}

#[test]
fn materialisation_is_atomic_leaves_no_temp_files_and_never_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path());
    for i in 0..20 {
        let id = format!("s{i}");
        if i % 3 == 0 {
            s.fail_next_write();
            assert_eq!(
                append(&s, &id, true, &turn(0), 0).unwrap_err().code,
                "SESSION_IO"
            );
        }
        append(&s, &id, true, &turn(0), 0).unwrap();
    }
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), 20, "{names:?}");
    assert!(
        names
            .iter()
            .all(|n| n.ends_with(".jsonl") && !n.starts_with('.')),
        "{names:?}"
    );
    // Someone else's file at the session's path is never replaced.
    std::fs::write(dir.path().join("taken.jsonl"), b"not mine\n").unwrap();
    let f = append(&s, "taken", true, &turn(0), 0).unwrap_err();
    assert_eq!(f.code, "SESSION_EXISTS");
    assert_eq!(
        std::fs::read(dir.path().join("taken.jsonl")).unwrap(),
        b"not mine\n"
    );
}

#[test]
fn directory_and_files_are_private() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("a/b/sessions");
    let s = store(&root);
    append(&s, "s1", true, &turn(0), 0).unwrap();
    Backend::claim(&s, SessionRef::new("s1")).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&root), 0o700);
    assert_eq!(mode(&dir.path().join("a")), 0o700);
    assert_eq!(mode(&root.join("s1.jsonl")), 0o600);
    assert_eq!(mode(&root.join("s1.lock")), 0o600);
}

#[test]
fn fsync_off_writes_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (_, synced) = session(&dir.path().join("on"));
    let off = JsonlStore::new(dir.path().join("off"), JsonlOptions { fsync: false });
    append(&off, "s1", true, &turn(0), 0).unwrap();
    append(&off, "s1", false, &turn(8), 8).unwrap();
    append(&off, "s1", false, &open_turn(16), 16).unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.path().join("off/s1.jsonl")).unwrap(),
        synced
    );
}

#[test]
fn a_failed_fsync_or_write_truncates_back_to_the_previous_length() {
    let dir = tempfile::tempdir().unwrap();
    let (path, text) = session(dir.path());
    let s = store(dir.path());
    load(&s, "s1", false).unwrap();
    s.fail_next_write();
    let f = append(&s, "s1", false, &turn(18), 18).unwrap_err();
    assert_eq!(f.code, "SESSION_IO");
    assert!(
        f.message.contains(&path.display().to_string()),
        "{}",
        f.message
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
}

#[test]
fn a_lock_held_by_another_process_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path());
    let lock = dir.path().join("s1.lock");
    let ready = dir.path().join("ready");
    let mut child = std::process::Command::new("flock")
        .arg("--exclusive")
        .arg("--no-fork")
        .arg(&lock)
        .arg("sh")
        .arg("-c")
        .arg(format!("touch {}; exec sleep 30", ready.display()))
        .spawn()
        .expect("the flock(1) tool");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !ready.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let f = Backend::claim(&s, SessionRef::new("s1")).unwrap_err();
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(f.code, "SESSION_LOCKED", "{}", f.message);
    Backend::claim(&s, SessionRef::new("s1")).unwrap();
}
