//! Taking a variable out of this process's environment for good (issue 10 item 4): keel holds
//! a credential or a passphrase in memory and leaves nothing for a child to inherit or for
//! `/proc/<pid>/environ` to show.
//!
//! `unsetenv` removes the entry from `environ`, but `/proc/<pid>/environ` shows the block the
//! kernel laid out at `exec`, which `unsetenv` never touches; so first the value's bytes are
//! overwritten in place, through the pointer `getenv` returns, when (and only when) they lie in
//! that block (its bounds are `env_start`/`env_end` of `/proc/self/stat`). A value `setenv` put
//! on the heap is not shown there and is left alone: glibc keeps such strings for reuse.
//!
//! Call it early (at activation), for variables only the caller reads: see the SAFETY note.

use std::ffi::CString;

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

/// Overwrites `name`'s value in the exec block, then unsets it. A name that is not set is a
/// no-op.
pub fn remove(name: &str) {
    let Ok(c_name) = CString::new(name) else {
        return;
    };
    let block = exec_block();
    // SAFETY: `getenv` returns null or a pointer to the NUL-terminated value of a live
    // `environ` entry; `strlen` reads up to that NUL. We write only those `len` bytes, and only
    // when they lie inside the exec block, which is this process's own writable stack memory
    // and stays mapped for the life of the process (never a string `putenv` was given, which
    // may be read-only). The bytes are the value of the very variable being dropped: keel's
    // only reader of such a variable is the caller (the credentials row under its lock, the
    // firewall at activation); no child inherits credential-like names (`child_env`), and adapters
    // resolve through the credentials row. A foreign reader of the same variable at this instant could read a mix of old
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
    fn remove_unsets_and_finds_the_exec_block() {
        let name = "KEEL_SDK_ENVIRON_TEST_TOKEN";
        // SAFETY: a name no other test reads; set once before use.
        unsafe { std::env::set_var(name, "tok-value-1") };
        remove(name);
        assert!(std::env::var_os(name).is_none());
        remove(name);
        let block = exec_block().expect("/proc/self/stat has the exec block");
        assert!(block.0 < block.1);
    }
}
