//! Finding, fingerprinting and loading plugin libraries.
//!
//! Loading is split in two on purpose: [`locate`] finds each library, opens it once and takes
//! its blake3 digest (crate `keel-digest`: from the digest cache when the file is untouched)
//! *without running any of its code*, so the lock check can refuse a tampered library before
//! `dlopen` executes its initialisers; only then does [`load`] open that same open file (ABI
//! major first, then abi_stable's layout check, then the manifest), so a file swapped in
//! between is not what runs.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

pub use keel_digest::Cache as DigestCache;
use keel_digest::Opened;
use keel_plugin_api::abi::TypeLayout;
use keel_plugin_api::host::{LoadedLibrary, load_library};
use keel_plugin_api::sdk::Manifest;

use crate::error::{KernelError, Result};
use crate::paths::{Paths, library_file_name};
use keel_config::Row;

/// A library found on the search path and digested, not yet loaded.
#[derive(Debug, Clone)]
pub struct Located {
    /// Plugin name.
    pub plugin: String,
    /// Library file.
    pub path: PathBuf,
    /// `blake3:<hex>` of the file's bytes.
    pub digest: String,
    /// The open file the digest describes, which [`load`] loads.
    pub opened: Opened,
}

/// An opened plugin library with its manifest.
#[derive(Debug)]
pub struct PluginLibrary {
    /// Plugin name.
    pub name: String,
    /// Library file.
    pub path: PathBuf,
    /// `blake3:<hex>`.
    pub digest: String,
    /// Parsed manifest.
    pub manifest: Manifest,
    /// The manifest exactly as the plugin returned it (for the lock).
    pub manifest_json: String,
    /// Entry points.
    pub library: LoadedLibrary,
    /// Layouts of the events the manifest declares: `(name, payload, output)`.
    pub event_layouts: Vec<(String, &'static TypeLayout, &'static TypeLayout)>,
}

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

/// Opens located libraries. `first_row` names the row to blame for each plugin.
///
/// # Errors
/// [`KernelError::Load`] (not a plugin, ABI mismatch, layout), [`KernelError::ManifestId`].
pub fn load(located: &[Located], rows: &[Row]) -> Result<BTreeMap<String, Arc<PluginLibrary>>> {
    let mut out = BTreeMap::new();
    for item in located {
        let row = rows
            .iter()
            .find(|r| r.plugin == item.plugin)
            .map(|r| r.id.clone())
            .unwrap_or_default();
        let open = item.opened.load_path();
        let clock = std::time::Instant::now();
        let library = load_library(&open).map_err(|e| KernelError::Load {
            row: row.clone(),
            source: e.naming(&open, &item.path),
        })?;
        let manifest_json =
            library
                .manifest_json(&item.path)
                .map_err(|source| KernelError::Load {
                    row: row.clone(),
                    source,
                })?;
        let manifest: Manifest =
            serde_json::from_str(&manifest_json).map_err(|e| KernelError::Load {
                row: row.clone(),
                source: keel_plugin_api::host::LoadError::Manifest {
                    path: item.path.clone(),
                    reason: e.to_string(),
                },
            })?;
        if manifest.id != item.plugin {
            return Err(KernelError::ManifestId {
                row,
                path: item.path.clone(),
                expected: item.plugin.clone(),
                found: manifest.id,
            });
        }
        let took_us = u64::try_from(clock.elapsed().as_micros()).unwrap_or(u64::MAX);
        tracing::debug!(target: "keel::boot", plugin = %item.plugin, took_us, "library opened");
        out.insert(
            item.plugin.clone(),
            Arc::new(PluginLibrary {
                name: item.plugin.clone(),
                path: item.path.clone(),
                digest: item.digest.clone(),
                manifest,
                manifest_json,
                event_layouts: library.event_layouts(),
                library,
            }),
        );
    }
    Ok(out)
}
