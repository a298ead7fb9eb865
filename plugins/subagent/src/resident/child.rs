//! The child's side of a resident child (child-only tools): `memory_write` (temp only),
//! `memory_read` (temp ∪ main) and `notify_parent` (an L3 interrupt on the parent, SUB-06).
//! The calling session must be a live resident child; its own registry entry names its
//! stores and its parent, so a child reaches nothing of another child.

use std::sync::Arc;

use keel_plugin_api::prelude::*;
use keel_plugin_api::services::agent::{InboxTarget, InterruptLevel, SendMessage};
use keel_plugin_api::services::resident::ResidentCode;
use keel_plugin_api::services::tools::{ToolCall, ToolResult};
use serde_json::json;

use super::Host;
use super::registry::Resident;
use super::tools::{NotifyArgs, ReadArgs, WriteArgs, json_result};

impl Host {
    fn me(&self, call: &ToolCall) -> Result<Arc<Resident>> {
        self.registry.by_child(&call.session_id).ok_or_else(|| {
            Error::coded(
                ResidentCode::NotResident,
                format!(
                    "{}: session {} is not a live resident child",
                    call.name, call.session_id
                ),
            )
        })
    }

    /// `memory_write`: temp only (main is not writable through the child's handle).
    pub(super) async fn memory_write(&self, call: &ToolCall, a: WriteArgs) -> Result<ToolResult> {
        let me = self.me(call)?;
        if a.key.is_empty() {
            return Err(Error::coded(
                keel_plugin_api::codes::ContractCode::InvalidArguments,
                "memory_write: the key is empty",
            ));
        }
        me.memory.write(&a.key, &a.text)?;
        Ok(json_result(&json!({ "key": a.key, "level": "temp" })))
    }

    /// `memory_read`: temp ∪ main, temp shadowing main.
    pub(super) async fn memory_read(&self, call: &ToolCall, a: ReadArgs) -> Result<ToolResult> {
        let me = self.me(call)?;
        let records = me.memory.read(a.query.as_deref())?;
        Ok(json_result(&json!({ "records": records })))
    }

    /// `notify_parent`: an L3 interrupt on the parent session.
    pub(super) async fn notify_parent(&self, call: &ToolCall, a: NotifyArgs) -> Result<ToolResult> {
        let me = self.me(call)?;
        let sent = self
            .agents
            .send(SendMessage {
                session_id: me.parent.clone(),
                content: format!("Message from resident child {:?}: {}", me.name, a.message),
                target: InboxTarget::Interrupt,
                level: Some(InterruptLevel::L3),
            })
            .await?;
        Ok(json_result(&json!({
            "parent_session": me.parent,
            "message_id": sent.id,
            "level": sent.level,
        })))
    }
}
