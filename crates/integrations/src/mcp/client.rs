//! `MultiServerMcpClient`: several MCP servers at once, their tools in one list (langchain-mcp-adapters'
//! `MultiServerMCPClient`).

use std::collections::{BTreeMap, BTreeSet};

use futures::future::join_all;
use weft_runnable_core::{Message, SharedTool, Tool, ToolExt};

use super::connection::Connection;
use super::content::ResourceContent;
use super::error::{McpError, Result};
use super::session::McpSession;
use super::tool::McpTool;

/// Sessions with several MCP servers, each known by a name.
///
/// ```no_run
/// use weft_integrations::mcp::{Connection, MultiServerMcpClient};
/// # async fn demo() -> Result<(), weft_integrations::mcp::McpError> {
/// let client = MultiServerMcpClient::connect([
///     ("math", Connection::stdio("python", ["math_server.py"])),
///     ("weather", Connection::http("http://127.0.0.1:8000/mcp")),
/// ])
/// .await?;
/// let tools = client.get_tools().await?; // hand them to create_react_agent
/// # let _ = tools;
/// client.close().await;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct MultiServerMcpClient {
    sessions: BTreeMap<String, McpSession>,
    prefix: bool,
}

impl MultiServerMcpClient {
    /// Connects to every server at once. If one cannot be reached, the others are closed and the error
    /// names the one that failed.
    pub async fn connect<N: Into<String>>(
        servers: impl IntoIterator<Item = (N, Connection)>,
    ) -> Result<Self> {
        let servers: Vec<(String, Connection)> = servers.into_iter().map(|(n, c)| (n.into(), c)).collect();
        let mut names = BTreeSet::new();
        if let Some((dup, _)) = servers.iter().find(|(name, _)| !names.insert(name.clone())) {
            return Err(McpError::Config(format!("two mcp servers are named '{dup}'")));
        }
        let connected = join_all(servers.iter().map(|(name, c)| McpSession::connect(name.clone(), c))).await;
        let mut sessions = BTreeMap::new();
        let mut failure = None;
        for ((name, _), result) in servers.into_iter().zip(connected) {
            match result {
                Ok(session) => {
                    sessions.insert(name, session);
                }
                Err(err) => failure = failure.or(Some(err)),
            }
        }
        if let Some(err) = failure {
            join_all(sessions.values().map(McpSession::close)).await;
            return Err(err);
        }
        Ok(Self { sessions, prefix: false })
    }

    /// A client over sessions already open.
    pub fn from_sessions(sessions: impl IntoIterator<Item = McpSession>) -> Self {
        Self { sessions: sessions.into_iter().map(|s| (s.name().to_owned(), s)).collect(), prefix: false }
    }

    /// Names each tool `<server>_<tool>` (langchain-mcp-adapters' `tool_name_prefix`), so that servers may
    /// have tools of one name.
    pub fn with_tool_name_prefix(mut self, prefix: bool) -> Self {
        self.prefix = prefix;
        self
    }

    /// The servers' names.
    pub fn servers(&self) -> impl Iterator<Item = &str> {
        self.sessions.keys().map(String::as_str)
    }

    /// The session with `server`.
    pub fn session(&self, server: &str) -> Result<&McpSession> {
        self.sessions.get(server).ok_or_else(|| McpError::UnknownServer {
            server: server.to_owned(),
            known: self.sessions.keys().cloned().collect(),
        })
    }

    /// The tools of every server, in server-name order. Two tools of one name are an error unless the
    /// names are prefixed ([`with_tool_name_prefix`](Self::with_tool_name_prefix)).
    pub async fn tools(&self) -> Result<Vec<McpTool>> {
        let listed = join_all(self.sessions.keys().map(|server| self.tools_from(server))).await;
        let mut tools = Vec::new();
        let mut seen = BTreeMap::new();
        for (server, result) in self.sessions.keys().zip(listed) {
            for tool in result? {
                if let Some(other) = seen.insert(Tool::name(&tool).to_owned(), server.clone()) {
                    return Err(McpError::Config(format!(
                        "servers '{other}' and '{server}' both have a tool named '{}'; use with_tool_name_prefix(true)",
                        Tool::name(&tool)
                    )));
                }
                tools.push(tool);
            }
        }
        Ok(tools)
    }

    /// [`tools`](Self::tools) as shared tools, ready for `create_react_agent` or a `ToolNode`.
    pub async fn get_tools(&self) -> Result<Vec<SharedTool>> {
        Ok(self.tools().await?.into_iter().map(ToolExt::shared).collect())
    }

    /// The tools of one server.
    pub async fn tools_from(&self, server: &str) -> Result<Vec<McpTool>> {
        let tools = self.session(server)?.tools().await?;
        if !self.prefix {
            return Ok(tools);
        }
        Ok(tools
            .into_iter()
            .map(|tool| {
                let name = format!("{server}_{}", tool.definition().name);
                tool.with_name(name)
            })
            .collect())
    }

    /// Renders prompt `name` of `server` as messages.
    pub async fn get_prompt(
        &self,
        server: &str,
        name: &str,
        arguments: BTreeMap<String, String>,
    ) -> Result<Vec<Message>> {
        self.session(server)?.get_prompt(name, arguments).await
    }

    /// Reads resources of `server`: the URIs given, or every listed resource when `uris` is `None`.
    pub async fn get_resources(&self, server: &str, uris: Option<&[&str]>) -> Result<Vec<ResourceContent>> {
        let session = self.session(server)?;
        let uris: Vec<String> = match uris {
            Some(uris) => uris.iter().map(|u| (*u).to_owned()).collect(),
            None => session.list_resources().await?.into_iter().map(|r| r.uri).collect(),
        };
        let mut contents = Vec::new();
        for uri in uris {
            contents.extend(session.read_resource(&uri).await?);
        }
        Ok(contents)
    }

    /// Closes every session (stdio servers exit and are reaped).
    pub async fn close(&self) {
        join_all(self.sessions.values().map(McpSession::close)).await;
    }
}
