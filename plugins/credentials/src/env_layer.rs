//! The environment layer (SEC-08, issue 10 item 4): the inherited process environment, read
//! once per variable and then held here, with the variable taken out of keel's environment.
//!
//! The environment keel inherited cannot change from outside, so holding a value it gave
//! changes nothing of the layer's semantics (read-only, wins) — but it leaves nothing for a
//! child to inherit or for `/proc/<pid>/environ` to show. At activation the row [`hold`]s every
//! variable that is a valid reference and [`is_credential_like`]; [`take`] holds any other
//! reference the first time `resolve` finds it there. [`peek`] (for `describe`, `set`'s
//! shadowing check and `list`) reads without taking, so asking whether `PATH` is set never
//! removes it.
//!
//! [`held_names`] answers the service's `held`: the held references plus every reference
//! `resolve` found in any layer ([`note_resolved`]), the names no child may inherit.
//!
//! The held map is a process-wide static: a library is never unloaded (ARCHITECTURE §3), so a
//! reloaded row finds what an earlier activation took.
//!
//! Taking a variable out is [`keel_plugin_api::sdk::environ::remove`]: the value's bytes in
//! the exec block that `/proc/<pid>/environ` shows are overwritten, then the variable is unset.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, PoisonError};

use keel_plugin_api::services::credentials::{is_credential_like, is_valid_reference};

/// Values taken from the environment, by reference.
static HELD: Mutex<BTreeMap<String, String>> = Mutex::new(BTreeMap::new());

/// References `resolve` found in any layer this process (names only).
static RESOLVED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Notes that `name` was resolved (from any layer): no child inherits it (issue 23 item 1).
pub fn note_resolved(name: &str) {
    RESOLVED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(name.to_owned());
}

/// Every reference held from the environment or resolved from any layer, sorted.
pub fn held_names() -> Vec<String> {
    let mut names: BTreeSet<String> = HELD
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .keys()
        .cloned()
        .collect();
    names.extend(
        RESOLVED
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned(),
    );
    names.into_iter().collect()
}

fn env_value(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The value of `name` in the environment layer, without taking it.
pub fn peek(name: &str) -> Option<String> {
    let held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
    held.get(name).cloned().or_else(|| env_value(name))
}

/// The value of `name` in the environment layer; found in the environment, it is held from
/// now on and the variable is taken out of keel's environment.
pub fn take(name: &str) -> Option<String> {
    let mut held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(v) = held.get(name) {
        return Some(v.clone());
    }
    let value = env_value(name)?;
    drop_var(name);
    held.insert(name.to_owned(), value.clone());
    Some(value)
}

/// Takes every credential-like reference out of the environment (activation); their names.
pub fn hold() -> Vec<String> {
    let names: Vec<String> = std::env::vars_os()
        .filter_map(|(k, v)| (!v.is_empty()).then_some(k))
        .filter_map(|k| k.into_string().ok())
        .filter(|k| is_valid_reference(k) && is_credential_like(k))
        .collect();
    names.into_iter().filter(|n| take(n).is_some()).collect()
}

fn drop_var(name: &str) {
    keel_plugin_api::sdk::environ::remove(name);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(
        unsafe_code,
        reason = "std::env::set_var is unsafe; this test owns the variable"
    )]
    fn take_holds_the_value_and_unsets_the_variable_peek_does_not() {
        let name = "KEEL_CRED_ENV_LAYER_TEST_TOKEN";
        // SAFETY: a name no other test reads; the test sets it once before using it.
        unsafe { std::env::set_var(name, "tok-value-1") };
        assert_eq!(peek(name).as_deref(), Some("tok-value-1"));
        assert_eq!(
            std::env::var(name).as_deref(),
            Ok("tok-value-1"),
            "peek leaves it"
        );
        assert_eq!(take(name).as_deref(), Some("tok-value-1"));
        assert!(
            std::env::var_os(name).is_none(),
            "taken out of the environment"
        );
        assert_eq!(take(name).as_deref(), Some("tok-value-1"), "held");
        assert_eq!(peek(name).as_deref(), Some("tok-value-1"));
        assert_eq!(take("KEEL_CRED_ENV_LAYER_SURELY_UNSET_KEY"), None);
    }

    #[test]
    #[allow(
        unsafe_code,
        reason = "std::env::set_var is unsafe; this test owns the variable"
    )]
    fn hold_takes_credential_like_references_only() {
        let (cred, plain) = ("KEEL_CRED_HOLD_TEST_SECRET", "KEEL_CRED_HOLD_TEST_PLAIN");
        // SAFETY: names no other test reads; set once before use.
        unsafe {
            std::env::set_var(cred, "s3cret-value");
            std::env::set_var(plain, "plain-value");
        }
        let held = hold();
        assert!(held.iter().any(|n| n == cred), "{held:?}");
        assert!(!held.iter().any(|n| n == plain));
        assert!(std::env::var_os(cred).is_none());
        assert_eq!(std::env::var(plain).as_deref(), Ok("plain-value"));
        assert_eq!(take(cred).as_deref(), Some("s3cret-value"));
        note_resolved("KEEL_CRED_HOLD_TEST_RESOLVED");
        let names = held_names();
        assert!(names.iter().any(|n| n == cred), "{names:?}");
        assert!(names.iter().any(|n| n == "KEEL_CRED_HOLD_TEST_RESOLVED"));
        assert!(!names.iter().any(|n| n == plain));
    }
}
