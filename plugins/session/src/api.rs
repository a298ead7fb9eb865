//! The `keel.session` provider ([`Api`], implementing the `Sessions` contract) over a
//! [`SessionManager`], with the kernel-facing side effects behind [`Hooks`] so the whole
//! surface is testable without the kernel. The request and answer types, and what each method
//! does, are declared once in `keel_plugin_api::services::session`.
//!
//! `append` takes each event's data as a frozen JSON document (`data`) or raw text
//! (`data_json`); both are parsed here with the lossless checks of [`parse_data`] (duplicate
//! keys refused), so no transport can drop a repeated key before the session sees it.

use std::sync::Arc;

use keel_plugin_api::prelude::Result as SdkResult;
use keel_plugin_api::services::session::{
    AppendEvents, AppendedEvents, CreateSession, CreatedSession, EventInput, EventRecord, Flushed,
    ForkAt, ForkMark, ForkSession, ForkedSession, ListedSession, OpenedSession, ReadAnswer,
    ReadEvents, RecordedProfile, SessionHeader, SessionListing, SessionLog, SessionMessages,
    SessionRef, SessionsProvider, SurfaceView, UnreadableSession,
};
use serde_json::Value;

use crate::error::{Result, SessionError};
use crate::fork::Boundary;
use crate::sessions::SessionManager;
use crate::store::BoxFut;
use crate::validate::{NewEvent, parse_data};

/// What the session plugin tells the kernel.
pub trait Hooks: Send + Sync + 'static {
    /// Events were committed (feed `session/event`); must not fail.
    fn committed(&self, session_id: &str, records: &[Arc<EventRecord>]);
    /// A session became live (`session/created`).
    fn created(&self, header: &SessionHeader);
    /// A live session was closed (`session/disposed`).
    fn disposed(&self, header: &SessionHeader);
    /// The durability barrier (`session/flush`): must end with the manager's writer drained.
    fn flush(&self, session_id: &str) -> BoxFut<Result<()>>;
    /// `session/persist`: listeners may rewrite each event's `data` before it is validated
    /// and committed (SEC-03). An error fails the append.
    fn before_persist(&self, session_id: &str, batch: &mut [NewEvent]) -> Result<()> {
        let _ = (session_id, batch);
        Ok(())
    }
}

fn to_new(e: EventInput) -> Result<NewEvent> {
    let data = match (e.data, e.data_json) {
        (Some(d), None) => parse_data(d.as_str())?,
        (None, Some(raw)) => parse_data(&raw)?,
        _ => {
            return Err(SessionError::invalid(format!(
                "event '{}' needs exactly one of data or data_json",
                e.kind
            )));
        }
    };
    Ok(NewEvent {
        kind: e.kind,
        data,
        ignorable: e.ignorable,
        surface_op: e.surface_op,
        source_event_seqs: e.source_event_seqs,
    })
}

/// Parses a fork boundary given as JSON (the CLI's `--at`): absent/null → last, a seq, or
/// `"last-turn-end"`.
///
/// # Errors
/// `SESSION_INVALID` for anything else.
pub fn boundary(at: Option<&Value>) -> Result<Boundary> {
    match at {
        None | Some(Value::Null) => Ok(Boundary::Last),
        Some(v) => serde_json::from_value::<ForkAt>(v.clone())
            .map(|at| fork_boundary(Some(at)))
            .map_err(|_| {
                SessionError::invalid(format!(
                    "fork boundary must be a seq or \"last-turn-end\", got {v}"
                ))
            }),
    }
}

/// The typed fork boundary as the fork module's.
pub fn fork_boundary(at: Option<ForkAt>) -> Boundary {
    match at {
        None => Boundary::Last,
        Some(ForkAt::Seq(seq)) => Boundary::At(seq),
        Some(ForkAt::Mark(ForkMark::LastTurnEnd)) => Boundary::LastTurnEnd,
    }
}

/// A `list` row of the manager (header fields, `events`, `updated_at`, `live`) as typed.
fn listed(row: Value) -> Result<ListedSession> {
    serde_json::from_value(row).map_err(|e| SessionError::invalid(format!("listed session: {e}")))
}

fn unreadable(row: Value) -> UnreadableSession {
    let text = |k: &str| row.get(k).and_then(Value::as_str).map(str::to_owned);
    UnreadableSession {
        path: text("path").unwrap_or_default(),
        reason: text("reason").unwrap_or_default(),
        code: text("code").unwrap_or_default(),
        session_id: text("session_id"),
    }
}

/// The `keel.session` provider.
pub struct Api<H: ?Sized> {
    /// The live sessions and the store.
    pub mgr: Arc<SessionManager>,
    /// The kernel side.
    pub hooks: Arc<H>,
}

impl<H: Hooks + ?Sized> Api<H> {
    async fn create(&self, create: CreateSession) -> Result<CreatedSession> {
        let (mgr, hooks) = (&*self.mgr, &*self.hooks);
        let profile = create.profile.clone();
        let header = mgr.create(create).await?;
        hooks.created(&header);
        if let Some(profile) = profile {
            let id = header.id.as_str();
            let logged = mgr.append(
                id,
                vec![crate::core_events::session_profile(&profile)],
                |c| {
                    hooks.committed(id, c);
                },
            );
            if let Err(e) = logged {
                let _ = mgr.close(id).await;
                hooks.disposed(&header);
                return Err(e);
            }
        }
        Ok(CreatedSession {
            session_id: header.id.clone(),
            header,
        })
    }

    async fn open(&self, SessionRef { session_id }: SessionRef) -> Result<OpenedSession> {
        let o = self.mgr.open(&session_id).await?;
        self.hooks.created(&o.header);
        if !o.recovered.is_empty() {
            self.hooks.committed(&session_id, &o.recovered);
        }
        Ok(OpenedSession {
            session_id,
            next_seq: o.next_seq,
            recovered: o.recovered.iter().map(|e| (**e).clone()).collect(),
        })
    }

    fn append(&self, AppendEvents { session_id, events }: AppendEvents) -> Result<AppendedEvents> {
        let mut batch = events.into_iter().map(to_new).collect::<Result<Vec<_>>>()?;
        self.hooks.before_persist(&session_id, &mut batch)?;
        let seqs = self.mgr.append(&session_id, batch, |committed| {
            self.hooks.committed(&session_id, committed);
        })?;
        Ok(AppendedEvents { seqs })
    }

    async fn flush(&self, SessionRef { session_id }: SessionRef) -> Result<Flushed> {
        self.mgr.durable_seq(&session_id)?;
        self.hooks.flush(&session_id).await?;
        Ok(Flushed {
            durable_seq: self.mgr.durable_seq(&session_id)?,
        })
    }

    async fn close(&self, SessionRef { session_id }: SessionRef) -> Result<()> {
        let header = self.mgr.close(&session_id).await?;
        self.hooks.disposed(&header);
        Ok(())
    }

    async fn read(&self, session_id: String, commit: bool) -> Result<SessionLog> {
        let s = if commit {
            self.mgr.load(&session_id).await?
        } else {
            self.mgr.inspect(&session_id).await?
        };
        if s.committed && !s.recovered.is_empty() {
            let recs: Vec<Arc<EventRecord>> = s.recovered.iter().cloned().map(Arc::new).collect();
            self.hooks.committed(&session_id, &recs);
        }
        Ok(SessionLog {
            header: s.header,
            events: s.events,
            recovered: s.recovered,
            truncated: s.truncated,
            committed: (!commit).then_some(false),
        })
    }

    async fn fork(&self, f: ForkSession) -> Result<ForkedSession> {
        let child = self
            .mgr
            .fork(
                &f.session_id,
                fork_boundary(f.at),
                f.child_id,
                crate::fork::ChildLineage {
                    origin: f.origin,
                    delegation_depth: f.delegation_depth,
                    parent_call_id: f.parent_call_id,
                },
            )
            .await?;
        Ok(ForkedSession {
            session_id: child.id,
            seed_length: child.seed_length,
        })
    }

    async fn list(&self) -> Result<SessionListing> {
        let listing = self.mgr.list().await?;
        Ok(SessionListing {
            sessions: listing
                .sessions
                .into_iter()
                .map(listed)
                .collect::<Result<_>>()?,
            unreadable: listing.unreadable.into_iter().map(unreadable).collect(),
        })
    }

    async fn profile(&self, SessionRef { session_id }: SessionRef) -> Result<RecordedProfile> {
        let profile = match self.mgr.recorded_profile(&session_id).await? {
            Some(data) => Some(serde_json::from_value(data).map_err(|e| {
                SessionError::invalid(format!(
                    "session '{session_id}' records a profile that is not {{name, digest}}: {e}"
                ))
            })?),
            None => None,
        };
        Ok(RecordedProfile { profile })
    }
}

impl<H: Hooks + ?Sized> SessionsProvider for Api<H> {
    async fn create(&self, request: CreateSession) -> SdkResult<CreatedSession> {
        Ok(Api::create(self, request).await?)
    }
    async fn open(&self, request: SessionRef) -> SdkResult<OpenedSession> {
        Ok(Api::open(self, request).await?)
    }
    async fn append(&self, request: AppendEvents) -> SdkResult<AppendedEvents> {
        Ok(Api::append(self, request)?)
    }
    async fn flush(&self, request: SessionRef) -> SdkResult<Flushed> {
        Ok(Api::flush(self, request).await?)
    }
    async fn close(&self, request: SessionRef) -> SdkResult<()> {
        Ok(Api::close(self, request).await?)
    }
    async fn load(&self, request: SessionRef) -> SdkResult<SessionLog> {
        Ok(self.read(request.session_id, true).await?)
    }
    async fn inspect(&self, request: SessionRef) -> SdkResult<SessionLog> {
        Ok(self.read(request.session_id, false).await?)
    }
    async fn fork(&self, request: ForkSession) -> SdkResult<ForkedSession> {
        Ok(Api::fork(self, request).await?)
    }
    async fn list(&self) -> SdkResult<SessionListing> {
        Ok(Api::list(self).await?)
    }
    async fn messages(&self, request: SessionRef) -> SdkResult<SessionMessages> {
        Ok(SessionMessages {
            messages: self.mgr.messages(&request.session_id).await?,
        })
    }
    async fn profile(&self, request: SessionRef) -> SdkResult<RecordedProfile> {
        Ok(Api::profile(self, request).await?)
    }
    async fn surface(&self, request: SessionRef) -> SdkResult<SurfaceView> {
        let (nodes, next_seq) = self.mgr.surface(&request.session_id).await?;
        Ok(SurfaceView { nodes, next_seq })
    }
    async fn read(&self, request: ReadEvents) -> SdkResult<ReadAnswer> {
        Ok(ReadAnswer {
            events: self
                .mgr
                .read_events(&request.session_id, &request.seqs)
                .await?,
        })
    }
}

/// Test access: one `keel.session` call with JSON arguments, through the real contract
/// dispatch (request decoding, answer encoding) of an [`Api`] over `mgr` and `hooks`.
///
/// # Errors
/// The call's error, as a [`SessionError`].
#[cfg(test)]
pub async fn call<H: Hooks>(
    mgr: &Arc<SessionManager>,
    hooks: &Arc<H>,
    method: &str,
    args: Value,
) -> Result<Value> {
    use keel_plugin_api::sdk::{ContractClient, ContractHandle};
    use keel_plugin_api::services::session::Sessions;
    let api = Api {
        mgr: Arc::clone(mgr),
        hooks: Arc::clone(hooks),
    };
    let handle = ContractHandle::serve::<Sessions, _>("session", api);
    ContractClient::<Sessions>::new(handle, "test")
        .__call::<Value, Value>(method, 1, &args)
        .await
        .map_err(|e| SessionError::from_code(&e.code, e.message))
}
