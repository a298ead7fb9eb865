//! keel's own paths, which no tool reaches (ARCHITECTURE §6 and §9): `$KEEL_HOME` (credentials,
//! the secrets store and its master key, sessions, trust records, the user layer) is neither
//! read nor written; the project's `.keel/` (its config layer) and `.claude/` (Claude Code
//! settings, whose hooks keel runs as commands: issue 15) are read but never written.
//!
//! A model that could write these would choose the next run's sandbox, endpoint, trust or the
//! commands keel runs on its own; one that could read them would hold the user's keys. So the ONE derivation here is shared by
//! every enforcer: the sandbox's runners (bubblewrap masks and read-only binds, Landlock leaves
//! them out of its grants) and the file tools (refused targets, pruned walks), the same way
//! [`super::sandbox::writable_roots`] is shared for writes (SBX-05). A path is not all of a
//! file's names: a hard link to a hidden file is refused by its identity ([`hidden_link`]).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The project layer's directory name under a workspace root.
pub const PROJECT_DIR: &str = ".keel";

/// Claude Code's settings directory under a workspace root: its `settings.json` and
/// `settings.local.json` carry hooks (commands) the `hooks` row may run.
pub const CLAUDE_DIR: &str = ".claude";

/// The user's private files under `$HOME` (issue 23 item 4): private keys and credential
/// files. One list for every guard: the firewall's default `deny_paths` are built from it (for
/// the file tools' paths), and the sandbox masks each one that exists for every process it
/// confines (`shell`, hooks, MCP stdio servers), so no tool reads them.
pub const PRIVATE_PATHS: [&str; 4] = [".ssh", ".gnupg", ".aws/credentials", ".netrc"];

/// The existing [`PRIVATE_PATHS`] under `home`, canonical (a symlinked `~/.ssh` masks its
/// target); none when `home` is unknown.
pub fn private_paths(home: Option<&Path>) -> Vec<PathBuf> {
    let Some(home) = home else {
        return Vec::new();
    };
    PRIVATE_PATHS
        .iter()
        .map(|rel| home.join(rel))
        .filter(|p| p.symlink_metadata().is_ok())
        .map(|p| canonical(&p))
        .collect()
}

/// How a protected path is kept from the tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Shield {
    /// Read, never written (the project's `.keel/`).
    ReadOnly,
    /// Neither read nor written (`$KEEL_HOME`).
    Hidden,
}

/// One protected path (canonical when it exists).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Protected {
    /// The directory.
    pub path: PathBuf,
    /// How it is kept.
    pub shield: Shield,
}

impl Protected {
    /// What a tool is told when it is refused `target` (never an escalation hint: no mode
    /// opens these).
    pub fn refusal(&self, target: &Path, writing: bool) -> String {
        let what = match self.shield {
            Shield::Hidden => "keel's home ($KEEL_HOME: credentials, secrets, sessions)",
            Shield::ReadOnly if self.path.ends_with(CLAUDE_DIR) => {
                "the project's Claude Code settings (.claude/: hooks keel runs)"
            }
            Shield::ReadOnly => "the project's keel config (.keel/)",
        };
        let verb = if writing { "writing" } else { "reading" };
        let how = if target.starts_with(&self.path) {
            "it is inside"
        } else {
            "it is a hard link to a file inside"
        };
        format!(
            "[sandbox: keel's own files are out of reach] {verb} {} is not allowed: {how} \
             {what} at {}; no sandbox mode allows it",
            target.display(),
            self.path.display()
        )
    }
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The protected paths of a session whose workspace root is `workspace_root`: `keel_home`
/// hidden, `<workspace_root>/.keel` and `<workspace_root>/.claude` read-only. All are
/// canonicalised when they exist (a symlinked `.keel` protects its target); a project dir
/// inside `$KEEL_HOME` is covered by the stronger shield already.
pub fn protected_paths(keel_home: Option<&Path>, workspace_root: &Path) -> Vec<Protected> {
    let mut out = Vec::new();
    if let Some(home) = keel_home {
        out.push(Protected {
            path: canonical(home),
            shield: Shield::Hidden,
        });
    }
    let root = canonical(workspace_root);
    for dir in [PROJECT_DIR, CLAUDE_DIR] {
        let project = canonical(&root.join(dir));
        if !out.iter().any(|p| project.starts_with(&p.path)) {
            out.push(Protected {
                path: project,
                shield: Shield::ReadOnly,
            });
        }
    }
    out
}

/// The strongest protection covering the canonical `target`, if any.
pub fn covering<'a>(protected: &'a [Protected], target: &Path) -> Option<&'a Protected> {
    protected
        .iter()
        .filter(|p| target.starts_with(&p.path))
        .max_by_key(|p| p.shield)
}

/// Whether `target` (canonical) may be read: not inside a hidden path, and not a hard link to
/// a file inside one ([`hidden_link`]).
pub fn refuse_read<'a>(protected: &'a [Protected], target: &Path) -> Option<&'a Protected> {
    covering(protected, target)
        .filter(|p| p.shield == Shield::Hidden)
        .or_else(|| hidden_link(protected, target))
}

/// Whether `target` (canonical) may be written: not inside a protected path, and not a hard
/// link to a file inside a hidden one.
pub fn refuse_write<'a>(protected: &'a [Protected], target: &Path) -> Option<&'a Protected> {
    covering(protected, target).or_else(|| hidden_link(protected, target))
}

/// The most entries of a hidden directory looked through for a hard link's other name;
/// past it the link is refused (it cannot be ruled out).
const LINK_SCAN_LIMIT: usize = 100_000;

/// The hidden path holding another name of the regular file `target`, when `target` has more
/// than one (issue 23 item 8): a hard link to `$KEEL_HOME/credentials.toml` made in the
/// workspace is the same file under a path no prefix check sees, so the file's identity
/// (device and inode) is compared with the files under each hidden path. Only a file with
/// two or more links on the hidden path's device is looked up, so an ordinary read costs
/// one `stat`.
pub fn hidden_link<'a>(protected: &'a [Protected], target: &Path) -> Option<&'a Protected> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::metadata(target).ok()?;
    if !meta.is_file() || meta.nlink() < 2 {
        return None;
    }
    protected
        .iter()
        .filter(|p| p.shield == Shield::Hidden)
        .find(|p| holds_inode(&p.path, meta.dev(), meta.ino()))
}

/// Whether a file under `dir` (symlinks not followed) is `(dev, ino)`; true when `dir` is too
/// large to tell.
fn holds_inode(dir: &Path, dev: u64, ino: u64) -> bool {
    use std::os::unix::fs::{DirEntryExt as _, MetadataExt as _};
    if std::fs::symlink_metadata(dir).map_or(true, |m| m.dev() != dev) {
        return false;
    }
    let mut stack = vec![dir.to_path_buf()];
    let mut seen = 0usize;
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            seen += 1;
            if seen > LINK_SCAN_LIMIT {
                return true;
            }
            let Ok(kind) = e.file_type() else {
                continue;
            };
            if kind.is_dir() {
                stack.push(e.path());
            } else if kind.is_file() && e.ino() == ino && e.metadata().is_ok_and(|m| m.dev() == dev)
            {
                return true;
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    // Issue 23 item 8: a hard link in the workspace to a file in $KEEL_HOME is refused for
    // reading and writing; an ordinary file with two links elsewhere is not.
    #[test]
    fn a_hard_link_to_a_hidden_file_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let home = root.path().join("home");
        let ws = root.path().join("ws");
        std::fs::create_dir_all(home.join("secrets")).unwrap();
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(home.join("secrets/master.key"), "k").unwrap();
        std::fs::hard_link(home.join("secrets/master.key"), ws.join("k.txt")).unwrap();
        std::fs::write(ws.join("a.txt"), "a").unwrap();
        std::fs::hard_link(ws.join("a.txt"), ws.join("b.txt")).unwrap();
        let p = protected_paths(Some(&home), &ws);
        let ws = ws.canonicalize().unwrap();
        let link = ws.join("k.txt");
        let refused = refuse_read(&p, &link).expect("the link is refused");
        assert_eq!(refused.shield, Shield::Hidden);
        assert!(refused.refusal(&link, false).contains("hard link"));
        assert!(refuse_write(&p, &link).is_some());
        assert!(refuse_read(&p, &ws.join("b.txt")).is_none());
        assert!(refuse_write(&p, &ws.join("b.txt")).is_none());
    }

    // Issue 10 items 1-3: $KEEL_HOME hidden, the project's .keel read-only, symlinks resolved.
    #[test]
    fn keel_home_is_hidden_and_the_project_layer_read_only() {
        let root = tempfile::tempdir().unwrap();
        let home = root.path().join("home");
        let ws = root.path().join("ws");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(ws.join(".keel")).unwrap();
        let p = protected_paths(Some(&home), &ws);
        let home = home.canonicalize().unwrap();
        let ws = ws.canonicalize().unwrap();
        assert_eq!(
            p,
            vec![
                Protected {
                    path: home.clone(),
                    shield: Shield::Hidden
                },
                Protected {
                    path: ws.join(".keel"),
                    shield: Shield::ReadOnly
                },
                Protected {
                    path: ws.join(".claude"),
                    shield: Shield::ReadOnly
                },
            ]
        );
        // Issue 15: Claude Code's settings carry hooks keel runs; a tool may read, never write.
        let settings = ws.join(".claude/settings.json");
        assert!(refuse_read(&p, &settings).is_none());
        let refused = refuse_write(&p, &settings).unwrap();
        assert!(
            refused
                .refusal(&settings, true)
                .contains("Claude Code settings")
        );
        let creds = home.join("credentials.toml");
        assert!(refuse_read(&p, &creds).is_some());
        assert!(refuse_write(&p, &creds).is_some());
        let layer = ws.join(".keel/config.toml");
        assert!(refuse_read(&p, &layer).is_none());
        assert_eq!(
            refuse_write(&p, &layer).map(|p| p.shield),
            Some(Shield::ReadOnly)
        );
        assert!(refuse_write(&p, &ws.join("src/main.rs")).is_none());
        // A sibling whose name merely starts like a protected one is not covered.
        assert!(refuse_read(&p, &root.path().canonicalize().unwrap().join("home2")).is_none());
        assert!(
            p[0].refusal(&creds, false)
                .starts_with("[sandbox: keel's own files are out of reach] reading")
        );
    }

    // Issue 23 item 4: only the private paths that exist, resolved.
    #[test]
    fn private_paths_are_the_existing_ones_under_home() {
        let home = tempfile::tempdir().unwrap();
        assert!(private_paths(Some(home.path())).is_empty());
        assert!(private_paths(None).is_empty());
        std::fs::create_dir_all(home.path().join(".ssh")).unwrap();
        std::fs::create_dir_all(home.path().join(".aws")).unwrap();
        std::fs::write(home.path().join(".netrc"), "machine x").unwrap();
        let h = home.path().canonicalize().unwrap();
        assert_eq!(
            private_paths(Some(home.path())),
            vec![h.join(".ssh"), h.join(".netrc")]
        );
    }

    #[test]
    fn a_symlinked_project_dir_protects_its_target_and_a_workspace_in_home_is_hidden() {
        let root = tempfile::tempdir().unwrap();
        let ws = root.path().join("ws");
        let elsewhere = root.path().join("elsewhere");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, ws.join(".keel")).unwrap();
        let p = protected_paths(None, &ws);
        assert_eq!(p[0].path, elsewhere.canonicalize().unwrap());

        let home = root.path().join("home");
        std::fs::create_dir_all(home.join("proj")).unwrap();
        let p = protected_paths(Some(&home), &home.join("proj"));
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].shield, Shield::Hidden);
    }
}
