//! A store served the way a backend row serves it: its backend on a kit [`Worker`] thread behind
//! the real `keel.session-store` contract. Both backends' suites run through this one harness,
//! so a suite exercises the same worker and contract path `keel` does.

use std::sync::Arc;

use keel_plugin_api::sdk::ContractHandle;
use keel_plugin_api::services::session::SessionStore;
use keel_session_store_kit::{Backend as StoreBackend, Worker};
use serde_json::Value;

use crate::{ContractStore, Failure, call_served};

/// One store instance; dropping it is a process going away.
pub struct Served<S: StoreBackend> {
    store: Arc<S>,
    handle: Option<ContractHandle>,
    fail_next_write: fn(&S),
}

impl<S: StoreBackend> Served<S> {
    /// Serves `store` as row `row`; `fail_next_write` arms the backend's write fail point.
    ///
    /// # Panics
    /// When the worker thread cannot start (a test harness).
    #[allow(clippy::expect_used, reason = "a test harness fails loudly")]
    pub fn new(row: &str, store: S, fail_next_write: fn(&S)) -> Served<S> {
        let store = Arc::new(store);
        let worker = Worker::start("contract-suite", Arc::clone(&store)).expect("start the worker");
        let handle = ContractHandle::serve::<SessionStore, _>(row, worker);
        Served {
            store,
            handle: Some(handle),
            fail_next_write,
        }
    }
}

/// Waits until the worker thread has let go of the store (and so of its locks).
impl<S: StoreBackend> Drop for Served<S> {
    fn drop(&mut self) {
        self.handle.take();
        while Arc::strong_count(&self.store) > 1 {
            std::thread::yield_now();
        }
    }
}

impl<S: StoreBackend> ContractStore for Served<S> {
    fn call(&self, method: &str, args: Value) -> Result<Value, Failure> {
        match &self.handle {
            Some(handle) => call_served(handle, method, args),
            None => Err(Failure {
                code: "SESSION_IO".to_owned(),
                message: "the store was dropped".to_owned(),
            }),
        }
    }

    fn fail_next_write(&self) {
        (self.fail_next_write)(&self.store);
    }
}
