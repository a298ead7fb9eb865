//! The run's half of taint (issue 23 item 6; `keel_config::taint` owns the records): digest
//! the workspace's `.keel/`, the project files the profile's plugins declare
//! (`Manifest::trusts_project_files`) and workspace `--patch` files before the driver runs and
//! again after it returned — whatever it returned, error or signal code included — and record
//! what changed as tainted by this run, one stderr line per file so the user knows what to
//! review before `keel trust`.

use std::path::{Path, PathBuf};

use keel_config::taint::{self, Snapshot};
use keel_config::{LayerKind, ResolvedProfile};
use keel_kernel::assemble::Assembly;
use keel_kernel::paths::Paths;

/// The project files the assembly's plugins declare, under `workspace` (canonical where it
/// resolves, as the snapshot names them).
pub fn declared_files(assembly: &Assembly, workspace: &Path) -> Vec<PathBuf> {
    let root = workspace
        .canonicalize()
        .unwrap_or_else(|_| workspace.to_path_buf());
    let mut out: Vec<PathBuf> = Vec::new();
    for lib in assembly.libraries.values() {
        for rel in &lib.manifest.trusted_files {
            let path = root.join(rel);
            if keel_config::trust::valid_rel(rel) && !out.contains(&path) {
                out.push(path);
            }
        }
    }
    out
}

/// The `--patch` files `profile` applied.
pub fn patch_files(profile: &ResolvedProfile) -> Vec<PathBuf> {
    profile
        .layers
        .iter()
        .filter(|l| l.kind == LayerKind::Patch)
        .map(|l| PathBuf::from(&l.source))
        .collect()
}

/// How a taint record names this run: its session for `resume`, else when and as which
/// process it started (the kernel does not learn a new session's id).
pub fn run_name(session: Option<&str>) -> String {
    match session {
        Some(id) => format!("session {id}"),
        None => format!(
            "the keel run started {} (pid {})",
            utc_now(),
            std::process::id()
        ),
    }
}

/// Digests the watched files again (`.keel/` and `watched`: the `--patch` files and the
/// `declared` project files) and records the difference; says each tainted file.
pub fn record(
    paths: &Paths,
    workspace: &Path,
    watched: &[PathBuf],
    declared: &[PathBuf],
    before: &Snapshot,
    by: &str,
) {
    let after = taint::snapshot(workspace, watched);
    match taint::record(&paths.keel_home, before, &after, by, declared) {
        Ok(files) => {
            for file in files {
                keel_output_guard::redact::eprintln(format_args!(
                    "keel: warning: kernel: {} changed during this run ({by}); --trust-project and --patch refuse it until `keel trust` after review",
                    file.display()
                ));
            }
        }
        Err(e) => keel_output_guard::redact::eprintln(format_args!(
            "keel: warning: kernel: cannot record the files this run changed: {e}"
        )),
    }
}

/// Now as `YYYY-MM-DDTHH:MM:SSZ`.
fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    keel_plugin_api::civil_time::utc_timestamp(i64::try_from(secs).unwrap_or(i64::MAX))
}
