//! `keel trust [DIR] [--revoke]`: the user's word that a project layer may change
//! security-relevant settings (ARCHITECTURE §6) and that the project files the profile's
//! plugins declare (`Manifest::trusts_project_files`: the hooks row's settings, issue 15) may
//! be acted on. It records the digest of each file as it is now and says what the layer does
//! and which plugin declared each other file, so the user sees what they vouch for. The kernel
//! knows no product (issue 24 item 4): the list of files comes from the manifests.

use std::io::Write as _;
use std::path::Path;

use keel_config::trust;
use keel_config::{LayerKind, LayerOps, RowAction};
use keel_kernel::error::{KernelError, Result};
use keel_kernel::paths::Paths;

use super::ProfileArgs;

pub(super) fn trust(
    paths: &Paths,
    profile: &ProfileArgs,
    dir: Option<&Path>,
    revoke: bool,
) -> Result<i32> {
    let dir = match dir {
        Some(d) => d.to_path_buf(),
        None => std::env::current_dir().map_err(|e| KernelError::Io {
            path: ".".into(),
            reason: format!("cannot read the current directory: {e}"),
        })?,
    };
    let text = if revoke {
        if trust::revoke(&paths.keel_home, &dir)? {
            format!("no longer trusted: {}\n", dir.display())
        } else {
            format!("{} was not trusted\n", dir.display())
        }
    } else {
        let mut text = String::new();
        let declared = declared_files(paths, profile);
        let files: Vec<String> = declared.iter().map(|(rel, _)| rel.clone()).collect();
        let recorded = trust::record(&paths.keel_home, &dir, &files);
        // Issue 23 item 6: the user's review clears what a run tainted in this project (a
        // tainted workspace `--patch` file too, even with no layer to record).
        let cleared = keel_config::taint::clear_under(&paths.keel_home, &dir)?;
        let recorded = match recorded {
            Err(_) if !cleared.is_empty() => Vec::new(),
            other => other?,
        };
        for file in cleared {
            text.push_str(&format!(
                "cleared the taint of {} (a keel run had changed it)\n",
                file.display()
            ));
        }
        for (file, digest) in recorded {
            text.push_str(&format!(
                "trusted {} (blake3 {}) as it is now; any change makes it untrusted again\n",
                file.display(),
                digest.get(..16).unwrap_or(&digest)
            ));
            let by = declared
                .iter()
                .find(|(rel, _)| file.ends_with(rel))
                .map(|(_, plugins)| plugins.join(", "));
            let lines = match by {
                Some(plugins) => vec![format!(
                    "(declared by plugin {plugins}: what it names may run as commands)"
                )],
                None => summary(&file),
            };
            for line in lines {
                text.push_str(&format!("  {line}\n"));
            }
        }
        text
    };
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
    Ok(0)
}

/// The project files the profile's plugins declare, each with the plugins that declare it.
/// A profile that cannot be resolved or loaded leaves only the layer to record (said on
/// stderr: `keel trust` still records what it can vouch for).
fn declared_files(paths: &Paths, profile: &ProfileArgs) -> Vec<(String, Vec<String>)> {
    let libraries = profile.resolve(paths).and_then(|p| {
        let mut cache = keel_kernel::loader::DigestCache::open(&paths.keel_home);
        let located = keel_kernel::loader::locate(&p.rows, paths, &mut cache)?;
        let mut manifests = keel_kernel::loader::ManifestCache::off();
        keel_kernel::loader::manifests(&located, &p.rows, &mut manifests).map_err(Into::into)
    });
    let libraries = match libraries {
        Ok(libraries) => libraries,
        Err(e) => {
            keel_output_guard::redact::eprintln(format_args!(
                "keel: warning: kernel: the profile's plugins could not be read, so only the project layer is recorded: {e}"
            ));
            return Vec::new();
        }
    };
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for lib in libraries.values() {
        for rel in &lib.manifest.trusted_files {
            match out.iter_mut().find(|(r, _)| r == rel) {
                Some((_, plugins)) => plugins.push(lib.name.clone()),
                None => out.push((rel.clone(), vec![lib.name.clone()])),
            }
        }
    }
    out
}

/// One line per row operation of the layer (`replaces row 'fence'`), so the user sees what
/// they trust; a layer that does not parse says so (the run will name the error).
fn summary(layer: &Path) -> Vec<String> {
    let parsed = std::fs::read_to_string(layer)
        .map_err(|e| e.to_string())
        .and_then(|text| {
            LayerOps::parse(&text, layer, &LayerKind::Project).map_err(|e| e.to_string())
        });
    match parsed {
        Ok(ops) if ops.ops.is_empty() => vec!["(no row operations)".to_owned()],
        Ok(ops) => ops
            .ops
            .iter()
            .map(|op| match &op.action {
                RowAction::Insert { id, plugin, .. } => {
                    format!("inserts row '{id}' (plugin {plugin})")
                }
                RowAction::Replace { id, .. } => format!("replaces the config of row '{id}'"),
                RowAction::Disable { id } => format!("disables row '{id}'"),
            })
            .collect(),
        Err(e) => vec![format!("(it does not parse: {e})")],
    }
}
