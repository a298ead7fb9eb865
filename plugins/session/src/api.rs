//! The `keel.session` JSON methods (`SessionMethod`) over a [`SessionManager`], with the
//! kernel-facing side effects behind [`Hooks`] so the whole surface is testable without the SDK.
//!
//! Shapes (requests → answers):
//! - `create {cwd, id?, origin?, delegation_depth?, ephemeral?, profile?}` → `{session_id,
//!   header}` — `profile` (`{name, digest}`) is logged at once as the first event,
//!   `session/profile`
//! - `open {session_id}` → `{session_id, next_seq, recovered: [EventRecord]}`
//! - `append {session_id, events: [{type, data | data_json, ignorable?, surface_op?,
//!   source_event_seqs?}]}` → `{seqs}` — `data_json` is raw JSON text checked for duplicate
//!   keys; `data` arrives already parsed by the transport, which keeps the last of two equal
//!   keys, so callers holding untrusted text should send `data_json`
//! - `flush {session_id}` → `{durable_seq}` (`null`: nothing stored yet); dispatches
//!   `session/flush` so every durability listener runs
//! - `close {session_id}` → `{}`
//! - `load {session_id}` → `{header, events, recovered, truncated}` (closers committed,
//!   included in `events`; `truncated`: the torn tail this load cut, or `null`)
//! - `inspect {session_id}` → `{header, events, recovered, committed: false, truncated}`
//!   (closers not in `events`; `truncated`: the torn tail a repair would cut)
//! - `fork {session_id, at?: seq | "last-turn-end", child_id?}` → `{session_id, seed_length}`
//! - `list {}` → `{sessions: [...], unreadable: [{path, reason, code, session_id}]}`
//! - `messages {session_id}` → `{messages: [...]}`
//! - `profile {session_id}` → `{profile: {name, digest} | null}` — the first `session/profile`
//!   event (the profile the session was created under); reads without repairing

use std::sync::Arc;

use keel_plugin_api::services::session::{EventRecord, SessionHeader, SurfaceOp};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::{Result, SessionError};
use crate::fork::Boundary;
use crate::sessions::{CreateArgs, SessionManager};
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IdArgs {
    session_id: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EventInput {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    data: Option<Value>,
    #[serde(default)]
    data_json: Option<String>,
    #[serde(default)]
    ignorable: bool,
    #[serde(default)]
    surface_op: Option<SurfaceOp>,
    #[serde(default)]
    source_event_seqs: Option<Vec<u64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AppendArgs {
    session_id: String,
    events: Vec<EventInput>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ForkArgs {
    session_id: String,
    #[serde(default)]
    at: Option<Value>,
    #[serde(default)]
    child_id: Option<String>,
}

fn args<T: serde::de::DeserializeOwned>(method: &str, v: Value) -> Result<T> {
    serde_json::from_value(v)
        .map_err(|e| SessionError::invalid(format!("bad arguments to '{method}': {e}")))
}

fn to_new(e: EventInput) -> Result<NewEvent> {
    let data = match (e.data, e.data_json) {
        (Some(d), None) => d,
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

/// Parses a fork boundary: absent/null → last, a seq, or `"last-turn-end"`.
///
/// # Errors
/// `SESSION_INVALID` for anything else.
pub fn boundary(at: Option<&Value>) -> Result<Boundary> {
    match at {
        None | Some(Value::Null) => Ok(Boundary::Last),
        Some(Value::String(s)) if s == "last-turn-end" => Ok(Boundary::LastTurnEnd),
        Some(v) => v.as_u64().map(Boundary::At).ok_or_else(|| {
            SessionError::invalid(format!(
                "fork boundary must be a seq or \"last-turn-end\", got {v}"
            ))
        }),
    }
}

fn to_json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// Runs one `keel.session` method.
///
/// # Errors
/// `SESSION_INVALID` for bad arguments or an unknown method, else the manager's errors.
pub async fn call(
    mgr: &SessionManager,
    hooks: &dyn Hooks,
    method: &str,
    a: Value,
) -> Result<Value> {
    match method {
        "create" => {
            let create = args::<CreateArgs>(method, a)?;
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
            Ok(json!({ "session_id": header.id, "header": to_json(&header) }))
        }
        "open" => {
            let IdArgs { session_id } = args(method, a)?;
            let o = mgr.open(&session_id).await?;
            hooks.created(&o.header);
            if !o.recovered.is_empty() {
                hooks.committed(&session_id, &o.recovered);
            }
            let recovered: Vec<&EventRecord> = o.recovered.iter().map(|e| &**e).collect();
            Ok(
                json!({ "session_id": session_id, "next_seq": o.next_seq, "recovered": to_json(&recovered) }),
            )
        }
        "append" => {
            let AppendArgs { session_id, events } = args(method, a)?;
            let mut batch = events.into_iter().map(to_new).collect::<Result<Vec<_>>>()?;
            hooks.before_persist(&session_id, &mut batch)?;
            let seqs = mgr.append(&session_id, batch, |committed| {
                hooks.committed(&session_id, committed);
            })?;
            Ok(json!({ "seqs": seqs }))
        }
        "flush" => {
            let IdArgs { session_id } = args(method, a)?;
            mgr.durable_seq(&session_id)?;
            hooks.flush(&session_id).await?;
            Ok(json!({ "durable_seq": mgr.durable_seq(&session_id)? }))
        }
        "close" => {
            let IdArgs { session_id } = args(method, a)?;
            let header = mgr.close(&session_id).await?;
            hooks.disposed(&header);
            Ok(json!({}))
        }
        "load" | "inspect" => {
            let IdArgs { session_id } = args(method, a)?;
            let s = if method == "load" {
                mgr.load(&session_id).await?
            } else {
                mgr.inspect(&session_id).await?
            };
            if s.committed && !s.recovered.is_empty() {
                let recs: Vec<Arc<EventRecord>> =
                    s.recovered.iter().cloned().map(Arc::new).collect();
                hooks.committed(&session_id, &recs);
            }
            let mut out = json!({
                "header": to_json(&s.header),
                "events": to_json(&s.events),
                "recovered": to_json(&s.recovered),
            });
            out["truncated"] = s.truncated.unwrap_or(Value::Null);
            if method == "inspect" {
                out["committed"] = Value::Bool(false);
            }
            Ok(out)
        }
        "fork" => {
            let ForkArgs {
                session_id,
                at,
                child_id,
            } = args(method, a)?;
            let child = mgr
                .fork(&session_id, boundary(at.as_ref())?, child_id)
                .await?;
            Ok(json!({ "session_id": child.id, "seed_length": child.seed_length }))
        }
        "list" => {
            let listed = mgr.list().await?;
            Ok(json!({ "sessions": listed.sessions, "unreadable": listed.unreadable }))
        }
        "messages" => {
            let IdArgs { session_id } = args(method, a)?;
            Ok(json!({ "messages": mgr.messages(&session_id).await? }))
        }
        "profile" => {
            let IdArgs { session_id } = args(method, a)?;
            Ok(json!({ "profile": mgr.recorded_profile(&session_id).await? }))
        }
        other => Err(SessionError::invalid(format!(
            "keel.session has no method '{other}'"
        ))),
    }
}
