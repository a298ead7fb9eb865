//! Where the kernel looks for things: plugin libraries, profiles and bundles, the lock, and
//! `$KEEL_HOME`.
//!
//! Search order is fixed and documented (ARCHITECTURE §4.1): `KEEL_PLUGIN_PATH`, then `lib/`
//! beside the binary (dist layout), then the binary's own directory (a cargo target dir in a
//! dev checkout). The lock is only ever read from beside the binary, never from the data dir
//! (KRN-05): a lock elsewhere is ignored.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Resolved locations for one kernel invocation.
#[derive(Debug, Clone)]
pub struct Paths {
    /// Directory holding the running `keel` executable.
    pub exe_dir: PathBuf,
    /// Plugin library search path, in order.
    pub plugin_path: Vec<PathBuf>,
    /// Config roots (each may hold `profiles/` and `bundles/`), in order.
    pub config_roots: Vec<PathBuf>,
    /// `$KEEL_HOME` (default `~/.keel`).
    pub keel_home: PathBuf,
}

/// File name of a plugin's library: `libkeel_plugin_<name with _>.so`.
pub fn library_file_name(plugin: &str) -> String {
    format!(
        "{}keel_plugin_{}{}",
        std::env::consts::DLL_PREFIX,
        plugin.replace('-', "_"),
        std::env::consts::DLL_SUFFIX
    )
}

/// Whether `name` is a plugin library's file name (`libkeel_plugin_*.so`): what the lock's
/// library table pins and `keel doctor` counts.
pub fn is_plugin_library(name: &str) -> bool {
    name.strip_prefix(std::env::consts::DLL_PREFIX)
        .is_some_and(|rest| rest.starts_with("keel_plugin_"))
        && name.ends_with(std::env::consts::DLL_SUFFIX)
}

fn split_path_var(var: &str) -> Vec<PathBuf> {
    std::env::var_os(var)
        .map(|v| {
            std::env::split_paths(&v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default()
}

impl Paths {
    /// Discovers paths from the environment and the executable's location.
    pub fn discover() -> Paths {
        let exe_dir = std::env::current_exe()
            .ok()
            .and_then(|p| p.canonicalize().ok())
            .and_then(|p| p.parent().map(Path::to_path_buf))
            .unwrap_or_else(|| PathBuf::from("."));
        let mut plugin_path = split_path_var("KEEL_PLUGIN_PATH");
        if let Some(prefix) = exe_dir.parent() {
            plugin_path.push(prefix.join("lib"));
        }
        plugin_path.push(exe_dir.clone());

        let mut config_roots = split_path_var("KEEL_CONFIG_PATH");
        if let Some(prefix) = exe_dir.parent() {
            config_roots.push(prefix.join("share"));
        }
        // A dev checkout: the workspace this binary was built from.
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        if workspace.join("profiles").is_dir() {
            config_roots.push(workspace);
        }

        let keel_home = std::env::var_os("KEEL_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".keel")))
            .unwrap_or_else(|| PathBuf::from(".keel"));
        Paths {
            exe_dir,
            plugin_path,
            config_roots,
            keel_home,
        }
    }

    /// The lock file: always beside the binary (KRN-05).
    pub fn lock_file(&self) -> PathBuf {
        self.exe_dir.join("keel.lock")
    }

    /// Finds a plugin library by name.
    pub fn find_plugin(&self, plugin: &str) -> Option<PathBuf> {
        let file = library_file_name(plugin);
        self.plugin_path
            .iter()
            .map(|d| d.join(&file))
            .find(|p| p.is_file())
    }

    /// Every plugin library on the search path by file name: for each name the first file in
    /// search order, the one [`Paths::find_plugin`] returns (a later one is shadowed and never
    /// loaded). Nothing is opened. Names that are not UTF-8 are skipped: no plugin name maps
    /// to one.
    pub fn plugin_libraries(&self) -> BTreeMap<String, PathBuf> {
        let mut out = BTreeMap::new();
        for dir in &self.plugin_path {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                    continue;
                };
                let path = dir.join(&name);
                if is_plugin_library(&name) && path.is_file() {
                    out.entry(name).or_insert(path);
                }
            }
        }
        out
    }

    /// The search path as one printable string.
    pub fn plugin_path_display(&self) -> String {
        self.plugin_path
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(":")
    }
}
