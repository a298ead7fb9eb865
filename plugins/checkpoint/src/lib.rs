//! `checkpoint`: the session checkpoint policy of requirements B6 / SES-05, as three waterfall
//! wrappers. Before a model request (`llm/stream`), before a tool body (`tools/execute`) and at
//! step admission (`agent/pre-step`) the session is flushed through `keel.session` `flush`
//! (which runs the `session/flush` barrier), and only then does the chain go on — except at the
//! pre-step of a session's very first step, which has no previous step's results to persist
//! (the `llm/stream` checkpoint right after it makes the turn's opening durable; issue 25).
//!
//! Fail closed: when the flush fails, `next` is never called, so the adapter is not dispatched
//! and the tool body does not run; the failure ends the turn with an error. A cancelled turn
//! whose tool has not started yet gets `ABORTED_BEFORE_DISPATCH`, not a body run. Being its own
//! plugin keeps the loop free of durability policy, and a profile can drop it (an ephemeral
//! benchmark) by disabling one row.

use keel_plugin_api::events::Typed;
use keel_plugin_api::events::agent::PreStep;
use keel_plugin_api::events::llm::Stream;
use keel_plugin_api::events::tools::Execute;
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::session::{SessionCode, SessionRef, Sessions, SessionsClient};
use keel_plugin_api::services::tools::ToolResult;

/// Runs before every other listener of the three events, so the flush precedes any work
/// another wrapper does downstream.
const ORDER: i32 = -1000;

async fn flush(sessions: &SessionsClient, session_id: &str) -> Result<()> {
    sessions
        .flush(SessionRef::new(session_id))
        .await
        .map(|_| ())
        .map_err(|e| {
            Error::coded(
                SessionCode::CheckpointFailed,
                format!(
                    "session '{session_id}' could not be made durable, so nothing was dispatched: [{}] {}",
                    e.code, e.message
                ),
            )
        })
}

/// Whether a step comes before `(turn, step)` in its session, so the pre-step checkpoint has
/// results to persist. Turns are numbered from the log (a resumed or forked session goes on
/// from its stored `turn/start`s), so turn 0, step 0 is the session's first step: what is
/// pending then is only this turn's opening (its `turn/start`), not the result of anything,
/// and the `llm/stream` checkpoint makes it durable before the first model request anyway
/// (SES-05). Skipping that one flush takes the session file's creation — a temp file, a link
/// and two fsyncs — off the way to the first request once: it is written with the step's
/// opening by the `llm/stream` checkpoint, one store call instead of two (issue 25 item 3).
pub fn has_previous_step(turn: u64, step: u64) -> bool {
    turn > 0 || step > 0
}

/// The plugin value.
#[derive(Default)]
struct Checkpoint;

impl Plugin for Checkpoint {
    type Dispatches = ();

    fn manifest(&self) -> Manifest {
        Manifest::new("checkpoint", env!("CARGO_PKG_VERSION"))
            .description("flush the session before each model request, tool body and step (B6)")
            .requires::<Sessions>()
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let sessions = ctx.client::<Sessions>()?;
        let s = sessions.clone();
        ctx.async_waterfall::<Stream, _, _>(ListenerOptions::order(ORDER), move |call, next| {
            let s = s.clone();
            async move {
                // A call outside a live session is not checkpointed (B6).
                if !call.session_id.is_empty() {
                    flush(&s, call.session_id.as_str()).await?;
                }
                next.run(call).await
            }
        })?;
        let s = sessions.clone();
        ctx.async_waterfall::<Execute, _, _>(ListenerOptions::order(ORDER), move |exec, next| {
            let s = s.clone();
            async move {
                // `tool/call` is durable before the side effect. A failed checkpoint is an
                // error result the model reads; the body never runs.
                if let Err(e) = flush(&s, exec.session_id.as_str()).await {
                    return Typed::new(&ToolResult::from_error(&e));
                }
                next.run(exec).await
            }
        })?;
        let s = sessions;
        ctx.async_waterfall::<PreStep, _, _>(ListenerOptions::order(ORDER), move |point, next| {
            let s = s.clone();
            async move {
                // Persists the previous step's results before the next one is admitted. The
                // session's very first step has none (see [`has_previous_step`]).
                if has_previous_step(point.turn, point.step) {
                    flush(&s, point.session_id.as_str()).await?;
                }
                next.run(point).await
            }
        })?;
        Ok(())
    }
}

keel_plugin_api::export_plugin!(Checkpoint);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_sessions_first_step_has_no_previous_step() {
        assert!(!has_previous_step(0, 0));
        assert!(has_previous_step(0, 1));
        assert!(has_previous_step(1, 0));
        assert!(has_previous_step(3, 2));
    }
}
