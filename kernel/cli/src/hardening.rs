//! What keel does to its own process before any plugin runs (ARCHITECTURE §9): it makes itself
//! non-dumpable. A process of the same user — a tool's child whose fence failed, or one run in
//! `danger-full-access` — can then neither read keel's memory or environment through `/proc`
//! (`environ`, `mem` and `maps` need ptrace access, which Linux refuses for a non-dumpable
//! process unless the reader has `CAP_SYS_PTRACE`) nor attach a debugger, and no core dump
//! writes keys or credentials to disk. Children are unaffected: `execve` makes a program dumpable
//! again. Root (with `CAP_SYS_PTRACE`) is not stopped by this; the plugins that hold values
//! also keep them out of the environment (the credentials row drops what it resolved).

/// Makes the process non-dumpable; the reason when it could not (logged, not fatal: the
/// plugins' own fences still hold).
pub fn harden() -> Option<String> {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .err()
        .map(|e| format!("cannot make keel non-dumpable (its /proc files stay readable): {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn harden_makes_the_process_non_dumpable() {
        assert_eq!(harden(), None);
        assert_eq!(
            rustix::process::dumpable_behavior().unwrap(),
            rustix::process::DumpableBehavior::NotDumpable
        );
        let _ = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::Dumpable);
    }
}
