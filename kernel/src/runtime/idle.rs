//! Idle rows at run time (issue 25 item 3): a slot with no fiber and a closed library. A reload
//! whose config gives the row work (`lifecycle::control`) or a seam asking for a service it
//! provides ([`wake_provider`]) gives it a fiber, under the lifecycle lock; its activation is
//! the ordinary one (rollback, LIFO teardown) and first opens the library ([`open_for`]),
//! reading its bytes again (changed since start: `LOCK_DIGEST`, never opened).

use std::sync::Arc;

use keel_plugin_api::abi::EventMode;

use super::{Inner, lifecycle};
use crate::bus::Bus;
use crate::fiber::Fiber;
use crate::loader::PluginLibrary;

/// Why a plugin's events cannot be declared: an unknown mode, or a conflicting declaration.
pub(super) enum DeclareError {
    Mode(String),
    Conflict(String),
}

/// Declares the events `plugin`'s manifest owns, with its library's layouts (or none when the
/// library is not open).
pub(super) fn declare_events(bus: &Bus, plugin: &PluginLibrary) -> Result<(), DeclareError> {
    let layouts = plugin.loaded().map(|l| l.event_layouts.as_slice());
    for decl in &plugin.manifest.events {
        let mode = EventMode::parse(&decl.mode).ok_or_else(|| {
            DeclareError::Mode(format!(
                "plugin {} declares event '{}' with unknown mode '{}'",
                plugin.name, decl.name, decl.mode
            ))
        })?;
        let layout = layouts
            .and_then(|all| all.iter().find(|(name, _, _)| *name == decl.name))
            .map(|(_, payload, output)| (*payload, *output));
        bus.declare(&decl.name, mode, layout, &format!("plugin {}", plugin.name))
            .map_err(DeclareError::Conflict)?;
    }
    Ok(())
}

/// Opens the library of `fiber`'s row if it is not open yet — re-reading its bytes first —
/// and declares its events. Errs with the reason the activation fails.
pub(super) fn open_for(inner: &Inner, fiber: &Fiber) -> Result<(), String> {
    let plugin = &fiber.plugin;
    if plugin.loaded().is_some() {
        return Ok(());
    }
    let clock = std::time::Instant::now();
    plugin
        .open(true)
        .map_err(|e| format!("{}: {e}", e.code()))?;
    let took_us = u64::try_from(clock.elapsed().as_micros()).unwrap_or(u64::MAX);
    tracing::debug!(target: "keel::boot", plugin = %plugin.name, row = %fiber.row, took_us, "library opened (idle row woken)");
    declare_events(&inner.bus, plugin).map_err(|e| match e {
        DeclareError::Mode(m) | DeclareError::Conflict(m) => m,
    })
}

/// Wakes every idle, enabled row whose plugin provides `service` (when no active row does)
/// and settles: what a seam does before it looks the service up.
pub(super) async fn wake_provider(inner: &Arc<Inner>, service: &str) {
    if inner.services.find(service, false).is_some() {
        return;
    }
    let _guard = inner.lifecycle.lock().await;
    let mut woke = false;
    for slot in inner.rows().iter_mut() {
        let provides = slot
            .plugin
            .manifest
            .provides
            .iter()
            .any(|p| p.name == service);
        if slot.idle && slot.enabled && provides {
            tracing::debug!(target: "keel::kernel", row = %slot.id, "waking the idle row: '{service}' was asked for");
            slot.idle = false;
            slot.fiber = Some(inner.new_fiber(&slot.id, &slot.plugin, &slot.config));
            woke = true;
        }
    }
    if woke {
        lifecycle::settle(inner).await;
    }
}

pub(super) fn is_idle(inner: &Inner, row: &str) -> bool {
    inner.rows().iter().any(|s| s.id == row && s.idle)
}

/// An idle row reloaded with a config that still gives it no work stays idle with that config
/// (and a row whose wake failed goes back to idle with its last good one), issue 25 item 3:
/// when `config` gives the row's plugin no work, the row is left idle — no fiber, library as
/// it is — and `true` is returned; otherwise nothing changes.
pub(super) fn keep_idle(inner: &Inner, row: &str, config: &serde_json::Value) -> bool {
    let mut rows = inner.rows();
    let Some(slot) = rows.iter_mut().find(|s| s.id == row && s.enabled) else {
        return false;
    };
    let dir = std::env::current_dir().ok();
    let idle = (slot.plugin.manifest.idle_when.as_ref())
        .zip(dir)
        .is_some_and(|(when, dir)| when.holds(config, &dir));
    if idle {
        slot.idle = true;
        slot.fiber = None;
        slot.config = config.clone();
        slot.last_good = config.clone();
    }
    idle
}
