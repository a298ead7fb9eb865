//! Fiber lifecycle: activation with rollback, LIFO teardown, inject (pending → active →
//! provider gone → dependents unload first → provider back → re-activate), and row control.
//!
//! Decisions (ARCHITECTURE §4.3, cordis-semantics §5): teardown is strictly serial last-in
//! first-out across a fiber's effects; each disposer's error is logged and teardown goes on.
//! When a provider goes away, every fiber that requires its service is unloaded first — while
//! the service is still registered, so their disposers can use it — and only then does the
//! entry disappear. Those fibers become pending again and re-activate when a provider is back.
//! A provider updating state behind its handle changes nothing: only identity (a new
//! registration) restarts dependents.
//!
//! Lifecycle changes never overlap (issue 13 item 1): an activation (with its rollback) and an
//! unload each hold the fiber's turn, so a teardown that becomes due while `activate` runs
//! waits for it to end. Every path ends a loaded fiber through `end`, so every path announces
//! one grammar: `loading → active → unloading → disposed`, or `loading → unloading → failed`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use futures::future::join_all;
use keel_plugin_api::abi::{FiberId, PluginError, RResult};
use keel_plugin_api::events::kernel::{ConfigUpdateFailed, ConfigUpdateFailedEvent};
use keel_plugin_api::host::{ControlCode, KernelCode};
use keel_plugin_api::sdk::{ControlAnswer, ControlOp, FileTrust, RowControl};

use super::{Inner, RowStatus};
use crate::bus::with_deadline;
use crate::fiber::{Effect, EffectKind, Fiber, FiberState};

/// The most verbose level the kernel's subscriber keeps, for the plugins' own filters.
fn max_log_level() -> u8 {
    use tracing::level_filters::LevelFilter;
    match LevelFilter::current() {
        LevelFilter::OFF => 0,
        LevelFilter::ERROR => 1,
        LevelFilter::WARN => 2,
        LevelFilter::INFO => 3,
        LevelFilter::DEBUG => 4,
        _ => 5,
    }
}

/// How long a control request waits for a lifecycle change in progress.
const CONTROL_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Whether a pending fiber's requirements allow it to activate now.
fn ready(inner: &Inner, fiber: &Fiber) -> bool {
    let rows = inner.rows();
    let provides_itself = |name: &str| {
        fiber
            .plugin
            .manifest
            .provides
            .iter()
            .any(|p| p.name == name)
    };
    fiber.plugin.manifest.requires.iter().all(|req| {
        // A row never waits for itself (a plugin may provide what it requires).
        if provides_itself(&req.name) {
            return true;
        }
        if !req.optional {
            return inner.services.is_available(&req.name);
        }
        // Optional: wait only for a provider row that is loading, or pending but able to load.
        rows.iter()
            .filter(|s| s.enabled && s.id != fiber.row)
            .all(|s| {
                let provides = s
                    .plugin
                    .manifest
                    .provides
                    .iter()
                    .any(|p| p.name == req.name);
                let Some(f) = &s.fiber else { return true };
                if !provides {
                    return true;
                }
                match f.state() {
                    FiberState::Loading => false,
                    FiberState::Pending => !f
                        .plugin
                        .manifest
                        .requires
                        .iter()
                        .filter(|r| !r.optional)
                        .all(|r| inner.services.is_available(&r.name)),
                    _ => true,
                }
            })
    })
}

/// Activates every pending fiber that can be, a wave at a time, until none can.
pub(super) async fn settle(inner: &Arc<Inner>) {
    loop {
        let candidates: Vec<Arc<Fiber>> = inner
            .rows()
            .iter()
            .filter(|s| s.enabled)
            .filter_map(|s| s.fiber.clone())
            .filter(|f| f.state() == FiberState::Pending)
            .collect();
        let wave: Vec<Arc<Fiber>> = candidates.into_iter().filter(|f| ready(inner, f)).collect();
        if wave.is_empty() {
            return;
        }
        join_all(wave.into_iter().map(|f| activate(inner, f))).await;
    }
}

/// Activates one pending fiber, holding its turn through `activate` and any rollback.
async fn activate(inner: &Arc<Inner>, fiber: Arc<Fiber>) {
    let _turn = fiber.turn.lock().await;
    if !fiber.transition(FiberState::Pending, FiberState::Loading) {
        return;
    }
    inner.fibers.insert(fiber.id, Arc::clone(&fiber));
    inner.bus.report_status(&fiber, "");
    let Some(api) = inner.api.get().copied() else {
        return;
    };
    // An idle row's library opens at its first activation (issue 25 item 3).
    if let Err(reason) = super::idle::open_for(inner, &fiber) {
        set_error(inner, &fiber.row, Some(reason.clone()));
        end(inner, &fiber, FiberState::Failed, &reason).await;
        return;
    }
    let Some(loaded) = fiber.plugin.loaded() else {
        return;
    };
    let fut = loaded.library.activate(fiber.id, api, max_log_level());
    let row = fiber.row.clone();
    let t = std::time::Instant::now();
    let result = with_deadline(
        inner.deadline(),
        || format!("activation of row '{row}'"),
        fut,
    )
    .await;
    match result {
        RResult::ROk(()) => {
            tracing::debug!(target: "keel::boot", row = %fiber.row, took_us = t.elapsed().as_micros(), "row active");
            fiber.set_state(FiberState::Active);
            set_error(inner, &fiber.row, None);
            inner.bus.report_status(&fiber, "");
        }
        RResult::RErr(e) => {
            let reason = format!("{}: {}", e.code, e.message);
            tracing::debug!(target: "keel::kernel", row = %fiber.row, "activation failed, rolling back: {reason}");
            set_error(inner, &fiber.row, Some(reason.clone()));
            end(inner, &fiber, FiberState::Failed, &reason).await;
        }
    }
}

fn set_error(inner: &Inner, row: &str, error: Option<String>) {
    if let Some(slot) = inner.rows().iter_mut().find(|s| s.id == row) {
        slot.last_error = error;
    }
}

/// Pops and disposes every effect, last in first out.
async fn teardown(inner: &Arc<Inner>, fiber: &Arc<Fiber>) {
    while let Some(effect) = fiber.pop_effect() {
        dispose_effect(inner, fiber, effect).await;
    }
    fiber.abort_tasks();
}

/// Disposes one effect. Never fails: errors are logged.
pub(super) fn dispose_effect<'a>(
    inner: &'a Arc<Inner>,
    fiber: &'a Arc<Fiber>,
    effect: Effect,
) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
    Box::pin(async move {
        match effect.kind {
            EffectKind::Listener { event } => inner.bus.remove(&event, effect.id),
            EffectKind::Service { name } => {
                unload_dependents(inner, &name, fiber).await;
                inner.services.remove(effect.id);
            }
            EffectKind::Disposer(d) => {
                let label = effect.label.clone();
                let row = fiber.row.clone();
                let r = with_deadline(
                    inner.deadline(),
                    || format!("disposer '{label}' of row '{row}'"),
                    d.run(),
                )
                .await;
                if let RResult::RErr(e) = r {
                    tracing::error!(
                        target: "keel::kernel",
                        row = %fiber.row,
                        effect = %effect.label,
                        "disposer failed: {}: {}",
                        e.code,
                        e.message
                    );
                }
            }
        }
    })
}

/// Unloads every live fiber that requires `service` (other than `provider`) and leaves a fresh
/// pending fiber in its row.
async fn unload_dependents(inner: &Arc<Inner>, service: &str, provider: &Arc<Fiber>) {
    // Another provider of a non-exclusive facility keeps dependents alive.
    let others = inner
        .services
        .providers_of(service)
        .into_iter()
        .filter(|id| *id != provider.id)
        .count();
    if others > 0 {
        return;
    }
    let dependents: Vec<Arc<Fiber>> = inner
        .rows()
        .iter()
        .filter_map(|s| s.fiber.clone())
        .filter(|f| f.id != provider.id && f.requires(service))
        .filter(|f| matches!(f.state(), FiberState::Loading | FiberState::Active))
        .collect();
    for dep in dependents {
        tracing::info!(
            target: "keel::kernel",
            row = %dep.row,
            "unloading: provider row '{}' of '{service}' is going away",
            provider.row
        );
        let _turn = dep.turn.lock().await;
        let reason = format!("provider of '{service}' went away");
        unload_held(inner, &dep, FiberState::Disposed, &reason).await;
        // Still under the turn: whoever waits for it finds the row's fresh fiber.
        let mut rows = inner.rows();
        if let Some(slot) = rows.iter_mut().find(|s| s.id == dep.row)
            && slot.enabled
            && slot.fiber.as_ref().is_some_and(|f| f.id == dep.id)
        {
            let fresh = inner.new_fiber(&slot.id, &slot.plugin, &slot.config);
            slot.fiber = Some(fresh);
        }
    }
}

/// Unloads a fiber once it has the fiber's turn — after an activation in progress has ended —
/// and ends it in `final_state`.
pub(super) async fn unload(
    inner: &Arc<Inner>,
    fiber: Arc<Fiber>,
    final_state: FiberState,
    reason: &str,
) {
    let _turn = fiber.turn.lock().await;
    unload_held(inner, &fiber, final_state, reason).await;
}

/// [`unload`] with the fiber's turn held. A failed or disposed fiber is left as it is: final
/// states stay final.
fn unload_held<'a>(
    inner: &'a Arc<Inner>,
    fiber: &'a Arc<Fiber>,
    final_state: FiberState,
    reason: &'a str,
) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
    Box::pin(async move {
        match fiber.state() {
            FiberState::Active => end(inner, fiber, final_state, reason).await,
            FiberState::Pending => {
                fiber.set_state(final_state);
                inner.bus.report_status(fiber, reason);
            }
            // Loading and Unloading only exist under someone else's turn.
            _ => {}
        }
    })
}

/// The one way a loaded fiber ends (unload, or rollback of a failed activation), called with
/// its turn held: `unloading`, the dependents of its services first, its effects LIFO, then
/// `final_state`.
async fn end(inner: &Arc<Inner>, fiber: &Arc<Fiber>, final_state: FiberState, reason: &str) {
    let _ = fiber.ended.set(reason.to_owned());
    fiber.set_state(FiberState::Unloading);
    inner.bus.report_status(fiber, reason);
    for service in fiber.provided_services() {
        unload_dependents(inner, &service, fiber).await;
    }
    teardown(inner, fiber).await;
    fiber.set_state(final_state);
    inner.fibers.remove(&fiber.id);
    inner.bus.report_status(fiber, reason);
}

/// One line per row that is not active after settling.
pub(super) fn problems(inner: &Inner) -> Vec<String> {
    let rows = inner.rows();
    rows.iter()
        .filter(|s| s.enabled)
        .filter_map(|s| {
            let f = s.fiber.as_ref()?;
            match f.state() {
                FiberState::Active => None,
                FiberState::Failed => Some(format!(
                    "row '{}' (plugin {}) failed to activate: {}",
                    s.id,
                    s.plugin.name,
                    s.last_error.as_deref().unwrap_or("unknown error")
                )),
                FiberState::Pending => {
                    let missing: Vec<String> = f
                        .plugin
                        .manifest
                        .requires
                        .iter()
                        .filter(|r| !r.optional && !inner.services.is_available(&r.name))
                        .map(|r| format!("'{}'", r.name))
                        .collect();
                    Some(format!(
                        "row '{}' is pending: required service {} has no active provider",
                        s.id,
                        missing.join(", ")
                    ))
                }
                other => Some(format!("row '{}' is {}", s.id, other.as_str())),
            }
        })
        .collect()
}

pub(super) fn status(inner: &Inner) -> Vec<RowStatus> {
    inner
        .rows()
        .iter()
        .map(|s| {
            let (state, faulted, faults, effects) = match (&s.fiber, s.enabled) {
                (_, false) => ("disabled".to_owned(), false, 0, Vec::new()),
                (None, true) if s.idle => ("idle".to_owned(), false, 0, Vec::new()),
                (Some(f), true) => (
                    f.state().as_str().to_owned(),
                    f.is_faulted(),
                    f.faults(),
                    f.effect_labels(),
                ),
                (None, true) => ("pending".to_owned(), false, 0, Vec::new()),
            };
            RowStatus {
                row: s.id.clone(),
                plugin: s.plugin.name.clone(),
                state,
                faulted,
                faults,
                error: s.last_error.clone(),
                effects,
            }
        })
        .collect()
}

/// Row control requested by a plugin (drivers, tests): disable, enable, reload, status,
/// project file trust.
pub(super) async fn control(
    inner: &Arc<Inner>,
    fiber: FiberId,
    op: ControlOp,
) -> Result<ControlAnswer, PluginError> {
    let row = match op {
        ControlOp::Status => {
            return Ok(ControlAnswer::Status {
                rows: status(inner),
            });
        }
        ControlOp::ProjectFileTrust { path } => {
            // May a project file the asking row's plugin declared be used (issues 15, 24)?
            let (row, declared) = inner
                .fibers
                .get(&fiber)
                .map(|f| (f.row.clone(), f.plugin.manifest.trusted_files.clone()))
                .unwrap_or_else(|| ("(no row)".to_owned(), Vec::new()));
            let vouched = inner.settings.trust_project;
            return keel_config::trust::file_state(
                &inner.keel_home,
                &row,
                &declared,
                path.as_ref(),
                vouched,
            )
            .map(|s| {
                ControlAnswer::FileTrust(FileTrust {
                    trusted: s.allows(),
                    state: s.describe().to_owned(),
                })
            })
            // The code is the config error's own catalog code (`ConfigCode`).
            .map_err(|e| PluginError::received(e.code(), e.to_string()));
        }
        ControlOp::Disable { ref row }
        | ControlOp::Enable { ref row }
        | ControlOp::Reload { ref row, .. } => row.clone(),
    };
    // Wait for a lifecycle change in progress (e.g. a settle after a late provide), but not
    // forever: a control request made from inside an activation would otherwise deadlock.
    let Ok(_guard) = tokio::time::timeout(CONTROL_WAIT, inner.lifecycle.lock()).await else {
        return Err(PluginError::coded(
            ControlCode::Busy,
            format!(
                "another lifecycle change did not finish within {} s (a control request from inside an activation?)",
                CONTROL_WAIT.as_secs()
            ),
        ));
    };
    let (fiber, plugin, current) = {
        let rows = inner.rows();
        let slot = rows.iter().find(|s| s.id == row).ok_or_else(|| {
            PluginError::coded(
                ControlCode::UnknownRow,
                format!("no row '{row}' in this profile"),
            )
        })?;
        (
            slot.fiber.clone(),
            Arc::clone(&slot.plugin),
            slot.config.clone(),
        )
    };
    // The fiber this control unloads (disable) or leaves in the row (enable, reload).
    let mine = match op {
        ControlOp::Disable { .. } => {
            if let Some(f) = &fiber {
                unload(inner, Arc::clone(f), FiberState::Disposed, DISABLED).await;
            }
            if let Some(slot) = inner.rows().iter_mut().find(|s| s.id == row) {
                slot.enabled = false;
                slot.fiber = None;
            }
            fiber
        }
        ControlOp::Enable { .. } => {
            if let Some(slot) = inner.rows().iter_mut().find(|s| s.id == row)
                && (!slot.enabled
                    || slot
                        .fiber
                        .as_ref()
                        .is_none_or(|f| f.state() == FiberState::Disposed))
            {
                slot.enabled = true;
                slot.idle = false;
                slot.fiber = Some(inner.new_fiber(&slot.id, &slot.plugin, &slot.config));
            }
            let mine = row_fiber(inner, &row);
            settle(inner).await;
            mine
        }
        ControlOp::Reload { config, .. } => {
            if let Err((pointer, reason)) =
                crate::schema::validate(&plugin.manifest.config_schema, &config)
            {
                let reason = format!("invalid config at {pointer}: {reason}");
                config_failed(inner, &row, &reason);
                return Err(PluginError::coded(
                    KernelCode::RowConfig,
                    format!("row '{row}': {reason}"),
                ));
            }
            let was_idle = super::idle::is_idle(inner, &row);
            if was_idle && super::idle::keep_idle(inner, &row, &config) {
                return Ok(ControlAnswer::Row(RowControl {
                    state: "idle".to_owned(),
                    row,
                    overtaken: None,
                }));
            }
            if let Some(f) = fiber {
                unload(inner, f, FiberState::Disposed, "row reloaded").await;
            }
            let mine = replace_fiber(inner, &row, &config);
            settle(inner).await;
            if let Some(f) = &mine
                && settled(f).await == FiberState::Failed
            {
                let reason = f.ended.get().cloned().unwrap_or_default();
                config_failed(inner, &row, &reason);
                let last_good = inner
                    .rows()
                    .iter()
                    .find(|s| s.id == row)
                    .map(|s| s.last_good.clone())
                    .unwrap_or(current);
                // A woken row whose wake failed goes back to idle with its last good config.
                if !(was_idle && super::idle::keep_idle(inner, &row, &last_good)) {
                    replace_fiber(inner, &row, &last_good);
                    settle(inner).await;
                }
                return Err(PluginError::coded(
                    ControlCode::ReloadFailed,
                    format!("row '{row}': {reason}; rolled back to the last good config"),
                ));
            }
            if let Some(slot) = inner.rows().iter_mut().find(|s| s.id == row) {
                slot.last_good = config;
            }
            mine
        }
        ControlOp::Status | ControlOp::ProjectFileTrust { .. } => None,
    };
    // Overtaken: another lifecycle change (a provider leaving, say) disposed this control's
    // fiber before the control could answer.
    let mut overtaken = None;
    if let Some(f) = mine
        && settled(&f).await == FiberState::Disposed
    {
        overtaken = f.ended.get().filter(|why| *why != DISABLED).cloned();
    }
    let state = row_fiber(inner, &row).map_or("disabled", |f| f.state().as_str());
    Ok(ControlAnswer::Row(RowControl {
        state: state.to_owned(),
        row,
        overtaken,
    }))
}

/// Why a disabled row's fiber ended; a control that disables is not overtaken by itself.
const DISABLED: &str = "row disabled";

/// The state of `fiber` once every lifecycle change queued for it so far (a teardown waiting
/// behind its activation, say) has run.
async fn settled(fiber: &Fiber) -> FiberState {
    drop(fiber.turn.lock().await);
    fiber.state()
}

fn config_failed(inner: &Inner, row: &str, reason: &str) {
    inner
        .bus
        .emit_kernel::<ConfigUpdateFailed>(&ConfigUpdateFailedEvent {
            row: row.into(),
            reason: reason.into(),
        });
}

fn replace_fiber(inner: &Inner, row: &str, config: &serde_json::Value) -> Option<Arc<Fiber>> {
    let mut rows = inner.rows();
    let slot = rows.iter_mut().find(|s| s.id == row)?;
    slot.config = config.clone();
    slot.enabled = true;
    slot.idle = false;
    let fiber = inner.new_fiber(&slot.id, &slot.plugin, config);
    slot.fiber = Some(Arc::clone(&fiber));
    Some(fiber)
}

fn row_fiber(inner: &Inner, row: &str) -> Option<Arc<Fiber>> {
    let rows = inner.rows();
    rows.iter().find(|s| s.id == row)?.fiber.clone()
}
