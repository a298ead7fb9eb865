//! The kernel's error type. Every variant names the file, row, plugin or edge at fault and
//! carries a stable code; the CLI maps all of them to exit code 2 (ARCHITECTURE §11).
//!
//! Who returns what: the loader returns `UnknownPlugin`, `Io` and `Loader` (crate
//! `keel-loader`); assembly (`graph`) returns `MissingProvider`, `DuplicateProvider`, `Cycle`,
//! `NoDriver`; the lock check returns `Lock*`; config validation returns `Config` /
//! `RowConfig`; boot returns `Activation` when a row fails or stays pending.

use std::path::PathBuf;

use keel_plugin_api::codes::ContractCode;
use keel_plugin_api::host::KernelCode;

use keel_config::ConfigError;

/// Result alias.
pub type Result<T> = std::result::Result<T, KernelError>;

/// Everything that stops the kernel before or during assembly.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// Profile or layer problem (file and line inside).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A row's config does not match its plugin's schema.
    #[error(
        "row '{row}' (plugin {plugin}): invalid config at {pointer}: {reason} (set by {source_layer})"
    )]
    RowConfig {
        row: String,
        plugin: String,
        pointer: String,
        reason: String,
        source_layer: String,
    },
    /// No library for a plugin name on the search path.
    #[error("row '{row}': unknown plugin '{plugin}': no {file} in {searched}")]
    UnknownPlugin {
        row: String,
        plugin: String,
        file: String,
        searched: String,
    },
    /// A library's manifest could not be read or the library opened (crate `keel-loader`).
    #[error(transparent)]
    Loader(#[from] keel_loader::LoaderError),
    /// A manifest declares something the kernel cannot take (a command that clashes).
    #[error("plugin '{plugin}': invalid manifest: {reason}")]
    Manifest { plugin: String, reason: String },
    /// A required facility has no provider.
    #[error(
        "row '{row}' (plugin {plugin}) requires '{facility}', which no row in this profile provides"
    )]
    MissingProvider {
        row: String,
        plugin: String,
        facility: String,
    },
    /// Two rows provide an exclusive facility.
    #[error("facility '{facility}' is exclusive but provided by rows '{first}' and '{second}'")]
    DuplicateProvider {
        facility: String,
        first: String,
        second: String,
    },
    /// A dependency cycle.
    #[error("dependency cycle: {path}")]
    Cycle { path: String },
    /// A command no plugin of the profile adds (`keel NAME` without the row that serves it).
    #[error("no plugin in profile '{profile}' provides `{command}` (no row serves '{service}')")]
    NoCommand {
        profile: String,
        command: String,
        service: String,
    },
    /// `keel run` on a profile without a driver.
    #[error("profile '{profile}' has no driver: no row provides 'keel.driver'")]
    NoDriver { profile: String },
    /// A plugin file changed since `keel lock`.
    #[error(
        "{lock}: plugin '{plugin}' ({path}) differs from the lock: locked {locked}, found {found}; run `keel lock --profile {profile}` if the change is intended"
    )]
    LockDigest {
        lock: PathBuf,
        profile: String,
        plugin: String,
        path: PathBuf,
        locked: String,
        found: String,
    },
    /// The assembly graph differs from the lock.
    #[error(
        "{lock}: assembly graph of profile '{profile}' differs from the lock: {detail}; run `keel lock --profile {profile}` if the change is intended"
    )]
    LockGraph {
        lock: PathBuf,
        profile: String,
        detail: String,
    },
    /// The lock file is unreadable or malformed.
    #[error("{path}: invalid lock file: {reason}")]
    LockFile { path: PathBuf, reason: String },
    /// A row failed to activate or stayed pending at boot.
    #[error("{0}")]
    Activation(String),
    /// Two plugins declare one event differently (before any row activates; issue 24).
    #[error("row '{row}': {detail}")]
    EventConflict { row: String, detail: String },
    /// I/O with a path.
    #[error("{path}: {reason}")]
    Io { path: PathBuf, reason: String },
    /// The driver failed.
    #[error("driver row '{row}': {code}: {message}")]
    Driver {
        row: String,
        code: String,
        message: String,
    },
    /// The profile a driver asked to be relaunched under cannot be prepared (its code is the
    /// cause's).
    #[error(
        "cannot run under profile '{profile}' ({reason}): {source}; pass --profile to choose the profile"
    )]
    Relaunch {
        profile: String,
        reason: String,
        source: Box<KernelError>,
    },
}

impl KernelError {
    /// Stable code for logs and JSON output.
    pub fn code(&self) -> &'static str {
        match self {
            KernelError::Config(e) => e.code(),
            KernelError::RowConfig { .. } => KernelCode::RowConfig.code(),
            KernelError::UnknownPlugin { .. } => KernelCode::UnknownPlugin.code(),
            KernelError::Loader(e) => e.code(),
            KernelError::Manifest { .. } => KernelCode::PluginManifest.code(),
            KernelError::MissingProvider { .. } => KernelCode::MissingProvider.code(),
            KernelError::DuplicateProvider { .. } => KernelCode::DuplicateProvider.code(),
            KernelError::Cycle { .. } => KernelCode::DependencyCycle.code(),
            KernelError::NoDriver { .. } => KernelCode::NoDriver.code(),
            KernelError::NoCommand { .. } => KernelCode::NoCommand.code(),
            KernelError::LockDigest { .. } => KernelCode::LockDigest.code(),
            KernelError::LockGraph { .. } => KernelCode::LockGraph.code(),
            KernelError::LockFile { .. } => KernelCode::LockFile.code(),
            KernelError::Activation(_) => KernelCode::Activation.code(),
            KernelError::EventConflict { .. } => KernelCode::EventDeclarationConflict.code(),
            KernelError::Io { .. } => ContractCode::Io.code(),
            KernelError::Driver { .. } => KernelCode::Driver.code(),
            KernelError::Relaunch { source, .. } => source.code(),
        }
    }
}
