//! `keel.lock`: blake3 digests of every plugin library and the assembly graph, per profile.
//!
//! The lock lives beside the `keel` binary (KRN-05; never in the data dir) and is checked in two
//! steps: library digests before any library is opened (a tampered file never runs), then the
//! graph digest after manifests are read (a changed edge is named). No lock, or no entry for the
//! profile, means "unlocked", which `keel doctor` reports.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{KernelError, Result};
use crate::graph::{Edge, Plan};
use crate::loader::{Located, PluginLibrary};

/// Format version of `keel.lock`.
pub const LOCK_VERSION: u32 = 1;

/// The whole lock file.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockFile {
    /// Format version.
    pub version: u32,
    /// Per profile name.
    #[serde(default)]
    pub profiles: BTreeMap<String, ProfileLock>,
}

/// What is pinned for one profile.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileLock {
    /// `blake3:<hex>` of the graph (rows, plugins, edges).
    pub graph_digest: String,
    /// Libraries.
    pub plugins: Vec<PluginLock>,
    /// Edges as text (`consumer -> provider (facility)`).
    pub edges: Vec<String>,
}

/// One pinned library.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginLock {
    /// Plugin name.
    pub name: String,
    /// Plugin version from its manifest.
    pub version: String,
    /// `blake3:<hex>` of the file.
    pub digest: String,
    /// File name (not the path: a dist tree is relocatable).
    pub file: String,
    /// The manifest JSON.
    pub manifest: String,
}

/// Reads the lock; `Ok(None)` when there is none.
///
/// # Errors
/// [`KernelError::LockFile`] for unreadable, malformed or wrong-version files.
pub fn read(path: &Path) -> Result<Option<LockFile>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(KernelError::LockFile {
                path: path.to_owned(),
                reason: e.to_string(),
            });
        }
    };
    let lock: LockFile = toml::from_str(&text).map_err(|e| {
        // One line (toml's messages may span several), with the line it points at.
        let message = e
            .message()
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("; ");
        let reason = match e.span() {
            Some(span) => {
                let before = text.as_bytes().get(..span.start).unwrap_or_default();
                let line = before.iter().filter(|b| **b == b'\n').count() + 1;
                format!("line {line}: {message}")
            }
            None => message,
        };
        KernelError::LockFile {
            path: path.to_owned(),
            reason,
        }
    })?;
    if lock.version != LOCK_VERSION {
        return Err(KernelError::LockFile {
            path: path.to_owned(),
            reason: format!(
                "unsupported lock version {}, this keel writes {LOCK_VERSION}",
                lock.version
            ),
        });
    }
    Ok(Some(lock))
}

/// Checks library digests before anything is opened.
///
/// # Errors
/// [`KernelError::LockDigest`] naming the plugin; [`KernelError::LockGraph`] when the set of
/// plugins differs.
pub fn verify_digests(
    lock_path: &Path,
    profile: &str,
    entry: &ProfileLock,
    located: &[Located],
) -> Result<()> {
    for item in located {
        match entry.plugins.iter().find(|p| p.name == item.plugin) {
            Some(p) if p.digest == item.digest => {}
            Some(p) => {
                return Err(KernelError::LockDigest {
                    lock: lock_path.to_owned(),
                    profile: profile.to_owned(),
                    plugin: item.plugin.clone(),
                    path: item.path.clone(),
                    locked: p.digest.clone(),
                    found: item.digest.clone(),
                });
            }
            None => {
                return Err(KernelError::LockGraph {
                    lock: lock_path.to_owned(),
                    profile: profile.to_owned(),
                    detail: format!("plugin '{}' is not in the lock", item.plugin),
                });
            }
        }
    }
    if let Some(missing) = entry
        .plugins
        .iter()
        .find(|p| !located.iter().any(|l| l.plugin == p.name))
    {
        return Err(KernelError::LockGraph {
            lock: lock_path.to_owned(),
            profile: profile.to_owned(),
            detail: format!("locked plugin '{}' is no longer used", missing.name),
        });
    }
    Ok(())
}

/// Checks the graph after manifests were read, naming the first differing edge.
///
/// # Errors
/// [`KernelError::LockGraph`].
pub fn verify_graph(
    lock_path: &Path,
    profile: &str,
    entry: &ProfileLock,
    plan: &Plan,
) -> Result<()> {
    if entry.graph_digest == plan.digest {
        return Ok(());
    }
    let now: Vec<String> = plan.edges.iter().map(Edge::to_string).collect();
    let detail = if let Some(added) = now.iter().find(|e| !entry.edges.contains(e)) {
        format!("edge '{added}' is new")
    } else if let Some(gone) = entry.edges.iter().find(|e| !now.contains(e)) {
        format!("edge '{gone}' is gone")
    } else {
        "rows changed (ids or plugins)".to_owned()
    };
    Err(KernelError::LockGraph {
        lock: lock_path.to_owned(),
        profile: profile.to_owned(),
        detail,
    })
}

/// Builds the entry for a profile.
pub fn entry_for(
    plan: &Plan,
    libraries: &BTreeMap<String, std::sync::Arc<PluginLibrary>>,
) -> ProfileLock {
    ProfileLock {
        graph_digest: plan.digest.clone(),
        plugins: libraries
            .values()
            .map(|l| PluginLock {
                name: l.name.clone(),
                version: l.manifest.version.clone(),
                digest: l.digest.clone(),
                file: l
                    .path
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                manifest: l.manifest_json.clone(),
            })
            .collect(),
        edges: plan.edges.iter().map(Edge::to_string).collect(),
    }
}

/// Writes (or updates) the lock atomically: temp file in the same directory, then rename.
///
/// # Errors
/// [`KernelError::Io`].
pub fn write(path: &Path, profile: &str, entry: ProfileLock) -> Result<PathBuf> {
    let mut lock = read(path)?.unwrap_or(LockFile {
        version: LOCK_VERSION,
        profiles: BTreeMap::new(),
    });
    lock.profiles.insert(profile.to_owned(), entry);
    let body = toml::to_string_pretty(&lock).map_err(|e| KernelError::Io {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    let text = format!("# keel.lock: written by `keel lock`; do not edit by hand.\n{body}");
    let tmp = path.with_extension("lock.tmp");
    let io = |e: std::io::Error| KernelError::Io {
        path: path.to_owned(),
        reason: e.to_string(),
    };
    std::fs::write(&tmp, text).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)?;
    Ok(path.to_owned())
}
