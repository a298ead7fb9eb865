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
    /// When a row of this plugin has no work for its config (issue 25 item 3): such a row is
    /// *idle* — the kernel checks it from its manifest (schema, facility graph, trust) but
    /// neither opens its library nor activates it before the first request. `None`: every
    /// row has work (the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_when: Option<IdleWhen>,
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

/// When a row has no work (issue 25 item 3; docs/plugin-authoring.md "Idle rows"): every
/// listed top-level config key is empty and every listed project file is absent. Data, not
/// code, so the kernel can decide it from a cached manifest without opening the library.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdleWhen {
    /// Top-level config keys that must each be absent, `null`, `false`, `0`, `""`, `[]` or
    /// `{}` (so a key whose serde default is not one of these must not be listed).
    #[serde(default)]
    pub empty: Vec<String>,
    /// Files, relative to the working directory (no `..`, not absolute), that must not exist:
    /// what the plugin would read on its own when it activates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub absent: Vec<String>,
}

impl IdleWhen {
    /// Whether a row with `config`, started in `dir`, has no work. Any doubt (a path that
    /// leaves `dir`, a file whose existence cannot be told) is work.
    pub fn holds(&self, config: &serde_json::Value, dir: &std::path::Path) -> bool {
        let empty = |key: &String| match config.get(key) {
            None | Some(serde_json::Value::Null) => true,
            Some(serde_json::Value::Bool(b)) => !b,
            Some(serde_json::Value::Number(n)) => n.as_f64() == Some(0.0),
            Some(serde_json::Value::String(s)) => s.is_empty(),
            Some(serde_json::Value::Array(a)) => a.is_empty(),
            Some(serde_json::Value::Object(o)) => o.is_empty(),
        };
        let absent = |rel: &String| {
            let rel = std::path::Path::new(rel);
            let inside = rel
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)));
            inside && matches!(dir.join(rel).try_exists(), Ok(false))
        };
        config.is_object() && self.empty.iter().all(empty) && self.absent.iter().all(absent)
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
            idle_when: None,
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

    /// A row has no work while every one of these top-level config keys is empty (absent,
    /// `null`, `false`, `0`, `""`, `[]`, `{}`): the kernel leaves it idle — unopened and
    /// inactive — until a config reload gives it work or a service it provides is asked for
    /// (issue 25 item 3). Only for rows nothing else needs at start: see
    /// docs/plugin-authoring.md "Idle rows".
    pub fn idle_when_empty(mut self, keys: &[&str]) -> Self {
        let idle = self.idle_when.get_or_insert_with(IdleWhen::default);
        idle.empty = keys.iter().map(|k| (*k).to_owned()).collect();
        self
    }

    /// With [`Manifest::idle_when_empty`]: and while none of these files (relative to the
    /// working directory) exists — files the plugin would read on its own at activation.
    pub fn idle_while_absent(mut self, paths: &[&str]) -> Self {
        let idle = self.idle_when.get_or_insert_with(IdleWhen::default);
        idle.absent = paths.iter().map(|p| (*p).to_owned()).collect();
        self
    }
}

#[cfg(test)]
mod idle_tests {
    use super::IdleWhen;
    use serde_json::json;

    // issue 25 item 3: what counts as "no work".
    #[test]
    fn idle_holds_only_when_every_key_is_empty_and_every_file_absent() {
        let dir = tempfile::tempdir().expect("tempdir");
        let idle = IdleWhen {
            empty: vec!["servers".into(), "flag".into()],
            absent: vec!["a/settings.json".into()],
        };
        for config in [json!({}), json!({"servers": {}, "flag": false, "other": 1})] {
            assert!(idle.holds(&config, dir.path()), "{config}");
        }
        for config in [
            json!({"servers": {"x": {}}}),
            json!({"flag": true}),
            json!({"servers": [1]}),
            json!({"flag": "yes"}),
            json!({"flag": 2}),
            json!("not an object"),
        ] {
            assert!(!idle.holds(&config, dir.path()), "{config}");
        }
        std::fs::create_dir(dir.path().join("a")).expect("mkdir");
        std::fs::write(dir.path().join("a/settings.json"), "{}").expect("write");
        assert!(
            !idle.holds(&json!({}), dir.path()),
            "a present file is work"
        );
        let escaping = IdleWhen {
            empty: vec![],
            absent: vec!["../elsewhere".into()],
        };
        assert!(
            !escaping.holds(&json!({}), dir.path()),
            "a path leaving the directory is work"
        );
    }
}
