//! The [`Plugin`] trait: the whole interface between a plugin author and the kernel.
//!
//! Registration is the interface (bevy's lesson): `activate` registers listeners, services and
//! effects on the [`Context`]; the kernel owns their lifetime from then on.

use std::future::Future;

use super::context::Context;
use super::dispatch::EventSet;
use super::error::Result;
use super::manifest::Manifest;

/// A keel plugin. One value per library (built with `Default`), one fiber per profile row.
///
/// # Lifecycle of a fiber
/// - **pending**: a required service has no active provider yet; `activate` has not run.
/// - **loading**: `activate` is running. Everything registered now is an effect of the fiber.
/// - **active**: `activate` returned `Ok`. Registrations are still allowed (from listeners).
/// - **failed**: `activate` returned `Err` or panicked; everything it registered was rolled back.
/// - **unloading**: effects are being disposed, last in first out; new registrations are refused.
/// - **disposed**: gone; its listeners never run again.
///
/// A fiber is re-activated (a fresh `activate`) when a provider it requires comes back with a
/// new identity, and when its row config is reloaded.
pub trait Plugin: Send + Sync + 'static {
    /// The events this plugin dispatches, written with
    /// [`dispatches!`](crate::dispatches); `()` when it dispatches none. The SDK declares them
    /// in the manifest, and `export_plugin!` defines `crate::DISPATCH`, this set's value, whose
    /// fields are the only handles the dispatch methods accept: an event outside the set
    /// cannot be dispatched (it does not compile).
    type Dispatches: EventSet;

    /// Describes the plugin. Called once at load, before any activation. The events of
    /// [`Plugin::Dispatches`] are added to it by the SDK.
    fn manifest(&self) -> Manifest;

    /// Activates one row of this plugin. Register everything here.
    ///
    /// # Errors
    /// An error (or panic) fails the fiber and rolls back what it registered.
    fn activate(&self, ctx: Context) -> impl Future<Output = Result<()>> + Send;

    /// Called once when the kernel exits: stop threads and runtimes the plugin owns.
    fn shutdown(&self) {}
}
