//! `McpError`: what can go wrong talking to an MCP server, or serving one.

use std::time::Duration;

/// Why a call to an MCP server failed.
///
/// Every variant names the server (the key it was given in a [`MultiServerMcpClient`](super::MultiServerMcpClient),
/// or the name given to [`McpSession::connect`](super::McpSession::connect)). Inside a tool call it
/// reaches the agent as the text of a tool message with status `error` (see [`McpTool`](super::McpTool));
/// callers that hold a `weft_runnable_core::Error` get it back with `err.downcast_ref::<McpError>()`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The server's command could not be started.
    #[error("cannot start mcp server '{server}' ({command})")]
    Spawn {
        /// The server's name.
        server: String,
        /// The command line.
        command: String,
        /// The operating system's reason.
        #[source]
        source: std::io::Error,
    },
    /// The connection could not be set up (the server is unreachable, or the MCP handshake failed).
    #[error("cannot connect to mcp server '{server}': {message}")]
    Connect {
        /// The server's name.
        server: String,
        /// What went wrong.
        message: String,
    },
    /// A request got no answer in time; the request was cancelled.
    #[error("mcp server '{server}' did not answer {operation} within {timeout:?}")]
    Timeout {
        /// The server's name.
        server: String,
        /// The request, such as `tools/call 'echo'`.
        operation: String,
        /// The limit that passed.
        timeout: Duration,
    },
    /// The server went away (its process exited, or the connection closed) before answering.
    #[error("mcp server '{server}' closed the connection during {operation}{}", detail_suffix(.detail))]
    Closed {
        /// The server's name.
        server: String,
        /// The request that was in flight.
        operation: String,
        /// How the process ended and the last lines it wrote to stderr, when known.
        detail: Option<String>,
    },
    /// The server answered with a JSON-RPC error, or with something that is not the expected answer.
    #[error("mcp server '{server}' failed {operation}: {message}")]
    Protocol {
        /// The server's name.
        server: String,
        /// The request.
        operation: String,
        /// The error the server sent.
        message: String,
        /// The JSON-RPC error code, when the server sent one.
        code: Option<i32>,
    },
    /// The tool ran and reported a failure (`isError: true`); the message is the text of its content.
    #[error("tool '{tool}' of mcp server '{server}' failed: {message}")]
    ToolFailed {
        /// The server's name.
        server: String,
        /// The tool.
        tool: String,
        /// The text the tool returned.
        message: String,
    },
    /// No server of that name was configured.
    #[error("no mcp server named '{server}' (servers: {known:?})")]
    UnknownServer {
        /// The name asked for.
        server: String,
        /// The configured names.
        known: Vec<String>,
    },
    /// The configuration cannot work (an empty command, an invalid URL or header, two tools of one name).
    #[error("invalid mcp configuration: {0}")]
    Config(String),
    /// Serving weft tools over MCP failed (the listener, the transport).
    #[error("mcp server error: {0}")]
    Serve(String),
}

fn detail_suffix(detail: &Option<String>) -> String {
    detail.as_ref().map(|d| format!(" ({d})")).unwrap_or_default()
}

impl McpError {
    /// Whether the server is gone (closed or timed out), so that retrying on the same session is useless.
    pub fn is_connection_lost(&self) -> bool {
        matches!(self, Self::Closed { .. } | Self::Timeout { .. })
    }
}

impl From<McpError> for weft_runnable_core::Error {
    fn from(err: McpError) -> Self {
        weft_runnable_core::Error::custom(err)
    }
}

/// `Result` of the MCP integration.
pub type Result<T, E = McpError> = std::result::Result<T, E>;
