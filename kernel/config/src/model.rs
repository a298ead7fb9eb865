//! The data model of an assembled configuration: rows, kernel settings, layers and provenance.
//!
//! These are plain data types shared by the assembler (`assemble.rs`), the renderer (`dump.rs`) and
//! the rest of the kernel. Provenance (CFG-08) lives next to the data it explains, so a row can
//! never lose track of the layers that shaped it.

use std::fmt;
use std::path::PathBuf;

/// Default for [`KernelSettings::fault_threshold`].
pub const DEFAULT_FAULT_THRESHOLD: u32 = 3;
/// Default for [`KernelSettings::listener_deadline_ms`].
pub const DEFAULT_LISTENER_DEADLINE_MS: u64 = 60_000;
/// Default for [`KernelSettings::activation_deadline_ms`].
pub const DEFAULT_ACTIVATION_DEADLINE_MS: u64 = 60_000;

/// What kind of layer an operation came from, in application order (CFG-02).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LayerKind {
    /// A bundle named by the profile (`bundle:<name>`).
    Bundle(String),
    /// The profile's own operations (`profile:<name>`).
    Profile(String),
    /// `$KEEL_HOME/config.toml`.
    User,
    /// `<project>/.keel/config.toml`.
    Project,
    /// A `--patch FILE`.
    Patch,
    /// One `-c ROW.KEY=VALUE` argument.
    Cli,
    /// An in-memory patch added by the launcher at live boot; never shown by a dump (CFG-07/08).
    Launcher,
}

impl fmt::Display for LayerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayerKind::Bundle(name) => write!(f, "bundle:{name}"),
            LayerKind::Profile(name) => write!(f, "profile:{name}"),
            LayerKind::User => f.write_str("user"),
            LayerKind::Project => f.write_str("project"),
            LayerKind::Patch => f.write_str("patch"),
            LayerKind::Cli => f.write_str("cli"),
            LayerKind::Launcher => f.write_str("launcher"),
        }
    }
}

/// One applied layer: its kind and where it came from (a file path, or the `-c` text).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LayerRef {
    pub kind: LayerKind,
    /// The file path, `-c ROW.KEY=VALUE` for a cli layer, or the launcher's label.
    pub source: String,
}

impl LayerRef {
    /// Creates a layer reference.
    pub fn new(kind: LayerKind, source: impl Into<String>) -> Self {
        LayerRef {
            kind,
            source: source.into(),
        }
    }

    /// Like `Display`, but with `:line` after the source when the line is known.
    pub fn at(&self, line: Option<usize>) -> String {
        match line {
            Some(line) => format!("{} ({}:{line})", self.kind, self.source),
            None => self.to_string(),
        }
    }

    /// True for launcher-only layers, which a dump never shows.
    pub fn is_launcher(&self) -> bool {
        self.kind == LayerKind::Launcher
    }
}

impl fmt::Display for LayerRef {
    /// `bundle:base (/etc/keel/bundles/base.toml)`, `cli (-c agent-loop.max_steps=3)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.kind, self.source)
    }
}

/// Who set one top-level config key (or kernel setting) and whom it overrode (CFG-08).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyProvenance {
    pub key: String,
    /// The layer that set the current value.
    pub set_by: LayerRef,
    /// Earlier layers that set this key and were overridden, oldest first.
    pub overrode: Vec<LayerRef>,
}

/// The history of one live row (CFG-08).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowProvenance {
    /// The layer whose `insert` created the row.
    pub inserted_by: LayerRef,
    /// Layers whose `replace` swapped the whole config, in order.
    pub replaced_by: Vec<LayerRef>,
    /// `-c` (and other single-key) layers that set one key, in order.
    pub overridden_by: Vec<LayerRef>,
    /// Set when this insert revived an id that an earlier layer disabled.
    pub previously_disabled_by: Option<LayerRef>,
    /// Per top-level config key, in config order.
    pub keys: Vec<KeyProvenance>,
}

impl RowProvenance {
    /// Provenance of a row freshly inserted by `layer` with the given top-level keys.
    pub(crate) fn inserted<'a>(layer: &LayerRef, keys: impl Iterator<Item = &'a String>) -> Self {
        RowProvenance {
            inserted_by: layer.clone(),
            replaced_by: Vec::new(),
            overridden_by: Vec::new(),
            previously_disabled_by: None,
            keys: keys
                .map(|key| KeyProvenance {
                    key: key.clone(),
                    set_by: layer.clone(),
                    overrode: Vec::new(),
                })
                .collect(),
        }
    }

    /// The provenance of one top-level key, if it has a value.
    pub fn key(&self, key: &str) -> Option<&KeyProvenance> {
        self.keys.iter().find(|k| k.key == key)
    }
}

/// One row of the final plugin tree.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Row id, `[a-z0-9][a-z0-9-]*`, unique among live rows.
    pub id: String,
    /// The plugin that serves this row.
    pub plugin: String,
    /// Always a JSON object.
    pub config: serde_json::Value,
    pub provenance: RowProvenance,
}

/// A row that some layer disabled and no later layer re-inserted.
#[derive(Debug, Clone, PartialEq)]
pub struct DisabledRow {
    pub id: String,
    pub plugin: String,
    pub inserted_by: LayerRef,
    pub disabled_by: LayerRef,
}

/// Kernel-level settings from `[kernel]` tables (any layer; later wins, per key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelSettings {
    /// Faults before a plugin is quarantined.
    pub fault_threshold: u32,
    /// Default deadline of one parallel or serial listener call (0 = none). Waterfall
    /// listeners wrap long operations and only get the deadline they register with.
    pub listener_deadline_ms: u64,
    /// Deadline of one activation and of one effect disposer (0 = none).
    pub activation_deadline_ms: u64,
    /// `--trust-project` for this invocation (never a config key): what the kernel answers a
    /// plugin asking whether a project trust file may be used.
    pub trust_project: bool,
}

impl Default for KernelSettings {
    fn default() -> Self {
        KernelSettings {
            fault_threshold: DEFAULT_FAULT_THRESHOLD,
            listener_deadline_ms: DEFAULT_LISTENER_DEADLINE_MS,
            activation_deadline_ms: DEFAULT_ACTIVATION_DEADLINE_MS,
            trust_project: false,
        }
    }
}

/// Where configuration comes from. Empty/`None` fields simply contribute no layer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigSources {
    /// Config roots in lookup order; each may hold `profiles/` and `bundles/`.
    pub roots: Vec<PathBuf>,
    /// The user layer is `keel_home/config.toml`, applied if it exists.
    pub keel_home: Option<PathBuf>,
    /// The project layer is `project_dir/.keel/config.toml`, applied if it exists.
    pub project_dir: Option<PathBuf>,
    /// `--patch FILE` layers, in order; each must exist.
    pub patches: Vec<PathBuf>,
    /// Raw `-c ROW.KEY=VALUE` arguments, in order.
    pub overrides: Vec<String>,
    /// `--trust-project`: the user vouches for the project layer of this invocation.
    pub trust_project: bool,
}

/// One row as a layer leaves it: what the trust check compares (ARCHITECTURE §6).
#[derive(Debug, Clone, PartialEq)]
pub struct RowState {
    pub id: String,
    pub plugin: String,
    pub config: serde_json::Value,
}

/// The project layer (`<project>/.keel/config.toml`) and what it did to the tree. The model can
/// write a workspace, so this layer is untrusted until `keel trust` recorded its digest; the
/// rows before and after it let the kernel see whether it touched anything security-relevant
/// once the plugins' manifests say what that is.
#[derive(Debug, Clone, PartialEq)]
pub struct ProjectLayer {
    /// The layer file.
    pub path: PathBuf,
    /// The project directory (canonical when it resolves), the trust record's key.
    pub dir: PathBuf,
    /// blake3 of the bytes that were parsed and applied (hex).
    pub digest: String,
    /// Live rows right before the layer.
    pub before: Vec<RowState>,
    /// Live rows right after it.
    pub after: Vec<RowState>,
    /// Whether it may change security-relevant config (read when the layer was applied).
    pub trust: super::trust::TrustState,
}

/// The state a dump shows: everything but launcher-only layers (CFG-08).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DumpView {
    pub(crate) rows: Vec<Row>,
    pub(crate) kernel: KernelSettings,
    pub(crate) kernel_provenance: Vec<KeyProvenance>,
    pub(crate) disabled: Vec<DisabledRow>,
    pub(crate) layers: Vec<LayerRef>,
}

/// A profile with all its layers applied.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedProfile {
    /// The profile name (file stem when given as a path).
    pub name: String,
    /// The profile file.
    pub path: PathBuf,
    /// The profile's `description`, if any.
    pub description: Option<String>,
    /// Bundle names, in the order the profile lists them.
    pub bundles: Vec<String>,
    /// The final live rows, in insertion order (a re-inserted id goes to the end).
    pub rows: Vec<Row>,
    pub kernel: KernelSettings,
    /// Kernel settings some layer set (absent keys keep their defaults).
    pub kernel_provenance: Vec<KeyProvenance>,
    /// `warning: ...` lines (unmatched replace/disable/-c), in application order.
    pub warnings: Vec<String>,
    /// Every applied layer, in order, including launcher layers.
    pub layers: Vec<LayerRef>,
    /// Rows disabled and not re-inserted.
    pub disabled: Vec<DisabledRow>,
    /// The project layer, when one was applied.
    pub project: Option<ProjectLayer>,
    /// The `--patch` files inside the workspace (issue 23 item 6): they follow the project
    /// layer's trust rule, so each is checked like it.
    pub workspace_patches: Vec<ProjectLayer>,
    /// Snapshot taken before the first launcher patch; what dumps render.
    pub(crate) dump_view: Option<Box<DumpView>>,
}

impl ResolvedProfile {
    /// An empty tree for `name` at `path`: no rows, default kernel settings.
    pub(crate) fn empty(name: String, path: PathBuf) -> Self {
        ResolvedProfile {
            name,
            path,
            description: None,
            bundles: Vec::new(),
            rows: Vec::new(),
            kernel: KernelSettings::default(),
            kernel_provenance: Vec::new(),
            warnings: Vec::new(),
            layers: Vec::new(),
            disabled: Vec::new(),
            project: None,
            workspace_patches: Vec::new(),
            dump_view: None,
        }
    }

    /// The live rows as [`RowState`]s.
    pub(crate) fn row_states(&self) -> Vec<RowState> {
        self.rows
            .iter()
            .map(|r| RowState {
                id: r.id.clone(),
                plugin: r.plugin.clone(),
                config: r.config.clone(),
            })
            .collect()
    }

    /// The live row with this id.
    pub fn row(&self, id: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.id == id)
    }

    /// What a dump shows: the tree before any launcher-only patch.
    pub(crate) fn dump_view(&self) -> View<'_> {
        match &self.dump_view {
            Some(view) => View {
                rows: &view.rows,
                kernel: &view.kernel,
                kernel_provenance: &view.kernel_provenance,
                disabled: &view.disabled,
                layers: &view.layers,
            },
            None => View {
                rows: &self.rows,
                kernel: &self.kernel,
                kernel_provenance: &self.kernel_provenance,
                disabled: &self.disabled,
                layers: &self.layers,
            },
        }
    }
}

/// A borrowed [`DumpView`]: the snapshot, or the live state when no launcher patch was applied.
#[derive(Debug, Clone, Copy)]
pub(crate) struct View<'a> {
    pub(crate) rows: &'a [Row],
    pub(crate) kernel: &'a KernelSettings,
    pub(crate) kernel_provenance: &'a [KeyProvenance],
    pub(crate) disabled: &'a [DisabledRow],
    pub(crate) layers: &'a [LayerRef],
}
