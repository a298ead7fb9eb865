//! A plugin library as the kernel holds it (issue 25 item 3): found and digested
//! ([`Located`]), then its manifest — from the manifest cache when it has an entry for the
//! library's digest, else by opening the library ([`manifests`]) — and the library opened
//! when its row first activates ([`PluginLibrary::open`]). Every open is the same: the
//! digested open file (`/proc/self/fd/N`), ABI major first, then abi_stable's layout check,
//! then the manifest, which must be the one the assembly was planned with.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use keel_config::Row;
use keel_digest::{ManifestCache, Opened};
use keel_plugin_api::abi::TypeLayout;
use keel_plugin_api::host::{LoadError, LoadedLibrary, load_library};
use keel_plugin_api::sdk::Manifest;

use crate::LoaderError;

type Result<T> = std::result::Result<T, LoaderError>;

/// A library found on the search path and digested, not yet loaded.
#[derive(Debug, Clone)]
pub struct Located {
    /// Plugin name.
    pub plugin: String,
    /// Library file.
    pub path: PathBuf,
    /// `blake3:<hex>` of the file's bytes.
    pub digest: String,
    /// The open file the digest describes, which is what loads.
    pub opened: Opened,
}

/// A plugin library with its manifest, opened now or later: a row with no work for its
/// config (issue 25 item 3) is planned from its manifest — from the manifest cache when it
/// has an entry for the library's digest — and its library is opened only when the row first
/// activates.
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
    /// The row blamed for a failure to open.
    row: String,
    /// The digested open file (`None`: linked into this image, always loaded).
    file: Option<Opened>,
    loaded: OnceLock<Loaded>,
    opening: Mutex<()>,
}

/// An opened library's entry points.
#[derive(Debug)]
pub struct Loaded {
    /// Entry points.
    pub library: LoadedLibrary,
    /// Layouts of the events the manifest declares: `(name, payload, output)`.
    pub event_layouts: Vec<(String, &'static TypeLayout, &'static TypeLayout)>,
}

impl PluginLibrary {
    /// A library already loaded (linked into this image: the in-process harness).
    pub fn linked(
        manifest: Manifest,
        manifest_json: String,
        path: PathBuf,
        library: LoadedLibrary,
    ) -> PluginLibrary {
        let loaded = OnceLock::new();
        let _ = loaded.set(Loaded {
            event_layouts: library.event_layouts(),
            library,
        });
        PluginLibrary {
            name: manifest.id.clone(),
            path,
            digest: "linked".to_owned(),
            row: String::new(),
            manifest,
            manifest_json,
            file: None,
            loaded,
            opening: Mutex::new(()),
        }
    }

    /// The entry points, if the library is open.
    pub fn loaded(&self) -> Option<&Loaded> {
        self.loaded.get()
    }

    /// Opens the library if it is not open yet (ABI major, layouts, manifest) and checks that
    /// it answers the manifest it was planned with. `recheck`: first read its bytes again and
    /// refuse them if they are not the ones digested (and checked against the lock) at start —
    /// for a library opened after start, which may have been written in place since.
    ///
    /// # Errors
    /// [`LoaderError::LibraryChanged`], [`LoaderError::Load`], [`LoaderError::ManifestDrift`],
    /// [`LoaderError::Io`].
    pub fn open(&self, recheck: bool) -> Result<&Loaded> {
        if let Some(loaded) = self.loaded.get() {
            return Ok(loaded);
        }
        let _turn = self
            .opening
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(loaded) = self.loaded.get() {
            return Ok(loaded);
        }
        let Some(file) = &self.file else {
            return Err(LoaderError::NoFile {
                row: self.row.clone(),
                plugin: self.name.clone(),
            });
        };
        if recheck {
            let found = file.rehash().map_err(|e| LoaderError::Io {
                path: e.path,
                reason: e.reason,
            })?;
            if found != self.digest {
                return Err(LoaderError::LibraryChanged {
                    row: self.row.clone(),
                    path: self.path.clone(),
                    checked: self.digest.clone(),
                    found,
                });
            }
        }
        let (library, json) = open_checked(file, &self.path, &self.row, &self.name)?;
        if !same_manifest(&json, &self.manifest_json) {
            return Err(LoaderError::ManifestDrift {
                row: self.row.clone(),
                path: self.path.clone(),
            });
        }
        Ok(self.loaded.get_or_init(|| Loaded {
            event_layouts: library.event_layouts(),
            library,
        }))
    }
}

/// Whether two manifest JSON texts say the same (key order aside).
fn same_manifest(a: &str, b: &str) -> bool {
    a == b
        || matches!(
            (serde_json::from_str::<serde_json::Value>(a), serde_json::from_str::<serde_json::Value>(b)),
            (Ok(x), Ok(y)) if x == y
        )
}

/// The library of each located plugin with its manifest: from `cache` where it has an entry
/// for the library's digest (nothing is opened), else by opening it now (ABI major first,
/// then abi_stable's layout check, then the manifest), recording what the open answered.
/// `rows` names the row to blame for each plugin.
///
/// # Errors
/// [`LoaderError::Load`] (not a plugin, ABI mismatch, layout), [`LoaderError::ManifestId`].
pub fn manifests(
    located: &[Located],
    rows: &[Row],
    cache: &mut ManifestCache,
) -> Result<BTreeMap<String, Arc<PluginLibrary>>> {
    let mut out = BTreeMap::new();
    for item in located {
        let row = rows
            .iter()
            .find(|r| r.plugin == item.plugin)
            .map(|r| r.id.clone())
            .unwrap_or_default();
        let cached = cache.get(&item.digest).and_then(|json| {
            let manifest = serde_json::from_str::<Manifest>(json).ok()?;
            (manifest.id == item.plugin).then(|| (manifest, json.to_owned()))
        });
        let library = PluginLibrary {
            name: item.plugin.clone(),
            path: item.path.clone(),
            digest: item.digest.clone(),
            manifest: Manifest::new(&item.plugin, ""),
            manifest_json: String::new(),
            row: row.clone(),
            file: Some(item.opened.clone()),
            loaded: OnceLock::new(),
            opening: Mutex::new(()),
        };
        let library = if let Some((manifest, manifest_json)) = cached {
            tracing::debug!(target: "keel::boot", plugin = %item.plugin, "manifest from the cache (library not opened)");
            PluginLibrary {
                manifest,
                manifest_json,
                ..library
            }
        } else {
            let clock = std::time::Instant::now();
            let (opened, manifest_json) =
                open_checked(&item.opened, &item.path, &row, &item.plugin)?;
            let manifest: Manifest =
                serde_json::from_str(&manifest_json).map_err(|e| LoaderError::Load {
                    row: row.clone(),
                    source: LoadError::Manifest {
                        path: item.path.clone(),
                        reason: e.to_string(),
                    },
                })?;
            cache.record(&item.digest, &manifest_json);
            let took_us = u64::try_from(clock.elapsed().as_micros()).unwrap_or(u64::MAX);
            tracing::debug!(target: "keel::boot", plugin = %item.plugin, took_us, "library opened");
            let _ = library.loaded.set(Loaded {
                event_layouts: opened.event_layouts(),
                library: opened,
            });
            PluginLibrary {
                manifest,
                manifest_json,
                ..library
            }
        };
        out.insert(item.plugin.clone(), Arc::new(library));
    }
    Ok(out)
}

/// Opens `file` (ABI major, layouts) and reads its manifest, which must name `plugin`.
fn open_checked(
    file: &Opened,
    path: &std::path::Path,
    row: &str,
    plugin: &str,
) -> Result<(LoadedLibrary, String)> {
    let open = file.load_path();
    let library = load_library(&open).map_err(|e| LoaderError::Load {
        row: row.to_owned(),
        source: e.naming(&open, path),
    })?;
    let manifest_json = library
        .manifest_json(path)
        .map_err(|source| LoaderError::Load {
            row: row.to_owned(),
            source,
        })?;
    let value: serde_json::Value =
        serde_json::from_str(&manifest_json).map_err(|e| LoaderError::Load {
            row: row.to_owned(),
            source: LoadError::Manifest {
                path: path.to_owned(),
                reason: e.to_string(),
            },
        })?;
    let id = value
        .get("id")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if id != plugin {
        return Err(LoaderError::ManifestId {
            row: row.to_owned(),
            path: path.to_owned(),
            expected: plugin.to_owned(),
            found: id,
        });
    }
    Ok((library, manifest_json))
}

/// Opens the library of every row of `rows` that is not `idle` and is not open yet (cached
/// manifests leave them closed): their load errors stay start-up errors. An idle row's
/// library stays closed until the row first activates.
///
/// # Errors
/// The first library that does not open ([`PluginLibrary::open`]).
pub fn open_starting(
    rows: &[Row],
    libraries: &BTreeMap<String, Arc<PluginLibrary>>,
    idle: &std::collections::BTreeSet<String>,
) -> Result<()> {
    for row in rows {
        let Some(lib) = libraries.get(&row.plugin) else {
            continue;
        };
        if idle.contains(&row.id) {
            tracing::debug!(target: "keel::boot", row = %row.id, plugin = %row.plugin, "row idle: no work for its config, library left closed");
        } else if lib.loaded().is_none() {
            let clock = std::time::Instant::now();
            lib.open(false)?;
            let took_us = u64::try_from(clock.elapsed().as_micros()).unwrap_or(u64::MAX);
            tracing::debug!(target: "keel::boot", plugin = %lib.name, took_us, "library opened");
        }
    }
    Ok(())
}
