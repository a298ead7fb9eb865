//! Claude Code's events on keel's seams (issue 15 item 3):
//!
//! | hook | keel event | what an answer does |
//! |---|---|---|
//! | PreToolUse | `tools/rewrite`, then `tools/pre-execute` | `updatedInput` rewrites the call (logged `tool/rewrite`); a block/deny is kept per call and denies it in pre-execute, an ask asks; allow never loosens keel's policy (TOOL-02) |
//! | PostToolUse | `tools/post-execute` | a block becomes `TOOL_BLOCKED` with the reason; context is appended to the result |
//! | UserPromptSubmit | `agent/pre-step` | a block rejects the step (reason on stderr); context enters as a user message |
//! | Stop | `agent/turn-stopping` | a block steers the turn on with the reason, up to `max_stop_continuations` |
//! | SessionStart | `session/created`, run at the session's first step | context enters as a user message |
//! | PreCompact | `context/compact` (sync: a bounded blocking wait) | side effects only |
//!
//! Every listener returns at once when its event has no hooks. The PreToolUse verdict waits
//! between the two tool stages in [`Verdicts`], keyed by session, turn, step and call id.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use keel_plugin_api::events::Json;
use keel_plugin_api::events::Typed;
use keel_plugin_api::events::agent::{
    AgentPoint, PreStep, PreStepData, PreStepDecision, Steer, StepMessage, TurnStopping,
    TurnStoppingData,
};
use keel_plugin_api::events::context::{Compact, ContextPoint};
use keel_plugin_api::events::session::{SessionCreated, SessionDisposed};
use keel_plugin_api::events::tools::{
    PostExecute, PreExecute, Rewrite, ToolExecution, ToolOutcome,
};
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::context::CompactPlan;
use keel_plugin_api::services::tools::{
    ListRequest, PostDecision, PreDecision, RewriteDecision, Tools,
};
use serde_json::{Map, Value, json};

use crate::alias;
use crate::config::Event;
use crate::engine::{At, Engine, header_cwd};
use crate::formatted;
use crate::protocol::Answer;
use crate::response;

/// Per-session state the listeners share.
#[derive(Default)]
struct Memory {
    /// PreToolUse verdicts waiting for their call's pre-execute: key → decision.
    verdicts: HashMap<String, PreDecision>,
    /// Sessions whose SessionStart has not run yet.
    fresh: HashSet<String>,
    /// session → (turn, continuations) of Stop hooks.
    stops: HashMap<String, (u64, u32)>,
    /// session → steering texts Stop hooks queued (not prompts: UserPromptSubmit skips them).
    steers: HashMap<String, Vec<String>>,
    /// The tool matchers were checked against the offered tools.
    checked: bool,
}

type Shared = Arc<(Engine, Mutex<Memory>)>;

fn memory(s: &Shared) -> std::sync::MutexGuard<'_, Memory> {
    s.1.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Where a tool call's hooks fire.
fn at(exec: &ToolExecution) -> At<'_> {
    At {
        session_id: exec.session_id.as_str(),
        cwd: exec.cwd.as_str(),
        turn: Some(exec.turn),
        call_id: Some(exec.call_id.as_str()),
    }
}

fn key(exec: &ToolExecution) -> String {
    format!(
        "{}\u{0}{}\u{0}{}\u{0}{}",
        exec.session_id, exec.turn, exec.step, exec.call_id
    )
}

fn fields(pairs: Value) -> Map<String, Value> {
    match pairs {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// Registers every listener whose event has hooks.
///
/// # Errors
/// A registration the kernel refused.
pub fn register(ctx: &Context, engine: Engine) -> Result<()> {
    // A listener's deadline covers its slowest hook (hooks of one event run in parallel).
    let deadline = u64::try_from(engine.set.longest().as_millis())
        .unwrap_or(u64::MAX)
        .saturating_add(engine.config.grace_ms + 10_000);
    let opts = ListenerOptions::default().deadline_ms(deadline);
    let s: Shared = Arc::new((engine, Mutex::default()));
    let set = &s.0.set;

    let st = Arc::clone(&s);
    ctx.effect("remove the hook transcripts", move || async move {
        st.0.transcripts.remove_all();
        Ok(())
    })?;

    let st = Arc::clone(&s);
    ctx.on::<SessionCreated>(ListenerOptions::default(), move |l| {
        st.0.session_cwd(l.session_id.as_str(), header_cwd(l.header.as_str()));
        memory(&st).fresh.insert(l.session_id.to_string());
        Ok(())
    })?;
    let st = Arc::clone(&s);
    ctx.on::<SessionDisposed>(ListenerOptions::default(), move |l| {
        let id = l.session_id.as_str();
        st.0.session_cwd(id, None);
        let mut m = memory(&st);
        m.fresh.remove(id);
        m.stops.remove(id);
        m.steers.remove(id);
        m.verdicts
            .retain(|k, _| !k.starts_with(&format!("{id}\u{0}")));
        Ok(())
    })?;

    if set.has(Event::PreToolUse) {
        let st = Arc::clone(&s);
        ctx.async_waterfall::<Rewrite, _, _>(opts, move |exec, next| {
            let st = Arc::clone(&st);
            async move { pre_tool_use(&st, exec, next).await }
        })?;
        let st = Arc::clone(&s);
        ctx.async_waterfall::<PreExecute, _, _>(ListenerOptions::default(), move |exec, next| {
            let st = Arc::clone(&st);
            async move {
                let mine = memory(&st).verdicts.remove(&key(&exec));
                let downstream = next.run(exec).await?;
                match mine {
                    None => Ok(downstream),
                    Some(mine) => tighten(downstream, mine),
                }
            }
        })?;
    }
    if set.has(Event::PostToolUse) {
        let st = Arc::clone(&s);
        ctx.async_waterfall::<PostExecute, _, _>(opts, move |outcome, next| {
            let st = Arc::clone(&st);
            async move { post_tool_use(&st, outcome, next).await }
        })?;
    }
    // Pre-step also checks, once, that every tool matcher can match an offered tool.
    let tool_hooks = set.has(Event::PreToolUse) || set.has(Event::PostToolUse);
    if set.has(Event::UserPromptSubmit) || set.has(Event::SessionStart) || tool_hooks {
        let st = Arc::clone(&s);
        ctx.async_waterfall::<PreStep, _, _>(opts, move |point, next| {
            let st = Arc::clone(&st);
            async move { pre_step(&st, point, next).await }
        })?;
    }
    if set.has(Event::Stop) {
        let st = Arc::clone(&s);
        ctx.on_serial::<TurnStopping, _, _>(opts, move |point| {
            let st = Arc::clone(&st);
            let point = point.clone();
            async move { stop(&st, &point).await }
        })?;
    }
    if set.has(Event::PreCompact) {
        let st = Arc::clone(&s);
        ctx.waterfall::<Compact>(ListenerOptions::default(), move |point, next| {
            pre_compact(&st, point);
            next.run(point)
        })?;
    }
    Ok(())
}

/// PreToolUse in `tools/rewrite`: runs the hooks once per call, keeps a deny/ask for the
/// call's pre-execute, and passes a rewrite down the chain and back.
async fn pre_tool_use(
    st: &Shared,
    mut exec: ToolExecution,
    next: keel_plugin_api::sdk::AsyncNext<Rewrite>,
) -> Result<Typed<RewriteDecision>> {
    let engine = &st.0;
    let name = exec.name.to_string();
    let args: Value = exec.args.parse().unwrap_or(Value::Null);
    let sent = alias::hook_input(&name, &args, exec.cwd.as_str());
    let input = fields(
        json!({"tool_name": alias::hook_name(&name), "tool_input": sent,
        "tool_use_id": exec.call_id.as_str()}),
    );
    let answer = engine
        .fire(Event::PreToolUse, &alias::names(&name), at(&exec), input)
        .await;
    let verdict = if let Some(reason) = &answer.block {
        Some(PreDecision::Deny {
            reason: format!("PreToolUse hook: {reason}"),
        })
    } else {
        answer.ask.clone().map(|reason| PreDecision::Ask {
            reason: Some(format!(
                "PreToolUse hook: {}",
                reason.unwrap_or_else(|| "asks for approval".into())
            )),
        })
    };
    if let Some(v) = verdict {
        memory(st).verdicts.insert(key(&exec), v);
    }
    let Some((updated, command)) = answer.rewrite.filter(|_| answer.block.is_none()) else {
        return next.run(exec).await;
    };
    // Claude Code's field names (`file_path`, …) back to keel's.
    let args = alias::keel_input(&name, updated, &sent);
    exec.args = Json::of(&args)?;
    let downstream = next.run(exec).await?;
    let later = downstream.get()?;
    if later.args.is_some() {
        return Ok(downstream);
    }
    Typed::new(&RewriteDecision {
        args: Some(args),
        by: Some(format!("PreToolUse hook `{command}`")),
    })
}

/// The hook's verdict on top of the chain's: a deny wins, an ask beats an allow (TOOL-02).
fn tighten(downstream: Typed<PreDecision>, mine: PreDecision) -> Result<Typed<PreDecision>> {
    let Ok(theirs) = downstream.get() else {
        return Ok(downstream);
    };
    let decision = match (theirs, mine) {
        (d @ PreDecision::Deny { .. }, _) | (_, d @ PreDecision::Deny { .. }) => d,
        (d @ PreDecision::Ask { .. }, _) | (_, d @ PreDecision::Ask { .. }) => d,
        (PreDecision::Allow, PreDecision::Allow) => PreDecision::Allow,
    };
    Typed::new(&decision)
}

/// PostToolUse in `tools/post-execute`, after the rest of the chain, on successful results.
async fn post_tool_use(
    st: &Shared,
    outcome: ToolOutcome,
    next: keel_plugin_api::sdk::AsyncNext<PostExecute>,
) -> Result<Typed<PostDecision>> {
    let exec = outcome.exec.clone();
    // A foreign listener replaced the result with a non-result: no hook can be told about it
    // (the pipeline keeps its own snapshot either way).
    let Ok(typed) = outcome.result.get() else {
        return next.run(outcome).await;
    };
    let downstream = next.run(outcome).await?;
    let decision = match downstream.get() {
        Ok(d) => d,
        Err(_) => return Ok(downstream),
    };
    let content = match decision {
        PostDecision::Block { .. } => return Ok(downstream),
        _ if typed.is_error => return Ok(downstream),
        PostDecision::Accept { content: Some(c) } => c,
        PostDecision::Accept { content: None } => typed.content.clone(),
    };
    // The hook command's `tool_response` is built from the result's JSON form.
    let result = serde_json::to_value(&typed).unwrap_or(Value::Null);
    let name = exec.name.to_string();
    let args: Value = exec.args.parse().unwrap_or(Value::Null);
    let cwd = exec.cwd.as_str();
    let input = fields(json!({"tool_name": alias::hook_name(&name),
        "tool_input": alias::hook_input(&name, &args, cwd),
        "tool_response": response::hook_response(&name, &args, &result, cwd),
        "tool_use_id": exec.call_id.as_str()}));
    // Item 12: the file as the tool left it, to tell what the hooks changed.
    let written = formatted::before(&name, &result);
    let answer =
        st.0.fire(Event::PostToolUse, &alias::names(&name), at(&exec), input)
            .await;
    let changed = written
        .filter(|_| answer.ran > 0)
        .and_then(|w| formatted::settle(&st.0.ctx, exec.session_id.as_str(), &w));
    if let Some(reason) = answer.block {
        let mut feedback = format!("the call ran, and a PostToolUse hook objected: {reason}");
        if let Some(note) = changed {
            feedback.push_str(&format!("\n\n{note}"));
        }
        return Typed::new(&PostDecision::Block { feedback });
    }
    let mut notes: Vec<String> = changed.into_iter().collect();
    if !answer.context.is_empty() {
        notes.push(format!("[PostToolUse hook] {}", answer.context.join("\n")));
    }
    if notes.is_empty() {
        return Ok(downstream);
    }
    Typed::new(&PostDecision::Accept {
        content: Some(format!("{content}\n\n{}", notes.join("\n\n"))),
    })
}

/// SessionStart (once, at a session's first step here) and UserPromptSubmit in
/// `agent/pre-step`.
async fn pre_step(
    st: &Shared,
    point: AgentPoint<PreStepData>,
    next: keel_plugin_api::sdk::AsyncNext<PreStep>,
) -> Result<Typed<PreStepDecision>> {
    let engine = &st.0;
    let sid = point.session_id.to_string();
    let cwd = engine.cwd_of(&sid);
    let data = point.data.get()?;
    warn_unmatched_once(st).await;
    let here = At {
        session_id: &sid,
        cwd: &cwd,
        turn: Some(point.turn),
        call_id: None,
    };
    let mut extra: Vec<(String, String)> = Vec::new();
    let first = memory(st).fresh.remove(&sid);
    if first {
        let source = if point.turn == 0 { "startup" } else { "resume" };
        let answer = engine
            .fire(
                Event::SessionStart,
                &[source],
                here,
                fields(json!({"source": source})),
            )
            .await;
        if let Some(reason) = &answer.block {
            engine.line(&format!("a SessionStart hook answered: {reason}"));
        }
        extra.extend(
            answer
                .context
                .into_iter()
                .map(|c| ("SessionStart".to_owned(), c)),
        );
    }
    let prompt = prompt_of(st, &sid, &data);
    if !prompt.is_empty() {
        let answer = engine
            .fire(
                Event::UserPromptSubmit,
                &[],
                here,
                fields(json!({"prompt": prompt})),
            )
            .await;
        if let Some(reason) = answer.block {
            engine.line(&format!(
                "a UserPromptSubmit hook blocked the prompt: {reason}"
            ));
            return Typed::new(&PreStepDecision::Reject);
        }
        extra.extend(
            answer
                .context
                .into_iter()
                .map(|c| ("UserPromptSubmit".to_owned(), c)),
        );
    }
    let downstream = next.run(point.clone()).await?;
    if extra.is_empty() {
        return Ok(downstream);
    }
    let PreStepDecision::Enter { mut messages } = downstream.get()? else {
        return Ok(downstream);
    };
    for (i, (event, text)) in extra.into_iter().enumerate() {
        messages.push(StepMessage {
            id: format!("hook_{sid}_{}_{}_{i}", point.turn, point.step),
            content: format!("[{event} hook] {text}"),
            source: None,
        });
    }
    Typed::new(&PreStepDecision::Enter { messages })
}

/// Once per run, at the first step (every tool is registered by then): a PreToolUse or
/// PostToolUse matcher that matches no registered tool under any of its names — keel's or
/// Claude Code's — is named on stderr with the file or row it came from (issue 23 item 10).
async fn warn_unmatched_once(st: &Shared) {
    {
        let mut m = memory(st);
        if m.checked {
            return;
        }
        m.checked = true;
    }
    let engine = &st.0;
    let Ok(Some(tools)) = engine.ctx.get_client::<Tools>() else {
        return;
    };
    let Ok(list) = tools.list(ListRequest::default()).await else {
        return;
    };
    let names: Vec<Vec<&str>> = list.tools.iter().map(|t| alias::names(&t.name)).collect();
    for (source, event, matcher) in engine.set.unmatched(&names) {
        engine.line(&format!(
            "{source}: {} matcher `{matcher}` matches no tool keel offers, under keel's or \
             Claude Code's names; its hooks never run",
            event.name()
        ));
    }
}

/// The step's prompt text: its claimed messages, without the steering Stop hooks queued.
fn prompt_of(st: &Shared, sid: &str, data: &PreStepData) -> String {
    let mut m = memory(st);
    let steers = m.steers.entry(sid.to_owned()).or_default();
    let mut texts = Vec::new();
    for msg in &data.messages {
        let text = msg.content.as_str();
        if let Some(i) = steers.iter().position(|s| s == text) {
            steers.remove(i);
        } else {
            texts.push(text.to_owned());
        }
    }
    texts.join("\n\n")
}

/// Stop in `agent/turn-stopping`: a block steers the turn on, at most
/// `max_stop_continuations` times per turn.
async fn stop(st: &Shared, point: &AgentPoint<TurnStoppingData>) -> Result<Option<Typed<Steer>>> {
    let engine = &st.0;
    let sid = point.session_id.to_string();
    let done = {
        let mut m = memory(st);
        let entry = m.stops.entry(sid.clone()).or_insert((point.turn, 0));
        if entry.0 != point.turn {
            *entry = (point.turn, 0);
        }
        entry.1
    };
    let cwd = engine.cwd_of(&sid);
    let input = fields(json!({"stop_hook_active": done > 0}));
    let here = At {
        session_id: &sid,
        cwd: &cwd,
        turn: Some(point.turn),
        call_id: None,
    };
    let answer: Answer = engine.fire(Event::Stop, &[], here, input).await;
    let Some(reason) = answer.block else {
        return Ok(None);
    };
    let cap = engine.config.max_stop_continuations;
    if done >= cap {
        engine.line(&format!(
            "a Stop hook asked to continue the turn again, but it already continued {done} \
             time(s) (max_stop_continuations = {cap}); the turn ends"
        ));
        return Ok(None);
    }
    {
        let mut m = memory(st);
        m.stops.insert(sid.clone(), (point.turn, done + 1));
        m.steers.entry(sid).or_default().push(reason.clone());
    }
    Ok(Some(Typed::new(&Steer { steer: reason })?))
}

/// PreCompact in the synchronous `context/compact`: the hooks run on a thread of their own
/// and this waits for them, bounded by their timeouts; they cannot change the plan.
fn pre_compact(st: &Shared, point: &ContextPoint<CompactPlan>) {
    let sid = point.session_id.to_string();
    let cwd = st.0.cwd_of(&sid);
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = Arc::clone(st);
    let bound =
        st.0.set.longest() + Duration::from_millis(st.0.config.grace_ms) + Duration::from_secs(10);
    let spawned = std::thread::Builder::new()
        .name("keel-hook-precompact".into())
        .spawn(move || {
            let input = fields(json!({"trigger": "auto", "custom_instructions": ""}));
            let here = At {
                session_id: &sid,
                cwd: &cwd,
                turn: None,
                call_id: None,
            };
            let answer = futures::executor::block_on(worker.0.fire(
                Event::PreCompact,
                &["auto"],
                here,
                input,
            ));
            let _ = tx.send(answer);
        });
    if spawned.is_ok() && rx.recv_timeout(bound).is_err() {
        st.0.line("the PreCompact hooks did not finish in time; the compaction goes on");
    }
}
