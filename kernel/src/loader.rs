//! Finding, fingerprinting and loading plugin libraries.
//!
//! Loading is split in two on purpose: [`locate`] finds each library and computes its blake3
//! digest *without running any of its code*, so the lock check can refuse a tampered library
//! before `dlopen` executes its initialisers; only then does [`load`] open it (ABI major first,
//! then abi_stable's layout check, then the manifest).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use keel_plugin_api::abi::TypeLayout;
use keel_plugin_api::host::{LoadedLibrary, load_library};
use keel_plugin_api::sdk::Manifest;

use crate::error::{KernelError, Result};
use crate::paths::{Paths, library_file_name};
use keel_config::Row;

/// A library found on the search path, not yet opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// Plugin name.
    pub plugin: String,
    /// Library file.
    pub path: PathBuf,
    /// `blake3:<hex>` of the file's bytes.
    pub digest: String,
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

/// blake3 digest of a file, `blake3:<hex>`.
///
/// # Errors
/// [`KernelError::Io`] when the file cannot be read.
fn digest_file(path: &std::path::Path) -> Result<String> {
    let mut hasher = blake3::Hasher::new();
    let mut file = std::fs::File::open(path).map_err(|e| KernelError::Io {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    // Large reads let blake3 hash many chunks per SIMD batch; `io::copy`'s 8 KiB buffer made
    // the digest a sixth of boot. Plain reads, not mmap: a file truncated while it is hashed
    // must be an error, not a SIGBUS.
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = std::io::Read::read(&mut file, &mut buf).map_err(|e| KernelError::Io {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(format!("blake3:{}", hasher.finalize().to_hex()))
}

/// Digests of `files`, in order, one result each.
///
/// Digests are the largest part of boot (every library is read whole): they are hashed on a
/// few threads. Results keep the input order, so the first error in that order can win.
pub fn digest_files(files: &[PathBuf]) -> Vec<Result<String>> {
    let workers = std::thread::available_parallelism()
        .map_or(1, std::num::NonZero::get)
        .clamp(1, 4);
    let chunk = files.len().div_ceil(workers).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = files
            .chunks(chunk)
            .map(|part| {
                let handle =
                    scope.spawn(move || part.iter().map(|p| digest_file(p)).collect::<Vec<_>>());
                (part, handle)
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|(part, h)| {
                // One result per library, whatever happened, so results stay aligned.
                h.join().unwrap_or_else(|_| {
                    part.iter()
                        .map(|path| {
                            Err(KernelError::Io {
                                path: path.clone(),
                                reason: "the digest thread panicked".to_owned(),
                            })
                        })
                        .collect()
                })
            })
            .collect()
    })
}

/// Locates every distinct plugin the rows use, in first-use order.
///
/// # Errors
/// [`KernelError::UnknownPlugin`] naming the first row whose plugin is not found.
pub fn locate(rows: &[Row], paths: &Paths) -> Result<Vec<Located>> {
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
    let digests = digest_files(&files);
    found
        .into_iter()
        .zip(digests)
        .map(|((plugin, path), digest)| {
            Ok(Located {
                plugin,
                path,
                digest: digest?,
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
        let library = load_library(&item.path).map_err(|source| KernelError::Load {
            row: row.clone(),
            source,
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
