//! The firewall's own policy and its facts API (requirements SEC-04): callers say what is
//! about to happen — a tool name, a path and its access, a host — and the policy, owned by the
//! firewall row's config, decides. Paths are judged both as written (lexically normalised) and
//! as resolved through symlinks, so a link cannot walk around a denied glob; the secrets
//! directory itself is always denied, whatever the config says.

use std::path::{Component, Path, PathBuf};

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

fn glob_set(
    key: &str,
    patterns: &[String],
    case_insensitive: bool,
) -> Result<GlobSet, FirewallError> {
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        let glob: Glob = GlobBuilder::new(p)
            .case_insensitive(case_insensitive)
            .literal_separator(false)
            .build()
            .map_err(|e| {
                FirewallError::new(
                    codes::FIREWALL_CONFIG,
                    format!("{key}: bad glob {p:?}: {e}"),
                )
            })?;
        b.add(glob);
    }
    b.build()
        .map_err(|e| FirewallError::new(codes::FIREWALL_CONFIG, format!("{key}: {e}")))
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

/// The compiled policy.
#[derive(Debug)]
pub struct Policy {
    deny_tools: GlobSet,
    deny_paths: GlobSet,
    deny_write_paths: GlobSet,
    allow_hosts: Option<GlobSet>,
    /// Always denied: the secrets directory (as written and resolved).
    secrets_dirs: Vec<PathBuf>,
}

impl Policy {
    /// Compiles `config`; `secrets_dir` is always denied.
    ///
    /// # Errors
    /// `FIREWALL_CONFIG` for a bad glob.
    pub fn new(config: &PolicyConfig, secrets_dir: &Path) -> Result<Self, FirewallError> {
        let plain = normalise(secrets_dir);
        let real = resolved(&plain);
        Ok(Policy {
            deny_tools: glob_set("deny_tools", &config.deny_tools, false)?,
            deny_paths: glob_set("deny_paths", &config.deny_paths, false)?,
            deny_write_paths: glob_set("deny_write_paths", &config.deny_write_paths, false)?,
            allow_hosts: if config.allow_hosts.is_empty() {
                None
            } else {
                Some(glob_set("allow_hosts", &config.allow_hosts, true)?)
            },
            secrets_dirs: vec![plain, real],
        })
    }

    /// `check_tool`.
    pub fn check_tool(&self, name: &str) -> Verdict {
        if self.deny_tools.is_match(name) {
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
        let plain = normalise(p);
        let real = resolved(&plain);
        for candidate in [&plain, &real] {
            if self.secrets_dirs.iter().any(|d| candidate.starts_with(d)) {
                return deny(format!("firewall: '{path}' is inside the secrets store"));
            }
            if self.deny_paths.is_match(candidate) {
                return deny(format!("firewall: '{path}' is denied by deny_paths"));
            }
            if access == PathAccess::Write && self.deny_write_paths.is_match(candidate) {
                return deny(format!(
                    "firewall: writing '{path}' is denied by deny_write_paths"
                ));
            }
        }
        allow()
    }

    /// `check_network`.
    pub fn check_network(&self, host: &str) -> Verdict {
        let Some(allowed) = &self.allow_hosts else {
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
