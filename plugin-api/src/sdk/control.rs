//! The kernel's control call as a typed contract (issue 24 item 3): what a plugin may ask the
//! kernel to do to its rows ([`ControlOp`]) and what the kernel answers ([`ControlAnswer`]).
//!
//! Both sides are in this crate so a misspelled operation does not compile: the kernel matches
//! the enum, [`Context::control`](crate::sdk::Context::control) sends it. On the ABI it is JSON
//! text tagged by `op` (requests) and `answer` (answers); failures are coded with
//! [`ControlCode`](crate::host::ControlCode), `ROW_CONFIG` or the trust record's config code.

use serde::{Deserialize, Serialize};

/// One control operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum ControlOp {
    /// Every row and its state.
    Status,
    /// Unloads the row's fiber and keeps the row disabled.
    Disable {
        /// Row id.
        row: String,
    },
    /// Re-enables a disabled (or disposed) row.
    Enable {
        /// Row id.
        row: String,
    },
    /// Replaces the row's config (validated against its schema); rolls back to the last good
    /// config when the new fiber fails.
    Reload {
        /// Row id.
        row: String,
        /// The new row config.
        #[serde(default = "empty_config")]
        config: serde_json::Value,
    },
    /// Whether a project file may be used as its bytes are now (see
    /// [`Context::project_file_trust`](crate::sdk::Context::project_file_trust)).
    ProjectFileTrust {
        /// The file's path.
        path: String,
    },
}

fn empty_config() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}

/// The kernel's answer to a [`ControlOp`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "kebab-case")]
pub enum ControlAnswer {
    /// To [`ControlOp::Status`].
    Status {
        /// Every row, in config order.
        rows: Vec<RowStatus>,
    },
    /// To `Disable`, `Enable`, `Reload`: the row once the change is done.
    Row(RowControl),
    /// To [`ControlOp::ProjectFileTrust`].
    FileTrust(FileTrust),
}

/// A row after a control operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowControl {
    /// Row id.
    pub row: String,
    /// Fiber state, or `disabled`.
    pub state: String,
    /// Set when another lifecycle change ended the fiber this control made before it could
    /// answer (its provider went away): why that fiber ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overtaken: Option<String>,
}

/// State of one row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowStatus {
    /// Row id.
    pub row: String,
    /// Plugin.
    pub plugin: String,
    /// Fiber state, or `disabled`.
    pub state: String,
    /// Whether faulted.
    pub faulted: bool,
    /// Faults counted.
    pub faults: u32,
    /// Last error.
    pub error: Option<String>,
    /// Registered effects, oldest first.
    pub effects: Vec<String>,
}

/// [`Context::project_file_trust`](crate::sdk::Context::project_file_trust)'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileTrust {
    /// The file may be used.
    pub trusted: bool,
    /// One phrase for messages (`untrusted (never recorded by \`keel trust\`)`).
    pub state: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_keep_their_wire_spelling() {
        let op = ControlOp::Reload {
            row: "r".into(),
            config: serde_json::json!({"k": 1}),
        };
        let text = serde_json::to_string(&op).unwrap();
        assert_eq!(text, r#"{"op":"reload","row":"r","config":{"k":1}}"#);
        let trust: ControlOp =
            serde_json::from_str(r#"{"op":"project-file-trust","path":"/p"}"#).unwrap();
        assert_eq!(trust, ControlOp::ProjectFileTrust { path: "/p".into() });
        let bare: ControlOp = serde_json::from_str(r#"{"op":"reload","row":"r"}"#).unwrap();
        assert!(
            matches!(bare, ControlOp::Reload { config, .. } if config == serde_json::json!({}))
        );
        assert!(serde_json::from_str::<ControlOp>(r#"{"op":"reboot"}"#).is_err());
    }

    #[test]
    fn a_row_answer_reads_as_before() {
        let a = ControlAnswer::Row(RowControl {
            row: "r".into(),
            state: "active".into(),
            overtaken: None,
        });
        let v = serde_json::to_value(&a).unwrap();
        assert_eq!(v["row"], "r");
        assert_eq!(v["state"], "active");
        assert_eq!(serde_json::from_value::<ControlAnswer>(v).unwrap(), a);
    }
}
