//! The contract cases, one function per behaviour of `keel.session-store` (SES-08). Each takes
//! the backend, makes its own temporary root and checks both the answers and the data on disk.

use std::path::Path;

use serde_json::{Value, json};

use crate::fixtures::{
    append, append_ok, event, expect_code, full_header, header, load, load_ok, open_turn, surface,
    turn,
};
use crate::{Backend, snapshot};

/// One contract case.
pub type Case = fn(&dyn Backend);

/// Every case by name, in the order [`crate::run_all`] runs them.
pub const ALL: &[(&str, Case)] = &[
    (
        "ses08_first_append_materialises",
        ses08_first_append_materialises,
    ),
    (
        "created_but_never_appended_leaves_nothing",
        created_but_never_appended_leaves_nothing,
    ),
    ("header_only_on_first_append", header_only_on_first_append),
    ("contiguous_seqs_enforced", contiguous_seqs_enforced),
    ("ses02_round_trip_every_field", ses02_round_trip_every_field),
    (
        "batches_accumulate_and_survive_reopen",
        batches_accumulate_and_survive_reopen,
    ),
    ("list_reports_every_session", list_reports_every_session),
    (
        "claim_release_and_double_claim",
        claim_release_and_double_claim,
    ),
    (
        "torn_tail_after_last_turn_end_is_cut",
        torn_tail_after_last_turn_end_is_cut,
    ),
    (
        "defect_before_last_turn_end_is_corrupt",
        defect_before_last_turn_end_is_corrupt,
    ),
    (
        "gap_before_last_turn_end_is_corrupt",
        gap_before_last_turn_end_is_corrupt,
    ),
    (
        "ses09_wrong_header_version_is_unsupported",
        ses09_wrong_header_version_is_unsupported,
    ),
    ("failed_write_keeps_nothing", failed_write_keeps_nothing),
    (
        "read_only_root_is_a_clear_io_error",
        read_only_root_is_a_clear_io_error,
    ),
    ("invalid_requests_are_refused", invalid_requests_are_refused),
    (
        "load_of_unknown_session_is_not_found",
        load_of_unknown_session_is_not_found,
    ),
    ("events_jsonl_matches_events", events_jsonl_matches_events),
];

pub(crate) fn temp_root() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

/// The root the store is given: a directory that does not exist yet, inside a temp dir.
pub(crate) fn root_in(dir: &tempfile::TempDir) -> std::path::PathBuf {
    dir.path().join("sessions")
}

pub(crate) fn events_of(loaded: &Value) -> &Vec<Value> {
    loaded["events"].as_array().expect("load answer has events")
}

pub(crate) fn names_a_data_file(backend: &dyn Backend, root: &Path, message: &str) -> bool {
    backend.data_files(root).iter().any(|p| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| message.contains(n))
    })
}

/// The first append writes the header and the batch; load returns exactly that.
pub fn ses08_first_append_materialises(backend: &dyn Backend) {
    let dir = temp_root();
    let root = root_in(&dir);
    let store = backend.open(&root);
    assert!(backend.stored_sessions(&root).is_empty());
    let events = turn(0);
    append_ok(&*store, "s1", Some(header("s1")), &events, 0);
    assert_eq!(backend.stored_sessions(&root), vec!["s1".to_owned()]);
    let loaded = load_ok(&*store, "s1", false);
    assert_eq!(loaded["header"], header("s1"));
    assert_eq!(loaded["events"], json!(events));
    assert_eq!(loaded["truncated"], Value::Null);
}

/// Claiming and releasing an id that is never appended to stores no session.
pub fn created_but_never_appended_leaves_nothing(backend: &dyn Backend) {
    let dir = temp_root();
    let root = root_in(&dir);
    let store = backend.open(&root);
    store
        .call("claim", json!({ "session_id": "ghost" }))
        .expect("claim");
    store
        .call("release", json!({ "session_id": "ghost" }))
        .expect("release");
    assert!(backend.stored_sessions(&root).is_empty());
    expect_code(
        load(&*store, "ghost", true),
        "SESSION_NOT_FOUND",
        "load ghost",
    );
    let listed = store.call("list", Value::Null).expect("list");
    assert_eq!(listed["sessions"], json!([]));
}

/// The header is required on the first append, refused later, and must name the session.
pub fn header_only_on_first_append(backend: &dyn Backend) {
    let dir = temp_root();
    let root = root_in(&dir);
    let store = backend.open(&root);
    expect_code(
        append(&*store, "s1", None, &turn(0), 0),
        "SESSION_NOT_FOUND",
        "no header",
    );
    expect_code(
        append(&*store, "s1", Some(header("other")), &turn(0), 0),
        "SESSION_INVALID",
        "header of another id",
    );
    assert!(backend.stored_sessions(&root).is_empty());
    append_ok(&*store, "s1", Some(header("s1")), &turn(0), 0);
    let before = snapshot(backend, &root);
    expect_code(
        append(&*store, "s1", Some(header("s1")), &turn(8), 8),
        "SESSION_EXISTS",
        "header again",
    );
    assert_eq!(
        snapshot(backend, &root),
        before,
        "refused append changed the data"
    );
    append_ok(&*store, "s1", None, &turn(8), 8);
    assert_eq!(events_of(&load_ok(&*store, "s1", false)).len(), 16);
}

/// A batch must continue the stored log exactly; refusals store nothing.
pub fn contiguous_seqs_enforced(backend: &dyn Backend) {
    let dir = temp_root();
    let root = root_in(&dir);
    let store = backend.open(&root);
    expect_code(
        append(&*store, "s1", Some(header("s1")), &turn(1), 1),
        "SESSION_SEQ",
        "first batch not at 0",
    );
    assert!(backend.stored_sessions(&root).is_empty());
    append_ok(&*store, "s1", Some(header("s1")), &turn(0), 0);
    let before = snapshot(backend, &root);
    let cases: Vec<(&str, Vec<Value>, u64)> = vec![
        ("expected_next_seq behind", turn(7), 7),
        ("expected_next_seq ahead", turn(9), 9),
        ("events[0] differs from expected", turn(9), 8),
        (
            "gap inside the batch",
            vec![
                event(8, "turn/start", json!({})),
                event(10, "turn/end", json!({})),
            ],
            8,
        ),
        (
            "repeat inside the batch",
            vec![
                event(8, "turn/start", json!({})),
                event(8, "turn/end", json!({})),
            ],
            8,
        ),
    ];
    for (what, events, expected) in cases {
        expect_code(
            append(&*store, "s1", None, &events, expected),
            "SESSION_SEQ",
            what,
        );
        assert_eq!(snapshot(backend, &root), before, "{what}: data changed");
    }
    assert_eq!(events_of(&load_ok(&*store, "s1", false)).len(), 8);
    append_ok(&*store, "s1", None, &turn(8), 8);
}

/// The events of [`ses02_round_trip_every_field`]: every envelope field, odd data.
pub(crate) fn ses02_events() -> Vec<Value> {
    let mut events = turn(0);
    let mut replace = surface(
        8,
        "assistant/message",
        json!({ "text": "summary ✓ \u{1F600}" }),
    );
    replace["surface_op"] = json!({ "op": "replace", "start": 2, "end": 5 });
    replace["source_event_seqs"] = json!([2, 4, 5]);
    events.push(replace);
    let mut ignorable = event(
        9,
        "plugin/note",
        json!({ "n": -12.5, "big": 9_007_199_254_740_993_u64, "neg": -3, "nested": { "a": [1, null, true, "x\"\n"] } }),
    );
    ignorable["ignorable"] = json!(true);
    events.push(ignorable);
    let mut cited = surface(10, "user/message", json!([]));
    cited["source_event_seqs"] = json!([]);
    events.push(cited);
    events.push(event(11, "todo/write", json!(null)));
    events.push(event(12, "turn/end", json!({ "reason": "done" })));
    events
}

/// Every header and envelope field survives: surface ops (append and replace),
/// `source_event_seqs`, `ignorable`, nested and unicode data, big and fractional numbers.
pub fn ses02_round_trip_every_field(backend: &dyn Backend) {
    let dir = temp_root();
    let root = root_in(&dir);
    let store = backend.open(&root);
    let events = ses02_events();
    append_ok(&*store, "fork-1", Some(full_header("fork-1")), &events, 0);
    for s in [&store, &backend.open(&root)] {
        let loaded = load_ok(&**s, "fork-1", false);
        assert_eq!(loaded["header"], full_header("fork-1"));
        assert_eq!(loaded["events"], json!(events));
    }
}

/// Batches accumulate; a new store instance sees everything and continues the seqs.
pub fn batches_accumulate_and_survive_reopen(backend: &dyn Backend) {
    let dir = temp_root();
    let root = root_in(&dir);
    let mut all = Vec::new();
    {
        let store = backend.open(&root);
        append_ok(&*store, "s1", Some(header("s1")), &turn(0), 0);
        all.extend(turn(0));
        for seq0 in [8_u64, 16] {
            append_ok(&*store, "s1", None, &turn(seq0), seq0);
            all.extend(turn(seq0));
        }
        append_ok(&*store, "s1", None, &[], 24);
    }
    let store = backend.open(&root);
    // Append before any load: the new instance finds the stored next seq itself.
    expect_code(
        append(&*store, "s1", None, &turn(0), 0),
        "SESSION_SEQ",
        "stale seq",
    );
    append_ok(&*store, "s1", None, &turn(24), 24);
    all.extend(turn(24));
    let loaded = load_ok(&*store, "s1", true);
    assert_eq!(loaded["events"], json!(all));
    assert_eq!(loaded["truncated"], Value::Null);
}

/// `list` returns each stored session's header, event count and update time.
pub fn list_reports_every_session(backend: &dyn Backend) {
    let dir = temp_root();
    let root = root_in(&dir);
    let store = backend.open(&root);
    assert_eq!(
        store.call("list", Value::Null).expect("list of nothing")["sessions"],
        json!([])
    );
    append_ok(&*store, "b", Some(full_header("b")), &turn(0), 0);
    append_ok(&*store, "a", Some(header("a")), &turn(0), 0);
    append_ok(&*store, "a", None, &open_turn(8), 8);
    let listed = store.call("list", Value::Null).expect("list");
    let sessions = listed["sessions"].as_array().expect("sessions array");
    assert_eq!(sessions.len(), 2, "{listed}");
    for (entry, id, hdr, count) in [
        (&sessions[0], "a", header("a"), 10),
        (&sessions[1], "b", full_header("b"), 8),
    ] {
        assert_eq!(entry["id"], id, "sorted by id: {listed}");
        assert_eq!(entry["events"], count, "{id}");
        assert!(
            entry["updated_at"]
                .as_u64()
                .is_some_and(|t| t > 1_600_000_000_000),
            "{entry}"
        );
        for (k, v) in hdr.as_object().expect("header object") {
            assert_eq!(&entry[k], v, "{id}: header field {k}");
        }
    }
}

/// One live writer per session: a second claim (same or another instance) is refused until
/// release; claims of different sessions are independent.
pub fn claim_release_and_double_claim(backend: &dyn Backend) {
    let dir = temp_root();
    let root = root_in(&dir);
    let one = backend.open(&root);
    let two = backend.open(&root);
    let id = |s: &str| json!({ "session_id": s });
    assert_eq!(one.call("claim", id("s1")).expect("claim"), Value::Null);
    expect_code(
        one.call("claim", id("s1")),
        "SESSION_LOCKED",
        "same instance",
    );
    expect_code(
        two.call("claim", id("s1")),
        "SESSION_LOCKED",
        "other instance",
    );
    two.call("claim", id("s2")).expect("other session");
    assert_eq!(one.call("release", id("s1")).expect("release"), Value::Null);
    two.call("claim", id("s1")).expect("claim after release");
    expect_code(
        one.call("claim", id("s1")),
        "SESSION_LOCKED",
        "now held by two",
    );
    drop(two);
    one.call("claim", id("s1"))
        .expect("claim after the holder went away");
    one.call("release", id("s1")).expect("release");
    one.call("release", id("s1"))
        .expect("release is idempotent");
}

pub use crate::damage::{
    defect_before_last_turn_end_is_corrupt, failed_write_keeps_nothing,
    gap_before_last_turn_end_is_corrupt, read_only_root_is_a_clear_io_error,
    ses09_wrong_header_version_is_unsupported, torn_tail_after_last_turn_end_is_cut,
};
pub use crate::forms::events_jsonl_matches_events;

/// Malformed requests: a session id that is not `[A-Za-z0-9_-]{1,128}`, missing fields, an
/// unknown method.
pub fn invalid_requests_are_refused(backend: &dyn Backend) {
    let dir = temp_root();
    let root = root_in(&dir);
    let store = backend.open(&root);
    let long = "x".repeat(129);
    for bad in ["", "../escape", "a/b", "dot.ted", long.as_str()] {
        expect_code(
            append(&*store, bad, Some(header(bad)), &turn(0), 0),
            "SESSION_INVALID",
            &format!("append id {bad:?}"),
        );
        expect_code(load(&*store, bad, false), "SESSION_INVALID", "load bad id");
        expect_code(
            store.call("claim", json!({ "session_id": bad })),
            "SESSION_INVALID",
            "claim",
        );
    }
    expect_code(
        store.call("append", json!({ "session_id": "s1" })),
        "INVALID_ARGUMENTS",
        "no events",
    );
    expect_code(store.call("load", json!({})), "INVALID_ARGUMENTS", "no id");
    let mut bad_event = header("s1");
    bad_event["bogus"] = json!(1);
    expect_code(
        append(&*store, "s1", Some(bad_event), &turn(0), 0),
        "INVALID_ARGUMENTS",
        "field",
    );
    expect_code(
        store.call("compact", json!({})),
        "UNKNOWN_METHOD",
        "unknown method",
    );
    assert!(backend.stored_sessions(&root).is_empty());
}

/// Loading a session that was never stored is `SESSION_NOT_FOUND` (also on a missing root).
pub fn load_of_unknown_session_is_not_found(backend: &dyn Backend) {
    let dir = temp_root();
    let root = root_in(&dir);
    let store = backend.open(&root);
    expect_code(
        load(&*store, "nope", false),
        "SESSION_NOT_FOUND",
        "missing root",
    );
    append_ok(&*store, "s1", Some(header("s1")), &turn(0), 0);
    expect_code(
        load(&*store, "nope", true),
        "SESSION_NOT_FOUND",
        "existing root",
    );
}
