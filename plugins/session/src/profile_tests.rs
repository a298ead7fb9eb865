//! The recorded profile (issue 11 item 7): `create {profile}` logs `session/profile` as the
//! first event, ignorable, announced like any event; `profile` reads it back from a live or a
//! stored session (not repairing it), `null` when none; a malformed one is refused.

use super::*;

#[tokio::test]
async fn item7_create_records_the_profile_first_and_profile_reads_it_back() {
    let store = MemStore::new();
    let (mgr, hooks) = setup(&store);
    let profile = json!({"name": "headless", "digest": "d1"});
    api::call(
        &mgr,
        &hooks,
        "create",
        json!({"cwd": "/w", "id": "p1", "profile": profile}),
    )
    .await
    .unwrap();
    assert_eq!(hooks.seen.lock().unwrap().events, [("p1".to_owned(), 0)]);
    let read = |id: &'static str| {
        let (mgr, hooks) = (&mgr, &hooks);
        async move {
            api::call(mgr, hooks, "profile", json!({"session_id": id}))
                .await
                .unwrap()
        }
    };
    // Live in this process.
    assert_eq!(read("p1").await, json!({"profile": profile}));
    mgr.append("p1", vec![ce::turn_start(0)], |_| {}).unwrap();
    api::call(&mgr, &hooks, "close", json!({"session_id": "p1"}))
        .await
        .unwrap();
    let stored = store.stored("p1");
    assert_eq!(stored[0].kind, "session/profile");
    assert!(stored[0].ignorable);
    assert_eq!(stored[0].data, profile);
    assert_eq!(stored[1].kind, "turn/start");
    // Stored, with its turn left open (a crash): read, never repaired.
    assert_eq!(read("p1").await, json!({"profile": profile}));
    assert_eq!(store.stored("p1").len(), 2, "profile repaired nothing");
    // A session that records none.
    api::call(&mgr, &hooks, "create", json!({"cwd": "/w", "id": "p2"}))
        .await
        .unwrap();
    assert_eq!(read("p2").await, json!({"profile": null}));
    let e = api::call(&mgr, &hooks, "profile", json!({"session_id": "nope"}))
        .await
        .unwrap_err();
    assert_eq!(e.code(), "SESSION_NOT_FOUND");
}

#[tokio::test]
async fn item7_a_malformed_profile_is_refused_and_creates_nothing() {
    let store = MemStore::new();
    let (mgr, hooks) = setup(&store);
    for bad in [
        json!({"name": "a"}),
        json!({"name": "a", "digest": 1}),
        json!("a"),
    ] {
        let e = api::call(
            &mgr,
            &hooks,
            "create",
            json!({"cwd": "/w", "id": "m", "profile": bad}),
        )
        .await
        .unwrap_err();
        // Refused by the contract's request decoding (SDK 2), before the session sees it.
        assert_eq!(e.code(), "INVALID_ARGUMENTS", "{bad}");
    }
    assert!(mgr.live_ids().is_empty());
    // Appended by hand, it must be ignorable and well-formed too.
    api::call(&mgr, &hooks, "create", json!({"cwd": "/w", "id": "m"}))
        .await
        .unwrap();
    let e = mgr
        .append(
            "m",
            vec![crate::validate::NewEvent::new(
                "session/profile",
                json!({"name": "a", "digest": "d"}),
            )],
            |_| {},
        )
        .unwrap_err();
    assert!(e.to_string().contains("ignorable"), "{e}");
}
