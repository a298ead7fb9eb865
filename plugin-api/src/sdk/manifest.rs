//! A plugin's manifest: identity, what it provides and requires, the events it declares, the
//! JSON Schema of its row config, and what it adds to `keel`'s command line.
//!
//! The manifest crosses the ABI as JSON: it is read once per library at load, so its cost does
//! not matter, and JSON lets it grow without an ABI break.

use serde::{Deserialize, Serialize};

use super::event::Event;
use super::service::Service;
use crate::services::command::{ArgSpec, CommandSpec};

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
    /// Events this plugin owns (dispatches) and so declares: its own, and the core events of
    /// `keel_plugin_api::events` it dispatches (the kernel declares only `kernel/*`). Filled
    /// by the SDK from the plugin's [`Plugin::Dispatches`](super::Plugin::Dispatches) set.
    #[serde(default)]
    pub events: Vec<EventDecl>,
    /// JSON Schema for the row config; `{"type":"object"}` when absent.
    #[serde(default = "default_schema")]
    pub config_schema: serde_json::Value,
    /// The part of this plugin's row config that decides security (ARCHITECTURE §6): a project
    /// layer, which the model can write, may change it only once the user trusted that layer.
    #[serde(default, skip_serializing_if = "Guarded::is_none")]
    pub guarded: Guarded,
    /// Commands this plugin adds to `keel` (each also provided as `keel.command.<name>`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<CommandSpec>,
    /// Options of `keel run` / `keel resume` this plugin, a driver, defines and validates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub run_options: Vec<ArgSpec>,
    /// Project files (relative to the project directory, e.g. `.claude/settings.json`) whose
    /// bytes this plugin acts on and so wants trusted (issue 24 item 4): `keel trust DIR`
    /// records their digests beside the layer's, and
    /// [`Context::project_file_trust`](super::Context::project_file_trust) answers for these
    /// paths only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trusted_files: Vec<String>,
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

/// Which config of a plugin's rows only a trusted layer may change (ARCHITECTURE §6). Inserting
/// or disabling any row, and swapping a row's plugin, always counts as security-relevant; this
/// says what else does.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind", content = "keys")]
pub enum Guarded {
    /// Nothing beyond inserting and disabling rows.
    #[default]
    None,
    /// The whole row: any change to its config (a sandbox, a firewall, an approval policy).
    Row,
    /// These top-level keys (an endpoint, a credential reference, headers).
    Keys(Vec<String>),
}

impl Guarded {
    /// Nothing is guarded.
    pub fn is_none(&self) -> bool {
        *self == Guarded::None
    }

    /// Whether a change of top-level `key` needs trust.
    pub fn covers(&self, key: &str) -> bool {
        match self {
            Guarded::None => false,
            Guarded::Row => true,
            Guarded::Keys(keys) => keys.iter().any(|k| k == key),
        }
    }
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
            guarded: Guarded::None,
            commands: Vec::new(),
            run_options: Vec::new(),
            trusted_files: Vec::new(),
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

    /// Declares an event. For the SDK's own use since SDK 3 (issue 24 item 7): a plugin's
    /// declarations come from its [`Plugin::Dispatches`](super::Plugin::Dispatches) set, the
    /// same set its dispatch handles come from; keel's test harness declares what its probe
    /// dispatches with it. An event is dispatchable only when some loaded row declares it
    /// (`UNKNOWN_EVENT` otherwise); listening needs no declaration.
    #[doc(hidden)]
    pub fn __declares<E: Event>(mut self) -> Self {
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

    /// Adds a command to `keel` (its grammar and help) and declares its service,
    /// `keel.command.<name>` (exclusive), which the row serves with the [`Command`] contract.
    ///
    /// [`Command`]: crate::services::command::Command
    pub fn command(mut self, spec: CommandSpec) -> Self {
        self.provides.push(Provision {
            name: crate::services::command::service_name(&spec.name),
            exclusive: true,
        });
        self.commands.push(spec);
        self
    }

    /// Adds an option to `keel run` / `keel resume` (a driver's): the binary checks its value
    /// against the spec and forwards it in the invocation's `options` under its id.
    pub fn run_option(mut self, option: ArgSpec) -> Self {
        self.run_options.push(option);
        self
    }

    /// Sets the JSON Schema of the row config.
    pub fn config_schema(mut self, schema: serde_json::Value) -> Self {
        self.config_schema = schema;
        self
    }

    /// The row config's JSON Schema, derived from its serde type (`#[derive(Deserialize,
    /// JsonSchema)]`, with `#[serde(deny_unknown_fields)]` so a misspelt key is refused by
    /// name): the type the plugin reads with [`Context::config`](super::Context::config) is the
    /// schema the kernel validates, so the two cannot drift.
    pub fn config_type<C: schemars::JsonSchema>(self) -> Self {
        let schema = schemars::schema_for!(C);
        self.config_schema(schema.to_value())
    }

    /// The whole row config decides security: an untrusted project layer may not change it.
    pub fn guard_row(mut self) -> Self {
        self.guarded = Guarded::Row;
        self
    }

    /// These top-level config keys decide security (an endpoint, a credential reference): an
    /// untrusted project layer may not change them.
    pub fn guard_keys(mut self, keys: &[&str]) -> Self {
        self.guarded = Guarded::Keys(keys.iter().map(|k| (*k).to_owned()).collect());
        self
    }

    /// Project files (relative to the project directory, without `..`) whose digests this
    /// plugin wants trusted: `keel trust DIR` records each one present, and the kernel answers
    /// [`Context::project_file_trust`](super::Context::project_file_trust) for these paths
    /// only (a request for another path is refused: `UNDECLARED_TRUST_FILE`).
    pub fn trusts_project_files(mut self, paths: &[&str]) -> Self {
        self.trusted_files = paths.iter().map(|p| (*p).to_owned()).collect();
        self
    }
}
