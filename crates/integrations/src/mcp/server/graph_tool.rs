//! `GraphTool`: a compiled graph as a tool (for serving weft agents over MCP, or as a sub-agent).

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt as _;
use serde_json::{Map, Value, json};
use weft_graph::erased::{ErasedGraph, JsonInput};
use weft_graph::{JsonStreamData, RunOptions, StreamMode};
use weft_runnable_core::{Content, Error, Result, Tool, ToolContext, ToolOutput};

/// A compiled graph as a tool: the arguments are the graph's input (an object of channel writes, such as
/// `{"messages": [{"role": "user", "content": "hi"}]}`), the result its final state.
///
/// The model (or MCP host) sees the text of the last message when the state has a `messages` channel,
/// else the state's JSON; the whole final state is the artifact (served over MCP as structured content).
/// A run that pauses on an interrupt returns the state so far with the interrupts under `__interrupt__`.
#[derive(Clone)]
pub struct GraphTool {
    name: String,
    description: String,
    schema: Value,
    graph: Arc<dyn ErasedGraph>,
}

impl GraphTool {
    /// The graph `graph` (see `CompiledGraph::erase`) as a tool named `name`. The argument schema lists
    /// the graph's channels; replace it with [`with_args_schema`](Self::with_args_schema).
    pub fn new(name: impl Into<String>, description: impl Into<String>, graph: Arc<dyn ErasedGraph>) -> Self {
        let mut properties = Map::new();
        for channel in graph.channels() {
            let schema = if channel.name == "messages" {
                json!({
                    "type": "array",
                    "description": "messages to add to the conversation, such as [{\"role\": \"user\", \"content\": \"...\"}]",
                    "items": {"type": "object"}
                })
            } else {
                json!({})
            };
            properties.insert(channel.name.to_string(), schema);
        }
        Self {
            name: name.into(),
            description: description.into(),
            schema: json!({"type": "object", "properties": properties}),
            graph,
        }
    }

    /// Replaces the argument schema (it must describe an object of channel writes).
    pub fn with_args_schema(mut self, schema: Value) -> Self {
        self.schema = schema;
        self
    }
}

impl fmt::Debug for GraphTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GraphTool").field("name", &self.name).field("graph", &self.graph.name()).finish()
    }
}

#[async_trait]
impl Tool for GraphTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn args_schema(&self) -> &Value {
        &self.schema
    }

    async fn call(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput> {
        let input = JsonInput::from_json(args).map_err(Error::from)?;
        let mut stream =
            self.graph.stream_json(input, ctx.config().clone(), &[StreamMode::Values], RunOptions::default());
        let mut last = None;
        let mut paused = Vec::new();
        while let Some(part) = stream.next().await {
            if let JsonStreamData::Values { values, interrupts } = part.map_err(Error::from)?.data {
                last = Some(values);
                paused.extend(interrupts);
            }
        }
        let mut state = last.unwrap_or_else(|| json!({}));
        if !paused.is_empty()
            && let Some(obj) = state.as_object_mut()
        {
            obj.insert("__interrupt__".to_owned(), serde_json::to_value(&paused)?);
        }
        let text = state
            .get("messages")
            .and_then(Value::as_array)
            .and_then(|messages| messages.last())
            .and_then(|message| message.get("content"))
            .map(|content| match content {
                Value::String(text) => text.clone(),
                other => serde_json::from_value::<Content>(other.clone())
                    .map(|c| c.text())
                    .unwrap_or_else(|_| other.to_string()),
            })
            .unwrap_or_else(|| state.to_string());
        Ok(ToolOutput::content_and_artifact(text, state))
    }
}

weft_runnable_core::impl_tool_runnable!(GraphTool);
