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
//! The held map is a process-wide static: a library is never unloaded (ARCHITECTURE §3), so a
//! reloaded row finds what an earlier activation took.
//!
//! Taking a variable out is two steps ([`drop_var`]). `unsetenv` removes the entry from
//! `environ`, but `/proc/<pid>/environ` shows the block the kernel laid out at `exec`, which
//! `unsetenv` never touches; so first the value's bytes are overwritten in place, through the
//! pointer `getenv` returns, when (and only when) they lie in that block (its bounds are
//! `env_start`/`env_end` of `/proc/self/stat`). A value `setenv` put on the heap is not shown
//! there and is left alone: glibc keeps such strings for reuse.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::sync::{Mutex, PoisonError};

use keel_plugin_api::services::credentials::{is_credential_like, is_valid_reference};

/// Values taken from the environment, by reference.
static HELD: Mutex<BTreeMap<String, String>> = Mutex::new(BTreeMap::new());

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

/// The bounds of the environment block laid out at `exec` (what `/proc/<pid>/environ`
/// shows): fields 50 and 51 of `/proc/self/stat`, counted after the command name.
fn exec_block() -> Option<(usize, usize)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state).
    let start = fields.get(50 - 3)?.parse().ok()?;
    let end = fields.get(51 - 3)?.parse().ok()?;
    (start < end).then_some((start, end))
}

/// Overwrites `name`'s value in the exec block, then unsets it.
#[allow(unsafe_code)]
fn drop_var(name: &str) {
    let Ok(c_name) = CString::new(name) else {
        return;
    };
    let block = exec_block();
    // SAFETY: `getenv` returns null or a pointer to the NUL-terminated value of a live
    // `environ` entry; `strlen` reads up to that NUL. We write only those `len` bytes, and only
    // when they lie inside the exec block, which is this process's own writable stack memory
    // and stays mapped for the life of the process (never a string `putenv` was given, which
    // may be read-only). The bytes are the value of the very variable being dropped: keel's
    // only reader of a credential variable is this module, under `HELD`'s lock (held by our
    // caller); `shell` never passes credential-like names on, and adapters resolve through
    // this row. A foreign reader of the same variable at this instant could read a mix of old
    // bytes and zeros, never out of bounds.
    //
    // `remove_var` then takes this image's std environment lock and glibc's own lock, which
    // serialises it with every `setenv`/`unsetenv`/`putenv` in the process. `getenv` takes no
    // lock: glibc's `unsetenv` shifts the later pointers of `environ` down in place and frees
    // neither the array nor a string, so a reader racing it (another thread's `getenv`, or
    // building a child's environment) never touches freed memory but could, during the
    // shift, miss one other variable. That is why all credential-like variables are taken at
    // activation, before the agent runs any tool or request, and later only a reference
    // resolved for the first time, which is rare.
    unsafe {
        let value = libc::getenv(c_name.as_ptr());
        if !value.is_null()
            && let Some((start, end)) = block
        {
            let len = libc::strlen(value);
            let at = value.addr();
            if at >= start && at.saturating_add(len) <= end {
                std::ptr::write_bytes(value, 0, len);
            }
        }
        std::env::remove_var(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(unsafe_code)]
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
        let block = exec_block().expect("/proc/self/stat has the exec block");
        assert!(block.0 < block.1);
    }

    #[test]
    #[allow(unsafe_code)]
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
    }
}
