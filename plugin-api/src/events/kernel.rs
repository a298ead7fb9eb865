//! `kernel/*` events: what the kernel itself reports about fibers, listeners and config.
//!
//! These are emits: observers (telemetry, a UI, a test driver) learn about faults without being
//! able to change the outcome. They are the only events the kernel declares itself ([`EVENTS`]);
//! every other domain is declared by the plugin that owns it (see [`OWNERS`](super::OWNERS)).

use abi_stable::StableAbi;
use abi_stable::std_types::RString;

use crate::declare_event;
use crate::sdk::event::{Event as _, EventInfo};

/// A fiber (one running plugin row) changed state, or its plugin was marked faulted.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct PluginStatusEvent {
    /// Row id from the profile.
    pub row: RString,
    /// Plugin name (library stem without `libkeel_plugin_`).
    pub plugin: RString,
    /// New state: `pending`, `loading`, `active`, `failed`, `unloading`, `disposed`.
    pub state: RString,
    /// Whether the plugin is faulted (its listeners are skipped).
    pub faulted: bool,
    /// Why, when the change was caused by an error; empty otherwise.
    pub reason: RString,
}

/// A listener failed or panicked inside a dispatch that contains errors (emit), or was skipped.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct ListenerErrorEvent {
    /// Event whose listener failed.
    pub event: RString,
    /// Row that owns the listener.
    pub row: RString,
    /// Error code (`PANIC`, `TIMEOUT`, or the plugin's own).
    pub code: RString,
    /// Human-readable message.
    pub message: RString,
}

/// A row reload was rejected; the last good fiber keeps running.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct ConfigUpdateFailedEvent {
    /// Row whose new config was rejected.
    pub row: RString,
    /// Why.
    pub reason: RString,
}

declare_event! {
    /// Fiber state changes and faulted plugins. Emitted by the kernel after each transition.
    pub struct PluginStatus: emit("kernel/plugin-status") -> PluginStatusEvent;
}
declare_event! {
    /// A contained listener failure (emit listeners, deadlines, panics), with the owning row.
    pub struct ListenerError: emit("kernel/listener-error") -> ListenerErrorEvent;
}
declare_event! {
    /// A row reload failed validation or activation and was rolled back to the last good config.
    pub struct ConfigUpdateFailed: emit("kernel/config-update-failed") -> ConfigUpdateFailedEvent;
}

/// The events the kernel declares on its own bus: these three, and no other.
pub const EVENTS: &[EventInfo] = &[
    PluginStatus::INFO,
    ListenerError::INFO,
    ConfigUpdateFailed::INFO,
];
