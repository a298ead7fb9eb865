//! `session/persist` at the service's door (SEC-03): what the hook rewrites is committed, and a
//! refusal commits nothing of the batch.

use super::*;

/// Wraps [`TestHooks`] with a `session/persist` stand-in: rewrites `content`, or refuses.
struct PersistHooks {
    inner: TestHooks,
    refuse: bool,
}

impl Hooks for PersistHooks {
    fn committed(&self, id: &str, records: &[Arc<EventRecord>]) {
        self.inner.committed(id, records);
    }
    fn created(&self, h: &SessionHeader) {
        self.inner.created(h);
    }
    fn disposed(&self, h: &SessionHeader) {
        self.inner.disposed(h);
    }
    fn flush(&self, id: &str) -> BoxFut<crate::error::Result<()>> {
        self.inner.flush(id)
    }
    fn before_persist(
        &self,
        _id: &str,
        batch: &mut [crate::validate::NewEvent],
    ) -> crate::error::Result<()> {
        if self.refuse {
            return Err(crate::error::SessionError::invalid("scrub failed"));
        }
        for e in batch {
            if let Some(c) = e.data.get_mut("content") {
                *c = json!("sec_KEY");
            }
        }
        Ok(())
    }
}

// SEC-03 at the session's door: what `session/persist` rewrites is what is committed; a
// refusal commits nothing of the batch.
#[tokio::test]
async fn sec03_persist_hook_rewrites_before_commit_and_a_refusal_writes_nothing() {
    let store = MemStore::new();
    let (mgr, inner) = setup(&store);
    for refuse in [false, true] {
        let hooks = Arc::new(PersistHooks {
            inner: TestHooks {
                mgr: mgr.clone(),
                seen: Mutex::default(),
            },
            refuse,
        });
        let id = if refuse { "r" } else { "w" };
        api::call(&mgr, &hooks, "create", json!({"cwd": "/w", "id": id}))
            .await
            .unwrap();
        let appended = api::call(
            &mgr,
            &hooks,
            "append",
            json!({"session_id": id, "events": [
                {"type": "user/message", "data": {"id": "u", "content": "the key is s3cr3t"},
                 "surface_op": "append"}
            ]}),
        )
        .await;
        api::call(&mgr, &hooks, "flush", json!({"session_id": id}))
            .await
            .unwrap();
        if refuse {
            assert!(appended.is_err());
            assert!(
                store.stored(id).is_empty(),
                "nothing of the batch is written"
            );
        } else {
            let stored = store.stored(id);
            assert_eq!(stored[0].data["content"], "sec_KEY");
            assert!(!format!("{stored:?}").contains("s3cr3t"));
        }
    }
    drop(inner);
}
