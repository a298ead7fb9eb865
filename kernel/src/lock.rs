//! `keel.lock`: blake3 digests of every plugin library on the search path, and per profile its
//! libraries and assembly graph.
//!
//! The lock lives beside the `keel` binary (KRN-05; never in the data dir). A profile with an
//! entry of its own is checked in two steps: library digests before any library is opened (a
//! tampered file never runs), then the graph digest after manifests are read (a changed edge is
//! named). Any other profile, while a lock exists, is checked against the library table, which
//! `keel lock` fills with every `libkeel_plugin_*` library on the search path it ran with: a
//! library changed or added since then is refused before it is opened, whichever profile loads
//! it (issue 10 item 10); only that profile's graph is unpinned. No lock at all means
//! "unlocked". `keel doctor` says which of the three applies.
//!
//! Entries are keyed by [`LockKey`]: a patch that swaps a row changes the graph, so a patched
//! run has its own (`default --patch anthropic`; issue 23 item 9), else meets the profile's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{KernelError, Result};
use crate::graph::{Edge, Plan};
use crate::loader::{DigestCache, Located, PluginLibrary};
use crate::paths::Paths;
use keel_config::{LayerKind, ResolvedProfile};

/// Format version of `keel.lock`.
pub const LOCK_VERSION: u32 = 1;

/// The whole lock file.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockFile {
    /// Format version.
    pub version: u32,
    /// Every plugin library on the search path when the lock was last written: file name →
    /// `blake3:<hex>`. Absent in a lock written before the table existed: then a profile
    /// without an entry of its own is refused (fail closed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub libraries: Option<BTreeMap<String, String>>,
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

/// The lock entry of an assembly: its profile and the `--patch` files (as given) it applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockKey {
    /// The profile name.
    pub profile: String,
    /// The `--patch` layers' files, in the order applied.
    pub patches: Vec<String>,
}

impl LockKey {
    /// The key of a resolved profile.
    pub fn of(profile: &ResolvedProfile) -> LockKey {
        let patches = profile.layers.iter().filter(|l| l.kind == LayerKind::Patch);
        LockKey {
            profile: profile.name.clone(),
            patches: patches.map(|l| l.source.clone()).collect(),
        }
    }

    /// The entry's name under `[profiles]`, each patch by its file stem however it was named:
    /// `default --patch anthropic`. With `as_given`, the patch files as given instead: what
    /// follows `keel lock --profile` to write the entry, for messages.
    pub fn name(&self, as_given: bool) -> String {
        let stem = |f: &String| {
            Path::new(f)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
        };
        self.patches.iter().fold(self.profile.clone(), |name, f| {
            let patch = if as_given { None } else { stem(f) };
            format!("{name} --patch {}", patch.unwrap_or_else(|| f.clone()))
        })
    }
}

impl LockFile {
    /// The entry an assembly under `key` is checked against: its own, else (a patched run) the
    /// profile's, whose graph check refuses a patch that changed rows or edges.
    pub fn entry(&self, key: &LockKey) -> Option<&ProfileLock> {
        let own = self.profiles.get(&key.name(false));
        own.or_else(|| self.profiles.get(&key.profile))
    }
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

/// What [`verify_libraries`] reports as the locked digest of a library the table lacks.
pub const NOT_PINNED: &str =
    "nothing (the library was not on the search path when the lock was made)";

/// Checks the libraries of a profile that has no entry of its own against the lock's library
/// table, before anything is opened.
///
/// # Errors
/// [`KernelError::LockDigest`] naming a library that changed or was added since the lock;
/// [`KernelError::LockFile`] when the lock has no library table.
pub fn verify_libraries(
    lock_path: &Path,
    profile: &str,
    lock: &LockFile,
    located: &[Located],
) -> Result<()> {
    let Some(table) = &lock.libraries else {
        return Err(KernelError::LockFile {
            path: lock_path.to_owned(),
            reason: format!(
                "it has no [libraries] table (written by an older keel), so profile \
                 '{profile}', which has no entry of its own, cannot be checked; run \
                 `keel lock --profile {profile}`"
            ),
        });
    };
    for item in located {
        let file = item
            .path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        match table.get(&file) {
            Some(locked) if *locked == item.digest => {}
            locked => {
                return Err(KernelError::LockDigest {
                    lock: lock_path.to_owned(),
                    profile: profile.to_owned(),
                    plugin: item.plugin.clone(),
                    path: item.path.clone(),
                    locked: locked.cloned().unwrap_or_else(|| NOT_PINNED.to_owned()),
                    found: item.digest.clone(),
                });
            }
        }
    }
    Ok(())
}

/// Digests every plugin library on the search path through `cache` (nothing is loaded): the
/// library table as it would be written now. `known` digests (the profile's, computed by
/// `locate`) are reused.
///
/// # Errors
/// [`KernelError::Io`] naming a library that cannot be read.
pub fn library_table(
    paths: &Paths,
    known: &[Located],
    cache: &mut DigestCache,
) -> Result<BTreeMap<String, String>> {
    let found = paths.plugin_libraries();
    let (reused, todo): (Vec<_>, Vec<_>) = found
        .into_iter()
        .map(|(name, path)| {
            let digest = known
                .iter()
                .find(|l| l.path == path)
                .map(|l| l.digest.clone());
            (name, path, digest)
        })
        .partition(|(_, _, d)| d.is_some());
    let paths: Vec<PathBuf> = todo.iter().map(|(_, p, _)| p.clone()).collect();
    let digests = keel_digest::open_all(&paths, cache);
    let mut table: BTreeMap<String, String> = reused
        .into_iter()
        .filter_map(|(name, _, d)| Some((name, d?)))
        .collect();
    for ((name, _, _), opened) in todo.into_iter().zip(digests) {
        let opened = opened.map_err(|e| KernelError::Io {
            path: e.path,
            reason: e.reason,
        })?;
        table.insert(name, opened.digest);
    }
    Ok(table)
}

/// How the search path differs from a library table, by file name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Drift {
    /// On the search path with another digest than the table's.
    pub changed: Vec<String>,
    /// On the search path, not in the table.
    pub unpinned: Vec<String>,
    /// In the table, no longer on the search path (harmless: nothing can load it).
    pub gone: Vec<String>,
}

impl Drift {
    /// Compares the table `now` (as [`library_table`] computes it) with the `locked` one.
    pub fn between(locked: &BTreeMap<String, String>, now: &BTreeMap<String, String>) -> Drift {
        let mut drift = Drift::default();
        for (name, digest) in now {
            match locked.get(name) {
                Some(d) if d == digest => {}
                Some(_) => drift.changed.push(name.clone()),
                None => drift.unpinned.push(name.clone()),
            }
        }
        drift.gone = locked
            .keys()
            .filter(|n| !now.contains_key(*n))
            .cloned()
            .collect();
        drift
    }

    /// Whether a library any profile could load differs from the table.
    pub fn refuses_something(&self) -> bool {
        !self.changed.is_empty() || !self.unpinned.is_empty()
    }
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

/// Writes (or updates) the lock atomically (temp file in the same directory, then rename): the
/// entry named `entry_name` ([`LockKey::name`]), and the library table replaced by
/// `libraries`. Returns the table it replaced, if any (so `keel lock` can say what it
/// re-pinned).
///
/// # Errors
/// [`KernelError::LockFile`] for an existing lock it cannot read; [`KernelError::Io`].
pub fn write(
    path: &Path,
    entry_name: &str,
    entry: ProfileLock,
    libraries: BTreeMap<String, String>,
) -> Result<Option<BTreeMap<String, String>>> {
    let mut lock = read(path)?.unwrap_or(LockFile {
        version: LOCK_VERSION,
        libraries: None,
        profiles: BTreeMap::new(),
    });
    lock.profiles.insert(entry_name.to_owned(), entry);
    let previous = lock.libraries.replace(libraries);
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
    Ok(previous)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
        entries
            .iter()
            .map(|(n, d)| ((*n).to_owned(), (*d).to_owned()))
            .collect()
    }

    fn entry(digest: &str) -> ProfileLock {
        ProfileLock {
            graph_digest: digest.to_owned(),
            plugins: Vec::new(),
            edges: Vec::new(),
        }
    }

    // Issue 23 item 9: a patched run is checked against its own entry, else the profile's.
    #[test]
    fn a_patched_key_finds_its_own_entry_or_falls_back_to_the_profiles() {
        let key = LockKey {
            profile: "default".to_owned(),
            patches: vec!["share/profiles/patches/anthropic.toml".to_owned()],
        };
        assert_eq!(key.name(false), "default --patch anthropic");
        assert_eq!(
            key.name(true),
            "default --patch share/profiles/patches/anthropic.toml"
        );
        let mut lock = LockFile {
            version: LOCK_VERSION,
            libraries: None,
            profiles: BTreeMap::from([("default".to_owned(), entry("base"))]),
        };
        assert_eq!(
            lock.entry(&key).map(|e| e.graph_digest.as_str()),
            Some("base")
        );
        lock.profiles
            .insert("default --patch anthropic".to_owned(), entry("patched"));
        assert_eq!(
            lock.entry(&key).map(|e| e.graph_digest.as_str()),
            Some("patched")
        );
        let other = LockKey {
            profile: "headless".to_owned(),
            ..key
        };
        assert!(lock.entry(&other).is_none());
    }

    // Issue 10 item 10: what `keel lock` and `keel doctor` report between two tables.
    #[test]
    fn drift_names_changed_new_and_gone_libraries() {
        let locked = table(&[("a.so", "1"), ("b.so", "2"), ("gone.so", "3")]);
        let now = table(&[("a.so", "1"), ("b.so", "9"), ("new.so", "4")]);
        let drift = Drift::between(&locked, &now);
        assert_eq!(drift.changed, ["b.so"]);
        assert_eq!(drift.unpinned, ["new.so"]);
        assert_eq!(drift.gone, ["gone.so"]);
        assert!(drift.refuses_something());
        let only_gone = Drift::between(&locked, &table(&[("a.so", "1"), ("b.so", "2")]));
        assert!(!only_gone.refuses_something());
    }
}
