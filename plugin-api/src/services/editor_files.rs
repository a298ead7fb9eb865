//! The editor-files seam (issue 26 item 3): files as the editor driving a session holds them.
//!
//! An editor front end (`keel acp` when the client offers `fs.readTextFile` /
//! `fs.writeTextFile`) provides it; the file tools ask it before they touch the disk, so the
//! agent reads the editor's unsaved buffers and its writes land in them (the editor saves).
//! An answer with `handled: false` (not one of the provider's sessions, or the editor does not
//! offer that operation) sends the tool to the disk as without a provider. Every check the
//! tool makes (sandbox write fence, version guards, the write policy) runs the same either way.

use serde::{Deserialize, Serialize};

crate::contract! {
    /// Files as the session's editor holds them.
    pub contract EditorFiles = "keel.editor-files", version 1;
    provider EditorFilesProvider;
    client EditorFilesClient;
    /// The text of `path` as the editor has it.
    fn read(EditorRead) -> EditorText;
    /// Hands `content` of `path` to the editor instead of writing the disk.
    fn write(EditorWrite) -> EditorWritten;
}

/// What `read` takes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EditorRead {
    /// The session whose tool asks.
    pub session_id: String,
    /// Absolute path.
    pub path: String,
}

/// What `read` answers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EditorText {
    /// `false`: read the disk.
    pub handled: bool,
    /// The text; `None` (when handled): the editor has no such file.
    #[serde(default)]
    pub content: Option<String>,
}

/// What `write` takes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EditorWrite {
    /// The session whose tool writes.
    pub session_id: String,
    /// Absolute path.
    pub path: String,
    /// The whole new text.
    pub content: String,
}

/// What `write` answers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EditorWritten {
    /// `false`: write the disk.
    pub handled: bool,
}
