//! Secrets for interpreters (issue 10 item 9, SEC-02): the typed channel by which the firewall
//! hands secret values to a tool whose argument is source code, so the interpreter never
//! parses a value.
//!
//! Filling a value into a bash command as text lets a `'`, `"`, `` ` `` or `$(…)` in it break
//! the command or run. So for a [`ScriptArg`] the firewall rewrites each alias in the source
//! into a quoted expansion of an environment variable named like the alias (`"${sec_NAME}"`)
//! and hands the values under the reserved argument [`SECRET_ENV_ARG`]: a [`SecretEnv`], whose
//! names can only be [`SecretEnvName`]s (`sec_` plus a secret name). The tool takes it out of
//! its arguments and adds those variables to the child's environment. No other name can pass:
//! the variables reach the sandbox launcher too (bubblewrap, `keel-landlock`), which runs
//! before any confinement, so a model-chosen `LD_PRELOAD` there would be an escape. A model
//! that writes the reserved argument itself gets it removed by the firewall; without a
//! firewall, all it could set is a `sec_*` variable, which it could as well set in its own
//! command.
//!
//! Every other tool argument still gets the value as text (no interpreter reads it).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The reserved argument that carries a [`SecretEnv`] from a `tools/execute` listener to the
/// tool. Never part of a tool's schema; never logged (`tool/call` records the model's text).
pub const SECRET_ENV_ARG: &str = "keel_secret_env";

/// A tool argument that an interpreter reads as source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScriptArg {
    /// The tool (ARCHITECTURE §8 name).
    pub tool: &'static str,
    /// The argument holding the source.
    pub arg: &'static str,
}

/// `shell`'s `command`, run by `bash -c`.
pub const SHELL_SCRIPT: ScriptArg = ScriptArg {
    tool: "shell",
    arg: "command",
};

/// Every [`ScriptArg`] (bash source, all of them).
pub const SCRIPT_ARGS: [ScriptArg; 1] = [SHELL_SCRIPT];

/// The argument of `tool` that is bash source, if any.
pub fn script_arg(tool: &str) -> Option<&'static str> {
    SCRIPT_ARGS.iter().find(|s| s.tool == tool).map(|s| s.arg)
}

/// The prefix of every [`SecretEnvName`] (the alias prefix).
pub const SECRET_ENV_PREFIX: &str = "sec_";

/// The name of a secret's environment variable: the alias, `sec_` plus 1 to 64 of
/// `[A-Za-z0-9_]`. Nothing else can be built, deserialized or passed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SecretEnvName(String);

impl SecretEnvName {
    /// `name` if it has the alias form.
    ///
    /// # Errors
    /// A message naming `name` and the form.
    pub fn new(name: &str) -> Result<Self, String> {
        let ok = name.strip_prefix(SECRET_ENV_PREFIX).is_some_and(|rest| {
            (1..=64).contains(&rest.len())
                && rest.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        });
        if ok {
            Ok(SecretEnvName(name.to_owned()))
        } else {
            Err(format!(
                "{name:?} is not a secret variable name (sec_ plus 1 to 64 of A-Z a-z 0-9 _)"
            ))
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for SecretEnvName {
    type Error = String;
    fn try_from(name: String) -> Result<Self, String> {
        SecretEnvName::new(&name)
    }
}

impl From<SecretEnvName> for String {
    fn from(name: SecretEnvName) -> String {
        name.0
    }
}

/// Secret environment variables for one call. `Debug` shows names only.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SecretEnv(BTreeMap<SecretEnvName, String>);

impl std::fmt::Debug for SecretEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

impl SecretEnv {
    /// Adds (or replaces) one variable.
    pub fn insert(&mut self, name: SecretEnvName, value: String) {
        self.0.insert(name, value);
    }

    /// No variable.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `(name, value)` pairs, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Takes the reserved argument out of `args` (an object): empty when absent.
    ///
    /// # Errors
    /// The argument is not a map of [`SecretEnvName`]s to strings; it is removed all the same.
    pub fn take(args: &mut Value) -> Result<SecretEnv, String> {
        let Some(raw) = args.as_object_mut().and_then(|o| o.remove(SECRET_ENV_ARG)) else {
            return Ok(SecretEnv::default());
        };
        serde_json::from_value(raw).map_err(|e| format!("{SECRET_ENV_ARG}: {e}"))
    }

    /// Puts this set into `args` (an object) under the reserved argument; nothing when empty.
    pub fn put(&self, args: &mut Value) {
        if self.is_empty() {
            return;
        }
        if let (Some(obj), Ok(v)) = (args.as_object_mut(), serde_json::to_value(self)) {
            obj.insert(SECRET_ENV_ARG.to_owned(), v);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn sec02_only_alias_names_pass() {
        for ok in ["sec_A", "sec_api_KEY_2", &format!("sec_{}", "x".repeat(64))] {
            assert_eq!(SecretEnvName::new(ok).unwrap().as_str(), ok);
        }
        for bad in [
            "LD_PRELOAD",
            "sec_",
            "SEC_A",
            "sec_a-b",
            "sec_a b",
            "PATH",
            "BASH_ENV",
            &format!("sec_{}", "x".repeat(65)),
        ] {
            assert!(SecretEnvName::new(bad).is_err(), "{bad}");
        }
        let mut args = json!({"command": "x", SECRET_ENV_ARG: {"LD_PRELOAD": "/evil.so"}});
        let e = SecretEnv::take(&mut args).unwrap_err();
        assert!(e.contains("LD_PRELOAD"), "{e}");
        assert_eq!(args, json!({"command": "x"}), "removed all the same");
    }

    #[test]
    fn take_and_put_round_trip_and_debug_shows_names_only() {
        let mut env = SecretEnv::default();
        env.insert(SecretEnvName::new("sec_T").unwrap(), "v4lue".into());
        let mut args = json!({"command": "echo \"${sec_T}\""});
        env.put(&mut args);
        assert_eq!(args[SECRET_ENV_ARG], json!({"sec_T": "v4lue"}));
        assert!(!format!("{env:?}").contains("v4lue"));
        let back = SecretEnv::take(&mut args).unwrap();
        assert_eq!(back, env);
        assert_eq!(args, json!({"command": "echo \"${sec_T}\""}));
        assert!(SecretEnv::take(&mut args).unwrap().is_empty());
        assert_eq!(script_arg("shell"), Some("command"));
        assert_eq!(script_arg("write_file"), None);
    }
}
