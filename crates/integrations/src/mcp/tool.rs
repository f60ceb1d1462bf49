//! `McpTool`: a tool of an MCP server as a weft [`Tool`].

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use weft_graph::Runtime;
use weft_runnable_core::tools::spec::clean_schema;
use weft_runnable_core::{Result, Tool, ToolContext, ToolErrorPolicy, ToolOutput};

use super::handler::Progress;
use super::session::{McpSession, ToolDefinition};

type ProgressCallback = dyn Fn(&str, &Progress) + Send + Sync;

/// A tool of an MCP server, usable wherever weft takes a tool (`ToolNode`, `create_react_agent`, a chat
/// model's `bind_tools`).
///
/// - Its schema is the server's `inputSchema`; weft validates the model's arguments against it before
///   anything is sent, so bad arguments come back to the model as a readable argument error.
/// - Its result is mapped by [`tool_output_from_mcp`](super::tool_output_from_mcp): text, images as
///   image blocks, structured content as the message's artifact.
/// - Failures (an `isError` result, a timeout, a server that died) become a tool message with status
///   `error` and the error's text, so the agent sees them and carries on; set another policy with
///   [`with_error_policy`](McpTool::with_error_policy). The error itself is an [`McpError`](super::McpError).
/// - Progress notifications go to the graph's `custom` stream as
///   `{"type": "mcp_progress", "server", "tool", "tool_call_id", "progress", "total", "message"}` when the
///   tool runs in a graph node, and to the callback of [`on_progress`](McpTool::on_progress).
#[derive(Clone)]
pub struct McpTool {
    session: McpSession,
    definition: Arc<ToolDefinition>,
    name: String,
    description: String,
    schema: Value,
    policy: ToolErrorPolicy,
    on_progress: Option<Arc<ProgressCallback>>,
}

impl McpTool {
    /// The tool `definition` of the server behind `session`.
    pub fn new(session: McpSession, definition: ToolDefinition) -> Self {
        let description =
            definition.description.clone().or_else(|| definition.title.clone()).unwrap_or_default();
        let mut schema = clean_schema(definition.input_schema.clone());
        if let Some(obj) = schema.as_object_mut() {
            obj.entry("type").or_insert_with(|| Value::String("object".to_owned()));
            obj.entry("properties").or_insert_with(|| json!({}));
        } else {
            schema = json!({"type": "object", "properties": {}});
        }
        Self {
            name: definition.name.clone(),
            definition: Arc::new(definition),
            session,
            description,
            schema,
            policy: ToolErrorPolicy::Message,
            on_progress: None,
        }
    }

    /// Renames the tool for the model (the server still receives its own name); used for prefixes such
    /// as `math_add` when several servers have tools of one name.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// What happens when the call fails (by default the error's text goes to the model).
    pub fn with_error_policy(mut self, policy: ToolErrorPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Also sends progress notifications to `f` (with the tool's name).
    pub fn on_progress(mut self, f: impl Fn(&str, &Progress) + Send + Sync + 'static) -> Self {
        self.on_progress = Some(Arc::new(f));
        self
    }

    /// The tool as its server describes it.
    pub fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    /// The session the tool calls through.
    pub fn session(&self) -> &McpSession {
        &self.session
    }
}

impl fmt::Debug for McpTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpTool")
            .field("name", &self.name)
            .field("server", &self.session.name())
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn args_schema(&self) -> &Value {
        &self.schema
    }

    fn error_policy(&self) -> ToolErrorPolicy {
        self.policy.clone()
    }

    async fn call(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput> {
        let runtime = ctx.config().extensions.get::<Runtime>().cloned();
        let server = self.session.name().to_owned();
        let tool_call_id = ctx.tool_call_id().map(str::to_owned);
        let report = |progress: Progress| {
            if let Some(runtime) = &runtime {
                runtime.write(&json!({
                    "type": "mcp_progress",
                    "server": server,
                    "tool": self.name,
                    "tool_call_id": tool_call_id,
                    "progress": progress.progress,
                    "total": progress.total,
                    "message": progress.message,
                }));
            }
            if let Some(f) = &self.on_progress {
                f(&self.name, &progress);
            }
        };
        Ok(self.session.call_tool(&self.definition.name, args, Some(&report)).await?)
    }
}

weft_runnable_core::impl_tool_runnable!(McpTool);
