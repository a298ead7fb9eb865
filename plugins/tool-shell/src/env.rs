//! The child environment (SBX-03, B12, issue 23 item 1): the shared allow-list builder
//! [`ChildEnv`] (the base names and the row's `pass_env` taken from keel's environment, never a
//! `KEEL_*`, credential-like or held name), then the row's explicit `env` entries on top, then
//! the call's secret variables ([`with_secrets`]).

use std::collections::BTreeMap;
use std::ffi::OsString;

use keel_plugin_api::services::child_env::ChildEnv;
use keel_plugin_api::services::secret_env::SecretEnv;

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

/// The child's environment before the call's secrets: what [`ChildEnv::inherit`] takes from
/// `parent` (the base names and `pass`, none withheld under `held`), then `explicit` entries
/// (which win, and may deliberately carry any name).
pub fn child_env(
    parent: impl IntoIterator<Item = (OsString, OsString)>,
    pass: &[String],
    held: &[String],
    explicit: &BTreeMap<String, String>,
) -> Vec<(OsString, OsString)> {
    let mut env = ChildEnv::inherit(parent, pass, held);
    env.extend(explicit.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    env.into_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs.iter().map(|(k, v)| (k.into(), v.into())).collect()
    }

    // SBX-03, issue 23 item 1: only the allow-list is inherited; held references never are,
    // whatever their name; explicit entries are merged after.
    #[test]
    fn sbx03_only_the_allow_list_is_inherited() {
        let parent = vars(&[
            ("PATH", "/bin"),
            ("MY_API_KEY", "k"),
            ("LLM_CRED", "sk-x"),
            ("KEEL_HOME", "/h"),
            ("LANG", "C"),
            ("CARGO_HOME", "/c"),
        ]);
        let explicit = BTreeMap::from([
            ("LANG".to_owned(), "C.UTF-8".to_owned()),
            ("EXTRA".to_owned(), "1".to_owned()),
        ]);
        let pass = ["CARGO_HOME".to_owned(), "LLM_CRED".to_owned()];
        assert_eq!(
            child_env(parent, &pass, &["LLM_CRED".to_owned()], &explicit),
            vars(&[
                ("CARGO_HOME", "/c"),
                ("EXTRA", "1"),
                ("LANG", "C.UTF-8"),
                ("PATH", "/bin")
            ])
        );
    }
}
