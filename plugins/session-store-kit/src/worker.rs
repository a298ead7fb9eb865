//! The thread that runs store calls: the kernel's async workers only await a channel, so a
//! fsync or a large load never blocks them. Calls are served one at a time, in order. The
//! thread ends when the row is disposed ([`Worker::stop`]) and the last handle is gone. Shared by
//! every session-store backend: a backend implements [`Backend`] (plain, synchronous Rust) and
//! serves `keel.session-store` with `ctx.serve::<SessionStore, _>(Worker::start(name, store)?)`.

use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex};

use futures::channel::oneshot;
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::session::{
    AppendBatch, BatchStored, LoadStored, SessionCode, SessionRef, SessionStoreProvider,
    StoredListing, StoredLog,
};

/// The `keel.session-store` contract as a synchronous backend (what runs on the thread).
pub trait Backend: Send + Sync + 'static {
    /// See `SessionStore::append`.
    ///
    /// # Errors
    /// A `SESSION_*` code.
    fn append(&self, request: AppendBatch) -> Result<BatchStored>;
    /// See `SessionStore::load`.
    ///
    /// # Errors
    /// A `SESSION_*` code.
    fn load(&self, request: LoadStored) -> Result<StoredLog>;
    /// See `SessionStore::list`.
    ///
    /// # Errors
    /// A `SESSION_*` code.
    fn list(&self) -> Result<StoredListing>;
    /// See `SessionStore::claim`.
    ///
    /// # Errors
    /// A `SESSION_*` code.
    fn claim(&self, request: SessionRef) -> Result<()>;
    /// See `SessionStore::release`.
    ///
    /// # Errors
    /// A `SESSION_*` code.
    fn release(&self, request: SessionRef) -> Result<()>;
}

impl<B: Backend> Backend for Arc<B> {
    fn append(&self, request: AppendBatch) -> Result<BatchStored> {
        (**self).append(request)
    }
    fn load(&self, request: LoadStored) -> Result<StoredLog> {
        (**self).load(request)
    }
    fn list(&self) -> Result<StoredListing> {
        (**self).list()
    }
    fn claim(&self, request: SessionRef) -> Result<()> {
        (**self).claim(request)
    }
    fn release(&self, request: SessionRef) -> Result<()> {
        (**self).release(request)
    }
}

type Job<B> = Box<dyn FnOnce(&B) + Send>;

/// A running store thread; it is the `keel.session-store` provider.
pub struct Worker<B> {
    tx: Arc<Mutex<Option<Sender<Job<B>>>>>,
}

impl<B> Clone for Worker<B> {
    fn clone(&self) -> Self {
        Worker {
            tx: Arc::clone(&self.tx),
        }
    }
}

impl<B: Backend> Worker<B> {
    /// Starts the thread named `name`, owning `backend`.
    ///
    /// # Errors
    /// `SESSION_IO` when the thread cannot start.
    pub fn start(name: &str, backend: B) -> Result<Worker<B>> {
        let (tx, rx) = channel::<Job<B>>();
        std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                for job in rx {
                    job(&backend);
                }
            })
            .map_err(|e| {
                Error::coded(
                    SessionCode::Io,
                    format!("cannot start the session store thread: {e}"),
                )
            })?;
        Ok(Worker {
            tx: Arc::new(Mutex::new(Some(tx))),
        })
    }

    /// Queues `call` to the thread and awaits its answer; a panic is `SESSION_IO`.
    async fn run<T, F>(&self, method: &'static str, call: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&B) -> Result<T> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job: Job<B> = Box::new(move |backend: &B| {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call(backend)))
                .unwrap_or_else(|_| {
                    Err(Error::coded(
                        SessionCode::Io,
                        format!("session store panicked in '{method}'"),
                    ))
                });
            let _ = reply.send(result);
        });
        let sent = self
            .tx
            .lock()
            .map_err(|_| ())
            .and_then(|tx| tx.as_ref().ok_or(())?.send(job).map_err(|_| ()));
        sent.map_err(|()| Error::coded(SessionCode::Io, "the session store is stopped"))?;
        answer.await.unwrap_or_else(|_| {
            Err(Error::coded(
                SessionCode::Io,
                "the session store stopped during the call",
            ))
        })
    }

    /// Refuses new calls; the thread ends after the queued ones.
    pub fn stop(&self) {
        if let Ok(mut tx) = self.tx.lock() {
            tx.take();
        }
    }
}

impl<B: Backend> SessionStoreProvider for Worker<B> {
    async fn append(&self, request: AppendBatch) -> Result<BatchStored> {
        self.run("append", move |b| b.append(request)).await
    }
    async fn load(&self, request: LoadStored) -> Result<StoredLog> {
        self.run("load", move |b| b.load(request)).await
    }
    async fn list(&self) -> Result<StoredListing> {
        self.run("list", |b| b.list()).await
    }
    async fn claim(&self, request: SessionRef) -> Result<()> {
        self.run("claim", move |b| b.claim(request)).await
    }
    async fn release(&self, request: SessionRef) -> Result<()> {
        self.run("release", move |b| b.release(request)).await
    }
}
