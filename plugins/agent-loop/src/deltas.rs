//! The loop's forwarding of model pieces (issue 26 item 1): each model request of a step gets a
//! fresh `stream_id` routed to its session, turn, step and attempt ([`Streams::open`]); the
//! `llm/delta` listener ([`listen`]) dispatches each piece of a routed stream as `agent/delta`
//! with that position, and drops the pieces of any other stream (a call that is not the loop's,
//! or one whose step already ended). Nothing here touches the log: the step's
//! `assistant/message` stays the one durable record of the answer.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use keel_plugin_api::events::agent::DeltaData;
use keel_plugin_api::events::llm::{Delta, LlmDelta};
use keel_plugin_api::prelude::*;

use crate::seams::Seams;

/// Where a stream's pieces belong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The session.
    pub session_id: String,
    /// Its open turn.
    pub turn: u64,
    /// The step whose request this is.
    pub step: u64,
    /// The request attempt (retries so far in the turn).
    pub attempt: u32,
}

/// The model requests in flight, by `stream_id`.
#[derive(Debug, Default)]
pub struct Streams {
    next: AtomicU64,
    open: Mutex<HashMap<u64, Route>>,
}

/// A routed stream; its pieces are dropped once this is.
#[derive(Debug)]
pub struct Open {
    streams: Arc<Streams>,
    /// The request's `stream_id`.
    pub id: u64,
}

impl Drop for Open {
    fn drop(&mut self) {
        self.streams.lock().remove(&self.id);
    }
}

impl Streams {
    /// Routes a new stream id to `route` until the answer is back.
    pub fn open(self: &Arc<Self>, route: Route) -> Open {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        self.lock().insert(id, route);
        Open {
            streams: Arc::clone(self),
            id,
        }
    }

    /// Where stream `id` goes, while it is open.
    pub fn route(&self, id: u64) -> Option<Route> {
        self.lock().get(&id).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Route>> {
        self.open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Listens to `llm/delta` and forwards the pieces of the loop's own open streams as
/// `agent/delta`.
///
/// # Errors
/// The kernel's refusal to register the listener.
pub fn listen(ctx: Context, streams: Arc<Streams>) -> Result<()> {
    ctx.on::<Delta>(ListenerOptions::default(), move |d: &LlmDelta| {
        let Some(route) = streams.route(d.stream_id) else {
            return Ok(());
        };
        let data = DeltaData {
            attempt: route.attempt,
            index: d.index,
            kind: d.kind,
            text: d.text.to_string(),
        };
        let point = Seams::point(&route.session_id, route.turn, route.step, &data)?;
        ctx.emit(crate::DISPATCH.delta, &point)
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(step: u64) -> Route {
        Route {
            session_id: "s".into(),
            turn: 0,
            step,
            attempt: 0,
        }
    }

    #[test]
    fn a_stream_is_routed_while_open_and_ids_are_fresh() {
        let streams = Arc::new(Streams::default());
        let a = streams.open(route(0));
        let b = streams.open(route(1));
        assert_ne!(a.id, b.id);
        assert_eq!(streams.route(a.id), Some(route(0)));
        let gone = a.id;
        drop(a);
        assert_eq!(
            streams.route(gone),
            None,
            "a closed stream's pieces are dropped"
        );
        assert_eq!(streams.route(b.id).map(|r| r.step), Some(1));
        assert_eq!(streams.route(0), None, "0 is never an id");
    }
}
