//! `McpServer`: weft tools and compiled graphs served over MCP (stdio or Streamable HTTP), so that MCP
//! hosts (Claude Desktop, IDEs, other agents) can call weft agents.

mod graph_tool;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ResultType, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt as _};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use weft_graph::erased::ErasedGraph;
use weft_runnable_core::{
    Error, RunnableConfig, SharedTool, ToolCall, ToolCallOutput, ToolContext, ToolExt as _, ToolStatus,
    invoke_tool,
};

pub use graph_tool::GraphTool;

use super::content::mcp_blocks_from_content;
use super::error::{McpError, Result};

/// weft tools (and graphs, through [`GraphTool`]) as an MCP server.
///
/// Each tool is listed with its model-facing schema; a call runs through weft's tool machinery
/// (arguments validated, the tool's error policy applied). The outcome is a `tools/call` result: the
/// tool's content as MCP content blocks, its artifact (when an object) as structured content, and
/// `isError: true` for invalid arguments, a failing tool or an error message; an unknown tool is a
/// JSON-RPC error.
///
/// ```no_run
/// use weft_integrations::mcp::McpServer;
/// use weft_runnable_core::{StructuredTool, ToolExt as _};
/// # async fn demo() -> Result<(), weft_integrations::mcp::McpError> {
/// let add = StructuredTool::from_fn(
///     "add",
///     "Adds two numbers.",
///     serde_json::json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
///                        "required": ["a", "b"]}),
///     |args, _ctx| async move {
///         let sum = args["a"].as_f64().unwrap_or(0.0) + args["b"].as_f64().unwrap_or(0.0);
///         Ok(serde_json::json!(sum))
///     },
/// );
/// McpServer::new("math").with_tool(add.shared()).serve_stdio().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct McpServer {
    name: String,
    version: String,
    instructions: Option<String>,
    tools: BTreeMap<String, SharedTool>,
    config: RunnableConfig,
}

impl fmt::Debug for McpServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpServer")
            .field("name", &self.name)
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl McpServer {
    /// A server called `name` (its `serverInfo.name`), with no tools yet.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            instructions: None,
            tools: BTreeMap::new(),
            config: RunnableConfig::default(),
        }
    }

    /// Serves `tool` (a tool of the same name is replaced).
    pub fn with_tool(mut self, tool: SharedTool) -> Self {
        self.tools.insert(tool.name().to_owned(), tool);
        self
    }

    /// Serves every tool of `tools`.
    pub fn with_tools(self, tools: impl IntoIterator<Item = SharedTool>) -> Self {
        tools.into_iter().fold(self, Self::with_tool)
    }

    /// Serves a compiled graph (see `CompiledGraph::erase`) as the tool `name` (see [`GraphTool`]).
    pub fn with_graph(
        self,
        name: impl Into<String>,
        description: impl Into<String>,
        graph: Arc<dyn ErasedGraph>,
    ) -> Self {
        self.with_tool(GraphTool::new(name, description, graph).shared())
    }

    /// Sets the version the server reports.
    pub fn with_version(mut self, version: impl Into<String>) -> Self {
        self.version = version.into();
        self
    }

    /// Sets instructions for the host's model, sent in the handshake.
    pub fn with_instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// Sets the config every tool call runs under (tags, metadata, callbacks).
    pub fn with_config(mut self, config: RunnableConfig) -> Self {
        self.config = config;
        self
    }

    /// Serves one client over this process's stdin and stdout until the client closes them.
    pub async fn serve_stdio(self) -> Result<()> {
        self.serve_io(tokio::io::stdin(), tokio::io::stdout()).await
    }

    /// Serves one client over a byte stream until it closes.
    pub async fn serve_io<R, W>(self, read: R, write: W) -> Result<()>
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let running = Handler(Arc::new(self))
            .serve((read, write))
            .await
            .map_err(|e| McpError::Serve(format!("handshake failed: {e}")))?;
        running.waiting().await.map_err(|e| McpError::Serve(e.to_string()))?;
        Ok(())
    }

    /// The Streamable HTTP endpoint as an axum router serving `path` (such as `/mcp`); nest it in an
    /// application or serve it with [`serve_http`](Self::serve_http). Only loopback `Host` headers are
    /// accepted (DNS-rebinding protection), as rmcp does by default.
    pub fn http_router(self, path: &str) -> axum::Router {
        let server = Arc::new(self);
        let service = StreamableHttpService::new(
            move || Ok(Handler(Arc::clone(&server))),
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default(),
        );
        axum::Router::new().route_service(path, service)
    }

    /// Serves the Streamable HTTP endpoint at `/mcp` on `listener` until the future is dropped.
    pub async fn serve_http(self, listener: tokio::net::TcpListener) -> Result<()> {
        axum::serve(listener, self.http_router("/mcp")).await.map_err(|e| McpError::Serve(e.to_string()))
    }

    async fn call(&self, request: CallToolRequestParams) -> std::result::Result<CallToolResult, ErrorData> {
        let Some(tool) = self.tools.get(request.name.as_ref()) else {
            let known: Vec<&String> = self.tools.keys().collect();
            return Err(ErrorData::invalid_params(
                format!("unknown tool '{}' (tools: {known:?})", request.name),
                None,
            ));
        };
        let args = request.arguments.map(Value::Object).unwrap_or_else(|| json!({}));
        let call = ToolCall { name: request.name.to_string(), args, id: None };
        let result = match invoke_tool(tool.as_ref(), call, ToolContext::new(self.config.clone())).await {
            Ok(ToolCallOutput::Message(message)) => {
                let mut result = json!({
                    "content": mcp_blocks_from_content(&message.content),
                    "isError": message.status == ToolStatus::Error,
                });
                if let Some(artifact) = message.artifact.filter(Value::is_object) {
                    let structured = artifact.get("structured_content").cloned().unwrap_or(artifact);
                    result["structuredContent"] = structured;
                }
                result
            }
            Ok(ToolCallOutput::Command(_) | ToolCallOutput::Many(_)) => {
                error_result("the tool returned a graph command or several outputs, which MCP cannot carry")
            }
            Err(Error::ToolArguments { errors, .. }) => {
                error_result(&format!("invalid arguments for tool '{}': {}", request.name, errors.join("; ")))
            }
            Err(err) => error_result(&err.to_string()),
        };
        let mut result: CallToolResult =
            serde_json::from_value(result).map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        // Required from protocol 2026-07-28 on; rmcp clears it for peers of older versions.
        result.result_type = Some(ResultType::COMPLETE);
        Ok(result)
    }
}

fn error_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

/// The rmcp handler of a served [`McpServer`].
#[derive(Clone)]
struct Handler(Arc<McpServer>);

impl ServerHandler for Handler {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder().enable_tools().build();
        let mut info = ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(self.0.name.clone(), self.0.version.clone()));
        if let Some(instructions) = &self.0.instructions {
            info = info.with_instructions(instructions.clone());
        }
        info
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> std::result::Result<ListToolsResult, ErrorData> {
        let tools = self
            .0
            .tools
            .values()
            .map(|tool| {
                let schema = match tool.model_schema().into_owned() {
                    Value::Object(schema) => schema,
                    _ => serde_json::Map::from_iter([("type".to_owned(), json!("object"))]),
                };
                rmcp::model::Tool::new(tool.name().to_owned(), tool.description().to_owned(), schema)
            })
            .collect();
        // The constructor sets `resultType`, which clients of protocol 2026-07-28 require.
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResponse, ErrorData> {
        self.0.call(request).await.map(CallToolResponse::Complete)
    }
}
