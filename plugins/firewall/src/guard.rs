//! The `tools/guard` listener's logic (requirements SEC-06): the facts of one real tool call,
//! put to the [`Policy`]. Every call is checked with `check_tool`; the fs tools' `path`
//! (`read_file`, `write_file`, `edit_file`, `list_dir`; `glob`/`grep`, whose absent `path` is
//! the working root) with `check_path`; `shell`'s `workdir` with `check_path` (write) and the
//! hosts of URLs in its command with `check_network`. Aliases in a path are filled before the
//! check, so a secret cannot smuggle a denied path. Relative paths resolve against the call's
//! working root (ARCHITECTURE §8).

use std::path::Path;

use keel_plugin_api::services::firewall::{PathAccess, Verdict};
use serde_json::Value;

use crate::policy::Policy;
use crate::vault::Vault;

/// The facts of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fact {
    /// `check_tool`.
    Tool(String),
    /// `check_path` (absolute).
    Path(String, PathAccess),
    /// `check_network`.
    Network(String),
}

fn absolute(vault: &Vault, raw: &str, cwd: &str) -> String {
    let filled = vault.fill(raw).unwrap_or_else(|| raw.to_owned());
    let p = Path::new(&filled);
    if p.is_absolute() {
        filled
    } else {
        Path::new(cwd).join(p).to_string_lossy().into_owned()
    }
}

/// Hosts of `scheme://host…` URLs in `text` (userinfo and port stripped).
pub fn url_hosts(text: &str) -> Vec<String> {
    let mut hosts = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find("://") {
        let at = from + i;
        from = at + 3;
        let scheme_ok = text[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphabetic());
        if !scheme_ok {
            continue;
        }
        let rest = &text[from..];
        let end = rest
            .find(|c: char| "/?#'\"`<>\\ \t\n;|&)(".contains(c))
            .unwrap_or(rest.len());
        let authority = &rest[..end];
        let host_port = authority.rsplit('@').next().unwrap_or(authority);
        let host = if let Some(v6) = host_port.strip_prefix('[') {
            v6.split(']').next().unwrap_or(v6)
        } else {
            host_port.split(':').next().unwrap_or(host_port)
        };
        if !host.is_empty() {
            hosts.push(host.to_owned());
        }
    }
    hosts
}

/// The facts to check for a call of `tool` with `args` at `cwd`.
pub fn facts(vault: &Vault, tool: &str, args: &Value, cwd: &str) -> Vec<Fact> {
    let mut out = vec![Fact::Tool(tool.to_owned())];
    let arg = |k: &str| args.get(k).and_then(Value::as_str);
    match tool {
        "read_file" | "list_dir" | "write_file" | "edit_file" => {
            let access = if matches!(tool, "write_file" | "edit_file") {
                PathAccess::Write
            } else {
                PathAccess::Read
            };
            if let Some(p) = arg("path") {
                out.push(Fact::Path(absolute(vault, p, cwd), access));
            }
        }
        "glob" | "grep" => {
            let p = arg("path").unwrap_or(".");
            out.push(Fact::Path(absolute(vault, p, cwd), PathAccess::Read));
        }
        "shell" => {
            if let Some(w) = arg("workdir") {
                out.push(Fact::Path(absolute(vault, w, cwd), PathAccess::Write));
            }
            if let Some(c) = arg("command") {
                let filled = vault.fill(c).unwrap_or_else(|| c.to_owned());
                out.extend(url_hosts(&filled).into_iter().map(Fact::Network));
            }
        }
        _ => {}
    }
    out
}

/// Puts one fact to the policy.
pub fn check(policy: &Policy, fact: &Fact) -> Verdict {
    match fact {
        Fact::Tool(name) => policy.check_tool(name),
        Fact::Path(path, access) => policy.check_path(path, *access),
        Fact::Network(host) => policy.check_network(host),
    }
}

/// The guard's decision: the first denial's reason, if any. The reason is scrubbed, since a
/// path filled from an alias would otherwise carry the value back to the model.
pub fn decide(
    policy: &Policy,
    vault: &Vault,
    tool: &str,
    args: &Value,
    cwd: &str,
) -> Option<String> {
    facts(vault, tool, args, cwd).iter().find_map(|f| {
        let v = check(policy, f);
        (!v.allowed).then(|| {
            let reason = v.reason.unwrap_or_else(|| "firewall: denied".to_owned());
            vault.scrub(&reason).unwrap_or(reason)
        })
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use crate::policy::PolicyConfig;
    use crate::store::SecretValue;

    fn vault() -> Vault {
        let mut s = BTreeMap::new();
        s.insert("DIR".to_owned(), SecretValue::new("/home/u/.ssh"));
        Vault::new(s).unwrap()
    }

    #[test]
    fn sec06_fs_tools_and_shell_yield_their_facts() {
        let v = vault();
        let f = facts(&v, "read_file", &json!({"path": "a/../b.txt"}), "/w");
        assert_eq!(
            f,
            [
                Fact::Tool("read_file".into()),
                Fact::Path("/w/a/../b.txt".into(), PathAccess::Read)
            ]
        );
        let f = facts(&v, "edit_file", &json!({"path": "/abs"}), "/w");
        assert_eq!(f[1], Fact::Path("/abs".into(), PathAccess::Write));
        let f = facts(&v, "grep", &json!({"pattern": "x"}), "/w");
        assert_eq!(f[1], Fact::Path("/w/.".into(), PathAccess::Read));
        let f = facts(
            &v,
            "shell",
            &json!({"command": "curl -u me:pw@x https://me:pw@api.test:8443/v1 http://[::1]:80/", "workdir": "sub"}),
            "/w",
        );
        assert_eq!(
            f[1..],
            [
                Fact::Path("/w/sub".into(), PathAccess::Write),
                Fact::Network("api.test".into()),
                Fact::Network("::1".into())
            ]
        );
        assert_eq!(facts(&v, "custom", &json!({"path": "/x"}), "/w").len(), 1);
    }

    #[test]
    fn sec06_decide_denies_on_tool_path_alias_and_host() {
        let home = tempfile::tempdir().unwrap();
        let policy = Policy::new(
            &PolicyConfig {
                deny_tools: vec!["write_file".into()],
                allow_hosts: vec!["ok.test".into()],
                ..PolicyConfig::default()
            },
            &home.path().join("secrets"),
        )
        .unwrap();
        let v = vault();
        let d = |tool: &str, args: Value| decide(&policy, &v, tool, &args, "/w");
        assert!(
            d("write_file", json!({"path": "x"}))
                .unwrap()
                .contains("deny_tools")
        );
        assert!(d("read_file", json!({"path": "/home/u/.ssh/id"})).is_some());
        // An alias whose value is a denied path is judged by its value.
        assert!(
            d("list_dir", json!({"path": "sec_DIR"}))
                .unwrap()
                .contains("deny_paths")
        );
        assert!(d("shell", json!({"command": "curl https://evil.test/"})).is_some());
        assert_eq!(
            d("shell", json!({"command": "curl https://ok.test/"})),
            None
        );
        assert_eq!(d("read_file", json!({"path": "src/lib.rs"})), None);
    }
}
