//! The child environment (SBX-03, B12): the parent's environment minus anything that looks
//! like a credential (names containing KEY, SECRET, TOKEN or PASSWORD, any case: the shared
//! rule [`is_credential_like`]) and minus keel's own `KEEL_*` namespace, then the row's
//! explicit `env` entries merged on top, then the call's secret variables ([`with_secrets`]).

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};

use keel_plugin_api::services::credentials::is_credential_like;
use keel_plugin_api::services::secret_env::SecretEnv;

/// Whether a parent variable is withheld from children.
pub fn withheld(name: &OsStr) -> bool {
    let name = name.to_string_lossy();
    name.to_ascii_uppercase().starts_with("KEEL_") || is_credential_like(&name)
}

/// `env` plus the call's secret variables (issue 10 item 9), which win. Their names are
/// [`SecretEnvName`](keel_plugin_api::services::secret_env::SecretEnvName)s (`sec_*`) by
/// type, so nothing here can set `PATH`, `LD_PRELOAD` or anything the sandbox launcher reads.
pub fn with_secrets(
    env: Vec<(OsString, OsString)>,
    secrets: &SecretEnv,
) -> Vec<(OsString, OsString)> {
    if secrets.is_empty() {
        return env;
    }
    let mut env: BTreeMap<OsString, OsString> = env.into_iter().collect();
    for (k, v) in secrets.iter() {
        env.insert(k.into(), v.into());
    }
    env.into_iter().collect()
}

/// The scrubbed environment: `parent` without withheld names, then `explicit` entries (which
/// win, and may deliberately pass a withheld name).
pub fn scrubbed(
    parent: impl IntoIterator<Item = (OsString, OsString)>,
    explicit: &BTreeMap<String, String>,
) -> Vec<(OsString, OsString)> {
    let mut env: BTreeMap<OsString, OsString> =
        parent.into_iter().filter(|(k, _)| !withheld(k)).collect();
    for (k, v) in explicit {
        env.insert(k.into(), v.into());
    }
    env.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs.iter().map(|(k, v)| (k.into(), v.into())).collect()
    }

    // SBX-03: credential-like names and KEEL_* are dropped; explicit entries are merged after.
    #[test]
    fn sbx03_credentials_and_keel_namespace_are_dropped() {
        let parent = vars(&[
            ("PATH", "/bin"),
            ("MY_API_KEY", "k"),
            ("github_token", "t"),
            ("DB_Password", "p"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("KEEL_HOME", "/h"),
            ("LANG", "C"),
        ]);
        let explicit = BTreeMap::from([
            ("LANG".to_owned(), "C.UTF-8".to_owned()),
            ("EXTRA".to_owned(), "1".to_owned()),
        ]);
        assert_eq!(
            scrubbed(parent, &explicit),
            vars(&[("EXTRA", "1"), ("LANG", "C.UTF-8"), ("PATH", "/bin")])
        );
    }
}
