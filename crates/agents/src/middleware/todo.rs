//! [`TodoList`]: LangChain's `TodoListMiddleware`, a `write_todos` tool and a `todos` list in the state
//! for planning multi-step work.

use std::borrow::Cow;

use async_trait::async_trait;
use serde_json::{Value, json};
use weft_graph::{Command, JsonChannel};
use weft_runnable_core::py::py_repr;
use weft_runnable_core::{
    Content, Message, Result, SharedTool, StructuredTool, SystemMessage, ToolContext, ToolExt as _,
    ToolMessage, ToolStatus,
};

use crate::agent::{
    AgentRuntime, AgentState, AgentUpdate, HookResult, Hooks, Middleware, ModelHandler, ModelRequest,
    ModelResponse, StateChannel, Visibility,
};
use crate::tool_node::tool_command;

/// LangChain's description of `write_todos`.
pub const WRITE_TODOS_TOOL_DESCRIPTION: &str = include_str!("todo_tool_description.txt");
/// LangChain's system prompt about `write_todos`.
pub const WRITE_TODOS_SYSTEM_PROMPT: &str = include_str!("todo_system_prompt.txt");

const PARALLEL: &str = "Error: The `write_todos` tool should never be called multiple times in parallel. Please \
                        call it only once per model invocation to update the todo list.";

/// Gives the agent a todo list (LangChain's `TodoListMiddleware`): the tool `write_todos` replaces the
/// list in the state key `todos` (shown in the output), the system prompt says how to use it, and
/// several calls of it in one turn are answered with an error.
#[derive(Debug, Clone)]
pub struct TodoList {
    system_prompt: String,
    tool_description: String,
}

impl Default for TodoList {
    fn default() -> Self {
        Self {
            system_prompt: WRITE_TODOS_SYSTEM_PROMPT.to_owned(),
            tool_description: WRITE_TODOS_TOOL_DESCRIPTION.to_owned(),
        }
    }
}

impl TodoList {
    /// LangChain's prompt and tool description.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the text added to the system prompt.
    #[must_use]
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = prompt.into();
        self
    }

    /// Sets the tool's description.
    #[must_use]
    pub fn tool_description(mut self, description: impl Into<String>) -> Self {
        self.tool_description = description.into();
        self
    }
}

fn write_todos(description: &str) -> SharedTool {
    let schema = json!({
        "type": "object",
        "properties": {"todos": {"type": "array", "items": {
            "type": "object",
            "properties": {
                "content": {"type": "string", "description": "The content/description of the todo item."},
                "status": {"type": "string", "enum": ["pending", "in_progress", "completed"],
                    "description": "The current status of the todo item."}
            },
            "required": ["content", "status"]
        }}},
        "required": ["todos"]
    });
    StructuredTool::from_fn("write_todos", description, schema, |args: Value, ctx: ToolContext| async move {
        // Each item as LangChain's `Todo` holds it: content, then status.
        let todos: Vec<Value> = args["todos"]
            .as_array()
            .map(|items| {
                items.iter().map(|t| json!({"content": t["content"], "status": t["status"]})).collect()
            })
            .unwrap_or_default();
        let todos = Value::Array(todos);
        let message = ToolMessage {
            content: format!("Updated todo list to {}", py_repr(&todos)).into(),
            tool_call_id: ctx.tool_call_id().unwrap_or_default().to_owned(),
            name: Some("write_todos".to_owned()),
            ..ToolMessage::default()
        };
        let update = AgentUpdate::new().set("todos", todos).messages(vec![Message::Tool(message)]);
        Ok(tool_command(Command::<AgentState>::new().update(update)))
    })
    .shared()
}

#[async_trait]
impl<C: Send + Sync + 'static> Middleware<C> for TodoList {
    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed("TodoListMiddleware")
    }

    fn hooks(&self) -> Hooks {
        Hooks::new().wrap_model_call().after_model()
    }

    fn state_channels(&self) -> Vec<StateChannel> {
        vec![StateChannel::new("todos", JsonChannel::LastValue).visibility(Visibility::OutputOnly)]
    }

    fn tools(&self) -> Vec<SharedTool> {
        vec![write_todos(&self.tool_description)]
    }

    async fn wrap_model_call(
        &self,
        mut request: ModelRequest<C>,
        next: ModelHandler<'_, C>,
    ) -> Result<ModelResponse> {
        let mut blocks = match request.system_message.take() {
            Some(system) => match system.content {
                Content::Text(text) => vec![json!({"type": "text", "text": text})],
                Content::Blocks(blocks) => blocks
                    .into_iter()
                    .map(|b| if let Value::String(s) = b { json!({"type": "text", "text": s}) } else { b })
                    .collect(),
            },
            None => Vec::new(),
        };
        let text = if blocks.is_empty() {
            self.system_prompt.clone()
        } else {
            format!("\n\n{}", self.system_prompt)
        };
        blocks.push(json!({"type": "text", "text": text}));
        request.system_message =
            Some(SystemMessage { content: Content::Blocks(blocks), ..SystemMessage::default() });
        next.call(request).await
    }

    async fn after_model(&self, state: &AgentState, _runtime: &AgentRuntime<C>) -> HookResult {
        let Some(ai) = state.messages().iter().rev().find_map(Message::as_ai) else { return Ok(None) };
        let calls: Vec<_> = ai.tool_calls.iter().filter(|c| c.name == "write_todos").collect();
        if calls.len() <= 1 {
            return Ok(None);
        }
        let errors = calls
            .into_iter()
            .map(|c| {
                Message::Tool(ToolMessage {
                    content: PARALLEL.into(),
                    tool_call_id: c.id.clone().unwrap_or_default(),
                    status: ToolStatus::Error,
                    ..ToolMessage::default()
                })
            })
            .collect();
        Ok(Some(AgentUpdate::new().messages(errors)))
    }
}
