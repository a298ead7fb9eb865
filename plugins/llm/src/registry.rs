//! The adapter registry as plain Rust (LLM-01, LLM-02): which adapter service answers which
//! provider name, and the prepared call that binds one model request to one registration.
//!
//! No SDK type appears here so that the all-or-nothing, atomic-replace and disposed-handle rules
//! are unit-tested without a kernel. The plugin glue (`lib.rs`) wraps a [`Registry`] in a mutex
//! and never holds it across an `await`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};

use keel_plugin_api::services::llm::{LlmCallConfig, LlmCode, LlmFailure, ProviderRoute};

/// A registry refusal: a stable code (`DUPLICATE_ADAPTER`, `INVALID_ADAPTER`,
/// `REGISTRATION_DISPOSED`) and a message naming the offending value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryError {
    /// Wire code.
    pub code: LlmCode,
    /// Human-readable reason.
    pub message: String,
}

impl RegistryError {
    fn new(code: LlmCode, message: impl Into<String>) -> Self {
        RegistryError {
            code,
            message: message.into(),
        }
    }
}

/// One provider route as `providers` lists it.
pub type Route = ProviderRoute;

#[derive(Debug, Clone)]
struct Entry {
    service: String,
    providers: Vec<String>,
    default_model: Option<String>,
}

/// Live registrations and the provider → registration routes.
#[derive(Debug, Default)]
pub struct Registry {
    /// Last id handed out; ids start at 1 and are never reused.
    last_id: u64,
    live: BTreeMap<u64, Entry>,
    routes: HashMap<String, u64>,
}

/// Checks a provider list on its own: non-empty, no empty names, no repeats.
fn validate_providers(providers: &[String]) -> Result<(), RegistryError> {
    if providers.is_empty() {
        return Err(RegistryError::new(
            LlmCode::InvalidAdapter,
            "an adapter must register at least one provider",
        ));
    }
    let mut seen = HashSet::new();
    for p in providers {
        if p.trim().is_empty() {
            return Err(RegistryError::new(
                LlmCode::InvalidAdapter,
                "provider names must not be empty",
            ));
        }
        if !seen.insert(p.as_str()) {
            return Err(RegistryError::new(
                LlmCode::DuplicateAdapter,
                format!("provider '{p}' is listed twice"),
            ));
        }
    }
    Ok(())
}

impl Registry {
    /// Registers `service` for every provider in `providers`, or for none of them (LLM-01).
    ///
    /// # Errors
    /// `INVALID_ADAPTER` for an empty service name, an empty list or an empty provider name;
    /// `DUPLICATE_ADAPTER` when any provider is already routed (nothing is registered then).
    pub fn register(
        &mut self,
        service: &str,
        providers: Vec<String>,
        default_model: Option<String>,
    ) -> Result<u64, RegistryError> {
        if service.trim().is_empty() {
            return Err(RegistryError::new(
                LlmCode::InvalidAdapter,
                "the adapter service name must not be empty",
            ));
        }
        validate_providers(&providers)?;
        self.check_free(&providers, None)?;
        self.last_id += 1;
        let id = self.last_id;
        for p in &providers {
            self.routes.insert(p.clone(), id);
        }
        self.live.insert(
            id,
            Entry {
                service: service.to_owned(),
                providers,
                default_model: default_model.filter(|m| !m.is_empty()),
            },
        );
        Ok(id)
    }

    /// Swaps the providers of a live registration in one step: either all new routes take
    /// effect and the old ones are gone, or nothing changes.
    ///
    /// # Errors
    /// `REGISTRATION_DISPOSED` for a registration that is not live; otherwise as
    /// [`Registry::register`] (routes held by this same registration do not conflict).
    pub fn replace(
        &mut self,
        registration: u64,
        providers: Vec<String>,
    ) -> Result<(), RegistryError> {
        self.live_entry(registration)?;
        validate_providers(&providers)?;
        self.check_free(&providers, Some(registration))?;
        let Some(entry) = self.live.get_mut(&registration) else {
            return Err(disposed(registration));
        };
        for old in &entry.providers {
            self.routes.remove(old);
        }
        for p in &providers {
            self.routes.insert(p.clone(), registration);
        }
        entry.providers = providers;
        Ok(())
    }

    /// Removes a registration and its routes.
    ///
    /// # Errors
    /// `REGISTRATION_DISPOSED` when it was already removed (or never issued).
    pub fn unregister(&mut self, registration: u64) -> Result<(), RegistryError> {
        let Some(entry) = self.live.remove(&registration) else {
            return Err(disposed(registration));
        };
        for p in &entry.providers {
            if self.routes.get(p) == Some(&registration) {
                self.routes.remove(p);
            }
        }
        Ok(())
    }

    /// Every route, sorted by provider name.
    pub fn providers(&self) -> Vec<Route> {
        let mut out: Vec<Route> = self
            .routes
            .iter()
            .filter_map(|(provider, id)| {
                self.live.get(id).map(|e| Route {
                    provider: provider.clone(),
                    service: e.service.clone(),
                    default_model: e.default_model.clone(),
                })
            })
            .collect();
        out.sort_by(|a, b| a.provider.cmp(&b.provider));
        out
    }

    /// The route for `provider`, if any.
    pub fn resolve(&self, provider: &str) -> Option<Route> {
        let id = self.routes.get(provider)?;
        self.live.get(id).map(|e| Route {
            provider: provider.to_owned(),
            service: e.service.clone(),
            default_model: e.default_model.clone(),
        })
    }

    /// Resolves `config.provider` once and binds the call to that registration (LLM-02).
    ///
    /// # Errors
    /// A `NO_ADAPTER` failure naming the provider and the registered ones.
    pub fn prepare(&self, config: &LlmCallConfig) -> Result<PreparedCall, LlmFailure> {
        let Some(id) = self.routes.get(&config.provider) else {
            return Err(self.no_adapter(&config.provider));
        };
        let Some(entry) = self.live.get(id) else {
            return Err(self.no_adapter(&config.provider));
        };
        Ok(PreparedCall {
            registration: *id,
            service: entry.service.clone(),
            config: config.clone(),
            dispatched: AtomicBool::new(false),
        })
    }

    /// The `NO_ADAPTER` failure for `provider`.
    pub fn no_adapter(&self, provider: &str) -> LlmFailure {
        let mut known: Vec<&str> = self.routes.keys().map(String::as_str).collect();
        known.sort_unstable();
        let known = if known.is_empty() {
            "none".to_owned()
        } else {
            known.join(", ")
        };
        LlmFailure::new(
            LlmCode::NoAdapter,
            format!("no LLM adapter is registered for provider '{provider}' (registered: {known})"),
        )
    }

    fn live_entry(&self, registration: u64) -> Result<&Entry, RegistryError> {
        self.live
            .get(&registration)
            .ok_or_else(|| disposed(registration))
    }

    fn check_free(&self, providers: &[String], owner: Option<u64>) -> Result<(), RegistryError> {
        for p in providers {
            if let Some(holder) = self.routes.get(p)
                && Some(*holder) != owner
            {
                let service = self.live.get(holder).map_or("?", |e| e.service.as_str());
                return Err(RegistryError::new(
                    LlmCode::DuplicateAdapter,
                    format!("provider '{p}' is already registered by '{service}'"),
                ));
            }
        }
        Ok(())
    }
}

fn disposed(registration: u64) -> RegistryError {
    RegistryError::new(
        LlmCode::RegistrationDisposed,
        format!("LLM adapter registration {registration} was disposed (or never issued)"),
    )
}

/// One model call resolved against one registration: dispatched at most once, and only with the
/// configuration it was prepared with (LLM-02).
#[derive(Debug)]
pub struct PreparedCall {
    /// The registration it is bound to.
    pub registration: u64,
    /// The adapter service to call.
    pub service: String,
    config: LlmCallConfig,
    dispatched: AtomicBool,
}

impl PreparedCall {
    /// Claims the one dispatch, returning the service to call.
    ///
    /// # Errors
    /// `INVALID_PREPARED_CALL` when it was already dispatched or `config` differs from the
    /// prepared one (a listener changed it on the way).
    pub fn dispatch(&self, config: &LlmCallConfig) -> Result<&str, LlmFailure> {
        if *config != self.config {
            return Err(invalid_prepared(
                "the call configuration changed after the call was prepared",
            ));
        }
        if self.dispatched.swap(true, Ordering::SeqCst) {
            return Err(invalid_prepared(
                "this prepared call was already dispatched",
            ));
        }
        Ok(&self.service)
    }
}

fn invalid_prepared(message: &str) -> LlmFailure {
    LlmFailure::new(LlmCode::InvalidPreparedCall, message)
}

#[cfg(test)]
#[path = "registry_tests.rs"]
mod tests;
