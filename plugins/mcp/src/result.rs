//! A `tools/call` answer as a keel [`ToolResult`] (issue 15 item 2), and the plugin's error
//! codes.
//!
//! keel's results are text the model reads, so each content block becomes text: `text` as
//! is; `image` / `audio` as a one-line note with the MIME type and size (the bytes are not sent
//! to the model); an embedded `resource` as its URI and its text (a blob as a note); a
//! `resource_link` as its URI and name. `structuredContent` goes to `meta.structured` always,
//! and is the content when the server sent no block. `isError: true` becomes an error result
//! with code `MCP_TOOL_ERROR` whose content is the server's own message.

use keel_plugin_api::codes::{ContractCode, McpCode};
use keel_plugin_api::services::tools::ToolResult;
use serde_json::{Value, json};

/// The plugin's failures, each with its wire code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    /// The server answered the call with `isError: true`.
    #[error("{0}")]
    ToolError(String),
    /// The server is not connected (failed, restarting, still starting).
    #[error("{0}")]
    Unavailable(String),
    /// The connection failed during the call (the server crashed, the transport broke).
    #[error("{0}")]
    CallFailed(String),
    /// The call ran past the server's `call_timeout_ms` (the request was cancelled).
    #[error("{0}")]
    Timeout(String),
    /// A server could not be started (config, spawn, handshake, tool list).
    #[error("{0}")]
    Start(String),
    /// Config keys the schema cannot check.
    #[error("{0}")]
    Config(String),
}

impl McpError {
    /// The code results and errors carry.
    pub fn code(&self) -> &'static str {
        match self {
            McpError::Config(_) => ContractCode::InvalidArguments.as_str(),
            _ => self.mcp_code().map_or("", McpCode::as_str),
        }
    }

    /// The plugin's own code, for every failure but a config one.
    fn mcp_code(&self) -> Option<McpCode> {
        match self {
            McpError::ToolError(_) => Some(McpCode::ToolError),
            McpError::Unavailable(_) => Some(McpCode::ServerUnavailable),
            McpError::CallFailed(_) => Some(McpCode::CallFailed),
            McpError::Timeout(_) => Some(McpCode::Timeout),
            McpError::Start(_) => Some(McpCode::StartFailed),
            McpError::Config(_) => None,
        }
    }

    /// As a result the model reads.
    pub fn result(&self) -> ToolResult {
        ToolResult::with_code(self.code(), self.to_string())
    }

    /// As an SDK error (activation, commands).
    pub fn sdk(&self) -> keel_plugin_api::sdk::Error {
        match self.mcp_code() {
            Some(code) => keel_plugin_api::sdk::Error::coded(code, self.to_string()),
            None => {
                keel_plugin_api::sdk::Error::coded(ContractCode::InvalidArguments, self.to_string())
            }
        }
    }
}

/// One content block as text.
fn block_text(block: &Value) -> String {
    let kind = block.get("type").and_then(Value::as_str).unwrap_or("?");
    let s = |k: &str| block.get(k).and_then(Value::as_str).unwrap_or_default();
    match kind {
        "text" => s("text").to_owned(),
        "image" | "audio" => format!(
            "[{kind}: {}, {} bytes base64; not shown to the model]",
            s("mimeType"),
            s("data").len()
        ),
        "resource" => {
            let r = block.get("resource").cloned().unwrap_or(Value::Null);
            let uri = r.get("uri").and_then(Value::as_str).unwrap_or_default();
            match r.get("text").and_then(Value::as_str) {
                Some(text) => format!("[resource {uri}]\n{text}"),
                None => format!(
                    "[resource {uri}: {}, {} bytes base64; not shown to the model]",
                    r.get("mimeType")
                        .and_then(Value::as_str)
                        .unwrap_or_default(),
                    r.get("blob").and_then(Value::as_str).map_or(0, str::len)
                ),
            }
        }
        "resource_link" => format!("[resource link {} ({})]", s("uri"), s("name")),
        other => format!("[{other} content]"),
    }
}

/// A `CallToolResult` (as JSON) as a keel result.
pub fn to_tool_result(server: &str, answer: &Value) -> ToolResult {
    let blocks = answer
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let structured = answer.get("structuredContent").filter(|v| !v.is_null());
    let mut text = blocks.iter().map(block_text).collect::<Vec<_>>().join("\n");
    if blocks.is_empty()
        && let Some(s) = structured
    {
        text = s.to_string();
    }
    let is_error = answer
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut result = if is_error {
        let message = if text.is_empty() {
            format!("mcp server '{server}' reported an error without a message")
        } else {
            text
        };
        McpError::ToolError(message).result()
    } else {
        ToolResult::ok(text)
    };
    let mut meta = json!({ "mcp_server": server });
    if let Some(s) = structured {
        meta["structured"] = s.clone();
    }
    result.meta = Some(meta);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    // Issue 15 item 2: text, images, resources, structured content and isError.
    #[test]
    fn content_blocks_become_text_and_errors_keep_the_servers_message() {
        let r = to_tool_result(
            "e",
            &json!({"content": [
                {"type": "text", "text": "Echo: hi"},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "test://1", "text": "body"}},
                {"type": "resource_link", "uri": "test://2", "name": "two"}
            ]}),
        );
        assert!(!r.is_error);
        assert_eq!(
            r.content,
            "Echo: hi\n[image: image/png, 4 bytes base64; not shown to the model]\n[resource test://1]\nbody\n[resource link test://2 (two)]"
        );
        let s = to_tool_result(
            "e",
            &json!({"content": [], "structuredContent": {"sum": 3}}),
        );
        assert_eq!(s.content, r#"{"sum":3}"#);
        assert_eq!(s.meta.unwrap()["structured"]["sum"], 3);
        let e = to_tool_result(
            "e",
            &json!({"content": [{"type": "text", "text": "boom"}], "isError": true}),
        );
        assert!(e.is_error);
        assert_eq!(e.code(), Some("MCP_TOOL_ERROR"));
        assert_eq!(e.content, "Error [MCP_TOOL_ERROR]: boom");
    }
}
