//! `keel.editor-files` for the ACP client: when it offers `fs.readTextFile` /
//! `fs.writeTextFile` (`initialize`), the file tools of its sessions read and write through
//! `fs/read_text_file` / `fs/write_text_file`, so the agent sees the editor's unsaved buffers
//! and its writes land in them (the editor saves them). Anything else is `handled: false`, and
//! the tool uses the disk.
//!
//! A read the client fails (a file it cannot open) falls back to the disk; a write it fails
//! fails the tool call (nothing was written, and the disk is not written behind the editor's
//! back).

use std::sync::Arc;

use agent_client_protocol::v1::schema::{ReadTextFileRequest, SessionId, WriteTextFileRequest};
use keel_plugin_api::codes::DriverCode;
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::editor_files::{
    EditorFilesProvider, EditorRead, EditorText, EditorWrite, EditorWritten,
};

use crate::state::Shared;

/// The provider.
pub struct Files {
    /// The connection and its sessions.
    pub shared: Arc<Shared>,
}

impl EditorFilesProvider for Files {
    async fn read(&self, r: EditorRead) -> Result<EditorText> {
        let (Some(_), Some(connection)) =
            (self.shared.session(&r.session_id), self.shared.connection())
        else {
            return Ok(EditorText::default());
        };
        if !self.shared.client_fs().read {
            return Ok(EditorText::default());
        }
        let asked = connection
            .send_request(ReadTextFileRequest::new(
                SessionId::new(r.session_id.as_str()),
                r.path.clone(),
            ))
            .block_task()
            .await;
        match asked {
            Ok(answer) => Ok(EditorText {
                handled: true,
                content: Some(answer.content),
            }),
            Err(e) => {
                tracing::debug!(
                    path = r.path,
                    "the client did not read the file ({e}); the disk is read"
                );
                Ok(EditorText::default())
            }
        }
    }

    async fn write(&self, w: EditorWrite) -> Result<EditorWritten> {
        let (Some(_), Some(connection)) =
            (self.shared.session(&w.session_id), self.shared.connection())
        else {
            return Ok(EditorWritten::default());
        };
        if !self.shared.client_fs().write {
            return Ok(EditorWritten::default());
        }
        connection
            .send_request(WriteTextFileRequest::new(
                SessionId::new(w.session_id.as_str()),
                w.path.clone(),
                w.content,
            ))
            .block_task()
            .await
            .map_err(|e| {
                Error::coded(
                    DriverCode::Io,
                    format!("the editor refused to write {}: {e}", w.path),
                )
            })?;
        Ok(EditorWritten { handled: true })
    }
}
