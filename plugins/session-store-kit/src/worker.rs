//! The thread that runs store calls: the kernel's async workers only await a channel, so a
//! fsync or a large load never blocks them. Calls are served one at a time, in order. The
//! thread ends when the row is disposed ([`Worker::stop`]) and the last handle is gone. Shared by
//! every session-store backend; the thread name and the `serve` function are the backend's.

use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex};

use futures::channel::oneshot;
use keel_plugin_api::prelude::*;
use serde_json::Value;

type Reply = std::result::Result<Value, (String, String)>;
type Job = (String, Value, oneshot::Sender<Reply>);

/// A running store thread.
#[derive(Clone)]
pub struct Worker {
    tx: Arc<Mutex<Option<Sender<Job>>>>,
}

impl Worker {
    /// Starts the thread; `serve` answers one call.
    pub fn start<F>(name: &str, serve: F) -> Result<Worker>
    where
        F: Fn(&str, Value) -> Reply + Send + 'static,
    {
        let (tx, rx) = channel::<Job>();
        std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                for (method, args, reply) in rx {
                    let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        serve(&method, args)
                    }))
                    .unwrap_or_else(|_| {
                        Err((
                            "SESSION_IO".into(),
                            format!("session store panicked in '{method}'"),
                        ))
                    });
                    let _ = reply.send(answer);
                }
            })
            .map_err(|e| {
                Error::new(
                    "SESSION_IO",
                    format!("cannot start the session store thread: {e}"),
                )
            })?;
        Ok(Worker {
            tx: Arc::new(Mutex::new(Some(tx))),
        })
    }

    /// The service handle: each call is queued to the thread and awaited.
    pub fn handle(&self) -> CallHandle {
        let worker = self.clone();
        CallHandle::new(move |method, args| {
            let (reply, answer) = oneshot::channel();
            let sent = worker.tx.lock().map_err(|_| ()).and_then(|tx| {
                tx.as_ref()
                    .ok_or(())?
                    .send((method, args, reply))
                    .map_err(|_| ())
            });
            async move {
                sent.map_err(|()| Error::new("SESSION_IO", "the session store is stopped"))?;
                match answer.await {
                    Ok(Ok(value)) => Ok(value),
                    Ok(Err((code, message))) => Err(Error::new(&code, message)),
                    Err(_) => Err(Error::new(
                        "SESSION_IO",
                        "the session store stopped during the call",
                    )),
                }
            }
        })
    }

    /// Refuses new calls; the thread ends after the queued ones.
    pub fn stop(&self) {
        if let Ok(mut tx) = self.tx.lock() {
            tx.take();
        }
    }
}
