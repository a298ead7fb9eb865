//! `keel trust [DIR] [--revoke]`: the user's word that a project layer may change
//! security-relevant settings (ARCHITECTURE §6) and that the project's Claude Code settings may
//! run their hooks (issue 15). It records the digest of each file as it is now and says what
//! the layer does, so the user sees what they vouch for.

use std::io::Write as _;
use std::path::Path;

use keel_config::trust;
use keel_config::{LayerKind, LayerOps, RowAction};
use keel_kernel::error::{KernelError, Result};
use keel_kernel::paths::Paths;

pub(super) fn trust(paths: &Paths, dir: Option<&Path>, revoke: bool) -> Result<i32> {
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
        let recorded = trust::record(&paths.keel_home, &dir);
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
            let lines = if file.extension().is_some_and(|e| e == "toml") {
                summary(&file)
            } else {
                vec!["(Claude Code settings: its hooks may run as commands)".to_owned()]
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
