//! Service-level tests: [`SessionManager`], the `keel.session` provider and the CLI commands over
//! [`MemStore`], on a tokio runtime standing in for the kernel's.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_plugin_api::services::session::{EventRecord, SessionHeader, StoreError};
use serde_json::{Value, json};

use crate::api::{self, Hooks};
use crate::commands::{self, Io};
use crate::core_events as ce;
use crate::fork::{Boundary, ChildLineage};
use crate::sessions::{Config, CreateArgs, SessionManager};
use crate::store::{BoxFut, MemStore, Store, Timer};
use crate::test_support::{self as ts, tc};

struct TokioTimer;
impl Timer for TokioTimer {
    fn spawn(&self, task: BoxFut<()>) {
        tokio::spawn(task);
    }
    fn sleep(&self, d: Duration) -> BoxFut<()> {
        Box::pin(tokio::time::sleep(d))
    }
}

#[derive(Default)]
struct Seen {
    events: Vec<(String, u64)>,
    created: Vec<String>,
    disposed: Vec<String>,
}

struct TestHooks {
    mgr: Arc<SessionManager>,
    seen: Mutex<Seen>,
}

impl Hooks for TestHooks {
    fn committed(&self, id: &str, records: &[Arc<EventRecord>]) {
        let mut s = self.seen.lock().unwrap();
        s.events
            .extend(records.iter().map(|r| (id.to_owned(), r.seq)));
    }
    fn created(&self, h: &SessionHeader) {
        self.seen.lock().unwrap().created.push(h.id.clone());
    }
    fn disposed(&self, h: &SessionHeader) {
        self.seen.lock().unwrap().disposed.push(h.id.clone());
    }
    fn flush(&self, id: &str) -> BoxFut<crate::error::Result<()>> {
        let (m, id) = (self.mgr.clone(), id.to_owned());
        Box::pin(async move { m.flush(&id).await.map(drop) })
    }
}

fn setup(store: &MemStore) -> (Arc<SessionManager>, Arc<TestHooks>) {
    let config = Config {
        write_batch_max_delay_ms: 10_000,
        event_types: vec![],
    };
    let mgr = Arc::new(SessionManager::new(
        Arc::new(store.clone()),
        Arc::new(TokioTimer),
        &config,
    ));
    let hooks = Arc::new(TestHooks {
        mgr: mgr.clone(),
        seen: Mutex::default(),
    });
    (mgr, hooks)
}

fn create(id: &str) -> CreateArgs {
    CreateArgs {
        cwd: "/work".into(),
        id: Some(id.into()),
        ..CreateArgs::default()
    }
}

/// A crashed session in the store: turn open, one call started, one not.
fn put_crashed(store: &MemStore, id: &str) {
    let h = SessionHeader {
        id: id.into(),
        ..ts_header()
    };
    store.put(
        h,
        vec![
            ts::user(0, "do it"),
            ts::turn_start(1, 0),
            ts::step_start(2, 0, 0),
            ts::assistant(3, 0, 0, &["a", "b"]),
            ts::call(4, 0, 0, "a"),
        ],
    );
}

fn ts_header() -> SessionHeader {
    SessionHeader {
        kind: keel_plugin_api::services::session::HeaderKind::Session,
        version: 0,
        id: "x".into(),
        created_at: 1,
        cwd: "/work".into(),
        parent_session: None,
        seed_length: None,
        parent_call_id: None,
        origin: None,
        delegation_depth: 0,
    }
}

#[tokio::test]
async fn ses04_created_session_writes_nothing_until_flush() {
    let store = MemStore::new();
    let (mgr, hooks) = setup(&store);
    let v = api::call(&mgr, &hooks, "create", json!({"cwd": "/w", "id": "s1"}))
        .await
        .unwrap();
    assert_eq!(v["session_id"], "s1");
    assert!(
        store.list().await.unwrap().sessions.is_empty(),
        "no file before the first flush"
    );
    let v = api::call(&mgr, &hooks, "flush", json!({"session_id": "s1"}))
        .await
        .unwrap();
    assert_eq!(v["durable_seq"], Value::Null);
    let v = api::call(
        &mgr,
        &hooks,
        "append",
        json!({"session_id": "s1", "events": [
            {"type": "user/message", "data": {"id": "u", "content": "hi"}, "surface_op": "append"},
            {"type": "turn/start", "data_json": "{\"turn\": 0}"}
        ]}),
    )
    .await
    .unwrap();
    assert_eq!(v["seqs"], json!([0, 1]));
    assert_eq!(store.append_calls(), 0, "append does no I/O");
    let v = api::call(&mgr, &hooks, "flush", json!({"session_id": "s1"}))
        .await
        .unwrap();
    assert_eq!(v["durable_seq"], 1);
    assert_eq!(store.stored("s1").len(), 2);
    assert_eq!(hooks.seen.lock().unwrap().events.len(), 2);
}

#[tokio::test]
async fn ephemeral_session_checkpoints_but_stores_nothing() {
    let store = MemStore::new();
    let (mgr, hooks) = setup(&store);
    api::call(
        &mgr,
        &hooks,
        "create",
        json!({"cwd": "/w", "id": "e1", "ephemeral": true}),
    )
    .await
    .unwrap();
    api::call(
        &mgr,
        &hooks,
        "append",
        json!({"session_id": "e1", "events": [{"type": "turn/start", "data": {"turn": 0}}]}),
    )
    .await
    .unwrap();
    let v = api::call(&mgr, &hooks, "flush", json!({"session_id": "e1"}))
        .await
        .unwrap();
    assert_eq!(v["durable_seq"], 0, "the checkpoint succeeds");
    api::call(&mgr, &hooks, "close", json!({"session_id": "e1"}))
        .await
        .unwrap();
    assert_eq!(store.append_calls(), 0, "nothing reached the store");
    assert!(store.list().await.unwrap().sessions.is_empty());
    assert!(store.stored("e1").is_empty());
}

#[tokio::test]
async fn ses01_duplicate_keys_in_data_json_are_refused_and_nothing_commits() {
    let store = MemStore::new();
    let (mgr, hooks) = setup(&store);
    mgr.create(create("d")).await.unwrap();
    let e = api::call(
        &mgr,
        &hooks,
        "append",
        json!({"session_id": "d", "events": [
            {"type": "turn/start", "data": {"turn": 0}},
            {"type": "todo/write", "data_json": "{\"todos\": [], \"todos\": [1]}"}
        ]}),
    )
    .await
    .unwrap_err();
    assert!(
        e.is(StoreError::Invalid) && e.message.contains("duplicate key"),
        "{e}"
    );
    assert_eq!(mgr.with_log("d", |l| l.len()).unwrap(), 0);
    assert!(hooks.seen.lock().unwrap().events.is_empty());
}

#[tokio::test]
async fn ses01_observer_failure_never_reverts_the_append() {
    let store = MemStore::new();
    let (mgr, _hooks) = setup(&store);
    mgr.create(create("o")).await.unwrap();
    let m = mgr.clone();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        m.append("o", vec![ce::user_message("u", "x")], |committed| {
            assert_eq!(committed.len(), 1);
            panic!("observer fails");
        })
    }));
    assert!(r.is_err());
    assert_eq!(mgr.with_log("o", |l| l.len()).unwrap(), 1);
    // The session still works, and the event is durable on flush.
    mgr.append("o", vec![ce::user_message("v", "y")], |_| {})
        .unwrap();
    assert_eq!(mgr.flush("o").await.unwrap(), Some(1));
}

#[tokio::test]
async fn ses04_disk_full_flush_fails_events_stay_pending_then_succeed() {
    let store = MemStore::new();
    let (mgr, hooks) = setup(&store);
    mgr.create(create("full")).await.unwrap();
    mgr.append("full", vec![ce::user_message("u", "x")], |_| {})
        .unwrap();
    store.fail_appends(1);
    let e = api::call(&mgr, &hooks, "flush", json!({"session_id": "full"}))
        .await
        .unwrap_err();
    assert!(e.is(StoreError::Io), "{e}");
    assert!(mgr.write_error("full").unwrap().is_some());
    assert!(store.stored("full").is_empty());
    let v = api::call(&mgr, &hooks, "flush", json!({"session_id": "full"}))
        .await
        .unwrap();
    assert_eq!(v["durable_seq"], 0);
    assert_eq!(store.stored("full").len(), 1);
}

// SES-06 and SES-11: a crashed session is recovered durably on open and then resumes — the
// log is the task state store, and appends continue it after a crash or restart.
#[tokio::test]
async fn ses06_ses11_open_recovers_commits_closers_and_resumes() {
    let store = MemStore::new();
    put_crashed(&store, "c");
    let (mgr, hooks) = setup(&store);
    let v = api::call(&mgr, &hooks, "open", json!({"session_id": "c"}))
        .await
        .unwrap();
    let kinds: Vec<&str> = v["recovered"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["tool/result", "tool/result", "step/end", "turn/end"]
    );
    assert_eq!(v["next_seq"], 9);
    assert_eq!(store.stored("c").len(), 9, "closers are durable");
    // The session is live and continues the log.
    mgr.append("c", vec![ce::turn_start(1)], |_| {}).unwrap();
    // A live session is never repaired: load refuses while its turn is open (a live writer
    // holds it: SESSION_LOCKED, issue 10 item 13).
    let e = mgr.load("c").await.unwrap_err();
    assert!(e.is(StoreError::Locked), "{e}");
    assert!(mgr.inspect("c").await.unwrap().recovered.len() == 1);
    mgr.append("c", vec![ce::turn_end(1, "completed")], |_| {})
        .unwrap();
    assert_eq!(mgr.load("c").await.unwrap().events.len(), 11);
    api::call(&mgr, &hooks, "close", json!({"session_id": "c"}))
        .await
        .unwrap();
    assert_eq!(store.stored("c").len(), 11, "close drains");
    assert_eq!(hooks.seen.lock().unwrap().disposed, ["c"]);
}

#[tokio::test]
async fn ses06_inspect_commits_nothing_load_commits() {
    let store = MemStore::new();
    put_crashed(&store, "c");
    let (mgr, _hooks) = setup(&store);
    let s = mgr.inspect("c").await.unwrap();
    assert_eq!(
        (s.events.len(), s.recovered.len(), s.committed),
        (5, 4, false)
    );
    assert_eq!(store.stored("c").len(), 5);
    let s = mgr.load("c").await.unwrap();
    assert_eq!(
        (s.events.len(), s.recovered.len(), s.committed),
        (9, 4, true)
    );
    assert_eq!(store.stored("c").len(), 9);
    // Loading again finds a balanced log.
    assert!(mgr.load("c").await.unwrap().recovered.is_empty());
}

#[tokio::test]
async fn ses06_session_live_in_another_process_is_never_repaired() {
    let store = MemStore::new();
    put_crashed(&store, "c");
    store.claim("c").await.unwrap(); // another writer holds it
    let (mgr, _hooks) = setup(&store);
    // Issue 10 item 13: both ways a second resume can lose are one lock conflict.
    assert!(mgr.load("c").await.unwrap_err().is(StoreError::Locked));
    assert!(mgr.open("c").await.unwrap_err().is(StoreError::Locked));
    assert_eq!(store.stored("c").len(), 5);
}

#[tokio::test]
async fn ses09_unsupported_version_and_unknown_required_type() {
    let store = MemStore::new();
    store.put(
        SessionHeader {
            id: "v1".into(),
            version: 1,
            ..ts_header()
        },
        vec![],
    );
    let mut unknown = ts::user(0, "x");
    unknown.kind = "future/thing".into();
    unknown.surface_op = None;
    store.put(
        SessionHeader {
            id: "unk".into(),
            ..ts_header()
        },
        vec![unknown],
    );
    let (mgr, _hooks) = setup(&store);
    for id in ["v1", "unk"] {
        let e = mgr.load(id).await.unwrap_err();
        assert!(e.is(StoreError::Unsupported), "{id}: {e}");
        let e = mgr.open(id).await.unwrap_err();
        assert!(e.is(StoreError::Unsupported), "{id}: {e}");
    }
    // The claim was released on failure.
    assert!(store.claim("unk").await.is_ok());
}

#[tokio::test]
async fn ses07_fork_live_and_stored_sessions() {
    let store = MemStore::new();
    let (mgr, hooks) = setup(&store);
    mgr.create(create("p")).await.unwrap();
    mgr.append(
        "p",
        vec![
            ce::user_message("u", "hi"),
            ce::turn_start(0),
            ce::step_start(0, 0),
            ce::assistant_message(0, 0, "", &[tc("a")]),
            ce::tool_call(0, 0, &tc("a")),
            ce::tool_result(0, 0, "a", "ok"),
            ce::step_end(0, 0),
            ce::turn_end(0, "completed"),
            ce::turn_start(1),
        ],
        |_| {},
    )
    .unwrap();
    let e = api::call(
        &mgr,
        &hooks,
        "fork",
        json!({"session_id": "p", "child_id": "k"}),
    )
    .await
    .unwrap_err();
    assert!(e.is(StoreError::OpenTurn), "{e}");
    let v = api::call(
        &mgr,
        &hooks,
        "fork",
        json!({"session_id": "p", "child_id": "k", "at": "last-turn-end"}),
    )
    .await
    .unwrap();
    assert_eq!(v, json!({"session_id": "k", "seed_length": 8}));
    let child = store.load("k", false).await.unwrap();
    assert_eq!(child.header.parent_session.as_deref(), Some("p"));
    assert_eq!(child.header.cwd, "/work");
    assert_eq!(child.events.len(), 9);
    assert_eq!(child.events[8].kind, "session/end-seed");
    // Duplicate child id refused before the boundary is looked at.
    let e = mgr
        .fork(
            "p",
            Boundary::At(999),
            Some("k".into()),
            ChildLineage::default(),
        )
        .await
        .unwrap_err();
    assert!(e.is(StoreError::Exists), "{e}");
    // A stored child can be forked again (non-live source).
    let g = mgr
        .fork(
            "k",
            Boundary::Last,
            Some("g".into()),
            ChildLineage::default(),
        )
        .await
        .unwrap();
    assert_eq!(g.seed_length, Some(9));
    // The child opens as a live session and projects like its parent's prefix.
    mgr.open("k").await.unwrap();
    let msgs = api::call(&mgr, &hooks, "messages", json!({"session_id": "k"}))
        .await
        .unwrap();
    assert_eq!(msgs["messages"].as_array().unwrap().len(), 3);
    // SES-13 (issue 16): an in-process subagent fork records its lineage in the header.
    let v = api::call(
        &mgr,
        &hooks,
        "fork",
        json!({"session_id": "p", "child_id": "sub", "at": "last-turn-end",
               "origin": "subagent", "delegation_depth": 1, "parent_call_id": "call_3"}),
    )
    .await
    .unwrap();
    assert_eq!(v["seed_length"], 8);
    let sub = store.load("sub", false).await.unwrap().header;
    assert_eq!(sub.parent_session.as_deref(), Some("p"));
    assert_eq!(sub.parent_call_id.as_deref(), Some("call_3"));
    assert_eq!(sub.origin.as_deref(), Some("subagent"));
    assert_eq!(sub.delegation_depth, 1);
}

// Issue 16: a spawned child's header names its parent and the call, and copies nothing.
#[tokio::test]
async fn a_spawned_child_records_its_lineage_in_the_header() {
    let store = MemStore::new();
    let (mgr, _hooks) = setup(&store);
    let header = mgr
        .create(CreateArgs {
            parent_session: Some("p".into()),
            parent_call_id: Some("call_1".into()),
            origin: Some("subagent".into()),
            delegation_depth: 2,
            ..create("kid")
        })
        .await
        .unwrap();
    assert_eq!(header.parent_session.as_deref(), Some("p"));
    assert_eq!(header.parent_call_id.as_deref(), Some("call_1"));
    assert_eq!(header.seed_length, None);
    assert_eq!(header.delegation_depth, 2);
    mgr.append("kid", vec![ce::user_message("u", "task")], |_| {})
        .unwrap();
    mgr.flush("kid").await.unwrap();
    mgr.close("kid").await.unwrap();
    let stored = store.load("kid", false).await.unwrap().header;
    assert_eq!(stored, header, "the header is stored as created");
}

#[tokio::test]
async fn create_refuses_existing_invalid_and_relative() {
    let store = MemStore::new();
    put_crashed(&store, "c");
    let (mgr, _hooks) = setup(&store);
    assert!(
        mgr.create(create("c"))
            .await
            .unwrap_err()
            .is(StoreError::Exists)
    );
    assert!(
        mgr.create(create("../x"))
            .await
            .unwrap_err()
            .is(StoreError::Invalid)
    );
    let rel = CreateArgs {
        cwd: "rel".into(),
        ..CreateArgs::default()
    };
    assert!(mgr.create(rel).await.unwrap_err().is(StoreError::Invalid));
    let auto = mgr
        .create(CreateArgs {
            cwd: "/".into(),
            ..CreateArgs::default()
        })
        .await
        .unwrap();
    assert!(crate::validate::is_valid_id(&auto.id));
    let listed = mgr.list().await.unwrap();
    assert!(
        listed
            .sessions
            .iter()
            .any(|r| r["id"] == auto.id.as_str() && r["live"] == true)
    );
}

async fn run_cmd(mgr: &SessionManager, fork: bool, args: Value) -> (i32, String, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let mut io = Io {
        out: &mut out,
        err: &mut err,
    };
    let code = if fork {
        commands::fork(mgr, &serde_json::from_value(args).unwrap(), &mut io).await
    } else {
        commands::sessions(mgr, &serde_json::from_value(args).unwrap(), &mut io).await
    };
    (
        code,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

#[tokio::test]
async fn cli_sessions_show_recovers_and_says_so() {
    let store = MemStore::new();
    put_crashed(&store, "c");
    let (mgr, _hooks) = setup(&store);
    let (code, out, err) = run_cmd(
        &mgr,
        false,
        json!({"action": "show", "session_id": "c", "json": false}),
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(err.trim(), "recovered crashed session: appended 4 closers");
    assert!(
        out.contains("turn/end") && out.contains("interrupted"),
        "{out}"
    );
    let (code, out, err) = run_cmd(
        &mgr,
        false,
        json!({"action": "show", "session_id": "c", "json": true}),
    )
    .await;
    assert_eq!((code, err.as_str()), (0, ""));
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["events"].as_array().unwrap().len(), 9);
}

#[tokio::test]
async fn cli_sessions_list_fork_and_errors() {
    let store = MemStore::new();
    put_crashed(&store, "c");
    let (mgr, _hooks) = setup(&store);
    let (code, out, _) = run_cmd(&mgr, false, json!({"action": "list", "json": true})).await;
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["sessions"][0]["id"], "c");
    let (code, out, _) = run_cmd(&mgr, false, json!({"action": "list", "json": false})).await;
    assert_eq!(code, 0);
    assert!(out.starts_with("ID") && out.contains("\nc "), "{out}");
    // Fork inside the open (crashed) turn: load recovers first, so the default boundary is the
    // closing turn/end and the fork succeeds.
    let (code, out, err) = run_cmd(&mgr, true, json!({"session_id": "c", "at": null})).await;
    assert_eq!(code, 0, "{err}");
    assert!(crate::validate::is_valid_id(out.trim()));
    let (code, _, err) = run_cmd(&mgr, true, json!({"session_id": "c", "at": 3})).await;
    assert_eq!(code, 2);
    assert!(err.starts_with("keel: error[SESSION_OPEN_TURN]: "), "{err}");
    let (code, _, err) = run_cmd(
        &mgr,
        false,
        json!({"action": "show", "session_id": "nope", "json": false}),
    )
    .await;
    assert_eq!(code, 2);
    assert!(err.starts_with("keel: error[SESSION_NOT_FOUND]: "), "{err}");
}

/// The `session/persist` hook at the service's door (SEC-03).
#[path = "persist_tests.rs"]
mod persist;

/// The recorded profile: `create {profile}` and `profile` (issue 11 item 7).
#[path = "profile_tests.rs"]
mod profile;

#[cfg(test)]
#[path = "messages_tests.rs"]
mod messages;
