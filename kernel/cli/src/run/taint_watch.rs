//! The run's half of taint (issue 23 item 6; `keel_config::taint` owns the records): digest
//! the workspace's `.keel/`, `.claude/` and workspace `--patch` files before the driver runs and
//! again after it returned — whatever it returned, error or signal code included — and record
//! what changed as tainted by this run, one stderr line per file so the user knows what to
//! review before `keel trust`.

use std::path::{Path, PathBuf};

use keel_config::taint::{self, Snapshot};
use keel_config::{LayerKind, ResolvedProfile};
use keel_kernel::paths::Paths;

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

/// Digests the watched files again and records the difference; says each tainted file.
pub fn record(paths: &Paths, workspace: &Path, patches: &[PathBuf], before: &Snapshot, by: &str) {
    let after = taint::snapshot(workspace, patches);
    match taint::record(&paths.keel_home, before, &after, by) {
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
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
