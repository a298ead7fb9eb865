//! `fs/*` events: the file tool's decision slots and observation feed (FS-01…03, B11).

use abi_stable::StableAbi;
use abi_stable::std_types::RString;

use super::json::Json;
use crate::declare_event;

/// A write or edit the file tool is about to make.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct FsIntent {
    /// Owner session.
    pub session_id: RString,
    /// Canonical target key (absolute path).
    pub target: RString,
    /// The decision; a policy listener sets it and does not call `next` (single slot, first
    /// registered wins). Write: `{"kind":"unconditional"}` (the terminal's),
    /// `{"kind":"create-if-absent"}`, `{"kind":"replace-if-version","version":"…"}`. Edit:
    /// `{"kind":"unconditional"}`, `{"kind":"version","version":"…"}` or
    /// `{"kind":"error","code":"FS_NOT_OBSERVED"|"FS_NOT_FOUND"}`.
    pub decision: Json,
}

/// What the file tool learnt about a target.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct FsObserved {
    /// Owner session.
    pub session_id: RString,
    /// Canonical target key.
    pub target: RString,
    /// `{"kind":"present","version":"…"}` or `{"kind":"absent"}`; the version is
    /// [`content_version`] of the bytes.
    pub observation: Json,
}

/// Hex characters of a content version (128 bits of the digest).
const VERSION_HEX_LEN: usize = 32;

/// The content version `fs/observed` carries: the first 32 hex characters of the blake3
/// digest of the file's bytes. One definition, so a plugin that observes a file another row
/// wrote (the hooks row after a PostToolUse formatter, issue 23 item 12) reports the version
/// the file tools compare against.
pub fn content_version(bytes: &[u8]) -> String {
    let mut hex = blake3::hash(bytes).to_hex().to_string();
    hex.truncate(VERSION_HEX_LEN);
    hex
}

declare_event! {
    /// Decision slot for `write_file` (FS-01).
    pub struct WriteIntent: waterfall("fs/write-intent") -> FsIntent;
}
declare_event! {
    /// Decision slot for `edit_file` (FS-01).
    pub struct EditIntent: waterfall("fs/edit-intent") -> FsIntent;
}
declare_event! {
    /// A read, stat or write observed a target (FS-02). Synchronous, side-effect only.
    pub struct Observed: emit("fs/observed") -> FsObserved;
}
