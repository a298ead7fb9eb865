//! Project-layer trust (ARCHITECTURE §6). A workspace is the model's to write, so
//! `<project>/.keel/config.toml` is untrusted until the user runs `keel trust`, which records the
//! file's blake3 digest in `$KEEL_HOME/trusted-projects.json` — `$KEEL_HOME` is out of every
//! tool's reach, so a model cannot trust its own plant. A record holds for exactly the bytes it
//! was made from: any later change makes the layer untrusted again.
//!
//! The layer itself always applies; what trust decides is whether it may touch security. The
//! rows before and after it ([`ProjectLayer`]) are compared with [`guarded_changes`]: inserting
//! a row whose plugin guards config, disabling a row, swapping a row's plugin, or changing a key
//! a manifest marks guarded (a whole row, an endpoint, a credential reference) needs trust.
//! The kernel checks that once the manifests are loaded, before anything activates.
//!
//! Other project files are trusted the same way, by their bytes, when a plugin declares them
//! (`Manifest::trusts_project_files`; the hooks row declares its settings files): the
//! kernel knows no product, so `keel trust` records the files the profile's plugins declare
//! and [`file_state`] answers a row for the files its own plugin declared, and no others.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use keel_plugin_api::sdk::Guarded;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::ConfigError;
use super::model::{ProjectLayer, RowState};

/// The trust records' file name under `$KEEL_HOME`.
pub const TRUST_FILE: &str = "trusted-projects.json";
const FORMAT: u32 = 1;

/// Whether the project layer may change security-relevant config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustState {
    /// `keel trust` recorded these very bytes.
    Trusted,
    /// `--trust-project` vouches for it in this invocation.
    Vouched,
    /// No record for this project.
    Untrusted,
    /// A record exists for other bytes: the file changed since it was trusted.
    Changed,
    /// A `--patch` file inside the workspace: only `--trust-project` vouches for it.
    UntrustedPatch,
}

impl TrustState {
    /// Whether security-relevant changes may apply.
    pub fn allows(&self) -> bool {
        matches!(self, TrustState::Trusted | TrustState::Vouched)
    }

    /// One phrase for messages and `--explain`.
    pub fn describe(&self) -> &'static str {
        match self {
            TrustState::Trusted => "trusted (`keel trust` recorded this content)",
            TrustState::Vouched => "trusted for this run (--trust-project)",
            TrustState::Untrusted => "untrusted (never recorded by `keel trust`)",
            TrustState::Changed => "untrusted (changed since `keel trust` recorded it)",
            TrustState::UntrustedPatch => {
                "a --patch file inside the workspace, untrusted (only --trust-project vouches for one)"
            }
        }
    }

    /// What the user does about an untrusted layer of project directory `dir`: `keel trust`
    /// records project layers, while a workspace `--patch` is vouched for per run only.
    pub fn remedy(&self, dir: &Path) -> String {
        match self {
            TrustState::UntrustedPatch => "review it, then pass --trust-project".to_owned(),
            _ => format!(
                "review it, then run `keel trust {}` (or pass --trust-project)",
                dir.display()
            ),
        }
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct TrustFile {
    version: u32,
    /// Canonical project directory → record.
    projects: BTreeMap<String, Record>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    /// blake3 (hex) of `.keel/config.toml` when trusted (empty: there was none).
    #[serde(default)]
    digest: String,
    /// blake3 (hex) of each declared project file present when trusted, by its path
    /// relative to the project (a plugin's `trusts_project_files`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    files: BTreeMap<String, String>,
    /// When, in ms since the epoch.
    trusted_at_ms: u64,
}

const LAYER_FILE: &str = ".keel/config.toml";

fn trust_path(keel_home: &Path) -> PathBuf {
    keel_home.join(TRUST_FILE)
}

fn load(keel_home: &Path) -> Result<TrustFile, ConfigError> {
    let path = trust_path(keel_home);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(TrustFile::default()),
        Err(e) => return Err(bad(&path, &e.to_string())),
    };
    let file: TrustFile =
        serde_json::from_str(&text).map_err(|e| bad(&path, &format!("not a trust file: {e}")))?;
    if file.version != FORMAT {
        return Err(bad(
            &path,
            &format!("format version {} (this keel reads {FORMAT})", file.version),
        ));
    }
    Ok(file)
}

fn bad(path: &Path, reason: &str) -> ConfigError {
    ConfigError::TrustFile {
        path: path.to_path_buf(),
        reason: reason.to_owned(),
    }
}

fn key(dir: &Path) -> String {
    dir.to_string_lossy().into_owned()
}

/// The trust state of the project layer in `dir` whose content has `digest` (without
/// `--trust-project`).
///
/// # Errors
/// An unreadable or malformed trust file, naming it.
pub fn state(keel_home: &Path, dir: &Path, digest: &str) -> Result<TrustState, ConfigError> {
    Ok(recorded(&load(keel_home)?, dir, LAYER_FILE, digest))
}

fn recorded(file: &TrustFile, dir: &Path, rel: &str, digest: &str) -> TrustState {
    let Some(r) = file.projects.get(&key(dir)) else {
        return TrustState::Untrusted;
    };
    let kept = if rel == LAYER_FILE {
        Some(&r.digest)
    } else {
        r.files.get(rel)
    };
    if kept.is_some_and(|d| d == digest) {
        TrustState::Trusted
    } else {
        TrustState::Changed
    }
}

/// Whether `rel` may name a project file: relative, and only plain names (no `..`, no `.`).
pub fn valid_rel(rel: &str) -> bool {
    let path = Path::new(rel);
    !rel.is_empty()
        && path
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
}

/// The trust state of one project file (absolute: one of `declared`, the files the asking
/// row's plugin declared, under its project directory) as its bytes are now; `vouched` is
/// `--trust-project`.
///
/// # Errors
/// A path that is none of `declared` under a project (`UNDECLARED_TRUST_FILE`, naming `row`),
/// an unreadable file, or an unreadable trust file.
pub fn file_state(
    keel_home: &Path,
    row: &str,
    declared: &[String],
    path: &Path,
    vouched: bool,
) -> Result<TrustState, ConfigError> {
    let undeclared = || ConfigError::UndeclaredTrustFile {
        row: row.to_owned(),
        path: path.display().to_string(),
        declared: if declared.is_empty() {
            "none".to_owned()
        } else {
            declared.join(", ")
        },
    };
    let rel = declared
        .iter()
        .find(|rel| valid_rel(rel) && path.ends_with(rel.as_str()))
        .ok_or_else(undeclared)?;
    let dir = path
        .ancestors()
        .nth(Path::new(rel).components().count())
        .ok_or_else(undeclared)?;
    let dir = dir.canonicalize().map_err(|e| bad_dir(dir, &e))?;
    let bytes = std::fs::read(path).map_err(|e| ConfigError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    if vouched {
        return Ok(TrustState::Vouched);
    }
    let digest = blake3::hash(&bytes).to_hex().to_string();
    Ok(recorded(&load(keel_home)?, &dir, rel, &digest))
}

/// `keel trust DIR`: records the digest of the project layer (`.keel/config.toml`) and of
/// each of `declared` (the project files the profile's plugins declare) present in `DIR` as
/// it is now. Returns the files recorded and their digests.
///
/// # Errors
/// None of those files in `dir`, an unreadable trust file, or a failed write.
pub fn record(
    keel_home: &Path,
    dir: &Path,
    declared: &[String],
) -> Result<Vec<(PathBuf, String)>, ConfigError> {
    let dir = dir.canonicalize().map_err(|e| bad_dir(dir, &e))?;
    let mut record = Record {
        digest: String::new(),
        files: BTreeMap::new(),
        trusted_at_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
    };
    let mut names = vec![LAYER_FILE];
    for rel in declared {
        if valid_rel(rel) && !names.contains(&rel.as_str()) {
            names.push(rel);
        }
    }
    let mut trusted = Vec::new();
    for rel in &names {
        let path = dir.join(rel);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(ConfigError::Io {
                    path,
                    message: e.to_string(),
                });
            }
        };
        let digest = blake3::hash(&bytes).to_hex().to_string();
        if *rel == LAYER_FILE {
            record.digest = digest.clone();
        } else {
            record.files.insert((*rel).to_owned(), digest.clone());
        }
        trusted.push((path, digest));
    }
    if trusted.is_empty() {
        return Err(ConfigError::Io {
            path: dir.join(LAYER_FILE),
            message: format!("nothing to trust: none of {} exists", names.join(", ")),
        });
    }
    let mut file = load(keel_home)?;
    file.projects.insert(key(&dir), record);
    save(keel_home, &file)?;
    Ok(trusted)
}

/// `keel trust --revoke DIR`: forgets the record; `true` when there was one.
///
/// # Errors
/// An unreadable trust file or a failed write.
pub fn revoke(keel_home: &Path, dir: &Path) -> Result<bool, ConfigError> {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let mut file = load(keel_home)?;
    let had = file.projects.remove(&key(&dir)).is_some();
    if had {
        save(keel_home, &file)?;
    }
    Ok(had)
}

fn bad_dir(dir: &Path, e: &std::io::Error) -> ConfigError {
    ConfigError::Io {
        path: dir.to_path_buf(),
        message: format!("cannot resolve the project directory: {e}"),
    }
}

/// Writes the trust file atomically, mode 0600 (its directory is `$KEEL_HOME`).
fn save(keel_home: &Path, file: &TrustFile) -> Result<(), ConfigError> {
    let path = trust_path(keel_home);
    let fail = |e: &dyn std::fmt::Display| bad(&path, &format!("cannot write: {e}"));
    std::fs::create_dir_all(keel_home).map_err(|e| fail(&e))?;
    let _ = std::fs::set_permissions(keel_home, std::fs::Permissions::from_mode(0o700));
    let mut body = serde_json::to_vec_pretty(&TrustFile {
        version: FORMAT,
        projects: file.projects.clone(),
    })
    .map_err(|e| fail(&e))?;
    body.push(b'\n');
    let tmp = path.with_extension(format!("json.{}.tmp", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(&body)?;
            f.sync_all()
        })
        .and_then(|()| std::fs::rename(&tmp, &path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail(&e));
    }
    Ok(())
}

/// ARCHITECTURE §6: an untrusted project layer may not touch what the manifests guard; a
/// trusted one that does is said on the log. `guarded` gives a plugin's declaration (`None`:
/// unknown, only row changes count).
///
/// # Errors
/// [`ConfigError::ProjectUntrusted`] naming the layer, its state and the changes.
pub fn check_project(
    project: &ProjectLayer,
    guarded: impl Fn(&str) -> Option<Guarded>,
) -> Result<(), ConfigError> {
    let changes = guarded_changes(project, guarded);
    if changes.is_empty() {
        return Ok(());
    }
    let state = &project.trust;
    if state.allows() {
        tracing::info!(
            layer = %project.path.display(),
            changes = %changes.join(", "),
            "project layer applies security-relevant changes: {}",
            state.describe()
        );
        return Ok(());
    }
    Err(ConfigError::ProjectUntrusted {
        path: project.path.clone(),
        dir: project.dir.clone(),
        remedy: state.remedy(&project.dir),
        state: state.describe().to_owned(),
        changes: changes.join(", "),
    })
}

/// What the project layer changed that needs trust, one phrase each (`disables row 'fence'`,
/// `llm-openai.base_url`), in row order. `guarded` gives a plugin's [`Guarded`] declaration
/// (`None` for a plugin that cannot be found: its row fails assembly anyway).
pub fn guarded_changes(
    project: &ProjectLayer,
    guarded: impl Fn(&str) -> Option<Guarded>,
) -> Vec<String> {
    let find = |rows: &[RowState], id: &str| rows.iter().find(|r| r.id == id).cloned();
    let mut out = Vec::new();
    for before in &project.before {
        match find(&project.after, &before.id) {
            None => out.push(format!("disables row '{}'", before.id)),
            Some(after) if after.plugin != before.plugin => out.push(format!(
                "swaps row '{}' from plugin {} to {}",
                before.id, before.plugin, after.plugin
            )),
            Some(after) => {
                let g = guarded(&after.plugin).unwrap_or_default();
                changed_keys(
                    &g,
                    &before.id,
                    Some(&before.config),
                    &after.config,
                    &mut out,
                );
            }
        }
    }
    for after in &project.after {
        if find(&project.before, &after.id).is_none() {
            let g = guarded(&after.plugin).unwrap_or_default();
            if g == Guarded::Row {
                out.push(format!(
                    "inserts row '{}' (plugin {})",
                    after.id, after.plugin
                ));
            } else {
                changed_keys(&g, &after.id, None, &after.config, &mut out);
            }
        }
    }
    out
}

/// The guarded top-level keys whose value differs between `before` (absent: a new row) and
/// `after`; a whole guarded row that changed is one phrase.
fn changed_keys(
    guarded: &Guarded,
    id: &str,
    before: Option<&Value>,
    after: &Value,
    out: &mut Vec<String>,
) {
    let empty = serde_json::Map::new();
    let old = before.and_then(Value::as_object).unwrap_or(&empty);
    let new = after.as_object().unwrap_or(&empty);
    if *guarded == Guarded::Row {
        if old != new {
            out.push(format!("changes row '{id}'"));
        }
        return;
    }
    let mut keys: Vec<&String> = old.keys().chain(new.keys()).collect();
    keys.dedup();
    let mut seen = std::collections::BTreeSet::new();
    for k in keys {
        if seen.insert(k) && guarded.covers(k) && old.get(k) != new.get(k) {
            out.push(format!("{id}.{k}"));
        }
    }
}

#[cfg(test)]
#[path = "trust_tests.rs"]
mod tests;
