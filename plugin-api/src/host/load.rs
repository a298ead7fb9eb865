//! Opening a plugin library: the plain ABI-major check first, then abi_stable's root module.
//!
//! Libraries are never unloaded (ARCHITECTURE §3): the libloading handle is leaked on purpose
//! and abi_stable leaks its own, so every pointer a plugin handed out stays valid for the life
//! of the process.

use std::path::{Path, PathBuf};

use abi_stable::library::{RootModule, lib_header_from_path};
use abi_stable::std_types::RResult;
use async_ffi::FfiFuture;

use crate::abi::{ABI_MAJOR, ABI_SYMBOL, AbiResult, FiberId, HostApi_Ref, HostCtx, PluginRoot_Ref};

/// Why a library could not be loaded. Every variant names the file.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LoadError {
    /// The dynamic loader refused the file (not ELF, missing deps, …).
    #[error("{path}: cannot open library: {reason}")]
    Open { path: PathBuf, reason: String },
    /// The library has no `KEEL_PLUGIN_ABI` symbol.
    #[error("{path}: not a keel plugin (no KEEL_PLUGIN_ABI symbol)")]
    NotAPlugin { path: PathBuf },
    /// The ABI major differs.
    #[error(
        "{path}: plugin ABI {plugin}, kernel ABI {kernel}; rebuild the plugin against keel-plugin-api ABI {kernel}"
    )]
    AbiMismatch {
        path: PathBuf,
        plugin: u32,
        kernel: u32,
    },
    /// abi_stable's layout check failed.
    #[error("{path}: plugin layout incompatible with this kernel: {reason}")]
    Layout { path: PathBuf, reason: String },
    /// The manifest entry failed or returned invalid JSON.
    #[error("{path}: invalid manifest: {reason}")]
    Manifest { path: PathBuf, reason: String },
}

impl LoadError {
    /// Stable code.
    pub fn code(&self) -> &'static str {
        use super::codes::KernelCode;
        match self {
            LoadError::Open { .. } => KernelCode::PluginOpen.code(),
            LoadError::NotAPlugin { .. } => KernelCode::NotAPlugin.code(),
            LoadError::AbiMismatch { .. } => KernelCode::AbiMismatch.code(),
            LoadError::Layout { .. } => KernelCode::AbiLayout.code(),
            LoadError::Manifest { .. } => KernelCode::PluginManifest.code(),
        }
    }

    /// The same error naming `real` where it names `open`: the kernel hands the loader
    /// `/proc/self/fd/N` for the library file it opened and digested (issue 25 item 2).
    pub fn naming(self, open: &Path, real: &Path) -> LoadError {
        let file = |p: PathBuf| if p == open { real.to_owned() } else { p };
        let text = |r: String| r.replace(&*open.to_string_lossy(), &real.to_string_lossy());
        match self {
            LoadError::Open { path, reason } => LoadError::Open {
                path: file(path),
                reason: text(reason),
            },
            LoadError::NotAPlugin { path } => LoadError::NotAPlugin { path: file(path) },
            LoadError::AbiMismatch {
                path,
                plugin,
                kernel,
            } => LoadError::AbiMismatch {
                path: file(path),
                plugin,
                kernel,
            },
            LoadError::Layout { path, reason } => LoadError::Layout {
                path: file(path),
                reason: text(reason),
            },
            LoadError::Manifest { path, reason } => LoadError::Manifest {
                path: file(path),
                reason: text(reason),
            },
        }
    }
}

/// A loaded plugin library.
#[derive(Clone, Copy)]
pub struct LoadedLibrary {
    root: PluginRoot_Ref,
}

impl std::fmt::Debug for LoadedLibrary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LoadedLibrary")
    }
}

/// Reads the plain `KEEL_PLUGIN_ABI` static without running abi_stable.
///
/// # Errors
/// [`LoadError::Open`] or [`LoadError::NotAPlugin`].
pub fn read_abi_major(path: &Path) -> Result<u32, LoadError> {
    // SAFETY: loading a library runs its initialisers; plugins are trusted code (ARCHITECTURE
    // §3, docs/security.md) and the lock's digest check ran before this call.
    let lib = unsafe { libloading::Library::new(path) }.map_err(|e| LoadError::Open {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    // SAFETY: the symbol, if present, is a `u32` static exported by `export_plugin!`.
    let major = unsafe {
        match lib.get::<*const u32>(ABI_SYMBOL) {
            Ok(sym) => Some(**sym),
            Err(_) => None,
        }
    };
    // Never unload: leak the handle.
    std::mem::forget(lib);
    major.ok_or_else(|| LoadError::NotAPlugin {
        path: path.to_owned(),
    })
}

/// Opens a plugin: ABI major, abi_stable header and layout, root module.
///
/// # Errors
/// Any [`LoadError`].
pub fn load_library(path: &Path) -> Result<LoadedLibrary, LoadError> {
    let major = read_abi_major(path)?;
    if major != ABI_MAJOR {
        return Err(LoadError::AbiMismatch {
            path: path.to_owned(),
            plugin: major,
            kernel: ABI_MAJOR,
        });
    }
    let header = lib_header_from_path(path).map_err(|e| LoadError::Layout {
        path: path.to_owned(),
        reason: super::first_error_line(&e.to_string()),
    })?;
    let root = header
        .init_root_module::<PluginRoot_Ref>()
        .map_err(|e| LoadError::Layout {
            path: path.to_owned(),
            reason: super::first_error_line(&e.to_string()),
        })?;
    let _ = <PluginRoot_Ref as RootModule>::NAME;
    Ok(LoadedLibrary { root })
}

impl LoadedLibrary {
    /// A plugin linked into this image (no library file): `root` is what `export_plugin!`'s
    /// entry points make, built by the caller (the in-process test harness, `keel-plugin-test`).
    /// Nothing is opened and nothing is checked: the plugin was compiled against this very
    /// `keel-plugin-api`.
    pub fn from_root(root: PluginRoot_Ref) -> LoadedLibrary {
        LoadedLibrary { root }
    }

    /// A plugin crate linked into this image as an `rlib`: `header` is the `LIB_HEADER` its
    /// `export_plugin!` exported; `name` stands for the file in errors. abi_stable's layout
    /// check runs as for a library file.
    ///
    /// # Errors
    /// [`LoadError::Layout`].
    pub fn linked(
        header: &'static abi_stable::library::LibHeader,
        name: &Path,
    ) -> Result<LoadedLibrary, LoadError> {
        let root = header
            .init_root_module::<PluginRoot_Ref>()
            .map_err(|e| LoadError::Layout {
                path: name.to_owned(),
                reason: super::first_error_line(&e.to_string()),
            })?;
        Ok(LoadedLibrary { root })
    }

    /// The manifest JSON.
    ///
    /// # Errors
    /// The plugin's manifest error.
    pub fn manifest_json(&self, path: &Path) -> Result<String, LoadError> {
        match (self.root.manifest())() {
            RResult::ROk(s) => Ok(s.into_string()),
            RResult::RErr(e) => Err(LoadError::Manifest {
                path: path.to_owned(),
                reason: format!("{}: {}", e.code, e.message),
            }),
        }
    }

    /// Layouts of the events the plugin declares: `(name, payload, output)`.
    pub fn event_layouts(
        &self,
    ) -> Vec<(
        String,
        &'static crate::abi::TypeLayout,
        &'static crate::abi::TypeLayout,
    )> {
        (self.root.event_layouts())()
            .into_iter()
            .map(|e| (e.name.into_string(), e.payload, e.output))
            .collect()
    }

    /// Activates one fiber. `max_log_level` is the kernel's most verbose kept level
    /// (0 off, 1 error … 5 trace).
    pub fn activate(
        &self,
        fiber: FiberId,
        api: HostApi_Ref,
        max_log_level: u8,
    ) -> FfiFuture<AbiResult<()>> {
        let ctx = HostCtx {
            abi: ABI_MAJOR,
            fiber,
            api: api.0.to_raw_ptr().cast::<()>(),
            api_layout: <HostApi_Ref as abi_stable::StableAbi>::LAYOUT,
            max_log_level,
        };
        (self.root.activate())(ctx)
    }

    /// Calls the library's shutdown entry.
    pub fn shutdown(&self) {
        (self.root.shutdown())();
    }
}
