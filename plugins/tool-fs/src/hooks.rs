//! The seam between the file tools and whoever decides and observes: the `fs/write-intent` and
//! `fs/edit-intent` decision slots and the `fs/observed` feed (FS-01, FS-02).
//!
//! The tools talk to an [`FsHooks`] value, not to the kernel, so the bodies are plain Rust: the
//! plugin passes one that dispatches the real events, tests pass one backed by a table.
//! Decisions and observations are the SDK's typed `fs/*` values ([`WriteDecision`],
//! [`EditDecision`], [`Observation`]). The same seam carries the sandbox's write check (FS-06),
//! so containment is one call too.

use std::path::Path;

pub use keel_plugin_api::events::fs::{EditDecision, Observation, WriteDecision};

use crate::error::{FsError, FsResult};
use crate::tools::Scope;

/// Decides and observes on behalf of the file tools. Without a policy (the defaults) every
/// decision is the terminal's pre-set `Unconditional`.
pub trait FsHooks: Send + Sync {
    /// Runs `fs/write-intent` for `target`.
    ///
    /// # Errors
    /// A message when the slot failed (a listener errored or left something that is not a
    /// [`WriteDecision`]): the call fails closed.
    fn write_intent(&self, session_id: &str, target: &str) -> Result<WriteDecision, String> {
        let _ = (session_id, target);
        Ok(WriteDecision::Unconditional)
    }

    /// Runs `fs/edit-intent` for `target`.
    ///
    /// # Errors
    /// As [`FsHooks::write_intent`], for an [`EditDecision`].
    fn edit_intent(&self, session_id: &str, target: &str) -> Result<EditDecision, String> {
        let _ = (session_id, target);
        Ok(EditDecision::Unconditional)
    }

    /// Reports an observation. Never fails (FS-02).
    fn observed(&self, session_id: &str, target: &str, observation: &Observation);

    /// FS-06: may the canonical `target` be written by this call (its session's working
    /// directory, the mode it asks for)? The default (no sandbox loaded) allows everything.
    ///
    /// # Errors
    /// `FS_SANDBOX_DENIED` with the sandbox's reason (it carries the `[sandbox: …]` marker);
    /// a sandbox that cannot answer also denies (fail closed).
    fn check_write(&self, scope: Scope<'_>, target: &Path) -> FsResult<()> {
        let _ = (scope, target);
        Ok(())
    }

    /// The text of the canonical `target` as the session's editor holds it (issue 26 item 3,
    /// `keel.editor-files`): `None` reads the disk (the default: no editor), `Some(None)` the
    /// editor has no such file.
    fn editor_read(&self, session_id: &str, target: &Path) -> Option<Option<String>> {
        let _ = (session_id, target);
        None
    }

    /// Hands a write of the canonical `target` to the session's editor instead of the disk:
    /// `Ok(true)` the editor took it, `Ok(false)` (the default) write the disk.
    ///
    /// # Errors
    /// The editor refused or failed: nothing was written.
    fn editor_write(&self, session_id: &str, target: &Path, content: &str) -> FsResult<bool> {
        let _ = (session_id, target, content);
        Ok(false)
    }
}

/// Runs the write slot.
///
/// # Errors
/// `TOOL_FAILED` when the slot failed or answered something that is not a decision.
pub fn write_decision(
    hooks: &dyn FsHooks,
    session_id: &str,
    target: &str,
) -> FsResult<WriteDecision> {
    hooks
        .write_intent(session_id, target)
        .map_err(|m| FsError::policy(format!("the write policy failed: {m}; nothing was written")))
}

/// Runs the edit slot.
///
/// # Errors
/// `TOOL_FAILED` when the slot failed or answered something that is not a decision.
pub fn edit_decision(
    hooks: &dyn FsHooks,
    session_id: &str,
    target: &str,
) -> FsResult<EditDecision> {
    hooks
        .edit_intent(session_id, target)
        .map_err(|m| FsError::policy(format!("the edit policy failed: {m}; nothing was edited")))
}

/// No policy: every decision is the terminal's `unconditional`, observations go nowhere.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoPolicy;

impl FsHooks for NoPolicy {
    fn observed(&self, _: &str, _: &str, _: &Observation) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Broken;
    impl FsHooks for Broken {
        fn write_intent(&self, _: &str, _: &str) -> Result<WriteDecision, String> {
            Err("INVALID_ARGUMENTS: expected WriteDecision".into())
        }
        fn edit_intent(&self, _: &str, _: &str) -> Result<EditDecision, String> {
            Err("listener exploded".into())
        }
        fn observed(&self, _: &str, _: &str, _: &Observation) {}
    }

    // FS-01: a broken decision slot fails closed with TOOL_FAILED.
    #[test]
    fn fs01_broken_policy_fails_closed() {
        assert_eq!(
            write_decision(&Broken, "s", "/t").unwrap_err().code,
            "TOOL_FAILED"
        );
        assert_eq!(
            edit_decision(&Broken, "s", "/t").unwrap_err().code,
            "TOOL_FAILED"
        );
        assert_eq!(
            write_decision(&NoPolicy, "s", "/t").unwrap(),
            WriteDecision::Unconditional
        );
    }
}
