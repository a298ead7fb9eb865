//! Errors of profile/bundle configuration (CFG).
//!
//! Owns [`ConfigError`]: every variant names the file, row, bundle or `-c` argument at fault and
//! renders as a single line starting in lowercase, so the CLI can print it after `error: ` and exit
//! with code 2. [`ConfigError::code`] gives a stable machine-readable code per variant for the JSON
//! output formats and for tests that must not depend on wording.

use std::path::PathBuf;

use keel_plugin_api::host::ConfigCode;

/// A configuration error. Display is one line; [`ConfigError::code`] is stable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A layer file exists but could not be read.
    #[error("cannot read config file {path}: {message}", path = .path.display())]
    Io { path: PathBuf, message: String },

    /// Malformed TOML or a shape error (unknown key, missing field, wrong type) in a layer file.
    #[error("{path}:{line}:{col}: {message}", path = .path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        col: usize,
        message: String,
    },

    /// `bundles` or `description` in a layer that is not a profile.
    #[error(
        "{path}:{line}:{col}: `{key}` is only allowed in a profile, not in a {layer} layer",
        path = .path.display()
    )]
    ProfileOnlyKey {
        path: PathBuf,
        line: usize,
        col: usize,
        key: String,
        layer: String,
    },

    /// A row id, plugin name or bundle name outside `[a-z0-9][a-z0-9-]*`.
    #[error("{location}: invalid {what} '{value}': expected [a-z0-9][a-z0-9-]*")]
    InvalidId {
        /// `path:line:col` for file layers, the layer description for in-memory layers.
        location: String,
        /// `row id`, `plugin name` or `bundle name`.
        what: &'static str,
        value: String,
    },

    /// A profile name found in none of the config roots.
    #[error("unknown profile '{profile}' (searched {searched})")]
    UnknownProfile {
        profile: String,
        /// The `profiles/<name>.toml` candidates tried, comma-separated, or `no config roots`.
        searched: String,
    },

    /// A profile given as a path that does not exist.
    #[error("profile file {path} does not exist", path = .path.display())]
    ProfileNotFound { path: PathBuf },

    /// A bundle named by a profile found in none of the config roots.
    #[error(
        "unknown bundle '{bundle}' referenced by profile {profile}:{line} (searched {searched})",
        profile = .profile.display()
    )]
    UnknownBundle {
        bundle: String,
        profile: PathBuf,
        line: usize,
        searched: String,
    },

    /// The same bundle listed twice in one profile.
    #[error(
        "bundle '{bundle}' is listed twice in profile {profile}:{line}",
        profile = .profile.display()
    )]
    DuplicateBundle {
        bundle: String,
        profile: PathBuf,
        line: usize,
    },

    /// An `insert` of an id that is already a live row.
    #[error("duplicate row '{id}': inserted by {layer} but already inserted by {first}")]
    DuplicateRow {
        id: String,
        /// The layer inserting it now, e.g. `profile:demo (/p/profiles/demo.toml:12)`.
        layer: String,
        /// The layer that inserted the live row.
        first: String,
    },

    /// A malformed `-c ROW.KEY=VALUE` argument, or one that cannot be applied.
    #[error("bad override '-c {arg}': {reason}")]
    BadOverride { arg: String, reason: String },

    /// A `--patch FILE` that does not exist.
    #[error("patch file {path} does not exist", path = .path.display())]
    MissingPatch { path: PathBuf },

    /// A `--patch NAME` found in none of the config roots nor `$KEEL_HOME`.
    #[error("unknown patch '{patch}' (searched {searched})")]
    UnknownPatch {
        patch: String,
        /// The `profiles/patches/<name>.toml` candidates tried, comma-separated.
        searched: String,
    },

    /// `$KEEL_HOME/trusted-projects.json` is unreadable, malformed or of another format.
    #[error("{path}: {reason}", path = .path.display())]
    TrustFile { path: PathBuf, reason: String },

    /// A row asked about a project file its plugin did not declare
    /// (`Manifest::trusts_project_files`).
    #[error(
        "row '{row}' asked whether {path} is trusted, but its plugin declares no such project \
         file (it declares: {declared})"
    )]
    UndeclaredTrustFile {
        row: String,
        path: String,
        declared: String,
    },

    /// The project layer changes security-relevant config and is not trusted as it is now.
    #[error(
        "project layer {path} is {state} and changes security-relevant settings: {changes}; \
         {remedy}",
        path = .path.display()
    )]
    ProjectUntrusted {
        path: PathBuf,
        dir: PathBuf,
        /// [`super::trust::TrustState::remedy`]: what vouches for this kind of layer.
        remedy: String,
        /// [`super::trust::TrustState::describe`].
        state: String,
        /// The guarded changes, comma-separated.
        changes: String,
    },

    /// A `--patch` file the resumed session recorded is not as it was (issue 23 item 3).
    #[error(
        "patch file {path} recorded by {reason} {what} since (digest {recorded} then); restore it, or resume with --profile and the layers you choose",
        path = .path.display()
    )]
    RecordedPatchChanged {
        path: PathBuf,
        /// Whose record it is (`session S was created with it`).
        reason: String,
        /// `changed` or `vanished`.
        what: &'static str,
        /// The recorded digest, shortened.
        recorded: String,
    },

    /// A file a keel run changed, offered to `--trust-project` or `--patch`.
    #[error("{0}")]
    ProjectTainted(Box<Tainted>),
}

/// A tainted file offered to `--trust-project` or `--patch` (issue 23 item 6), boxed in
/// [`ConfigError::ProjectTainted`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{path} was changed by {by}, so {what} does not accept it; review it, then run `keel trust {dir}` to clear it",
    path = .path.display(),
    dir = .dir.display()
)]
pub struct Tainted {
    /// The tainted file.
    pub path: PathBuf,
    /// The run that changed it.
    pub by: String,
    /// `--trust-project` or `--patch`.
    pub what: &'static str,
    /// The project directory `keel trust` takes.
    pub dir: PathBuf,
}

impl ConfigError {
    /// Stable machine-readable code of this error.
    pub fn code(&self) -> &'static str {
        match self {
            ConfigError::Io { .. } => ConfigCode::Io.code(),
            ConfigError::Parse { .. } => ConfigCode::Parse.code(),
            ConfigError::ProfileOnlyKey { .. } => ConfigCode::ProfileOnlyKey.code(),
            ConfigError::InvalidId { .. } => ConfigCode::InvalidId.code(),
            ConfigError::UnknownProfile { .. } => ConfigCode::UnknownProfile.code(),
            ConfigError::ProfileNotFound { .. } => ConfigCode::UnknownProfile.code(),
            ConfigError::UnknownBundle { .. } => ConfigCode::UnknownBundle.code(),
            ConfigError::DuplicateBundle { .. } => ConfigCode::DuplicateBundle.code(),
            ConfigError::DuplicateRow { .. } => ConfigCode::DuplicateRow.code(),
            ConfigError::BadOverride { .. } => ConfigCode::BadOverride.code(),
            ConfigError::MissingPatch { .. } | ConfigError::UnknownPatch { .. } => {
                ConfigCode::MissingPatch.code()
            }
            ConfigError::TrustFile { .. } => ConfigCode::TrustFile.code(),
            ConfigError::UndeclaredTrustFile { .. } => ConfigCode::UndeclaredTrustFile.code(),
            ConfigError::ProjectUntrusted { .. } => ConfigCode::ProjectUntrusted.code(),
            ConfigError::ProjectTainted(_) => ConfigCode::ProjectTainted.code(),
            ConfigError::RecordedPatchChanged { .. } => ConfigCode::RecordedPatchChanged.code(),
        }
    }
}

/// Collapses a possibly multi-line message (toml's messages sometimes contain newlines) into one
/// line, so every [`ConfigError`] displays on a single line.
pub(crate) fn one_line(message: &str) -> String {
    message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}
