//! From a resolved profile to a checked assembly: locate → project trust (from the lock's
//! manifests) → lock digests → manifests (cached by digest, else by opening) → project trust →
//! config schemas → idle rows → facility graph → open the starting rows' libraries → lock
//! graph. Every step fails with an error naming its culprit, and nothing a plugin ships runs
//! before the lock's digest check passed.
//!
//! Trust comes before the lock (issue 23 item 5): a planted layer disabling a guarded row is
//! `PROJECT_UNTRUSTED`, never `LOCK_GRAPH … run keel lock`; the guarded keys come from the
//! manifests the lock recorded (data, not plugin code), then again from the loaded ones.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use crate::error::{KernelError, Result};
use crate::graph::{GraphRow, Plan, plan};
use crate::loader::{
    DigestCache, Located, ManifestCache, PluginLibrary, host_fingerprint, idle_rows, locate,
    manifests, open_starting,
};
use crate::lock;
use crate::paths::Paths;
use crate::runtime::RowSpec;
use keel_config::trust;
use keel_config::{ResolvedProfile, Row};
use keel_loader::LoaderError;
use keel_plugin_api::sdk::{Guarded, Manifest};

/// What the lock said about this assembly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockState {
    /// Digests and graph match the profile's entry in `keel.lock` beside the binary.
    Locked(PathBuf),
    /// The lock has no entry for this profile: its libraries matched the lock's library
    /// table (every library on the search path when it was made); its graph is not pinned.
    Libraries(PathBuf),
    /// No lock beside the binary.
    Unlocked(String),
    /// The caller asked not to check (`keel lock` itself).
    NotChecked,
}

/// A checked assembly, ready to start.
#[derive(Debug)]
pub struct Assembly {
    /// The profile.
    pub profile: ResolvedProfile,
    /// Libraries by plugin name.
    pub libraries: Libraries,
    /// Where each library was found.
    pub located: Vec<Located>,
    /// The facility graph.
    pub plan: Plan,
    /// Rows with no work for their config: checked, not opened, not activated at start
    /// (issue 25 item 3).
    pub idle: BTreeSet<String>,
    /// Lock verdict.
    pub lock: LockState,
}

/// Runs every check.
///
/// # Errors
/// Any assembly error, naming the row, plugin, file or edge.
pub fn assemble(paths: &Paths, profile: ResolvedProfile, check_lock: bool) -> Result<Assembly> {
    // `keel lock` (no check) pins bytes it read: its digests never come from the cache.
    let mut cache = if check_lock {
        DigestCache::open(&paths.keel_home)
    } else {
        DigestCache::refresh(&paths.keel_home)
    };
    let mut clock = std::time::Instant::now();
    let mut located = locate(&profile.rows, paths, &mut cache)?;
    phase("libraries located and digested", &mut clock);
    let lock_path = paths.lock_file();
    let lock_file = if check_lock {
        lock::read(&lock_path)?
    } else {
        None
    };
    let untrusted = || profile.project.iter().chain(&profile.workspace_patches);
    if let Some(lock_file) = &lock_file {
        for project in untrusted() {
            trust::check_project(project, |plugin| locked_guarded(lock_file, plugin))?;
        }
    }
    // Errors name what `keel lock --profile` takes to write the entry (issue 23 item 9).
    let lock_key = lock::LockKey::of(&profile);
    let key = lock_key.name(true);
    let entry = lock_file.as_ref().and_then(|l| l.entry(&lock_key).cloned());
    let verify = |located: &[Located]| match (&lock_file, &entry) {
        (_, Some(entry)) => lock::verify_digests(&lock_path, &key, entry, located),
        // A lock covers every library on its search path, whichever profile loads it.
        (Some(lock_file), None) => lock::verify_libraries(&lock_path, &key, lock_file, located),
        (None, None) => Ok(()),
    };
    // A refusal rests on bytes read: a cached digest the lock refuses is hashed again (and
    // its entry replaced) first.
    if verify(&located).is_err() && located.iter().any(|l| l.opened.cached) {
        located = locate(
            &profile.rows,
            paths,
            &mut DigestCache::refresh(&paths.keel_home),
        )?;
    }
    verify(&located)?;
    phase("lock checked", &mut clock);
    // `keel lock` records manifests the libraries answered, never cached ones.
    let mut manifest_cache = match (check_lock, host_fingerprint()) {
        (true, Some(host)) => ManifestCache::open(&paths.keel_home, &host),
        _ => ManifestCache::off(),
    };
    let checked = match checked(&profile, &located, &mut manifest_cache, &mut clock) {
        // A cached manifest the library contradicts: forget the cache and open everything.
        Err(KernelError::Loader(LoaderError::ManifestDrift { row, path })) => {
            tracing::warn!(target: "keel::kernel", %row, path = %path.display(), "the manifest cache disagrees with a library; assembling again without it");
            let rerun = checked(&profile, &located, &mut ManifestCache::off(), &mut clock);
            for l in rerun.iter().flat_map(|c| c.libraries.values()) {
                manifest_cache.record(&l.digest, &l.manifest_json);
            }
            rerun
        }
        other => other,
    };
    // Saved whatever the verdict: what an open proved holds for the next start too.
    manifest_cache.save();
    let Checked {
        libraries,
        idle,
        plan,
    } = checked?;
    let lock_state = match (&entry, &lock_file, check_lock) {
        (Some(entry), _, _) => {
            lock::verify_graph(&lock_path, &key, entry, &plan)?;
            LockState::Locked(lock_path)
        }
        (None, Some(_), _) => LockState::Libraries(lock_path),
        (None, None, true) => LockState::Unlocked(format!(
            "no keel.lock beside the binary ({})",
            lock_path.display()
        )),
        (None, None, false) => LockState::NotChecked,
    };
    Ok(Assembly {
        profile,
        libraries,
        located,
        plan,
        idle,
        lock: lock_state,
    })
}

/// What [`checked`] proved.
struct Checked {
    libraries: Libraries,
    idle: BTreeSet<String>,
    plan: Plan,
}

/// Manifests (cached or from opening) → project trust → config schemas → idle rows →
/// facility graph → the libraries of the rows that start opened.
fn checked(
    profile: &ResolvedProfile,
    located: &[Located],
    cache: &mut ManifestCache,
    clock: &mut std::time::Instant,
) -> Result<Checked> {
    let libraries = manifests(located, &profile.rows, cache)?;
    phase("manifests read (cached, or opened and checked)", clock);
    for project in profile.project.iter().chain(&profile.workspace_patches) {
        trust::check_project(project, |plugin| {
            libraries.get(plugin).map(|l| l.manifest.guarded.clone())
        })?;
    }
    for row in &profile.rows {
        validate_row(row, &libraries, cache)?;
    }
    phase("project trust and config schemas checked", clock);
    let dir = std::env::current_dir().ok();
    let idle = idle_rows(
        &profile.rows,
        |p| libraries.get(p).map(|l| &l.manifest),
        dir.as_deref(),
    );
    let graph_rows: Vec<GraphRow<'_>> = profile
        .rows
        .iter()
        .filter_map(|r| {
            libraries.get(&r.plugin).map(|l| GraphRow {
                id: &r.id,
                plugin: &r.plugin,
                manifest: &l.manifest,
            })
        })
        .collect();
    let plan = plan(&graph_rows)?;
    phase("facility graph planned", clock);
    open_starting(&profile.rows, &libraries, &idle)?;
    phase("libraries of the starting rows opened", clock);
    Ok(Checked {
        libraries,
        idle,
        plan,
    })
}

/// One `keel::boot` line for a step of the assembly (issue 25 item 1), then restarts `clock`.
fn phase(step: &str, clock: &mut std::time::Instant) {
    let took_us = u64::try_from(clock.elapsed().as_micros()).unwrap_or(u64::MAX);
    tracing::debug!(target: "keel::boot", took_us, "{step}");
    *clock = std::time::Instant::now();
}

/// What the manifest the lock recorded for `plugin` (in any entry) guards.
fn locked_guarded(lock_file: &lock::LockFile, plugin: &str) -> Option<Guarded> {
    let mut locked = lock_file.profiles.values().flat_map(|e| e.plugins.iter());
    let found = locked.find(|p| p.name == plugin)?;
    serde_json::from_str::<Manifest>(&found.manifest)
        .ok()
        .map(|m| m.guarded)
}

type Libraries = BTreeMap<String, Arc<PluginLibrary>>;

fn validate_row(row: &Row, libraries: &Libraries, cache: &mut ManifestCache) -> Result<()> {
    let Some(lib) = libraries.get(&row.plugin) else {
        return Ok(());
    };
    let schema = &lib.manifest.config_schema;
    crate::schema::validate_cached(cache, &lib.digest, schema, &row.config).map_err(
        |(pointer, reason)| {
            let top = pointer
                .trim_start_matches('/')
                .split('/')
                .next()
                .unwrap_or_default()
                .to_owned();
            let source_layer = row
                .provenance
                .key(&top)
                .map(|k| k.set_by.to_string())
                .unwrap_or_else(|| row.provenance.inserted_by.to_string());
            KernelError::RowConfig {
                row: row.id.clone(),
                plugin: row.plugin.clone(),
                pointer,
                reason,
                source_layer,
            }
        },
    )
}

impl Assembly {
    /// Rows in activation order (by layer, then profile order) with their libraries.
    pub fn row_specs(&self) -> Vec<RowSpec> {
        let mut specs: Vec<(usize, usize, RowSpec)> = self
            .profile
            .rows
            .iter()
            .enumerate()
            .filter_map(|(i, r)| {
                let plugin = Arc::clone(self.libraries.get(&r.plugin)?);
                Some((
                    self.plan.layer_of(&r.id).unwrap_or(usize::MAX),
                    i,
                    RowSpec {
                        id: r.id.clone(),
                        plugin,
                        config: r.config.clone(),
                        idle: self.idle.contains(&r.id),
                    },
                ))
            })
            .collect();
        specs.sort_by_key(|(layer, i, _)| (*layer, *i));
        specs.into_iter().map(|(_, _, s)| s).collect()
    }

    /// Whether some row provides the driver seam.
    pub fn has_driver(&self) -> bool {
        self.provides(
            <keel_plugin_api::services::driver::Driver as keel_plugin_api::sdk::Service>::NAME,
        )
    }

    /// Whether some row's plugin provides `service`.
    pub fn provides(&self, service: &str) -> bool {
        self.libraries
            .values()
            .any(|l| l.manifest.provides.iter().any(|p| p.name == service))
    }
}
