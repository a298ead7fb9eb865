//! Child environments (issue 23 item 1, SBX-03, SEC-09): the one builder every spawner uses
//! for the environment of a process keel starts — `shell` commands, hooks, MCP stdio servers
//! and the sandbox's own probes.
//!
//! A child never gets keel's environment minus a deny-list (a credential under an unusual name
//! such as `LLM_CRED` would pass). It gets an allow-list:
//!
//! 1. [`BASE_NAMES`] (and the `LC_*` locale names) taken from keel's environment: Codex's
//!    `shell_environment_policy` "core" set (`HOME`, `LOGNAME`, `PATH`, `SHELL`, `USER`,
//!    `USERNAME`, `TMPDIR`, `TEMP`, `TMP`), which the MCP SDKs' default stdio environment
//!    also follows, plus the locale and terminal names `LANG`, `LANGUAGE`, `LC_*`, `TERM`, `TZ`;
//! 2. the names the spawning row's [`PASS_ENV_KEY`] (`pass_env`) lists, also taken from keel's
//!    environment (an entry ending in `*` is a prefix);
//! 3. the row's explicit entries (`env`), which the spawner sets on top.
//!
//! Whatever a list says, nothing is inherited from keel under a name that is [withheld]: keel's
//! own `KEEL_*` namespace, a credential-like name
//! ([`is_credential_like`](super::credentials::is_credential_like)), or a reference the
//! `credentials` row holds or has resolved this run
//! ([`held`](super::credentials::CredentialsProvider::held)). An explicit entry is the
//! user's deliberate choice and is kept (an MCP server's `env = { PAT =
//! "${credential:GITHUB_PAT}" }`).

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};

use super::credentials::{CredentialsClient, HeldRequest, is_credential_like};

/// The config key every spawning row uses for the names it passes through from keel's
/// environment (`shell`, `hooks`, each MCP server).
pub const PASS_ENV_KEY: &str = "pass_env";

/// The names a child inherits from keel's environment without being asked.
pub const BASE_NAMES: [&str; 13] = [
    "HOME", "LOGNAME", "PATH", "SHELL", "USER", "USERNAME", "TMPDIR", "TEMP", "TMP", "LANG",
    "LANGUAGE", "TERM", "TZ",
];

/// Name prefixes a child inherits without being asked (the locale categories).
pub const BASE_PREFIXES: [&str; 1] = ["LC_"];

/// keel's own namespace, never inherited.
const KEEL_PREFIX: &str = "KEEL_";

/// Whether keel's variable `name` is never inherited: `KEEL_*`, credential-like, or one of
/// `held` (the references the credentials row holds or resolved).
pub fn withheld(name: &str, held: &[String]) -> bool {
    name.to_ascii_uppercase().starts_with(KEEL_PREFIX)
        || is_credential_like(name)
        || held.iter().any(|h| h == name)
}

/// Whether `name` is on the base allow-list.
pub fn is_base(name: &str) -> bool {
    BASE_NAMES.contains(&name) || BASE_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Whether a `pass_env` entry (an exact name, or a prefix ending in `*`) names `name`.
fn passes(entry: &str, name: &str) -> bool {
    match entry.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => entry == name,
    }
}

/// Checks a row's `pass_env` list: each entry a variable name (`[A-Za-z_][A-Za-z0-9_]*`),
/// optionally ending in `*`.
///
/// # Errors
/// A message naming the first bad entry.
pub fn check_pass_env(list: &[String]) -> Result<(), String> {
    for entry in list {
        let name = entry.strip_suffix('*').unwrap_or(entry);
        let mut bytes = name.bytes();
        let ok = match bytes.next() {
            Some(b) if b.is_ascii_alphabetic() || b == b'_' => {
                bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
            }
            // A lone `*` would pass everything: the deny-list design this replaces.
            _ => false,
        };
        if !ok {
            return Err(format!(
                "{PASS_ENV_KEY}: {entry:?} is not a variable name (letters, digits, _; a \
                 trailing * makes it a prefix)"
            ));
        }
    }
    Ok(())
}

/// A child's complete environment, built by [`ChildEnv::inherit`] and then the row's explicit
/// entries.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ChildEnv(BTreeMap<OsString, OsString>);

impl std::fmt::Debug for ChildEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Names only: an explicit entry may hold a credential.
        f.debug_set().entries(self.0.keys()).finish()
    }
}

impl ChildEnv {
    /// The inherited part: from `parent`, the base names and those `pass` names, none
    /// [`withheld`] under `held`.
    pub fn inherit(
        parent: impl IntoIterator<Item = (OsString, OsString)>,
        pass: &[String],
        held: &[String],
    ) -> ChildEnv {
        let vars = parent
            .into_iter()
            .filter(|(k, _)| {
                let Some(name) = k.to_str() else {
                    return false;
                };
                (is_base(name) || pass.iter().any(|p| passes(p, name))) && !withheld(name, held)
            })
            .collect();
        ChildEnv(vars)
    }

    /// [`ChildEnv::inherit`] from keel's own environment.
    pub fn from_process(pass: &[String], held: &[String]) -> ChildEnv {
        ChildEnv::inherit(std::env::vars_os(), pass, held)
    }

    /// Sets one variable (an explicit entry: it wins and may carry any name).
    pub fn set(&mut self, name: impl Into<OsString>, value: impl Into<OsString>) {
        self.0.insert(name.into(), value.into());
    }

    /// Sets every explicit entry of `entries`.
    pub fn extend<K: Into<OsString>, V: Into<OsString>>(
        &mut self,
        entries: impl IntoIterator<Item = (K, V)>,
    ) {
        for (k, v) in entries {
            self.set(k, v);
        }
    }

    /// The value of `name`, if set.
    pub fn get(&self, name: &str) -> Option<&OsStr> {
        self.0.get(OsStr::new(name)).map(OsString::as_os_str)
    }

    /// `(name, value)` pairs, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&OsStr, &OsStr)> {
        self.0.iter().map(|(k, v)| (k.as_os_str(), v.as_os_str()))
    }

    /// The pairs, by name.
    pub fn into_vec(self) -> Vec<(OsString, OsString)> {
        self.0.into_iter().collect()
    }
}

/// The references the run's credentials row holds or has resolved (never inherited by a
/// child, whatever their name): through `service` when a credentials row is loaded, else none.
///
/// # Errors
/// The service's error: a spawner refuses to start the child rather than guess.
pub async fn held_references(
    service: Option<CredentialsClient>,
) -> crate::sdk::Result<Vec<String>> {
    match service {
        Some(s) => Ok(s.held(HeldRequest::default()).await?.refs),
        None => Ok(Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs.iter().map(|(k, v)| (k.into(), v.into())).collect()
    }

    // Issue 23 item 1: an allow-list, never keel's environment minus a deny-list.
    #[test]
    fn only_the_base_and_passed_names_are_inherited_and_held_ones_never() {
        let parent = vars(&[
            ("PATH", "/bin"),
            ("HOME", "/h"),
            ("LC_ALL", "C"),
            ("LLM_CRED", "sk-x"),
            ("GITHUB_PAT", "p"),
            ("MY_API_KEY", "k"),
            ("KEEL_HOME", "/k"),
            ("CARGO_HOME", "/c"),
            ("RUSTUP_HOME", "/r"),
            ("NODE_OPTIONS", "--x"),
        ]);
        let env = ChildEnv::inherit(parent.clone(), &[], &[]);
        let names: Vec<&OsStr> = env.iter().map(|(k, _)| k).collect();
        assert_eq!(names, ["HOME", "LC_ALL", "PATH"]);
        let pass = vec![
            "LLM_CRED".to_owned(),
            "GITHUB_PAT".to_owned(),
            "MY_API_KEY".to_owned(),
            "KEEL_HOME".to_owned(),
            "RUST*".to_owned(),
        ];
        let held = vec!["LLM_CRED".to_owned()];
        let mut env = ChildEnv::inherit(parent, &pass, &held);
        let names: Vec<&OsStr> = env.iter().map(|(k, _)| k).collect();
        // LLM_CRED is held, MY_API_KEY credential-like, KEEL_HOME keel's own: never inherited.
        assert_eq!(
            names,
            ["GITHUB_PAT", "HOME", "LC_ALL", "PATH", "RUSTUP_HOME"]
        );
        env.set("LLM_CRED", "explicit");
        assert_eq!(env.get("LLM_CRED"), Some(OsStr::new("explicit")));
        assert!(!format!("{env:?}").contains("explicit"));
    }

    #[test]
    fn pass_env_entries_are_checked() {
        assert!(check_pass_env(&["CARGO_HOME".into(), "LC_*".into(), "_X1".into()]).is_ok());
        for bad in ["*", "", "1X", "A-B", "A*B"] {
            let e = check_pass_env(&[bad.to_owned()]).unwrap_err();
            assert!(e.contains(PASS_ENV_KEY), "{e}");
        }
    }
}
