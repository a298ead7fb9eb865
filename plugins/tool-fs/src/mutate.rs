//! `write_file` and `edit_file`: the two tools that change files, each gated by its decision
//! slot (FS-01) and guarded by versions (FS-04).
//!
//! Per target, the version check, the literal match and the atomic replace run under one
//! mutex ([`TargetLocks`]), so two calls in this process can never interleave between "the
//! file is still the version I read" and "replace it". After a change the new version is
//! reported on `fs/observed`, so the session may keep editing without re-reading. The result's
//! meta names the canonical `target` and the `version` written, so a row that runs after the
//! body (the hooks row's PostToolUse formatters, issue 23 item 12) can tell whether the file
//! still holds what the tool wrote.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use keel_plugin_api::services::tools::ToolResult;
use serde::Deserialize;
use serde_json::json;

use crate::atomic::{Publish, publish};
use crate::content::{as_text, lf, version_of};
use crate::error::{FsError, FsErrorCode, FsResult};
use crate::hooks::{EditDecision, Observation, WriteDecision, edit_decision, write_decision};
use crate::path::{recheck, target_key, writable_target};
use crate::tools::{FsTools, Scope};
use keel_plugin_api::codes::ErrorCode as _;

/// `write_file` arguments.
#[derive(Debug, Deserialize)]
pub struct WriteArgs {
    /// Target path.
    pub path: String,
    /// The whole new content.
    pub content: String,
}

/// `edit_file` arguments.
#[derive(Debug, Deserialize)]
pub struct EditArgs {
    /// Target path.
    pub path: String,
    /// Literal text to find.
    pub old_string: String,
    /// Replacement.
    pub new_string: String,
    /// Replace every occurrence instead of exactly one.
    #[serde(default)]
    pub replace_all: bool,
}

/// One mutex per target while anyone uses it (entries are dropped when the last user leaves).
#[derive(Debug, Default)]
pub struct TargetLocks {
    held: Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>,
}

impl TargetLocks {
    /// Runs `f` holding `target`'s mutex.
    pub fn with<T>(&self, target: &Path, f: impl FnOnce() -> T) -> T {
        let lock = {
            let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(held.entry(target.to_path_buf()).or_default())
        };
        let out = {
            let _guard = lock.lock().unwrap_or_else(PoisonError::into_inner);
            f()
        };
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        // Only the map and this call hold it: nobody else is waiting, forget it.
        if Arc::strong_count(&lock) == 2 {
            held.remove(target);
        }
        out
    }
}

/// The target's current bytes as the session sees them (its editor's, when one holds the
/// file), `None` when it does not exist.
fn current_seen(tools: &FsTools, session_id: &str, target: &Path) -> FsResult<Option<Vec<u8>>> {
    match tools.hooks.editor_read(session_id, target) {
        Some(text) => Ok(text.map(String::into_bytes)),
        None => current(target),
    }
}

/// Publishes `bytes` to the session's editor when it takes the write, else to the disk.
fn publish_seen(
    tools: &FsTools,
    session_id: &str,
    target: &Path,
    text: &str,
    how: Publish,
) -> FsResult<()> {
    if tools.hooks.editor_write(session_id, target, text)? {
        return Ok(());
    }
    publish(target, text.as_bytes(), how).map_err(|e| FsError::io(target, &e))
}

/// The target's current bytes on disk, `None` when it does not exist.
fn current(target: &Path) -> FsResult<Option<Vec<u8>>> {
    match fs::metadata(target) {
        Ok(m) if !m.is_file() => Err(FsError::fs(
            FsErrorCode::NotRegularFile,
            format!("{} is not a regular file", target.display()),
        )),
        Ok(_) => match fs::read(target) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(FsError::io(target, &e)),
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(FsError::io(target, &e)),
    }
}

fn not_observed(target: &Path) -> FsError {
    FsError::fs(
        FsErrorCode::NotObserved,
        format!(
            "{} already exists and you have not read it; read it with read_file first, then write",
            target.display()
        ),
    )
}

fn stale(target: &Path, what: &str) -> FsError {
    FsError::fs(
        FsErrorCode::StaleVersion,
        format!(
            "{} {what} since you last read it; read it again before changing it",
            target.display()
        ),
    )
}

/// `write_file`.
///
/// # Errors
/// `FS_NOT_OBSERVED`, `FS_STALE_VERSION`, `FS_NOT_REGULAR_FILE`, OS errors, `TOOL_FAILED` when
/// the decision slot broke.
pub fn write_file(tools: &FsTools, scope: Scope<'_>, args: WriteArgs) -> FsResult<ToolResult> {
    let target = writable_target(tools.hooks.as_ref(), scope, &args.path)?;
    let key = target_key(&target);
    let decision = write_decision(tools.hooks.as_ref(), scope.session_id, &key)?;
    let bytes = args.content.as_bytes();
    tools.locks.with(&target, || {
        // FS-06: re-resolved and re-checked inside the critical section.
        let target = recheck(tools.hooks.as_ref(), scope, &args.path, &target)?;
        let before = current_seen(tools, scope.session_id, &target)?;
        match (&decision, &before) {
            (WriteDecision::CreateIfAbsent, Some(_)) => return Err(not_observed(&target)),
            (WriteDecision::ReplaceIfVersion { .. }, None) => {
                return Err(stale(&target, "was deleted"));
            }
            (WriteDecision::ReplaceIfVersion { version }, Some(b)) if &version_of(b) != version => {
                return Err(stale(&target, "changed"));
            }
            _ => {}
        }
        let published = match before {
            _ if tools
                .hooks
                .editor_write(scope.session_id, &target, &args.content)? =>
            {
                Ok(())
            }
            Some(_) => publish(&target, bytes, Publish::Replace),
            None => match publish(&target, bytes, Publish::Create) {
                // Appeared meanwhile: a guarded create must not replace it (FS-04).
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => match decision {
                    WriteDecision::Unconditional => publish(&target, bytes, Publish::Replace),
                    _ => return Err(not_observed(&target)),
                },
                other => other,
            },
        };
        published.map_err(|e| FsError::io(&target, &e))?;
        let version = version_of(bytes);
        let obs = Observation::Present {
            version: version.clone(),
        };
        tools.hooks.observed(scope.session_id, &key, &obs);
        let (op, verb) = if before.is_some() {
            ("update", "Updated")
        } else {
            ("create", "Created")
        };
        let before_text = before.as_deref().map(|b| lf(&String::from_utf8_lossy(b)));
        Ok(ToolResult {
            meta: Some(json!({
                "op": op,
                "target": key,
                "version": version,
                "before": before_text,
                "after": lf(&args.content),
            })),
            ..ToolResult::ok(format!(
                "{verb} {} ({} bytes, {} lines).",
                target.display(),
                bytes.len(),
                args.content.lines().count()
            ))
        })
    })
}

/// The policy's refusal as the model reads it.
fn refused(code: &str, target: &Path) -> FsError {
    match FsErrorCode::parse(code) {
        Some(FsErrorCode::NotObserved) => FsError::fs(
            FsErrorCode::NotObserved,
            format!(
                "you have not read {} yet; read it with read_file before editing it",
                target.display()
            ),
        ),
        Some(FsErrorCode::NotFound) => FsError::fs(
            FsErrorCode::NotFound,
            format!(
                "{} did not exist when you last looked; create it with write_file",
                target.display()
            ),
        ),
        Some(other) => FsError::fs(
            other,
            format!("the file policy refused to edit {}", target.display()),
        ),
        None => FsError::policy(format!(
            "the edit policy answered an unknown error code {code}; nothing was edited"
        )),
    }
}

/// Finds the literal to replace: as given, or with LF turned into CRLF when the file uses
/// CRLF and the model wrote LF. Returns (old, new, occurrences).
fn literal(text: &str, old: &str, new: &str) -> (String, String, usize) {
    let n = text.matches(old).count();
    if n == 0 && old.contains('\n') && !old.contains('\r') && text.contains("\r\n") {
        let (old_crlf, new_crlf) = (old.replace('\n', "\r\n"), new.replace('\n', "\r\n"));
        let n = text.matches(old_crlf.as_str()).count();
        return (old_crlf, new_crlf, n);
    }
    (old.to_owned(), new.to_owned(), n)
}

/// `edit_file`.
///
/// # Errors
/// The policy's refusal, `FS_STALE_VERSION`, `FS_NOT_TEXT`, `FS_EDIT_NOT_FOUND`,
/// `FS_AMBIGUOUS_EDIT`, OS errors, `TOOL_FAILED` when the decision slot broke.
pub fn edit_file(tools: &FsTools, scope: Scope<'_>, args: EditArgs) -> FsResult<ToolResult> {
    if args.old_string.is_empty() {
        return Err(FsError::invalid_args(
            "old_string must not be empty; use write_file to create or overwrite a file",
        ));
    }
    let target = writable_target(tools.hooks.as_ref(), scope, &args.path)?;
    let key = target_key(&target);
    let decision = edit_decision(tools.hooks.as_ref(), scope.session_id, &key)?;
    if let EditDecision::Error { code } = &decision {
        return Err(refused(code.code(), &target));
    }
    tools.locks.with(&target, || {
        // FS-06: re-resolved and re-checked inside the critical section.
        let target = recheck(tools.hooks.as_ref(), scope, &args.path, &target)?;
        let Some(bytes) = current_seen(tools, scope.session_id, &target)? else {
            tools
                .hooks
                .observed(scope.session_id, &key, &Observation::Absent);
            return Err(FsError::fs(
                FsErrorCode::NotFound,
                format!("{} does not exist", target.display()),
            ));
        };
        // FS-04: the version is checked before the literal is matched.
        if let EditDecision::Version { version } = &decision
            && &version_of(&bytes) != version
        {
            return Err(stale(&target, "changed"));
        }
        let text = as_text(&bytes).ok_or_else(|| {
            FsError::fs(
                FsErrorCode::NotText,
                format!("{} is not UTF-8 text", target.display()),
            )
        })?;
        let (old, new, count) = literal(text, &args.old_string, &args.new_string);
        if count == 0 {
            return Err(FsError::fs(
                FsErrorCode::EditNotFound,
                format!(
                    "old_string was not found in {}; read the file again and copy the text exactly, including whitespace",
                    target.display()
                ),
            ));
        }
        if count > 1 && !args.replace_all {
            return Err(FsError::fs(
                FsErrorCode::AmbiguousEdit,
                format!(
                    "old_string occurs {count} times in {}; include more surrounding text to make it unique, or set replace_all",
                    target.display()
                ),
            ));
        }
        let after = if args.replace_all {
            text.replace(&old, &new)
        } else {
            text.replacen(&old, &new, 1)
        };
        publish_seen(tools, scope.session_id, &target, &after, Publish::Replace)?;
        let version = version_of(after.as_bytes());
        let obs = Observation::Present {
            version: version.clone(),
        };
        tools.hooks.observed(scope.session_id, &key, &obs);
        let s = if count == 1 { "" } else { "s" };
        Ok(ToolResult {
            meta: Some(json!({
                "target": key,
                "version": version,
                "replacements": count,
                "before": lf(text),
                "after": lf(&after),
            })),
            ..ToolResult::ok(format!(
                "Edited {}: {count} replacement{s}.",
                target.display()
            ))
        })
    })
}
