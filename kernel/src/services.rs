//! The service registry: name → provider fiber and handle.
//!
//! Lookups check what the consumer expects against what the provider registered (consumer =
//! expected, provider = found), so a provider at least as new as its consumer is accepted. The
//! registry itself knows nothing about lifecycles; `kernel::lifecycle` decides who unloads when
//! a provider goes away.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use keel_plugin_api::abi::{ErasedShared, FiberId, PluginError, TypeLayout};
use keel_plugin_api::host::{KernelCode, layouts_compatible};

use crate::fiber::{Fiber, FiberState, lock};

/// One provided service.
#[derive(Clone)]
pub struct Provided {
    /// Service name.
    pub name: String,
    /// Providing fiber.
    pub provider: Arc<Fiber>,
    /// Registration id (the provider's identity together with the fiber id).
    pub registration: u64,
    handle: ErasedShared,
    exclusive: bool,
}

/// The registry.
#[derive(Default)]
pub struct Services {
    entries: Mutex<Vec<Provided>>,
    /// `(expected, found)` layout pairs already proven compatible. Layouts are `'static` and
    /// never change, so a pair checked once stays good; without this, every lookup of a
    /// registry-called service (an adapter per model call, a tool provider per tool call)
    /// re-ran abi_stable's recursive check (several % of a step's CPU).
    compatible: Mutex<HashSet<(usize, usize)>>,
}

impl Services {
    /// Adds a provider.
    ///
    /// # Errors
    /// `DUPLICATE_PROVIDER` for a second provider of an exclusive service.
    pub fn provide(
        &self,
        name: &str,
        provider: &Arc<Fiber>,
        registration: u64,
        handle: ErasedShared,
        exclusive: bool,
    ) -> Result<(), PluginError> {
        let mut entries = lock(&self.entries);
        if let Some(existing) = entries
            .iter()
            .find(|e| e.name == name && (e.exclusive || exclusive))
        {
            return Err(PluginError::coded(
                KernelCode::DuplicateProvider,
                format!(
                    "service '{name}' is already provided by row '{}'; row '{}' cannot provide it too",
                    existing.provider.row, provider.row
                ),
            ));
        }
        entries.push(Provided {
            name: name.to_owned(),
            provider: Arc::clone(provider),
            registration,
            handle,
            exclusive,
        });
        Ok(())
    }

    /// Removes the entry of one registration.
    pub fn remove(&self, registration: u64) -> Option<Provided> {
        let mut entries = lock(&self.entries);
        let pos = entries
            .iter()
            .position(|e| e.registration == registration)?;
        Some(entries.remove(pos))
    }

    /// The first provider of `name` whose fiber is active (or loading, when `include_loading`).
    pub fn find(&self, name: &str, include_loading: bool) -> Option<Provided> {
        let entries = lock(&self.entries);
        entries
            .iter()
            .find(|e| {
                e.name == name
                    && match e.provider.state() {
                        FiberState::Active | FiberState::Unloading => true,
                        FiberState::Loading => include_loading,
                        _ => false,
                    }
            })
            .cloned()
    }

    /// Whether an active provider of `name` exists.
    pub fn is_available(&self, name: &str) -> bool {
        lock(&self.entries)
            .iter()
            .any(|e| e.name == name && e.provider.state() == FiberState::Active)
    }

    /// Hands out a handle after the layout check.
    ///
    /// # Errors
    /// `SERVICE_LAYOUT` naming both rows.
    pub fn handle_for(
        &self,
        entry: &Provided,
        consumer_row: &str,
        expected: &'static TypeLayout,
    ) -> Result<ErasedShared, PluginError> {
        let found = entry.handle.layout();
        let key = (
            std::ptr::from_ref(expected) as usize,
            std::ptr::from_ref(found) as usize,
        );
        let known = lock(&self.compatible).contains(&key);
        if known {
            return Ok(entry.handle.clone());
        }
        layouts_compatible(expected, found).map_err(|r| {
            PluginError::coded(
                KernelCode::ServiceLayout,
                format!(
                    "service '{}' of row '{}' does not match what row '{consumer_row}' expects: {r}",
                    entry.name, entry.provider.row
                ),
            )
        })?;
        lock(&self.compatible).insert(key);
        Ok(entry.handle.clone())
    }

    /// Fiber ids providing something (for status output).
    pub fn providers_of(&self, name: &str) -> Vec<FiberId> {
        lock(&self.entries)
            .iter()
            .filter(|e| e.name == name)
            .map(|e| e.provider.id)
            .collect()
    }
}
