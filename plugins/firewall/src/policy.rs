//! The firewall's own policy and its facts API (requirements SEC-04): callers say what is
//! about to happen — a tool name, a path and its access, a host — and the policy, owned by the
//! firewall row's config, decides. Paths are judged both as written (lexically normalised) and
//! as resolved through symlinks, so a link cannot walk around a denied glob; the secrets
//! directory itself is always denied, whatever the config says.
//!
//! Every glob is parsed when the row activates (a bad one refuses the row), but the glob sets'
//! matchers — regular expressions, most of the row's activation (issue 25 item 1) — are
//! compiled once, on a thread of its own from activation on ([`Policy::compile_in_background`])
//! or by the first check that needs them, whichever comes first; a check never runs against a
//! partial set: it waits for the one compilation, and when that failed it denies.

use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, OnceLock};

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};
use keel_plugin_api::services::firewall::{PathAccess, Verdict};
use serde::Deserialize;

use crate::error::{FirewallError, codes};

/// The policy part of the row config.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// Tool-name globs that are never run.
    #[serde(default)]
    pub deny_tools: Vec<String>,
    /// Path globs that are neither read nor written.
    #[serde(default = "default_deny_paths")]
    pub deny_paths: Vec<String>,
    /// Path globs that are not written (reads allowed).
    #[serde(default)]
    pub deny_write_paths: Vec<String>,
    /// Host globs that may be reached; empty: no restriction.
    #[serde(default)]
    pub allow_hosts: Vec<String>,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            deny_tools: Vec::new(),
            deny_paths: default_deny_paths(),
            deny_write_paths: Vec::new(),
            allow_hosts: Vec::new(),
        }
    }
}

/// The default `deny_paths`: private keys and cloud/credential files — the shared list
/// [`PRIVATE_PATHS`] (which the sandbox masks for confined processes too, issue 23 item 4),
/// each anywhere and everything beneath it.
///
/// [`PRIVATE_PATHS`]: keel_plugin_api::services::protected::PRIVATE_PATHS
pub fn default_deny_paths() -> Vec<String> {
    keel_plugin_api::services::protected::PRIVATE_PATHS
        .iter()
        .flat_map(|p| [format!("**/{p}"), format!("**/{p}/**")])
        .collect()
}

/// The globs of one config key, parsed (syntax checked) but not compiled.
fn parse_globs(
    key: &str,
    patterns: &[String],
    case_insensitive: bool,
) -> Result<Vec<Glob>, FirewallError> {
    patterns
        .iter()
        .map(|p| {
            GlobBuilder::new(p)
                .case_insensitive(case_insensitive)
                .literal_separator(false)
                .build()
                .map_err(|e| {
                    FirewallError::new(
                        codes::FIREWALL_CONFIG,
                        format!("{key}: bad glob {p:?}: {e}"),
                    )
                })
        })
        .collect()
}

/// The matcher of one key's parsed globs.
fn glob_set(key: &str, globs: &[Glob]) -> Result<GlobSet, String> {
    let mut b = GlobSetBuilder::new();
    for glob in globs {
        b.add(glob.clone());
    }
    b.build().map_err(|e| format!("{key}: {e}"))
}

/// `path` with `.` and `..` folded (no file-system access).
pub fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// `path` through symlinks: the longest existing ancestor canonicalised, the rest appended.
fn resolved(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut cur = path.to_path_buf();
    loop {
        if let Ok(real) = cur.canonicalize() {
            let mut out = real;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return out;
        }
        match (cur.file_name().map(ToOwned::to_owned), cur.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                cur = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

fn allow() -> Verdict {
    Verdict {
        allowed: true,
        reason: None,
    }
}

fn deny(reason: String) -> Verdict {
    Verdict {
        allowed: false,
        reason: Some(reason),
    }
}

/// The policy's globs, parsed.
#[derive(Debug)]
struct Globs {
    deny_tools: Vec<Glob>,
    deny_paths: Vec<Glob>,
    deny_write_paths: Vec<Glob>,
    /// `None`: no restriction.
    allow_hosts: Option<Vec<Glob>>,
}

impl Globs {
    fn compile(&self) -> Result<Sets, String> {
        Ok(Sets {
            deny_tools: glob_set("deny_tools", &self.deny_tools)?,
            deny_paths: glob_set("deny_paths", &self.deny_paths)?,
            deny_write_paths: glob_set("deny_write_paths", &self.deny_write_paths)?,
            allow_hosts: match &self.allow_hosts {
                Some(globs) => Some(glob_set("allow_hosts", globs)?),
                None => None,
            },
        })
    }
}

/// The compiled matchers.
#[derive(Debug)]
struct Sets {
    deny_tools: GlobSet,
    deny_paths: GlobSet,
    deny_write_paths: GlobSet,
    allow_hosts: Option<GlobSet>,
}

/// The policy: parsed globs, their matchers compiled once ([`Policy::sets`]).
#[derive(Debug)]
pub struct Policy {
    globs: Globs,
    sets: OnceLock<Result<Sets, String>>,
    /// Always denied: the secrets directory (as written and resolved).
    secrets_dirs: Vec<PathBuf>,
}

impl Policy {
    /// Parses `config` (nothing is compiled yet); `secrets_dir` is always denied.
    ///
    /// # Errors
    /// `FIREWALL_CONFIG` for a bad glob.
    pub fn new(config: &PolicyConfig, secrets_dir: &Path) -> Result<Self, FirewallError> {
        let plain = normalise(secrets_dir);
        let real = resolved(&plain);
        Ok(Policy {
            globs: Globs {
                deny_tools: parse_globs("deny_tools", &config.deny_tools, false)?,
                deny_paths: parse_globs("deny_paths", &config.deny_paths, false)?,
                deny_write_paths: parse_globs("deny_write_paths", &config.deny_write_paths, false)?,
                allow_hosts: if config.allow_hosts.is_empty() {
                    None
                } else {
                    Some(parse_globs("allow_hosts", &config.allow_hosts, true)?)
                },
            },
            sets: OnceLock::new(),
            secrets_dirs: vec![plain, real],
        })
    }

    /// Compiles the matchers on a thread of its own, so the first check finds them ready (it
    /// waits for this compilation if it is still running). A thread that cannot start changes
    /// nothing: the first check compiles.
    pub fn compile_in_background(self: &Arc<Self>) {
        let policy = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("keel-firewall-policy".into())
            .spawn(move || {
                let _ = policy.sets();
            });
        if let Err(e) = spawned {
            tracing::debug!(error = %e, "firewall: the policy is compiled at its first check");
        }
    }

    /// Whether the matchers are compiled (tests).
    pub fn is_compiled(&self) -> bool {
        self.sets.get().is_some()
    }

    /// The matchers: compiled already, being compiled (waited for) or compiled now. Every
    /// check goes through here, so none ever sees a partial set.
    fn sets(&self) -> Result<&Sets, Verdict> {
        self.sets
            .get_or_init(|| self.globs.compile())
            .as_ref()
            .map_err(|e| deny(format!("firewall: the policy could not be compiled ({e})")))
    }

    /// `check_tool`.
    pub fn check_tool(&self, name: &str) -> Verdict {
        let sets = match self.sets() {
            Ok(sets) => sets,
            Err(denied) => return denied,
        };
        if sets.deny_tools.is_match(name) {
            deny(format!("firewall: tool '{name}' is denied by deny_tools"))
        } else {
            allow()
        }
    }

    /// `check_path`: `path` must be absolute.
    pub fn check_path(&self, path: &str, access: PathAccess) -> Verdict {
        let p = Path::new(path);
        if !p.is_absolute() {
            return deny(format!("firewall: path '{path}' is not absolute"));
        }
        let sets = match self.sets() {
            Ok(sets) => sets,
            Err(denied) => return denied,
        };
        let plain = normalise(p);
        let real = resolved(&plain);
        for candidate in [&plain, &real] {
            if self.secrets_dirs.iter().any(|d| candidate.starts_with(d)) {
                return deny(format!("firewall: '{path}' is inside the secrets store"));
            }
            if sets.deny_paths.is_match(candidate) {
                return deny(format!("firewall: '{path}' is denied by deny_paths"));
            }
            if access == PathAccess::Write && sets.deny_write_paths.is_match(candidate) {
                return deny(format!(
                    "firewall: writing '{path}' is denied by deny_write_paths"
                ));
            }
        }
        allow()
    }

    /// `check_network`.
    pub fn check_network(&self, host: &str) -> Verdict {
        let sets = match self.sets() {
            Ok(sets) => sets,
            Err(denied) => return denied,
        };
        let Some(allowed) = &sets.allow_hosts else {
            return allow();
        };
        let h = host.trim_end_matches('.').to_ascii_lowercase();
        if allowed.is_match(h.as_str()) {
            allow()
        } else {
            deny(format!("firewall: host '{host}' is not in allow_hosts"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(config: PolicyConfig) -> (tempfile::TempDir, Policy) {
        let home = tempfile::tempdir().unwrap();
        let p = Policy::new(&config, &home.path().join("secrets")).unwrap();
        (home, p)
    }

    #[test]
    fn sec04_default_paths_deny_keys_and_the_secrets_store() {
        let (home, p) = policy(PolicyConfig::default());
        let r = PathAccess::Read;
        assert!(!p.check_path("/home/u/.ssh/id_rsa", r).allowed);
        assert!(!p.check_path("/home/u/.ssh", r).allowed);
        assert!(!p.check_path("/home/u/work/../.ssh/config", r).allowed);
        assert!(
            !p.check_path("/x/.aws/credentials", PathAccess::Write)
                .allowed
        );
        assert!(p.check_path("/home/u/work/src/main.rs", r).allowed);
        assert!(!p.check_path("relative/file", r).allowed);
        let key = home.path().join("secrets/master.key");
        let v = p.check_path(key.to_str().unwrap(), r);
        assert!(!v.allowed);
        assert!(v.reason.unwrap().starts_with("firewall: "));
    }

    #[test]
    fn sec04_a_symlink_does_not_walk_around_a_denied_path() {
        let (home, p) = policy(PolicyConfig::default());
        let ssh = home.path().join(".ssh");
        std::fs::create_dir(&ssh).unwrap();
        std::fs::write(ssh.join("id"), "k").unwrap();
        let link = home.path().join("innocent");
        std::os::unix::fs::symlink(&ssh, &link).unwrap();
        let target = link.join("id");
        assert!(
            !p.check_path(target.to_str().unwrap(), PathAccess::Read)
                .allowed
        );
    }

    #[test]
    fn sec04_write_only_denials_tools_and_hosts() {
        let (_h, p) = policy(PolicyConfig {
            deny_tools: vec!["shell".into(), "mcp_*".into()],
            deny_write_paths: vec!["**/*.lock".into()],
            allow_hosts: vec!["example.com".into(), "*.example.org".into()],
            ..PolicyConfig::default()
        });
        assert!(!p.check_tool("shell").allowed);
        assert!(!p.check_tool("mcp_fetch").allowed);
        assert!(p.check_tool("read_file").allowed);
        assert!(p.check_path("/w/Cargo.lock", PathAccess::Read).allowed);
        assert!(!p.check_path("/w/Cargo.lock", PathAccess::Write).allowed);
        assert!(p.check_network("EXAMPLE.com.").allowed);
        assert!(p.check_network("api.example.org").allowed);
        assert!(!p.check_network("evil.test").allowed);
        let (_h, open) = policy(PolicyConfig::default());
        assert!(open.check_network("anything.test").allowed);
    }

    // Issue 25 item 1: the very first checks after activation — racing the background
    // compilation, or with none started — judge with the whole policy, never a partial one.
    #[test]
    fn sec04_the_first_checks_after_activation_use_the_whole_policy() {
        for background in [true, false] {
            for _ in 0..20 {
                let home = tempfile::tempdir().unwrap();
                let p = Arc::new(
                    Policy::new(
                        &PolicyConfig {
                            deny_tools: vec!["shell".into()],
                            allow_hosts: vec!["*.example.org".into()],
                            ..PolicyConfig::default()
                        },
                        &home.path().join("secrets"),
                    )
                    .unwrap(),
                );
                assert!(!p.is_compiled(), "Policy::new must not compile");
                if background {
                    p.compile_in_background();
                }
                assert!(
                    !p.check_path("/home/u/.ssh/id_rsa", PathAccess::Read)
                        .allowed
                );
                assert!(!p.check_tool("shell").allowed);
                assert!(!p.check_network("evil.test").allowed);
                assert!(p.check_network("api.example.org").allowed);
                assert!(p.check_path("/w/src/main.rs", PathAccess::Read).allowed);
                assert!(p.is_compiled());
            }
        }
    }

    #[test]
    fn the_background_compilation_finishes_without_a_check() {
        let home = tempfile::tempdir().unwrap();
        let p = Arc::new(Policy::new(&PolicyConfig::default(), home.path()).unwrap());
        p.compile_in_background();
        let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !p.is_compiled() && std::time::Instant::now() < end {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(p.is_compiled());
    }

    // A compilation that failed denies every check (fail closed), naming why.
    #[test]
    fn sec04_a_policy_that_could_not_compile_denies_everything() {
        let home = tempfile::tempdir().unwrap();
        let p = Policy::new(&PolicyConfig::default(), home.path()).unwrap();
        p.sets.set(Err("too big".into())).unwrap();
        let v = p.check_path("/w/src/main.rs", PathAccess::Read);
        assert!(!v.allowed);
        assert!(v.reason.unwrap().contains("too big"));
        assert!(!p.check_tool("read_file").allowed);
        assert!(!p.check_network("example.com").allowed);
    }

    #[test]
    fn a_bad_glob_is_a_config_error() {
        let home = tempfile::tempdir().unwrap();
        let e = Policy::new(
            &PolicyConfig {
                deny_paths: vec!["a[".into()],
                ..PolicyConfig::default()
            },
            home.path(),
        )
        .unwrap_err();
        assert_eq!(e.code, codes::FIREWALL_CONFIG);
    }
}
