//! The `session` plugin: keel's append-only session log (ARCHITECTURE §7, requirements C6).
//!
//! This file is only the SDK adapter: it serves `keel.session` (the typed provider of
//! [`api`]), `keel.command.sessions` and `keel.command.fork` (the [`commands`]), talks to the
//! profile's `keel.session-store` backend through [`store::Store`], runs the write-behind
//! timers on the kernel's runtime, feeds `session/event` after every commit and
//! `session/durable` after every durable write, announces `session/created` /
//! `session/disposed`, and drains a session's writer on `session/flush`.
//! The job itself lives in SDK-free modules, testable as plain Rust:
//!
//! - [`validate`]: lossless data, envelope and read-side checks (SES-01/02/09);
//! - [`invariants`]: B15 turn/step/tool balance, staged before commit;
//! - [`log`]: [`log::SessionLog`], the write site (seq, time, atomic batches);
//! - [`writer`]: write-behind batching and the flush barrier (SES-04, B5);
//! - [`recovery`]: crash closers (SES-06, B7);
//! - [`fork`]: closed-prefix forks (SES-07/13, B8);
//! - [`projection`], [`contract`]: incremental model history and the tool-call contract
//!   (SES-03/12, ARCHITECTURE §7);
//! - [`sessions`], [`api`], [`commands`]: live sessions, the `keel.session` provider, the CLI.

pub mod api;
pub mod commands;
pub mod contract;
pub mod core_events;
pub mod error;
pub mod fork;
pub mod invariants;
pub mod log;
pub mod projection;
pub mod recovery;
pub mod sessions;
pub mod store;
pub mod validate;
pub mod wire;
pub mod writer;

#[cfg(test)]
mod prop_tests;
#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use keel_plugin_api::events::Json;
use keel_plugin_api::events::session::{
    FlushRequest, Persist, PersistBatch, SessionCreated, SessionDisposed, SessionDurability,
    SessionDurable, SessionEvent, SessionEventNotice, SessionFlush, SessionLifecycle,
};
use keel_plugin_api::prelude::*;
use keel_plugin_api::sdk::sleep;
use keel_plugin_api::services::command::{Command, service_name};
use keel_plugin_api::services::session::{
    AppendBatch, EventRecord, LoadFormat, LoadStored, SessionHeader, SessionRef, SessionStore,
    SessionStoreClient, Sessions, StoreError,
};
use serde_json::Value;

use crate::error::SessionError;
use crate::sessions::{Config, SessionManager};
use crate::store::{BoxFut, Listing, Loaded, Store, StoreAppend, Timer};
use crate::validate::NewEvent;

fn to_sdk(e: SessionError) -> Error {
    e.into()
}

fn from_sdk(e: Error) -> SessionError {
    let Error { code, message } = e;
    SessionError::from_code(&code, message)
}

/// [`Store`] over the backend's `keel.session-store` client.
struct CallStore(SessionStoreClient);

impl Store for CallStore {
    fn append(&self, req: StoreAppend) -> BoxFut<error::Result<u64>> {
        let (client, batch) = (
            self.0.clone(),
            AppendBatch {
                session_id: req.session_id,
                header: req.header,
                events: req.events,
                expected_next_seq: req.expected_next_seq,
            },
        );
        Box::pin(async move {
            let stored = client.append(batch).await.map_err(from_sdk)?;
            Ok(stored.next_seq)
        })
    }

    fn load(&self, session_id: &str, repair: bool) -> BoxFut<error::Result<Loaded>> {
        // `jsonl-file`: the JSONL backend names the byte range of its checked lines
        // (`events_file`), read straight from the file; other backends send one JSON lines
        // string (`events_jsonl`). Both are far cheaper across the seam than an array.
        let (client, request) = (
            self.0.clone(),
            LoadStored {
                session_id: session_id.to_owned(),
                repair,
                format: LoadFormat::JsonlFile,
            },
        );
        Box::pin(async move { wire::load_answer(client.load(request).await.map_err(from_sdk)?) })
    }

    fn list(&self) -> BoxFut<error::Result<Listing>> {
        let client = self.0.clone();
        Box::pin(async move {
            let listed = client.list().await.map_err(from_sdk)?;
            let value = |v: serde_json::Result<Value>| {
                v.map_err(|e| SessionError::invalid(format!("session listing: {e}")))
            };
            Ok(Listing {
                sessions: listed
                    .sessions
                    .iter()
                    .map(|s| value(serde_json::to_value(s)))
                    .collect::<error::Result<_>>()?,
                unreadable: listed
                    .unreadable
                    .iter()
                    .map(|u| value(serde_json::to_value(u)))
                    .collect::<error::Result<_>>()?,
            })
        })
    }

    fn claim(&self, session_id: &str) -> BoxFut<error::Result<()>> {
        let (client, id) = (self.0.clone(), SessionRef::new(session_id));
        Box::pin(async move { client.claim(id).await.map_err(from_sdk) })
    }

    fn release(&self, session_id: &str) -> BoxFut<error::Result<()>> {
        let (client, id) = (self.0.clone(), SessionRef::new(session_id));
        Box::pin(async move { client.release(id).await.map_err(from_sdk) })
    }
}

/// [`Timer`] on the kernel's runtime (no tokio inside plugins).
struct KernelTimer(Context);

impl Timer for KernelTimer {
    fn spawn(&self, task: BoxFut<()>) {
        if let Err(e) = self.0.spawn(task) {
            tracing::error!(
                "cannot start a session write window (events stay pending until flush): {e}"
            );
        }
    }
    fn sleep(&self, d: Duration) -> BoxFut<()> {
        Box::pin(sleep(d))
    }
}

/// [`api::Hooks`] through the kernel's bus.
struct KernelHooks {
    ctx: Context,
    mgr: Arc<SessionManager>,
}

fn lifecycle(header: &SessionHeader) -> SessionLifecycle {
    SessionLifecycle {
        session_id: header.id.as_str().into(),
        header: serde_json::to_string(header).unwrap_or_default().into(),
    }
}

impl api::Hooks for KernelHooks {
    fn committed(&self, session_id: &str, records: &[Arc<EventRecord>]) {
        for r in records {
            let notice = SessionEventNotice {
                session_id: session_id.into(),
                seq: r.seq,
                kind: r.kind.as_str().into(),
                record: serde_json::to_string(&**r).unwrap_or_default().into(),
            };
            // Listener failures are contained by the bus; only misuse comes back here.
            if let Err(e) = self.ctx.emit(crate::DISPATCH.session_event, &notice) {
                tracing::error!(session = %session_id, seq = r.seq, "session/event emit failed: {e}");
            }
        }
    }

    fn created(&self, header: &SessionHeader) {
        if let Err(e) = self
            .ctx
            .emit(crate::DISPATCH.session_created, &lifecycle(header))
        {
            tracing::error!(session = %header.id, "session/created emit failed: {e}");
        }
    }

    fn disposed(&self, header: &SessionHeader) {
        if let Err(e) = self
            .ctx
            .emit(crate::DISPATCH.session_disposed, &lifecycle(header))
        {
            tracing::error!(session = %header.id, "session/disposed emit failed: {e}");
        }
    }

    fn before_persist(&self, session_id: &str, batch: &mut [NewEvent]) -> error::Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let data: Vec<&Value> = batch.iter().map(|e| &e.data).collect();
        let text =
            serde_json::to_string(&data).map_err(|e| SessionError::invalid(e.to_string()))?;
        let mut payload = PersistBatch {
            session_id: session_id.into(),
            data: Json { text: text.into() },
        };
        let before = payload.data.text.clone();
        self.ctx
            .run_waterfall(crate::DISPATCH.persist, &mut payload, |_| Ok(()))
            .map_err(from_sdk)?;
        if payload.data.text == before {
            return Ok(());
        }
        let rewritten: Vec<Value> =
            serde_json::from_str(payload.data.text.as_str()).map_err(|e| {
                SessionError::invalid(format!(
                    "a session/persist listener left data that is not a JSON array: {e}"
                ))
            })?;
        if rewritten.len() != batch.len() {
            return Err(SessionError::invalid(format!(
                "a session/persist listener changed the number of events ({} → {}); nothing was written",
                batch.len(),
                rewritten.len()
            )));
        }
        for (event, data) in batch.iter_mut().zip(rewritten) {
            event.data = data;
        }
        Ok(())
    }

    fn flush(&self, session_id: &str) -> BoxFut<error::Result<()>> {
        let (ctx, mgr, id) = (self.ctx, self.mgr.clone(), session_id.to_owned());
        Box::pin(async move {
            ctx.parallel(
                crate::DISPATCH.session_flush,
                FlushRequest {
                    session_id: id.as_str().into(),
                },
            )
            .await
            .map_err(from_sdk)?;
            // Our own listener drained already; draining again is free and keeps the barrier
            // even if the listener was skipped (a faulted row).
            mgr.flush(&id).await.map(drop)
        })
    }
}

#[derive(Default)]
struct SessionPlugin;

keel_plugin_api::dispatches! {
    /// The `session/*` events this row dispatches, and so declares.
    pub struct Dispatches {
        pub persist: Persist,
        pub session_event: SessionEvent,
        pub session_durable: SessionDurable,
        pub session_flush: SessionFlush,
        pub session_created: SessionCreated,
        pub session_disposed: SessionDisposed,
    }
}

impl Plugin for SessionPlugin {
    type Dispatches = Dispatches;

    fn manifest(&self) -> Manifest {
        Manifest::new("session", env!("CARGO_PKG_VERSION"))
            .description("the session log: validation, write-behind, recovery, fork, projection")
            .requires::<SessionStore>()
            .provides::<Sessions>()
            .command(commands::sessions_spec())
            .command(commands::fork_spec())
            .config_type::<Config>()
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let config: Config = ctx.config()?;
        let store: Arc<dyn Store> = Arc::new(CallStore(ctx.client::<SessionStore>()?));
        let mgr = Arc::new(SessionManager::new(
            store,
            Arc::new(KernelTimer(ctx)),
            &config,
        ));
        mgr.set_durable_hook(Arc::new(move |session_id: &str, seq: u64| {
            let notice = SessionDurability {
                session_id: session_id.into(),
                seq,
            };
            // Listener failures are contained by the bus; only misuse comes back here.
            if let Err(e) = ctx.emit(crate::DISPATCH.session_durable, &notice) {
                tracing::error!(session = %session_id, seq, "session/durable emit failed: {e}");
            }
        }));
        let hooks = Arc::new(KernelHooks {
            ctx,
            mgr: mgr.clone(),
        });

        let m = mgr.clone();
        ctx.on_parallel::<SessionFlush, _, _>(ListenerOptions::default(), move |req| {
            let (m, id) = (m.clone(), req.session_id.to_string());
            async move {
                match m.flush(&id).await {
                    Ok(_) => Ok(()),
                    // Not live here: nothing of ours to drain.
                    Err(e) if e.is(StoreError::NotFound) => Ok(()),
                    Err(e) => Err(to_sdk(e)),
                }
            }
        })?;

        ctx.serve::<Sessions, _>(api::Api {
            mgr: mgr.clone(),
            hooks: hooks.clone(),
        })?;
        let commands = commands::Command::sessions(ctx, mgr.clone());
        ctx.serve_named::<Command, _>(&service_name("sessions"), commands)?;
        let commands = commands::Command::fork(ctx, mgr.clone());
        ctx.serve_named::<Command, _>(&service_name("fork"), commands)?;

        // Disposal drains every live session (B5) and releases its writer lock.
        let h = hooks;
        ctx.effect("drain live sessions", move || async move {
            for header in mgr.close_all().await {
                api::Hooks::disposed(&*h, &header);
            }
            Ok(())
        })?;
        Ok(())
    }
}

keel_plugin_api::export_plugin!(SessionPlugin);
