//! The seam between the file tools and whoever decides and observes: the `fs/write-intent` and
//! `fs/edit-intent` decision slots and the `fs/observed` feed (FS-01, FS-02).
//!
//! The tools talk to an [`FsHooks`] value, not to the kernel, so the bodies are plain Rust: the
//! plugin passes one that dispatches the real events, tests pass one backed by a table.
//! Decisions arrive as JSON and are parsed here into [`WriteDecision`] / [`EditDecision`].
//! The same seam carries the sandbox's write check (FS-06), so containment is one call too.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{FsError, FsResult};
use crate::tools::Scope;

/// Which decision slot a call goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intent {
    /// `fs/write-intent`.
    Write,
    /// `fs/edit-intent`.
    Edit,
}

/// What a read, write or edit learnt about a target (the `fs/observed` payload).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Observation {
    /// The target exists with this content version.
    Present {
        /// Content hash of the bytes read or written.
        version: String,
    },
    /// The target does not exist.
    Absent,
}

/// Decides and observes on behalf of the file tools.
pub trait FsHooks: Send + Sync {
    /// Runs the intent's decision slot for `target` and returns the decision JSON. With no
    /// policy loaded the answer is `{"kind":"unconditional"}` (the terminal's pre-set).
    ///
    /// # Errors
    /// A message when the slot failed (a listener errored): the call fails closed.
    fn decide(&self, intent: Intent, session_id: &str, target: &str) -> Result<Value, String>;

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
}

/// The decision of `fs/write-intent`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum WriteDecision {
    /// Write whatever is there (no policy loaded).
    Unconditional,
    /// Only create: an existing target → `FS_NOT_OBSERVED`.
    CreateIfAbsent,
    /// Only replace this version: absent or changed → `FS_STALE_VERSION`.
    ReplaceIfVersion {
        /// The version the session read.
        version: String,
    },
}

/// The decision of `fs/edit-intent`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum EditDecision {
    /// Edit whatever is there (no policy loaded).
    Unconditional,
    /// The file must still be at this version (checked before matching).
    Version {
        /// The version the session read.
        version: String,
    },
    /// Refuse with this code (`FS_NOT_OBSERVED`, `FS_NOT_FOUND`).
    Error {
        /// A B11 code.
        code: String,
    },
}

/// The pre-set decision the terminal keeps when no policy answers.
pub fn unconditional() -> Value {
    serde_json::json!({ "kind": "unconditional" })
}

fn parse<T: for<'de> Deserialize<'de>>(intent: Intent, raw: Value) -> FsResult<T> {
    let shown = raw.to_string();
    serde_json::from_value(raw).map_err(|e| {
        FsError::policy(format!(
            "the {intent:?} policy answered an unknown decision {shown}: {e}; nothing was changed"
        ))
    })
}

/// Runs the write slot and parses its answer.
///
/// # Errors
/// `TOOL_FAILED` when the slot failed or answered an unknown decision.
pub fn write_decision(
    hooks: &dyn FsHooks,
    session_id: &str,
    target: &str,
) -> FsResult<WriteDecision> {
    let raw = hooks
        .decide(Intent::Write, session_id, target)
        .map_err(|m| {
            FsError::policy(format!("the write policy failed: {m}; nothing was written"))
        })?;
    parse(Intent::Write, raw)
}

/// Runs the edit slot and parses its answer.
///
/// # Errors
/// `TOOL_FAILED` when the slot failed or answered an unknown decision.
pub fn edit_decision(
    hooks: &dyn FsHooks,
    session_id: &str,
    target: &str,
) -> FsResult<EditDecision> {
    let raw = hooks
        .decide(Intent::Edit, session_id, target)
        .map_err(|m| FsError::policy(format!("the edit policy failed: {m}; nothing was edited")))?;
    parse(Intent::Edit, raw)
}

/// No policy: every decision is the terminal's `unconditional`, observations go nowhere.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoPolicy;

impl FsHooks for NoPolicy {
    fn decide(&self, _: Intent, _: &str, _: &str) -> Result<Value, String> {
        Ok(unconditional())
    }

    fn observed(&self, _: &str, _: &str, _: &Observation) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decisions_parse_from_the_documented_shapes() {
        let w: WriteDecision =
            serde_json::from_value(json!({"kind":"replace-if-version","version":"v"})).unwrap();
        assert_eq!(
            w,
            WriteDecision::ReplaceIfVersion {
                version: "v".into()
            }
        );
        let e: EditDecision =
            serde_json::from_value(json!({"kind":"error","code":"FS_NOT_FOUND"})).unwrap();
        assert_eq!(
            e,
            EditDecision::Error {
                code: "FS_NOT_FOUND".into()
            }
        );
        let o = serde_json::to_value(Observation::Present {
            version: "v".into(),
        })
        .unwrap();
        assert_eq!(o, json!({"kind":"present","version":"v"}));
        assert_eq!(
            serde_json::to_value(Observation::Absent).unwrap(),
            json!({"kind":"absent"})
        );
    }

    struct Broken;
    impl FsHooks for Broken {
        fn decide(&self, i: Intent, _: &str, _: &str) -> Result<Value, String> {
            match i {
                Intent::Write => Ok(json!({"kind":"sometimes"})),
                Intent::Edit => Err("listener exploded".into()),
            }
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
    }
}
