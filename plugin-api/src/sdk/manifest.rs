//! A plugin's manifest: identity, what it provides and requires, the events it declares and the
//! JSON Schema of its row config.
//!
//! The manifest crosses the ABI as JSON: it is read once per library at load, so its cost does
//! not matter, and JSON lets it grow without an ABI break.

use serde::{Deserialize, Serialize};

use super::event::Event;
use super::service::Service;

/// What a plugin library says about itself.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    /// Plugin name (`[a-z0-9-]+`); the library is `libkeel_plugin_<name with _>.so`.
    pub id: String,
    /// The plugin's own semver version.
    pub version: String,
    /// ABI major; filled in by the SDK.
    #[serde(default)]
    pub abi: u32,
    /// One line for `keel plugins list`.
    #[serde(default)]
    pub description: String,
    /// Facilities (services) this plugin provides.
    #[serde(default)]
    pub provides: Vec<Provision>,
    /// Facilities it requires.
    #[serde(default)]
    pub requires: Vec<Requirement>,
    /// Events this plugin declares (beyond the core taxonomy in `keel_plugin_api::events`).
    #[serde(default)]
    pub events: Vec<EventDecl>,
    /// JSON Schema for the row config; `{"type":"object"}` when absent.
    #[serde(default = "default_schema")]
    pub config_schema: serde_json::Value,
    /// Layouts of the declared events; handed to the kernel through the root module, not JSON.
    #[serde(skip)]
    pub(crate) event_layouts: Vec<DeclaredLayout>,
}

/// Payload and output layouts of one declared event.
#[derive(Clone, Copy)]
pub(crate) struct DeclaredLayout {
    pub(crate) name: &'static str,
    pub(crate) payload: &'static crate::abi::TypeLayout,
    pub(crate) output: &'static crate::abi::TypeLayout,
}

impl std::fmt::Debug for DeclaredLayout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

fn default_schema() -> serde_json::Value {
    serde_json::json!({ "type": "object" })
}

/// A provided facility.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provision {
    /// Facility / service name.
    pub name: String,
    /// Whether a second provider in the same profile is an assembly error (default true).
    #[serde(default = "yes")]
    pub exclusive: bool,
}

fn yes() -> bool {
    true
}

/// A required facility.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Requirement {
    /// Facility / service name.
    pub name: String,
    /// Optional requirements order activation when present but never block it.
    #[serde(default)]
    pub optional: bool,
}

/// A declared event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventDecl {
    /// Wire name.
    pub name: String,
    /// `emit`, `waterfall`, `async-waterfall`, `parallel` or `serial`.
    pub mode: String,
}

impl Manifest {
    /// A manifest with nothing provided or required and an open object config.
    pub fn new(id: &str, version: &str) -> Self {
        Manifest {
            id: id.to_owned(),
            version: version.to_owned(),
            abi: crate::abi::ABI_MAJOR,
            description: String::new(),
            provides: Vec::new(),
            requires: Vec::new(),
            events: Vec::new(),
            config_schema: default_schema(),
            event_layouts: Vec::new(),
        }
    }

    /// Sets the one-line description.
    pub fn description(mut self, text: &str) -> Self {
        self.description = text.to_owned();
        self
    }

    /// Declares an exclusive provided service.
    pub fn provides<S: Service>(mut self) -> Self {
        self.provides.push(Provision {
            name: S::NAME.to_owned(),
            exclusive: true,
        });
        self
    }

    /// Declares a provided facility by name; `exclusive = false` lets several rows provide it.
    pub fn provides_named(mut self, name: &str, exclusive: bool) -> Self {
        self.provides.push(Provision {
            name: name.to_owned(),
            exclusive,
        });
        self
    }

    /// Declares a required service: the row stays pending until a provider is active.
    pub fn requires<S: Service>(self) -> Self {
        self.requires_named(S::NAME, false)
    }

    /// Declares an optional service: orders activation when present, never blocks it.
    pub fn optional<S: Service>(self) -> Self {
        self.requires_named(S::NAME, true)
    }

    /// Declares a requirement by name.
    pub fn requires_named(mut self, name: &str, optional: bool) -> Self {
        self.requires.push(Requirement {
            name: name.to_owned(),
            optional,
        });
        self
    }

    /// Declares an event this plugin owns (custom events must be declared by some loaded plugin).
    pub fn declares<E: Event>(mut self) -> Self {
        self.events.push(EventDecl {
            name: E::NAME.to_owned(),
            mode: E::MODE.as_str().to_owned(),
        });
        self.event_layouts.push(DeclaredLayout {
            name: E::NAME,
            payload: <E::Payload as abi_stable::StableAbi>::LAYOUT,
            output: <E::Output as abi_stable::StableAbi>::LAYOUT,
        });
        self
    }

    /// Sets the JSON Schema of the row config.
    pub fn config_schema(mut self, schema: serde_json::Value) -> Self {
        self.config_schema = schema;
        self
    }
}
