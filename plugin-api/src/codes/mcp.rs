//! Codes of the MCP client plugin (`plugins/mcp`): what a tool served from an MCP server
//! answers when the server or the connection fails.

crate::error_codes! {
    /// MCP servers' tools (`plugins/mcp`). A config the schema cannot check is
    /// `INVALID_ARGUMENTS`.
    pub enum McpCode in "mcp" {
        /// The server answered the call with `isError: true`; the content is its message.
        ToolError = "MCP_TOOL_ERROR", by "`mcp`", retry Changed;
        /// The server is not connected (failed, restarting, still starting).
        ServerUnavailable = "MCP_SERVER_UNAVAILABLE", by "`mcp`", retry Later;
        /// The connection failed during the call (the server crashed, the transport broke).
        CallFailed = "MCP_CALL_FAILED", by "`mcp`", retry Once;
        /// The call ran past the server's `call_timeout_ms`; the request was cancelled.
        Timeout = "MCP_TIMEOUT", by "`mcp`", retry Later;
        /// A server could not be started (config, spawn, handshake, tool list).
        StartFailed = "MCP_START_FAILED", by "`mcp`", retry Never;
    }
}
