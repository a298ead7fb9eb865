//! `messages` answers frozen documents (issue 12 item 2): each projected message is encoded
//! once, when first read, and every later read of the history — through the typed contract, as
//! the agent loop reads it before each model request — shares the same buffers.

use keel_plugin_api::sdk::{ContractClient, ContractHandle};
use keel_plugin_api::services::session::{SessionRef, Sessions, SessionsClient};

use super::*;

fn user(content: &str) -> Value {
    json!({"type": "user/message", "data": {"id": "u", "content": content}, "surface_op": "append"})
}

#[tokio::test]
async fn item2_messages_are_frozen_once_and_shared_by_every_later_read() {
    let store = MemStore::new();
    let (mgr, hooks) = setup(&store);
    api::call(&mgr, &hooks, "create", json!({"cwd": "/w", "id": "f"}))
        .await
        .unwrap();
    let append = |content: &'static str| {
        let (mgr, hooks) = (&mgr, &hooks);
        async move {
            let args = json!({"session_id": "f", "events": [user(content)]});
            api::call(mgr, hooks, "append", args).await.unwrap();
        }
    };
    append("first").await;
    let api = api::Api {
        mgr: mgr.clone(),
        hooks: hooks.clone(),
    };
    let client: SessionsClient =
        ContractClient::new(ContractHandle::serve::<Sessions, _>("session", api), "test").into();
    let read = || client.messages(SessionRef::new("f"));
    let before = read().await.unwrap().messages;
    append("second").await;
    let after = read().await.unwrap().messages;
    assert_eq!(before[0].as_str(), r#"{"role":"user","content":"first"}"#);
    assert_eq!(after.len(), 2);
    assert!(
        after[0].same(&before[0]),
        "the old message was encoded again instead of shared"
    );
    assert_eq!(after[1].as_str(), r#"{"role":"user","content":"second"}"#);
}
