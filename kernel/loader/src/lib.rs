//! keel's plugin libraries as the kernel holds them (issue 25 item 3): what a start reads of
//! each library it digested, and when it opens it.
//!
//! - [`manifests`] (`library.rs`): each library's manifest, from the manifest cache
//!   (`keel-digest`'s [`ManifestCache`](keel_digest::ManifestCache), by digest and
//!   [`host_fingerprint`]) when it has the entry, else by opening the library.
//! - [`PluginLibrary::open`]: a library not yet open is opened when its row first activates,
//!   its bytes read again first when that is after start.
//! - [`idle_rows`] (`idle.rs`): which rows have no work for their config, and so are not
//!   opened or activated at start.
//! - [`schema`]: a row config against its manifest's JSON Schema.
//!
//! Why a crate of its own: the kernel proper (`kernel/src`) is held to a line budget so it
//! can be read in an afternoon; this is file and manifest bookkeeping with no fiber, bus or
//! service in it, and can be tested alone. The kernel re-exports it as `keel_kernel::loader`.

mod idle;
mod library;
pub mod schema;

use std::path::PathBuf;

use keel_plugin_api::host::{KernelCode, LoadError};

pub use idle::idle_rows;
pub use library::{Loaded, Located, PluginLibrary, manifests, open_starting};

/// Why a library's manifest could not be read or the library opened. Each names the row and
/// the file; the kernel wraps it (`KernelError::Loader`) with the same text and code.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LoaderError {
    /// A library could not be loaded.
    #[error("row '{row}': {source}")]
    Load {
        row: String,
        #[source]
        source: LoadError,
    },
    /// A manifest names a different plugin id than the row's plugin.
    #[error("row '{row}': library {path} declares plugin id '{found}', expected '{expected}'")]
    ManifestId {
        row: String,
        path: PathBuf,
        expected: String,
        found: String,
    },
    /// A library opened after start (an idle row's) is no longer the bytes that were digested
    /// and checked against the lock when keel started.
    #[error(
        "row '{row}': library {path} changed since keel started: it was {checked} when the lock \
         was checked, it is {found} now; it is not opened (restart keel to check it again)"
    )]
    LibraryChanged {
        row: String,
        path: PathBuf,
        checked: String,
        found: String,
    },
    /// A library answered another manifest than the one the manifest cache recorded for its
    /// digest (the assembly then runs again without the cache).
    #[error(
        "row '{row}': library {path} answered another manifest than the one cached for its digest"
    )]
    ManifestDrift { row: String, path: PathBuf },
    /// A library file could not be read.
    #[error("{path}: {reason}")]
    Io { path: PathBuf, reason: String },
    /// A linked plugin (no file) that is not loaded: never happens outside a broken harness.
    #[error("row '{row}': plugin {plugin} has no library file to open")]
    NoFile { row: String, plugin: String },
}

impl LoaderError {
    /// Stable code.
    pub fn code(&self) -> &'static str {
        match self {
            LoaderError::Load { source, .. } => source.code(),
            LoaderError::ManifestId { .. } | LoaderError::ManifestDrift { .. } => {
                KernelCode::PluginManifest.code()
            }
            LoaderError::LibraryChanged { .. } => KernelCode::LockDigest.code(),
            LoaderError::Io { .. } => keel_plugin_api::codes::ContractCode::Io.code(),
            LoaderError::NoFile { .. } => KernelCode::PluginOpen.code(),
        }
    }
}

/// What the manifest cache's entries are valid for: this keel (version, ABI major) as the
/// file system describes its executable now (path, device, inode, size, mtime, ctime), so a
/// rebuilt or replaced `keel` never believes another's "the layout check passed". `None`:
/// unknown (no cache is used).
pub fn host_fingerprint() -> Option<String> {
    let exe = std::env::current_exe().ok()?;
    let key = keel_digest::StatKey::of(&std::fs::metadata(&exe).ok()?)?;
    Some(format!(
        "keel {} abi {} exe {} {}",
        env!("CARGO_PKG_VERSION"),
        keel_plugin_api::abi::ABI_MAJOR,
        exe.display(),
        serde_json::to_string(&key).ok()?
    ))
}
