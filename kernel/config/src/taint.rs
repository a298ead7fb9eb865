//! Files a keel run changed in the project's trust-relevant places (issue 23 item 6;
//! ARCHITECTURE §6). What the model wrote must not be trusted later: keel digests everything
//! under the workspace's `.keel/`, each project file a plugin of the profile declares
//! (`Manifest::trusts_project_files`, issue 24 item 4), and each `--patch` file inside the workspace,
//! when a run starts and again when it ends (error paths included). A file that is new,
//! changed or removed between the two is *tainted*: recorded in `$KEEL_HOME/tainted-files.json`
//! (0600, beside the trust records, out of every tool's reach) with the run that changed it.
//! Later, `--trust-project` does not vouch for a project holding a tainted file and `--patch`
//! refuses one (`PROJECT_TAINTED`, naming the file and the run); `keel trust`, the user's word
//! after review, clears the taint of the files it records.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::ConfigError;

/// The taint records' file name under `$KEEL_HOME`.
pub const TAINT_FILE: &str = "tainted-files.json";
const FORMAT: u32 = 1;

/// The workspace directories whose files are trust-relevant (the kernel's own: the declared
/// project files are watched one by one).
pub const WATCHED_DIRS: &[&str] = &[".keel"];

/// Digests of the watched files: absolute path → blake3 hex.
pub type Snapshot = BTreeMap<PathBuf, String>;

#[derive(Debug, Default, Serialize, Deserialize)]
struct TaintFile {
    version: u32,
    /// Absolute path → who changed it.
    files: BTreeMap<String, Taint>,
}

/// One tainted file.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Taint {
    /// The run that changed it (`session S`, or `the keel run started at …` when the kernel
    /// cannot know the session).
    by: String,
    /// new, changed or removed.
    change: String,
    /// A project file a plugin declared (`--trust-project` refuses its project, as for
    /// `.keel/`), not a `--patch` file.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    project_file: bool,
    /// When, in ms since the epoch.
    at_ms: u64,
}

/// Digests every regular file under `workspace`'s watched directories (symlinks not followed:
/// a link is digested as its target path) and each of `extra` that lies inside `workspace`.
pub fn snapshot(workspace: &Path, extra: &[PathBuf]) -> Snapshot {
    let workspace = workspace
        .canonicalize()
        .unwrap_or_else(|_| workspace.to_path_buf());
    let mut out = Snapshot::new();
    for dir in WATCHED_DIRS {
        walk(&workspace.join(dir), &mut out, 0);
    }
    for file in extra {
        let Ok(file) = file.canonicalize() else {
            continue;
        };
        if file.starts_with(&workspace) {
            digest_into(&file, &mut out);
        }
    }
    out
}

fn walk(dir: &Path, out: &mut Snapshot, depth: usize) {
    // Deep enough for any real config tree; a link loop cannot recurse (links are not followed).
    if depth > 16 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() => walk(&path, out, depth + 1),
            Ok(_) => digest_into(&path, out),
            Err(_) => {}
        }
    }
}

fn digest_into(path: &Path, out: &mut Snapshot) {
    let digest = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => std::fs::read_link(path)
            .map(|t| format!("link:{}", t.display()))
            .unwrap_or_default(),
        Ok(_) => match std::fs::read(path) {
            Ok(bytes) => blake3::hash(&bytes).to_hex().to_string(),
            Err(_) => return,
        },
        Err(_) => return,
    };
    out.insert(path.to_path_buf(), digest);
}

/// Records every file new, changed or removed between `before` and `after` as tainted by `by`
/// (those among `project_files`, the declared project files, marked as such); answers them.
/// Nothing changed: nothing is written.
///
/// # Errors
/// An unreadable taint file or a failed write.
pub fn record(
    keel_home: &Path,
    before: &Snapshot,
    after: &Snapshot,
    by: &str,
    project_files: &[PathBuf],
) -> Result<Vec<PathBuf>, ConfigError> {
    let mut changed = Vec::new();
    for (path, digest) in after {
        match before.get(path) {
            None => changed.push((path.clone(), "new")),
            Some(old) if old != digest => changed.push((path.clone(), "changed")),
            Some(_) => {}
        }
    }
    for path in before.keys() {
        if !after.contains_key(path) {
            changed.push((path.clone(), "removed"));
        }
    }
    if changed.is_empty() {
        return Ok(Vec::new());
    }
    let mut file = load(keel_home)?;
    let at_ms = now_ms();
    for (path, change) in &changed {
        file.files.insert(
            path.display().to_string(),
            Taint {
                by: by.to_owned(),
                change: (*change).to_owned(),
                project_file: project_files.contains(path),
                at_ms,
            },
        );
    }
    save(keel_home, &file)?;
    Ok(changed.into_iter().map(|(p, _)| p).collect())
}

/// Who tainted `path` (canonical where it exists), if it is tainted.
///
/// # Errors
/// An unreadable or malformed taint file.
pub fn tainted_by(keel_home: &Path, path: &Path) -> Result<Option<String>, ConfigError> {
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let file = load(keel_home)?;
    Ok(file
        .files
        .get(&path.display().to_string())
        .map(|t| t.by.clone()))
}

/// The first tainted file under `dir`'s watched directories or among its declared project
/// files, with who tainted it.
///
/// # Errors
/// An unreadable or malformed taint file.
pub fn tainted_under(
    keel_home: &Path,
    dir: &Path,
) -> Result<Option<(PathBuf, String)>, ConfigError> {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let file = load(keel_home)?;
    Ok(file.files.iter().find_map(|(path, t)| {
        let path = PathBuf::from(path);
        (WATCHED_DIRS.iter().any(|w| path.starts_with(dir.join(w)))
            || (t.project_file && path.starts_with(&dir)))
        .then(|| (path, t.by.clone()))
    }))
}

/// `keel trust DIR`: forgets the taint of every file under `dir` (the user reviewed them);
/// answers the files cleared.
///
/// # Errors
/// An unreadable taint file or a failed write.
pub fn clear_under(keel_home: &Path, dir: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let mut file = load(keel_home)?;
    let cleared: Vec<String> = file
        .files
        .keys()
        .filter(|p| Path::new(p).starts_with(&dir))
        .cloned()
        .collect();
    if cleared.is_empty() {
        return Ok(Vec::new());
    }
    for p in &cleared {
        file.files.remove(p);
    }
    save(keel_home, &file)?;
    Ok(cleared.into_iter().map(PathBuf::from).collect())
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn load(keel_home: &Path) -> Result<TaintFile, ConfigError> {
    let path = keel_home.join(TAINT_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(TaintFile {
                version: FORMAT,
                files: BTreeMap::new(),
            });
        }
        Err(e) => return Err(bad(&path, &e.to_string())),
    };
    let file: TaintFile =
        serde_json::from_str(&text).map_err(|e| bad(&path, &format!("not a taint file: {e}")))?;
    if file.version != FORMAT {
        return Err(bad(
            &path,
            &format!("format version {} (this keel reads {FORMAT})", file.version),
        ));
    }
    Ok(file)
}

fn save(keel_home: &Path, file: &TaintFile) -> Result<(), ConfigError> {
    let path = keel_home.join(TAINT_FILE);
    let tmp = keel_home.join(format!("{TAINT_FILE}.{}.tmp", std::process::id()));
    let text = serde_json::to_string_pretty(file).map_err(|e| bad(&path, &e.to_string()))?;
    std::fs::create_dir_all(keel_home).map_err(|e| bad(&path, &e.to_string()))?;
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| f.write_all(text.as_bytes()).and_then(|()| f.sync_all()))
        .and_then(|()| std::fs::rename(&tmp, &path));
    written.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        bad(&path, &e.to_string())
    })
}

fn bad(path: &Path, reason: &str) -> ConfigError {
    ConfigError::TrustFile {
        path: path.to_path_buf(),
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Issue 24 item 4: a declared project file (any name: the kernel knows no product) that a
    // run created is tainted and marked, so `--trust-project` refuses its project; a tainted
    // `--patch` file is not a project file.
    #[test]
    fn a_declared_file_the_run_wrote_taints_its_project() {
        let home = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let root = work.path().canonicalize().unwrap();
        let declared = root.join(".acme/settings.json");
        let patch = root.join("patch.toml");
        let watched = vec![declared.clone(), patch.clone()];
        let before = snapshot(&root, &watched);
        assert!(before.is_empty(), "{before:?}");
        std::fs::create_dir_all(root.join(".acme")).unwrap();
        std::fs::write(&declared, "{}").unwrap();
        std::fs::write(&patch, "# patch\n").unwrap();
        let after = snapshot(&root, &watched);
        let changed = record(
            home.path(),
            &before,
            &after,
            "run 1",
            std::slice::from_ref(&declared),
        )
        .unwrap();
        assert_eq!(changed.len(), 2, "{changed:?}");
        let (path, by) = tainted_under(home.path(), &root).unwrap().unwrap();
        assert_eq!((path, by.as_str()), (declared, "run 1"));

        let home = tempfile::tempdir().unwrap();
        record(home.path(), &before, &after, "run 2", &[]).unwrap();
        assert_eq!(tainted_under(home.path(), &root).unwrap(), None);
        assert_eq!(
            tainted_by(home.path(), &patch).unwrap().as_deref(),
            Some("run 2")
        );
    }
}
