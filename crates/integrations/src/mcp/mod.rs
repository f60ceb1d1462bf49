//! Model Context Protocol: the tools, prompts and resources of MCP servers as weft tools and messages,
//! and weft tools and graphs served to MCP hosts (on the official Rust SDK, `rmcp`).
//!
//! As a client (langchain-mcp-adapters' `MultiServerMCPClient`):
//!
//! - [`Connection`] says how to reach a server: a child process over stdio, or Streamable HTTP.
//! - [`McpSession`] is one live connection: `list_tools`, `call_tool`, `list_prompts`, `get_prompt`,
//!   `list_resources`, `read_resource`, each within a timeout. A stdio server's process is killed and
//!   reaped when the session is dropped; a server that dies during a call fails it at once with
//!   [`McpError::Closed`].
//! - [`McpTool`] is one server tool as a weft [`Tool`](weft_runnable_core::Tool): arguments validated
//!   against the server's schema before the call, results mapped to tool messages (text, image blocks,
//!   structured content as the artifact), failures sent to the model as error messages, progress
//!   notifications written to the graph's `custom` stream.
//! - [`MultiServerMcpClient`] holds sessions with several servers and lists all their tools.
//!
//! ```no_run
//! use weft_integrations::mcp::{Connection, MultiServerMcpClient};
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let client = MultiServerMcpClient::connect([
//!     ("everything", Connection::stdio("npx", ["-y", "@modelcontextprotocol/server-everything"])),
//! ])
//! .await?;
//! let tools = client.get_tools().await?;
//! // let agent = create_react_agent(model, tools).compile()?;
//! # let _ = tools;
//! # Ok(()) }
//! ```
//!
//! As a server, [`McpServer`] serves weft tools, and compiled graphs through [`GraphTool`], over stdio
//! ([`McpServer::serve_stdio`]) or Streamable HTTP ([`McpServer::serve_http`], [`McpServer::http_router`]).

mod client;
mod connection;
mod content;
mod error;
mod handler;
mod process;
mod server;
mod session;
mod tool;

pub use client::MultiServerMcpClient;
pub use connection::{
    Connection, DEFAULT_CONNECT_TIMEOUT, DEFAULT_TIMEOUT, HttpConnection, StdioConnection, Timeouts,
};
pub use content::{
    ResourceContent, ResourceData, block_from_mcp, content_from_mcp, message_from_mcp, tool_output_from_mcp,
};
pub use error::{McpError, Result};
pub use handler::Progress;
pub use server::{GraphTool, McpServer};
pub use session::{McpSession, PromptArgument, PromptInfo, ResourceInfo, ToolDefinition};
pub use tool::McpTool;
