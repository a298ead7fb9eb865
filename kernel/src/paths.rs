//! Where the kernel looks for things: plugin libraries, profiles and bundles, the lock, and
//! `$KEEL_HOME`.
//!
//! The search path is handed in: the `keel` binary (crate `keel-cli`, `layout.rs`) derives it
//! from where it runs (ARCHITECTURE §4.1). Search order within each list is the order given;
//! for each library name the first file wins. The lock is only ever read from beside the
//! binary, never from the data dir (KRN-05): a lock elsewhere is ignored.

use std::collections::BTreeMap;
use std::path::PathBuf;

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

impl Paths {
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
