//! Finding and fingerprinting plugin libraries; what is done with them is crate
//! `keel-loader`'s (re-exported here).
//!
//! Loading is split in two on purpose: [`locate`] finds each library, opens it once and takes
//! its blake3 digest (crate `keel-digest`: from the digest cache when the file is untouched)
//! *without running any of its code*, so the lock check can refuse a tampered library before
//! `dlopen` executes its initialisers; only then does [`manifests`] read each manifest — from
//! the manifest cache, or by opening that same open file (ABI major first, then abi_stable's
//! layout check, then the manifest), so a file swapped in between is not what runs — and a
//! row's library is open by the time it activates ([`PluginLibrary::open`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

pub use keel_digest::Cache as DigestCache;
pub use keel_digest::ManifestCache;
pub use keel_loader::{
    Loaded, Located, PluginLibrary, host_fingerprint, idle_rows, manifests, open_starting,
};

use crate::error::{KernelError, Result};
use crate::paths::{Paths, library_file_name};
use keel_config::Row;

/// Locates every distinct plugin the rows use, in first-use order, digesting each through
/// `cache`.
///
/// # Errors
/// [`KernelError::UnknownPlugin`] naming the first row whose plugin is not found;
/// [`KernelError::Io`] naming a library that cannot be read.
pub fn locate(rows: &[Row], paths: &Paths, cache: &mut DigestCache) -> Result<Vec<Located>> {
    let mut seen: BTreeMap<&str, ()> = BTreeMap::new();
    let mut found = Vec::new();
    for row in rows {
        if seen.insert(&row.plugin, ()).is_some() {
            continue;
        }
        let path = paths
            .find_plugin(&row.plugin)
            .ok_or_else(|| KernelError::UnknownPlugin {
                row: row.id.clone(),
                plugin: row.plugin.clone(),
                file: library_file_name(&row.plugin),
                searched: paths.plugin_path_display(),
            })?;
        found.push((row.plugin.clone(), path));
    }
    let files: Vec<PathBuf> = found.iter().map(|(_, path)| path.clone()).collect();
    let opened = keel_digest::open_all(&files, cache);
    found
        .into_iter()
        .zip(opened)
        .map(|((plugin, path), opened)| {
            let opened = opened.map_err(|e| KernelError::Io {
                path: e.path,
                reason: e.reason,
            })?;
            let digest = opened.digest.clone();
            Ok(Located {
                plugin,
                path,
                digest,
                opened,
            })
        })
        .collect()
}
