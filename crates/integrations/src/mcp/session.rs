//! `McpSession`: one live connection to one MCP server: its tools, prompts and resources.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, GetPromptRequestParams, ReadResourceRequestParams,
    ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, RunningService, ServiceError, ServiceExt as _};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Mutex;
use weft_runnable_core::{Message, ToolOutput};

use super::connection::{Connection, HttpConnection, Timeouts};
use super::content::{ResourceContent, message_from_mcp, tool_output_from_mcp};
use super::error::{McpError, Result};
use super::handler::{ClientState, Progress, token_key};
use super::process::ServerProcess;
use super::tool::McpTool;

/// A tool as the server describes it (`tools/list`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolDefinition {
    /// Its name.
    pub name: String,
    /// A display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON schema of its arguments.
    pub input_schema: Value,
    /// The JSON schema of its structured result, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Hints about its behaviour (`readOnlyHint`, `destructiveHint`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
}

/// A prompt template the server offers (`prompts/list`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptInfo {
    /// Its name.
    pub name: String,
    /// What it is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The arguments it takes.
    #[serde(default)]
    pub arguments: Vec<PromptArgument>,
}

/// An argument of a prompt template.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptArgument {
    /// Its name.
    pub name: String,
    /// What it means.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether the prompt needs it.
    #[serde(default)]
    pub required: bool,
}

/// A resource the server offers (`resources/list`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceInfo {
    /// Its URI, for [`McpSession::read_resource`].
    pub uri: String,
    /// Its name.
    pub name: String,
    /// What it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
}

/// One live connection to an MCP server.
///
/// Cheap to clone (clones share the connection). A stdio server's process lives as long as the session:
/// when the last clone (the tools made from it hold one) is dropped the process is killed and reaped;
/// [`close`](McpSession::close) ends it gracefully (stdin closed, then killed after a grace period).
///
/// Every request is limited by the connection's timeout and cancelled (`notifications/cancelled`) when it
/// passes; a server that dies during a request fails it at once with [`McpError::Closed`], which says how
/// the process ended and what it last wrote to stderr.
#[derive(Clone)]
pub struct McpSession {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    peer: Peer<RoleClient>,
    service: Mutex<Option<RunningService<RoleClient, ClientState>>>,
    state: ClientState,
    process: Mutex<Option<ServerProcess>>,
    pid: Option<u32>,
    timeouts: Timeouts,
}

impl fmt::Debug for McpSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpSession")
            .field("name", &self.inner.name)
            .field("pid", &self.inner.pid)
            .field("timeouts", &self.inner.timeouts)
            .finish_non_exhaustive()
    }
}

impl McpSession {
    /// Connects to the server `connection` describes, calling it `name` in errors and tool metadata:
    /// starts the process (stdio) or reaches the endpoint (HTTP), then does the MCP handshake, within the
    /// connection's connect timeout.
    pub async fn connect(name: impl Into<String>, connection: &Connection) -> Result<Self> {
        let name = name.into();
        let timeouts = connection.timeouts();
        match connection {
            Connection::Stdio(stdio) => {
                let (process, stdout, stdin) = ServerProcess::spawn(&name, stdio)?;
                Self::handshake(name, (stdout, stdin), Some(process), timeouts).await
            }
            Connection::StreamableHttp(http) => {
                let transport = http_transport(&name, http)?;
                Self::handshake(name, transport, None, timeouts).await
            }
        }
    }

    /// Connects over an already open byte stream (a socket, a pipe, `tokio::io::duplex` in tests).
    pub async fn connect_io<R, W>(
        name: impl Into<String>,
        read: R,
        write: W,
        timeouts: Timeouts,
    ) -> Result<Self>
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        Self::handshake(name.into(), (read, write), None, timeouts).await
    }

    async fn handshake<T, E, A>(
        name: String,
        transport: T,
        mut process: Option<ServerProcess>,
        timeouts: Timeouts,
    ) -> Result<Self>
    where
        T: rmcp::transport::IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let state = ClientState::default();
        let started = tokio::time::timeout(timeouts.connect, state.clone().serve(transport)).await;
        let service = match started {
            Ok(Ok(service)) => service,
            Ok(Err(err)) => {
                let detail = match process.as_mut() {
                    Some(p) => p.describe_exit().await.map(|d| format!(" ({d})")).unwrap_or_default(),
                    None => String::new(),
                };
                return Err(McpError::Connect { server: name, message: format!("{err}{detail}") });
            }
            Err(_) => {
                return Err(McpError::Connect {
                    server: name,
                    message: format!("no answer to the handshake within {:?}", timeouts.connect),
                });
            }
        };
        let pid = process.as_ref().map(ServerProcess::pid);
        Ok(Self {
            inner: Arc::new(Inner {
                name,
                peer: service.peer().clone(),
                service: Mutex::new(Some(service)),
                state,
                process: Mutex::new(process),
                pid,
                timeouts,
            }),
        })
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The process id of a stdio server.
    pub fn pid(&self) -> Option<u32> {
        self.inner.pid
    }

    /// The limits of this session's requests.
    pub fn timeouts(&self) -> Timeouts {
        self.inner.timeouts
    }

    /// What the server said about itself in the handshake (`serverInfo`, capabilities, instructions), as
    /// its JSON.
    pub fn server_info(&self) -> Option<Value> {
        self.inner.peer.peer_info().and_then(|info| serde_json::to_value(&*info).ok())
    }

    /// The server's tools, as it describes them (every page).
    pub async fn list_tools(&self) -> Result<Vec<ToolDefinition>> {
        let op = "tools/list";
        let tools = self.request(op, self.inner.timeouts.request, self.inner.peer.list_all_tools()).await?;
        tools.iter().map(|tool| self.decode(op, tool)).collect()
    }

    /// The server's tools as weft tools, ready for a `ToolNode` or `create_react_agent`.
    pub async fn tools(&self) -> Result<Vec<McpTool>> {
        Ok(self.list_tools().await?.into_iter().map(|def| McpTool::new(self.clone(), def)).collect())
    }

    /// Calls tool `name` with `arguments` (a JSON object, sent as is: [`McpTool`] validates them first)
    /// and returns the result's wire JSON (`content`, `structuredContent`, `isError`). `on_progress`
    /// receives the server's progress notifications while the call runs.
    pub async fn call_tool_raw(
        &self,
        name: &str,
        arguments: Value,
        on_progress: Option<&(dyn Fn(Progress) + Send + Sync)>,
    ) -> Result<Value> {
        let op = format!("tools/call '{name}'");
        let arguments = match arguments {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => {
                return Err(McpError::Protocol {
                    server: self.inner.name.clone(),
                    operation: op,
                    message: format!("tool arguments must be a JSON object, got {other}"),
                    code: None,
                });
            }
        };
        // rmcp gives every request a progress token of its own; the route is registered under it once the
        // request is sent (notifications that arrive before that wait in the handler).
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(
            CallToolRequestParams::new(name.to_owned()).with_arguments(arguments),
        ));
        let timeout = self.inner.timeouts.request;
        let options = PeerRequestOptions::with_timeout(timeout);
        let handle = match self.inner.peer.send_request_with_option(request, options).await {
            Ok(handle) => handle,
            Err(err) => return Err(self.service_error(&op, err).await),
        };
        let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
        let token = token_key(&handle.progress_token);
        self.inner.state.route(token.clone(), sender);
        let _route = RouteGuard { routes: &self.inner.state.progress, token };
        let call = handle.await_response();
        tokio::pin!(call);
        let result = loop {
            tokio::select! {
                result = &mut call => break result,
                Some(progress) = receiver.recv() => {
                    if let Some(report) = on_progress {
                        report(progress);
                    }
                }
            }
        };
        while let Ok(progress) = receiver.try_recv() {
            if let Some(report) = on_progress {
                report(progress);
            }
        }
        let result = match result {
            Ok(ServerResult::CallToolResult(result)) => serde_json::to_value(result),
            Ok(other) => {
                let got = serde_json::to_value(other).unwrap_or_default();
                return Err(self.protocol_error(&op, format!("unexpected answer {got}")));
            }
            Err(err) => return Err(self.service_error(&op, err).await),
        };
        result.map_err(|e| self.protocol_error(&op, e.to_string()))
    }

    /// Calls tool `name` and maps its result (see [`tool_output_from_mcp`]): an `isError` result is
    /// [`McpError::ToolFailed`].
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        on_progress: Option<&(dyn Fn(Progress) + Send + Sync)>,
    ) -> Result<ToolOutput> {
        let result = self.call_tool_raw(name, arguments, on_progress).await?;
        tool_output_from_mcp(&self.inner.name, name, &result)
    }

    /// The server's prompt templates (every page).
    pub async fn list_prompts(&self) -> Result<Vec<PromptInfo>> {
        let op = "prompts/list";
        let prompts =
            self.request(op, self.inner.timeouts.request, self.inner.peer.list_all_prompts()).await?;
        prompts.iter().map(|prompt| self.decode(op, prompt)).collect()
    }

    /// Renders prompt `name` with `arguments` as weft messages (`user` as human, `assistant` as AI).
    pub async fn get_prompt(&self, name: &str, arguments: BTreeMap<String, String>) -> Result<Vec<Message>> {
        let op = format!("prompts/get '{name}'");
        let mut params = GetPromptRequestParams::new(name.to_owned());
        if !arguments.is_empty() {
            params.arguments =
                Some(arguments.into_iter().map(|(key, value)| (key, Value::String(value))).collect());
        }
        let result =
            self.request(&op, self.inner.timeouts.request, self.inner.peer.get_prompt(params)).await?;
        result
            .messages
            .iter()
            .map(|m| {
                let m = serde_json::to_value(m).map_err(|e| self.protocol_error(&op, e.to_string()))?;
                message_from_mcp(&m).map_err(|message| self.protocol_error(&op, message))
            })
            .collect()
    }

    /// The server's resources (every page).
    pub async fn list_resources(&self) -> Result<Vec<ResourceInfo>> {
        let op = "resources/list";
        let resources =
            self.request(op, self.inner.timeouts.request, self.inner.peer.list_all_resources()).await?;
        resources.iter().map(|resource| self.decode(op, resource)).collect()
    }

    /// Reads the resource at `uri`: its text or binary contents (a resource may have several parts).
    pub async fn read_resource(&self, uri: &str) -> Result<Vec<ResourceContent>> {
        let op = format!("resources/read '{uri}'");
        let params = ReadResourceRequestParams::new(uri.to_owned());
        let result =
            self.request(&op, self.inner.timeouts.request, self.inner.peer.read_resource(params)).await?;
        let contents =
            serde_json::to_value(result.contents).map_err(|e| self.protocol_error(&op, e.to_string()))?;
        serde_json::from_value(contents).map_err(|e| self.protocol_error(&op, e.to_string()))
    }

    /// Ends the session: closes the connection, then lets a stdio server exit on its own (killing it after
    /// a grace period) and reaps it. Tools made from this session fail with [`McpError::Closed`] afterwards.
    pub async fn close(&self) {
        if let Some(service) = self.inner.service.lock().await.take() {
            let _ = service.cancel().await;
        }
        if let Some(process) = self.inner.process.lock().await.take() {
            process.shutdown().await;
        }
    }

    /// Runs `request` within `timeout`, mapping rmcp's errors to [`McpError`].
    async fn request<T>(
        &self,
        operation: &str,
        timeout: Duration,
        request: impl Future<Output = Result<T, ServiceError>>,
    ) -> Result<T> {
        match tokio::time::timeout(timeout, request).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(err)) => Err(self.service_error(operation, err).await),
            Err(_) => Err(McpError::Timeout {
                server: self.inner.name.clone(),
                operation: operation.to_owned(),
                timeout,
            }),
        }
    }

    async fn service_error(&self, operation: &str, err: ServiceError) -> McpError {
        let server = self.inner.name.clone();
        let operation = operation.to_owned();
        match err {
            ServiceError::McpError(data) => McpError::Protocol {
                server,
                operation,
                message: data.message.into_owned(),
                code: Some(data.code.0),
            },
            ServiceError::Timeout { timeout } => McpError::Timeout { server, operation, timeout },
            ServiceError::TransportClosed
            | ServiceError::TransportSend(_)
            | ServiceError::Cancelled { .. } => {
                // A stdio server's exit status and stderr say most; when it is still up and said
                // nothing, the transport's own reason.
                let detail = match self.inner.process.lock().await.as_mut() {
                    Some(process) => process.describe_exit().await.or_else(|| Some(err.to_string())),
                    None => Some(err.to_string()),
                };
                McpError::Closed { server, operation, detail }
            }
            other => McpError::Protocol { server, operation, message: other.to_string(), code: None },
        }
    }

    fn protocol_error(&self, operation: &str, message: String) -> McpError {
        McpError::Protocol {
            server: self.inner.name.clone(),
            operation: operation.to_owned(),
            message,
            code: None,
        }
    }

    /// Reads one listed item through its wire JSON.
    fn decode<T: Serialize, U: serde::de::DeserializeOwned>(&self, operation: &str, item: &T) -> Result<U> {
        serde_json::to_value(item)
            .and_then(serde_json::from_value)
            .map_err(|e| self.protocol_error(operation, format!("unreadable answer: {e}")))
    }
}

/// Removes a call's progress route when the call ends (or is dropped).
struct RouteGuard<'a> {
    routes: &'a super::handler::ProgressRoutes,
    token: String,
}

impl Drop for RouteGuard<'_> {
    fn drop(&mut self) {
        self.routes.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.token);
    }
}

/// The token of an `Authorization` value of the Bearer scheme (its name in any case), `None` for another
/// scheme.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim_start())
}

/// The Streamable HTTP client transport for `http`, on a reqwest client of the workspace's TLS setup.
fn http_transport(
    server: &str,
    http: &HttpConnection,
) -> Result<StreamableHttpClientTransport<reqwest::Client>> {
    use reqwest::header::{HeaderName, HeaderValue};

    let url = reqwest::Url::parse(&http.url).map_err(|e| {
        McpError::Config(format!("mcp server '{server}' has an invalid url {:?}: {e}", http.url))
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(McpError::Config(format!("mcp server '{server}' url {:?} is not http(s)", http.url)));
    }
    let mut config = StreamableHttpClientTransportConfig::with_uri(http.url.clone());
    let mut headers = std::collections::HashMap::new();
    for (name, value) in &http.headers {
        // A bearer token (the scheme in any case) goes through rmcp's auth header, which writes the
        // `Bearer ` prefix itself; any other scheme (`Basic ...`) is sent as written.
        if name.eq_ignore_ascii_case("authorization") {
            if let Some(token) = bearer_token(value) {
                config = config.auth_header(token.to_owned());
                continue;
            }
        }
        let bad =
            |what: &str| McpError::Config(format!("mcp server '{server}' header {name:?}: invalid {what}"));
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad("name"))?;
        let value = HeaderValue::from_str(value).map_err(|_| bad("value"))?;
        headers.insert(name, value);
    }
    if !headers.is_empty() {
        config = config.custom_headers(headers);
    }
    crate::install_crypto_provider();
    let client = reqwest::Client::builder()
        .build()
        .map_err(|e| McpError::Config(format!("mcp server '{server}': cannot build the http client: {e}")))?;
    Ok(StreamableHttpClientTransport::with_client(client, config))
}

#[cfg(test)]
mod tests {
    use super::bearer_token;

    #[test]
    fn only_the_bearer_scheme_in_any_case_gives_a_token() {
        assert_eq!(bearer_token("Bearer s3cret"), Some("s3cret"));
        assert_eq!(bearer_token("bearer  s3cret"), Some("s3cret"));
        assert_eq!(bearer_token("BEARER s3cret"), Some("s3cret"));
        assert_eq!(bearer_token("Basic dXNlcjpwYXNz"), None);
        assert_eq!(bearer_token("s3cret"), None);
    }
}
