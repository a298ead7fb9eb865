//! `keel.context` `fit`: measure the request, plan a compaction when it passes the threshold,
//! let `context/compact` change or veto the plan, append it as replacements, and refuse what
//! still does not fit (issue 14 items 1, 2, 4 and 5; CTX-01…03).
//!
//! Order of a fit: the session's visible history (`surface`) → the cold index made whole for
//! this process (rebuilt from the log once, after a resume or fork) → the estimate → the plan
//! (caps for oversized results always; sink or summarise runs past the threshold, or on a
//! server's refusal) → the waterfall → one append of every replacement (each replacement is one
//! event, so a crash leaves the old or the new projection of it, never half) → the estimate of
//! what is sent → `CONTEXT_OVERFLOW` when it is over the window.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use keel_plugin_api::events::Typed;
use keel_plugin_api::events::context::ContextPoint;
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::context::{
    CompactAction, CompactPlan, CompactionReport, ContextCode, FitRequest, FitTrigger, Fitted,
    TokenEstimate,
};
use keel_plugin_api::services::llm::{LlmCallConfig, LlmClient, ModelLimits};
use keel_plugin_api::services::session::{
    AppendEvents, EventRecord, ReadEvents, SessionRef, SessionsClient, SurfaceNode,
};

use crate::actions::check_plan;
use crate::cold::{ColdIndex, ColdItem};
use crate::config::ContextConfig;
use crate::estimate::{MESSAGE_OVERHEAD_BYTES, Meter, bytes_at};
use crate::stub::{self, Sunk};

/// One session's state in this process.
#[derive(Debug, Default)]
pub struct SessionState {
    /// Its token meter.
    pub meter: Meter,
    /// Its cold index, once something sank (created on the first item).
    pub cold: Option<ColdIndex>,
    /// The index holds everything the log sank (rebuilt once per process).
    pub indexed: bool,
}

impl SessionState {
    /// Indexes `items`, creating the index on the first.
    ///
    /// # Errors
    /// SQLite errors.
    fn index(&mut self, items: &[ColdItem]) -> Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        if self.cold.is_none() {
            self.cold = Some(ColdIndex::new().map_err(index_error)?);
        }
        match self.cold.as_mut() {
            Some(cold) => cold.add(items).map_err(index_error),
            None => Ok(()),
        }
    }
}

/// The manager behind `keel.context` and the `coldcontext_*` tools.
pub struct Manager {
    /// This row's context (for the waterfall).
    pub ctx: Context,
    /// Row config.
    pub config: ContextConfig,
    /// The summary prompt's text, when summarise is configured.
    pub summary_prompt: Option<String>,
    /// `keel.session`.
    pub sessions: SessionsClient,
    /// `keel.llm`.
    pub llm: LlmClient,
    states: Mutex<HashMap<String, SessionState>>,
}

/// A request's measure.
pub(crate) struct Measure {
    pub(crate) bytes: u64,
    pub(crate) tokens: u64,
}

fn overflow(message: String) -> Error {
    Error::coded(ContextCode::Overflow, message)
}

impl Manager {
    /// A manager over the given services.
    pub fn new(
        ctx: Context,
        config: ContextConfig,
        summary_prompt: Option<String>,
        sessions: SessionsClient,
        llm: LlmClient,
    ) -> Self {
        Manager {
            ctx,
            config,
            summary_prompt,
            sessions,
            llm,
            states: Mutex::new(HashMap::new()),
        }
    }

    /// The session states (poison-tolerant: the state stays usable after a panicking holder).
    pub fn states(&self) -> MutexGuard<'_, HashMap<String, SessionState>> {
        self.states
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The row's limits; an adapter that cannot say is an unknown window.
    async fn limits(&self, request: &FitRequest) -> ModelLimits {
        match self.llm.limits(request.config.clone()).await {
            Ok(l) => l,
            Err(e) => {
                tracing::debug!(error = %e, "model limits unknown");
                ModelLimits::default()
            }
        }
    }

    fn measure(&self, sid: &str, fixed: u64, nodes: &[SurfaceNode], bpt: f64) -> Measure {
        let bytes = fixed
            + nodes
                .iter()
                .map(|n| n.message.len() as u64 + MESSAGE_OVERHEAD_BYTES)
                .sum::<u64>();
        let tokens = self
            .states()
            .entry(sid.to_owned())
            .or_default()
            .meter
            .tokens(bytes, bpt);
        Measure { bytes, tokens }
    }

    /// `fit`.
    ///
    /// # Errors
    /// `CONTEXT_OVERFLOW`; session and waterfall errors.
    pub async fn fit(&self, request: FitRequest) -> Result<Fitted> {
        let sid = request.session_id.clone();
        let limits = self.limits(&request).await;
        let fallback = limits
            .bytes_per_token
            .unwrap_or(self.config.bytes_per_token);
        let fixed = request.fixed_bytes;
        // A server that states its window is the truth: a row that knows none learns it, a
        // row that says more is overruled.
        let window = match (limits.context_window, stated_window(&request.trigger)) {
            (Some(row), Some(said)) => Some(row.min(said)),
            (row, said) => row.or(said),
        };
        let usable = window.map(|w| w.saturating_sub(limits.output_reserve));
        if let (FitTrigger::ServerOverflow { .. }, Some(w)) = (&request.trigger, window) {
            self.states()
                .entry(sid.clone())
                .or_default()
                .meter
                .refused(w, fallback);
        }
        let mut view = self.sessions.surface(SessionRef::new(&sid)).await?.nodes;
        self.ensure_index(&sid, &view).await?;
        let before = self.measure(&sid, fixed, &view, fallback);
        let bpt = self
            .states()
            .get(&sid)
            .map_or(fallback, |s| s.meter.bytes_per_token(fallback));
        let estimate = |m: &Measure, method: String| TokenEstimate {
            tokens: m.tokens,
            bytes: m.bytes,
            window,
            output_reserve: limits.output_reserve,
            threshold: usable.map(|u| threshold_of(u, self.config.threshold)),
            method,
        };
        let method = || {
            self.states()
                .get(&sid)
                .map_or_else(String::new, |s| s.meter.method(fallback))
        };
        let server = matches!(request.trigger, FitTrigger::ServerOverflow { .. });
        let over = usable.is_some_and(|u| before.tokens > threshold_of(u, self.config.threshold));
        let target = usable.map(|u| threshold_of(u, self.config.target));
        let actions = self.plan(
            &view,
            &before,
            (over || server).then_some(target).flatten(),
            bpt,
        );
        let mut report = None;
        if !actions.is_empty() {
            let plan = CompactPlan {
                session_id: sid.clone(),
                trigger: request.trigger.clone(),
                estimate: estimate(&before, method()),
                target_tokens: target.unwrap_or(before.tokens),
                actions,
                veto: None,
            };
            let budget = target.map_or(64 * 1024, |t| bytes_at(t, bpt) / 2);
            let budget = usize::try_from(budget).unwrap_or(usize::MAX);
            if let Some(r) = self.compact(plan, &view, &request.config, budget).await? {
                view = self.sessions.surface(SessionRef::new(&sid)).await?.nodes;
                report = Some(r);
            }
        }
        let after = self.measure(&sid, fixed, &view, fallback);
        if let Some(r) = report.as_mut() {
            r.tokens_after = after.tokens;
            let point = ContextPoint {
                session_id: sid.as_str().into(),
                data: Typed::new(&*r)?,
            };
            if let Err(e) = self.ctx.emit(crate::DISPATCH.compacted, &point) {
                tracing::warn!(error = %e, "context/compacted could not be emitted");
            }
        }
        // Refused only when it cannot fit: before the provider counted anything, at the
        // most bytes per token a tokenizer was measured at (issue 23 item 19).
        let fewest = self
            .states()
            .get(&sid)
            .map_or_else(Meter::default, |s| s.meter.clone())
            .fewest_tokens(after.bytes, fallback);
        if let (Some(u), Some(w)) = (usable, window)
            && fewest > u
        {
            return Err(overflow(format!(
                "the request needs about {} tokens ({} bytes, {}) but the model's window is {w} tokens with {} kept for the answer, and nothing more can be compacted (user messages, the system prompt and the newest step are never cut){}",
                after.tokens,
                after.bytes,
                method(),
                limits.output_reserve,
                server_words(&request.trigger)
            )));
        }
        if server && report.is_none() {
            return Err(overflow(format!(
                "the model's server refused the request as over its context window and nothing is left to compact{}",
                server_words(&request.trigger)
            )));
        }
        let estimate = estimate(&after, method());
        self.states()
            .entry(sid)
            .or_default()
            .meter
            .sent(after.bytes);
        Ok(Fitted {
            messages: view.into_iter().map(|n| n.message).collect(),
            estimate,
            compaction: report,
        })
    }

    /// `calibrate`.
    pub fn calibrate(&self, session_id: &str, input_tokens: u64) {
        self.states()
            .entry(session_id.to_owned())
            .or_default()
            .meter
            .calibrate(input_tokens);
    }

    /// Runs the waterfall and appends what the plan says; `None` when nothing was appended.
    async fn compact(
        &self,
        plan: CompactPlan,
        view: &[SurfaceNode],
        base: &LlmCallConfig,
        budget: usize,
    ) -> Result<Option<CompactionReport>> {
        let sid = plan.session_id.clone();
        let mut point = ContextPoint {
            session_id: sid.as_str().into(),
            data: Typed::new(&plan)?,
        };
        self.ctx
            .run_waterfall(crate::DISPATCH.compact, &mut point, |_| Ok(()))?;
        let plan = point.data.into_inner()?;
        if let Some(why) = &plan.veto {
            tracing::warn!(session = %sid, reason = %why, "context/compact vetoed the plan");
            return Ok(None);
        }
        check_plan(&plan.actions, view)?;
        let mut events = Vec::new();
        let mut items: Vec<ColdItem> = Vec::new();
        let mut applied = Vec::new();
        for action in &plan.actions {
            match action {
                CompactAction::Cap { seq } => {
                    let original = self.read(&sid, &[*seq]).await?;
                    if let Some(ev) = original.first()
                        && let Some(capped) = stub::cap_event(ev, self.config.result_cap_bytes)?
                    {
                        items.push(stub::item_of(ev, &[]));
                        events.push(capped);
                        applied.push(action.clone());
                    }
                }
                CompactAction::Sink { seqs } | CompactAction::Summarise { seqs } => {
                    let sunk = self.sunk(&sid, seqs).await?;
                    let summary = match action {
                        CompactAction::Summarise { .. } => {
                            self.summarise(base, &sid, seqs, view, &sunk, budget).await
                        }
                        _ => None,
                    };
                    let (event, done) = match summary {
                        Some(text) => (stub::summary_event(seqs, &sunk, &text)?, action.clone()),
                        None => (
                            stub::sink_event(seqs, &sunk)?,
                            CompactAction::Sink { seqs: seqs.clone() },
                        ),
                    };
                    // A stub no smaller than what it replaces frees nothing: leave the run.
                    let run_bytes: usize = view
                        .iter()
                        .filter(|n| seqs.contains(&n.seq))
                        .map(|n| n.message.len())
                        .sum();
                    if event.data.as_ref().is_some_and(|d| d.len() >= run_bytes) {
                        continue;
                    }
                    items.extend(sunk.items);
                    events.push(event);
                    applied.push(done);
                }
            }
        }
        if events.is_empty() {
            return Ok(None);
        }
        let appended = self
            .sessions
            .append(AppendEvents {
                session_id: sid.clone(),
                events,
            })
            .await?
            .seqs;
        self.states().entry(sid).or_default().index(&items)?;
        Ok(Some(CompactionReport {
            trigger: plan.trigger,
            actions: applied,
            appended,
            tokens_before: plan.estimate.tokens,
            tokens_after: 0,
        }))
    }

    /// Events by seq.
    pub async fn read(&self, sid: &str, seqs: &[u64]) -> Result<Vec<EventRecord>> {
        Ok(self
            .sessions
            .read(ReadEvents {
                session_id: sid.to_owned(),
                seqs: seqs.to_vec(),
            })
            .await?
            .events)
    }

    /// What sinks with the run `seqs`.
    async fn sunk(&self, sid: &str, seqs: &[u64]) -> Result<Sunk> {
        let events = self.read(sid, seqs).await?;
        let capped: Vec<u64> = events
            .iter()
            .filter_map(|e| stub::context_of(e))
            .filter(|c| c.get("strategy").and_then(serde_json::Value::as_str) == Some("cap"))
            .filter_map(|c| c.get("ref").and_then(serde_json::Value::as_u64))
            .collect();
        let originals = self.read(sid, &capped).await?;
        Ok(stub::sunk_from(&events, &originals))
    }

    /// Makes the session's cold index whole for this process (the tools call it first).
    ///
    /// # Errors
    /// Session and index errors.
    pub async fn ready(&self, sid: &str) -> Result<()> {
        if self.states().get(sid).is_some_and(|s| s.indexed) {
            return Ok(());
        }
        let view = self.sessions.surface(SessionRef::new(sid)).await?.nodes;
        self.ensure_index(sid, &view).await
    }

    /// Builds the session's cold index from the log unless this process has it: every original
    /// under a compaction's replacement, followed down through replacements of replacements.
    async fn ensure_index(&self, sid: &str, view: &[SurfaceNode]) -> Result<()> {
        if self.states().get(sid).is_some_and(|s| s.indexed) {
            return Ok(());
        }
        let mut found = Vec::new();
        let mut frontier: Vec<u64> = view
            .iter()
            .filter(|n| n.replacement)
            .map(|n| n.seq)
            .collect();
        while !frontier.is_empty() {
            let events = self.read(sid, &frontier).await?;
            frontier.clear();
            let mut originals = Vec::new();
            for ev in &events {
                if stub::context_of(ev).is_some() {
                    frontier.extend(ev.source_event_seqs.iter().flatten());
                } else if ev.surface_op.is_some() && ev.kind != "user/message" {
                    originals.push(ev.clone());
                }
            }
            found.extend(stub::sunk_from(&originals, &[]).items);
        }
        let mut states = self.states();
        let state = states.entry(sid.to_owned()).or_default();
        state.index(&found)?;
        state.indexed = true;
        Ok(())
    }
}

fn threshold_of(usable: u64, share: f64) -> u64 {
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "token counts are far below 2^52 and the share is in (0, 1]"
    )]
    let t = (usable as f64 * share) as u64;
    t
}

/// The window a refusal states, in OpenAI's and llama.cpp's words ("maximum context length is
/// 8192 tokens").
fn stated_window(trigger: &FitTrigger) -> Option<u64> {
    let FitTrigger::ServerOverflow { message } = trigger else {
        return None;
    };
    let rest = &message[message.find("maximum context length is ")? + 26..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok().filter(|w| *w > 0)
}

fn server_words(trigger: &FitTrigger) -> String {
    match trigger {
        FitTrigger::ServerOverflow { message } => format!("; the server said: {message}"),
        FitTrigger::Request => String::new(),
    }
}

fn index_error(e: crate::cold::IndexError) -> Error {
    Error::coded(ContextCode::Index, e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_that_states_its_window_gives_it() {
        let said = |m: &str| {
            stated_window(&FitTrigger::ServerOverflow {
                message: m.to_owned(),
            })
        };
        assert_eq!(
            said("This model's maximum context length is 8192 tokens. However, …"),
            Some(8192)
        );
        assert_eq!(said("prompt too long"), None);
        assert_eq!(stated_window(&FitTrigger::Request), None);
    }
}
