//! [`ToolNode`]: runs the tool calls of the last AI message as a graph node.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use async_trait::async_trait;
use futures::FutureExt as _;
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use weft_graph::node::{IntoNode, NodeFn, NodeInput};
use weft_graph::{Command, CommandGraph, Goto, NodeOutput, Payload, Runtime, State, Store};
use weft_runnable_core::{
    AiMessage, CommandPayload, Error, InjectedArg, Injection, InvalidToolCall, Message, REMOVE_ALL_MESSAGES,
    Result, RunKind, Runnable, RunnableConfig, SharedTool, Tool, ToolCall, ToolCallOutput, ToolContext,
    ToolMessage, ToolOutput, ToolStatus, invoke_tool,
};

use crate::state::{HasMessages, state_json};

type ErrorHandler = dyn Fn(&Error) -> Option<String> + Send + Sync;

/// Which tool errors [`ToolNode`] turns into tool messages for the model (LangGraph's
/// `handle_tool_errors`); errors it does not handle fail the node.
///
/// Whatever the policy, control flow (an interrupt raised inside a tool, a command for a parent graph)
/// always propagates, and a call of an unknown tool always becomes the message
/// `Error: <name> is not a valid tool, try one of [a, b].`
#[derive(Clone, Default)]
pub enum HandleToolErrors {
    /// Arguments that break the tool's schema become the message `Error invoking tool '<name>' with kwargs
    /// <args> with error:\n <path>: <problem>\n Please fix the error and try again.`; any other error
    /// propagates (the default, as in LangGraph 1.x).
    #[default]
    InvalidArguments,
    /// Every error becomes `Error: <error>\n Please fix your mistakes.`
    All,
    /// Every error becomes this text.
    Text(String),
    /// The function decides: `Some(text)` is sent to the model, `None` lets the error propagate (so it
    /// plays the part of LangGraph's handlers restricted to some exception types).
    Handler(Arc<ErrorHandler>),
    /// Every error propagates, invalid arguments included.
    Never,
}

impl HandleToolErrors {
    /// Every error becomes `text`.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text(text.into())
    }

    /// A function of the error decides (see [`HandleToolErrors::Handler`]).
    pub fn handler(f: impl Fn(&Error) -> Option<String> + Send + Sync + 'static) -> Self {
        Self::Handler(Arc::new(f))
    }

    /// The message content for `err` raised by `tool`, or `None` when it must propagate.
    fn content(&self, err: &Error, tool: &dyn Tool) -> Option<String> {
        if err.is_control_flow() {
            return None;
        }
        match self {
            Self::InvalidArguments => invocation_error_text(err, tool),
            Self::All => {
                let text = invocation_error_text(err, tool).unwrap_or_else(|| err.to_string());
                Some(format!("Error: {text}\n Please fix your mistakes."))
            }
            Self::Text(text) => Some(text.clone()),
            Self::Handler(f) => f(err),
            Self::Never => None,
        }
    }
}

impl fmt::Debug for HandleToolErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidArguments => f.write_str("InvalidArguments"),
            Self::All => f.write_str("All"),
            Self::Text(text) => f.debug_tuple("Text").field(text).finish(),
            Self::Handler(_) => f.write_str("Handler(..)"),
            Self::Never => f.write_str("Never"),
        }
    }
}

/// LangGraph's text for arguments that break a tool's schema, or `None` when `err` is something else.
/// Injected arguments are left out of the shown arguments.
fn invocation_error_text(err: &Error, tool: &dyn Tool) -> Option<String> {
    let Error::ToolArguments { tool: name, args, errors } = err else { return None };
    let mut shown = (**args).clone();
    if let Some(map) = shown.as_object_mut() {
        for arg in tool.injected_args() {
            map.remove(&arg.field);
        }
    }
    Some(format!(
        "Error invoking tool '{name}' with kwargs {shown} with error:\n {}\n Please fix the error and try again.",
        errors.join("\n")
    ))
}

/// The tool message content for a call whose arguments the model's output could not be parsed into
/// (not valid JSON): LangGraph's text for arguments a tool refuses, with the raw arguments and the parse
/// error, so that the model can correct its call.
pub fn invalid_tool_call_text(call: &InvalidToolCall) -> String {
    let name = call.name.as_deref().unwrap_or_default();
    let args = call.args.as_deref().unwrap_or_default();
    let error = call.error.as_deref().unwrap_or("the arguments are not valid JSON");
    format!(
        "Error invoking tool '{name}' with kwargs {args} with error:\n {error}\n Please fix the error and try again."
    )
}

/// The error tool message answering a call whose arguments could not be parsed.
pub fn invalid_tool_call_message(call: &InvalidToolCall) -> ToolMessage {
    ToolMessage {
        content: invalid_tool_call_text(call).into(),
        tool_call_id: call.id.clone().unwrap_or_default(),
        name: call.name.clone(),
        status: ToolStatus::Error,
        ..ToolMessage::default()
    }
}

/// The tool message content for a call of a tool the node does not have.
pub fn invalid_tool_text(requested: &str, available: &[&str]) -> String {
    format!("Error: {requested} is not a valid tool, try one of [{}].", available.join(", "))
}

/// The payload of a `Send` to a tool node: one tool call, and the state as JSON when the called tool has
/// injected state arguments (LangGraph's `ToolCallWithContext`, which `create_react_agent` v2 sends
/// for each call).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallWithContext {
    /// The call.
    pub tool_call: ToolCall,
    /// The graph state for injected arguments, if the tool needs it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Value>,
}

/// Errors of [`ToolNode`] and [`tools_condition`](crate::tools_condition) besides the tools' own.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolNodeError {
    /// The input holds no AI message whose tool calls could be run.
    #[error("no AI message found in input")]
    NoAiMessage,
    /// `tools_condition` got a state without messages.
    #[error("no messages found in input state to tool_edge")]
    NoMessages,
    /// A `Send` to the tool node carried something other than a [`ToolCallWithContext`].
    #[error("the tool node takes a ToolCallWithContext from a Send, got {0}")]
    UnexpectedPayload(String),
    /// A tool returned a command built for another state type.
    #[error("tool '{tool}' returned a command that is not a Command of this graph's state ({state})")]
    ForeignCommand {
        /// The tool.
        tool: String,
        /// The graph's state type.
        state: String,
    },
    /// A tool's command for the current graph does not answer its tool call with a tool message.
    #[error(
        "Expected to have a matching ToolMessage in Command.update for tool '{tool}', got: {messages}. Every \
         tool call (LLM requesting to call a tool) in the message history MUST have a corresponding \
         ToolMessage."
    )]
    MissingToolMessage {
        /// The tool.
        tool: String,
        /// The messages of the command's update, as JSON.
        messages: String,
    },
    /// A tool returned a command where no graph can apply it (the node was invoked on a message list).
    #[error("tool '{0}' returned a command, which only a graph can apply")]
    CommandOutsideGraph(String),
    /// A tool returned several outputs, and not exactly one of them answers its call.
    #[error(
        "Tool {tool} returned a list with {count} messages bound to tool_call_id '{id}'; expected exactly one \
         terminating ToolMessage."
    )]
    TerminatorCount {
        /// The tool.
        tool: String,
        /// How many tool messages answer the call.
        count: usize,
        /// The call's id.
        id: String,
    },
}

/// Runs the tool calls of the last AI message, concurrently, and answers each with a tool message, in
/// call order (LangGraph's `ToolNode`).
///
/// As a graph node (`graph.add_node("tools", tool_node)`, for any state implementing [`HasMessages`]) it
/// takes the calls of the last AI message that have no tool message yet (all of them, right after the
/// model's reply), and writes one tool message per call: content = the tool's result as text, the call's
/// id, the tool's name, and the status. As the target of a `Send` it takes one [`ToolCallWithContext`].
/// On a bare message list, use it as a `Runnable<Vec<Message>, Vec<ToolMessage>>`.
///
/// A tool returning a command ([`tool_command`]) has it applied by the graph: its update (which must
/// answer the call with a tool message, unless it goes to the parent graph) and its `goto`. Injected
/// arguments are filled here: the call id, the state (the state's channels as a JSON object), a state
/// key; and tools reach the graph's store and runtime with [`tool_store`] and [`tool_runtime`].
/// Errors follow [`HandleToolErrors`].
///
/// ```
/// use serde_json::json;
/// use weft_agents::ToolNode;
/// use weft_runnable_core::{AiMessage, Message, Runnable, RunnableConfig, StructuredTool, ToolCall, ToolExt};
///
/// # tokio_test::block_on(async {
/// let add = StructuredTool::from_fn("add", "Adds.", json!({"type": "object"}), |args, _ctx| async move {
///     Ok(json!(args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)))
/// });
/// let node = ToolNode::new([add.shared()]);
/// let call = |id: &str, name: &str| ToolCall { name: name.into(), args: json!({"a": 2, "b": 3}), id: Some(id.into()) };
/// let ask = AiMessage { tool_calls: vec![call("1", "add"), call("2", "mul")], ..AiMessage::default() };
/// let out = node.invoke(vec![Message::from(ask)], &RunnableConfig::default()).await.unwrap();
/// assert_eq!(out[0].content.text(), "5");
/// assert_eq!(out[1].content.text(), "Error: mul is not a valid tool, try one of [add].");
/// # });
/// ```
#[derive(Clone)]
pub struct ToolNode {
    tools: Vec<SharedTool>,
    handle_tool_errors: HandleToolErrors,
    fallback: Option<Arc<FallbackFn>>,
}

type FallbackFn = dyn Fn(&Error, &ToolCall) -> String + Send + Sync;

impl fmt::Debug for ToolNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolNode")
            .field("tools", &self.tool_names())
            .field("handle_tool_errors", &self.handle_tool_errors)
            .field("fallback", &self.fallback.is_some())
            .finish()
    }
}

impl ToolNode {
    /// A node running `tools`. When two tools share a name, the first wins.
    pub fn new(tools: impl IntoIterator<Item = SharedTool>) -> Self {
        Self {
            tools: tools.into_iter().collect(),
            handle_tool_errors: HandleToolErrors::default(),
            fallback: None,
        }
    }

    /// When running the calls fails (an error the policy lets through), answers every call of the AI
    /// message with an error tool message whose content `f` makes of the error and the call: the
    /// LangGraph tutorials' `ToolNode(tools).with_fallbacks([handle_tool_error], exception_key="error")`.
    /// Control flow (an interrupt, a command for the parent graph) is never answered this way.
    ///
    /// ```
    /// use serde_json::json;
    /// use weft_agents::ToolNode;
    /// use weft_runnable_core::{AiMessage, Error, Message, Runnable, RunnableConfig, StructuredTool, ToolCall, ToolExt};
    ///
    /// # tokio_test::block_on(async {
    /// let broken = StructuredTool::from_fn("lookup", "Looks up.", json!({"type": "object"}), |_args, _ctx| async move {
    ///     Err::<serde_json::Value, _>(Error::msg("the database is down"))
    /// });
    /// let node = ToolNode::new([broken.shared()])
    ///     .on_error(|err, _call| format!("Error: {err}\n please fix your mistakes."));
    /// let call = |id: &str| ToolCall { name: "lookup".into(), args: json!({}), id: Some(id.into()) };
    /// let ask = AiMessage { tool_calls: vec![call("1"), call("2")], ..AiMessage::default() };
    /// let out = node.invoke(vec![Message::from(ask)], &RunnableConfig::default()).await.unwrap();
    /// assert_eq!(out.len(), 2);
    /// assert_eq!(out[1].content.text(), "Error: the database is down\n please fix your mistakes.");
    /// # });
    /// ```
    pub fn on_error(mut self, f: impl Fn(&Error, &ToolCall) -> String + Send + Sync + 'static) -> Self {
        self.fallback = Some(Arc::new(f));
        self
    }

    /// The outputs of `calls`, or, when that fails and a fallback is set, every call answered with it.
    async fn run_or_answer(&self, calls: Vec<ToolCall>, ctx: ToolContext) -> Result<Vec<ToolCallOutput>> {
        // The calls are needed again only to be answered by the fallback.
        let kept = if self.fallback.is_some() { calls.clone() } else { Vec::new() };
        match (self.run_owned_calls(calls, ctx).await, &self.fallback) {
            (Err(err), Some(fallback)) if !err.is_control_flow() => Ok(kept
                .iter()
                .map(|call| ToolCallOutput::Message(error_message(call, fallback(&err, call))))
                .collect()),
            (result, _) => result,
        }
    }

    /// Sets which tool errors become tool messages.
    pub fn handle_tool_errors(mut self, policy: HandleToolErrors) -> Self {
        self.handle_tool_errors = policy;
        self
    }

    /// The tools.
    pub fn tools(&self) -> &[SharedTool] {
        &self.tools
    }

    /// The tools' names, in order.
    pub fn tool_names(&self) -> Vec<&str> {
        self.tools.iter().map(|t| Tool::name(t.as_ref())).collect()
    }

    /// The tool named `name`.
    pub fn tool(&self, name: &str) -> Option<&SharedTool> {
        self.tools.iter().find(|t| Tool::name(t.as_ref()) == name)
    }

    /// Whether the tool named `name` has an argument filled from the state.
    pub fn needs_state(&self, name: &str) -> bool {
        self.tool(name).is_some_and(|tool| tool.injected_args().iter().any(reads_state))
    }

    /// Runs one call: an unknown tool gives the invalid-tool message, a tool error goes through the
    /// error policy.
    pub async fn run_call(&self, call: ToolCall, ctx: ToolContext) -> Result<ToolCallOutput> {
        self.run_tool(self.tool(&call.name), call, ctx).await
    }

    /// Runs one call on `tool` (which a middleware may have chosen in place of the call's name); no tool
    /// gives the invalid-tool message, a tool error goes through the error policy.
    pub async fn run_tool(
        &self,
        tool: Option<&SharedTool>,
        call: ToolCall,
        ctx: ToolContext,
    ) -> Result<ToolCallOutput> {
        let Some(tool) = tool else {
            let text = invalid_tool_text(&call.name, &self.tool_names());
            return Ok(ToolCallOutput::Message(error_message(&call, text)));
        };
        // What an error message names of the call (its arguments go to the tool).
        let answered = ToolCall { name: call.name.clone(), args: Value::Null, id: call.id.clone() };
        // Boxed: the invocation's future is several kilobytes, and a call's future that held it would be
        // moved whole into the list of a step's calls.
        match Box::pin(invoke_tool(tool.as_ref(), call, ctx)).await {
            Ok(output) => Ok(output),
            Err(err) => match self.handle_tool_errors.content(&err, tool.as_ref()) {
                Some(text) => Ok(ToolCallOutput::Message(error_message(&answered, text))),
                None => Err(err),
            },
        }
    }

    /// Answers a call whose arguments could not be parsed, as the error policy says for bad arguments:
    /// [`invalid_tool_call_text`] by default, the policy's text otherwise; under
    /// [`HandleToolErrors::Never`] (or a handler returning `None`) it is an [`Error::ToolArguments`]
    /// holding the raw arguments and the parse error.
    pub fn answer_invalid_call(&self, call: &InvalidToolCall) -> Result<ToolMessage> {
        let error = || Error::ToolArguments {
            tool: call.name.clone().unwrap_or_default(),
            args: Box::new(Value::String(call.args.clone().unwrap_or_default())),
            errors: vec![call.error.clone().unwrap_or_else(|| "the arguments are not valid JSON".to_owned())],
        };
        let text = match &self.handle_tool_errors {
            HandleToolErrors::InvalidArguments => Some(invalid_tool_call_text(call)),
            HandleToolErrors::All => {
                Some(format!("Error: {}\n Please fix your mistakes.", invalid_tool_call_text(call)))
            }
            HandleToolErrors::Text(text) => Some(text.clone()),
            HandleToolErrors::Handler(f) => f(&error()),
            HandleToolErrors::Never => None,
        };
        match text {
            Some(text) => Ok(ToolMessage { content: text.into(), ..invalid_tool_call_message(call) }),
            None => Err(error()),
        }
    }

    /// Runs `calls` concurrently and returns their outputs in call order; the first error (in call order)
    /// fails the whole batch once every call has finished.
    pub async fn run_calls(&self, calls: Vec<ToolCall>, ctx: &ToolContext) -> Result<Vec<ToolCallOutput>> {
        self.run_owned_calls(calls, ctx.clone()).await
    }

    /// [`run_calls`](Self::run_calls) with a context of its own: the last call takes it, the others a
    /// copy each.
    async fn run_owned_calls(
        &self,
        mut calls: Vec<ToolCall>,
        ctx: ToolContext,
    ) -> Result<Vec<ToolCallOutput>> {
        let last = calls.pop();
        // No call or one (most model turns): awaited as it is, with no list of futures to build.
        if calls.is_empty() {
            return match last {
                Some(call) => Ok(vec![self.run_call(call, ctx).await?]),
                None => Ok(Vec::new()),
            };
        }
        let mut runs: Vec<_> = calls.into_iter().map(|call| self.run_call(call, ctx.clone())).collect();
        runs.extend(last.map(|call| self.run_call(call, ctx)));
        futures::future::join_all(runs).await.into_iter().collect()
    }
}

fn reads_state(arg: &InjectedArg) -> bool {
    matches!(arg.source, Injection::State | Injection::StateKey(_))
}

fn error_message(call: &ToolCall, text: String) -> ToolMessage {
    ToolMessage {
        content: text.into(),
        tool_call_id: call.id.clone().unwrap_or_default(),
        name: Some(call.name.clone()),
        status: ToolStatus::Error,
        ..ToolMessage::default()
    }
}

/// The last AI message of `messages` (only tool messages may follow it) and its calls that no tool message
/// answers yet.
pub fn pending_tool_calls(messages: &[Message]) -> Option<(&AiMessage, Vec<ToolCall>)> {
    let mut answered = Vec::new();
    for message in messages.iter().rev() {
        match message {
            Message::Tool(tool) => answered.push(tool.tool_call_id.as_str()),
            Message::Ai(ai) => {
                let pending = ai
                    .tool_calls
                    .iter()
                    .filter(|c| !answered.contains(&c.id.as_deref().unwrap_or_default()))
                    .cloned()
                    .collect();
                return Some((ai, pending));
            }
            _ => return None,
        }
    }
    None
}

/// The invalid tool calls (arguments that could not be parsed) of the last AI message of `messages` (only
/// tool messages may follow it) that no tool message answers yet. A [`ToolNode`] answers each with an
/// error tool message ([`invalid_tool_call_message`]) so that the model can try again.
pub fn pending_invalid_tool_calls(messages: &[Message]) -> Vec<InvalidToolCall> {
    let mut answered = Vec::new();
    for message in messages.iter().rev() {
        match message {
            Message::Tool(tool) => answered.push(tool.tool_call_id.as_str()),
            Message::Ai(ai) => {
                return ai
                    .invalid_tool_calls
                    .iter()
                    .filter(|c| !answered.contains(&c.id.as_deref().unwrap_or_default()))
                    .cloned()
                    .collect();
            }
            _ => return Vec::new(),
        }
    }
    Vec::new()
}

/// The runtime of the graph task running the tool, when the tool runs in a [`ToolNode`]: its store,
/// stream writer, `interrupt`, execution info (LangGraph's `ToolRuntime`).
pub fn tool_runtime(ctx: &ToolContext) -> Option<&Runtime> {
    ctx.config().extensions.get::<Runtime>()
}

/// The graph's long-term memory store, when the tool runs in a [`ToolNode`] of a graph compiled with one
/// (LangGraph's `InjectedStore`).
pub fn tool_store(ctx: &ToolContext) -> Option<&Arc<dyn Store>> {
    tool_runtime(ctx).and_then(Runtime::store)
}

/// Wraps a graph command as a tool's output: run in a [`ToolNode`] of a graph over `S`, the graph applies
/// its update and goes where it says. Unless it is for the parent graph, its update must answer the tool
/// call with a tool message (use [`ToolContext::tool_call_id`]).
///
/// A command for the parent graph ([`Command::to_parent`]) is written in the parent's terms, as in
/// LangGraph: a `Command` of the parent graph's state, whatever the state of the graph the tool runs in
/// (a hand-off tool inside a prebuilt agent names the supervisor's nodes and keys).
pub fn tool_command<S: State>(command: Command<S>) -> ToolOutput {
    let goto: Vec<&str> = command
        .goto
        .iter()
        .map(|g| match g {
            Goto::Node(node) => node.as_str(),
            Goto::Send(send) => send.node(),
        })
        .collect();
    let graph = match command.graph {
        CommandGraph::Current => "current",
        CommandGraph::Parent => "parent",
    };
    let summary = json!({
        "goto": goto,
        "updates": command.update.len(),
        "graph": graph,
        "state": std::any::type_name::<S>(),
    });
    ToolOutput::command(CommandPayload::new(command, summary))
}

/// The context tools get in a graph task: the task's config carrying the runtime and the typed state
/// (for [`ToolRuntime`](crate::ToolRuntime)), and the state as JSON when a tool has injected state
/// arguments.
pub(crate) fn task_context<S: State>(
    runtime: &Runtime,
    state: Option<&S>,
    json: Option<Value>,
) -> ToolContext {
    let mut config = runtime.config().clone();
    config.extensions.insert(runtime.clone());
    if let Some(state) = state {
        config.extensions.insert(crate::tool_runtime::ToolState::new(state.clone(), runtime));
    }
    let ctx = ToolContext::new(config);
    match json {
        Some(json) => ctx.with_state(json),
        None => ctx,
    }
}

/// Turns the outputs of `calls` into the node's output: one messages update when every tool answered
/// with a message, else each output in call order (a tool's several outputs in their order).
pub(crate) fn node_output<S: HasMessages + Default>(
    outputs: Vec<ToolCallOutput>,
    calls: &[ToolCall],
) -> Result<NodeOutput<S>> {
    if outputs.iter().all(|o| matches!(o, ToolCallOutput::Message(_))) {
        let messages = outputs
            .into_iter()
            .filter_map(|o| match o {
                ToolCallOutput::Message(m) => Some(Message::Tool(m)),
                _ => None,
            })
            .collect();
        return Ok(NodeOutput::Update(S::messages_update(messages)));
    }
    let mut parts = Vec::with_capacity(outputs.len());
    for (output, call) in outputs.into_iter().zip(calls) {
        match output {
            ToolCallOutput::Message(m) => parts.push(NodeOutput::Update(S::messages_update(vec![m.into()]))),
            ToolCallOutput::Command(payload) => parts.push(command_output::<S>(&payload, call, true)?),
            ToolCallOutput::Many(items) => parts.extend(many_outputs::<S>(items, call)?),
        }
    }
    Ok(NodeOutput::Many(parts))
}

/// The outputs of one call that returned several (LangGraph's `list[Command | ToolMessage]`): exactly one
/// tool message, at the top or in a command's update, must answer the call.
fn many_outputs<S: HasMessages + Default>(
    items: Vec<ToolCallOutput>,
    call: &ToolCall,
) -> Result<Vec<NodeOutput<S>>> {
    let answers = |messages: &[Message]| {
        messages
            .iter()
            .filter(|m| m.as_tool().is_some_and(|t| Some(t.tool_call_id.as_str()) == call.id.as_deref()))
            .count()
    };
    let mut count = 0;
    let mut parts = Vec::with_capacity(items.len());
    for item in items {
        match item {
            ToolCallOutput::Message(m) => {
                count += usize::from(Some(m.tool_call_id.as_str()) == call.id.as_deref());
                parts.push(NodeOutput::Update(S::messages_update(vec![m.into()])));
            }
            ToolCallOutput::Command(payload) => {
                if let Some(command) = payload.downcast_ref::<Command<S>>() {
                    count += answers(&command_messages::<S>(command)?);
                }
                parts.push(command_output::<S>(&payload, call, false)?);
            }
            ToolCallOutput::Many(nested) => parts.extend(many_outputs::<S>(nested, call)?),
        }
    }
    if count != 1 {
        return Err(Error::custom(ToolNodeError::TerminatorCount {
            tool: call.name.clone(),
            count,
            id: call.id.clone().unwrap_or_default(),
        }));
    }
    Ok(parts)
}

/// The command inside a tool's payload, checked: a command for the current graph must answer the call
/// (unless `require_answer` is off: one of several outputs of a call). A command for the parent graph
/// written in the parent's terms (a `Command` of the parent's state) travels up as it is.
fn command_output<S: HasMessages + Default>(
    payload: &CommandPayload,
    call: &ToolCall,
    require_answer: bool,
) -> Result<NodeOutput<S>> {
    let Some(command) = payload.downcast_ref::<Command<S>>().cloned() else {
        if payload.summary().get("graph").and_then(Value::as_str) == Some("parent") {
            let state = payload.summary().get("state").and_then(Value::as_str).unwrap_or("?").to_owned();
            return Err(
                weft_graph::ParentCommand::from_shared(Arc::clone(payload.value()), state).into_error()
            );
        }
        return Err(Error::custom(ToolNodeError::ForeignCommand {
            tool: call.name.clone(),
            state: std::any::type_name::<S>().to_owned(),
        }));
    };
    if command.graph == CommandGraph::Parent || !require_answer {
        return Ok(NodeOutput::Command(command));
    }
    let messages = command_messages::<S>(&command)?;
    let remove_all = matches!(&messages[..], [Message::Remove(r)] if r.id == REMOVE_ALL_MESSAGES);
    let answered = messages
        .iter()
        .any(|m| m.as_tool().is_some_and(|t| Some(t.tool_call_id.as_str()) == call.id.as_deref()));
    if remove_all || answered {
        return Ok(NodeOutput::Command(command));
    }
    Err(Error::custom(ToolNodeError::MissingToolMessage {
        tool: call.name.clone(),
        messages: serde_json::to_string(&messages)?,
    }))
}

/// The messages a command's updates write to the conversation channel.
fn command_messages<S: HasMessages + Default>(command: &Command<S>) -> Result<Vec<Message>> {
    if command.update.is_empty() {
        return Ok(Vec::new());
    }
    // The conversation channel is the one a messages update writes; find its index through the state's
    // own JSON view of such an update (this works for any state implementing `HasMessages`).
    let probe = S::messages_update(Vec::new());
    let state = S::default();
    let to_json =
        |update: &S::Update| state.update_to_json(update).map_err(|e| Error::Serialization(e.to_string()));
    let Some(channel) = to_json(&probe)?.first().map(|(i, _)| *i) else { return Ok(Vec::new()) };
    let mut messages = Vec::new();
    for update in &command.update {
        for (i, value) in to_json(update)? {
            if i == channel {
                let written: Vec<Message> = match value {
                    Value::Array(_) => serde_json::from_value(value)?,
                    other => vec![serde_json::from_value(other)?],
                };
                messages.extend(written);
            }
        }
    }
    Ok(messages)
}

/// Marks the [`IntoNode`] implementation of [`ToolNode`].
#[derive(Debug)]
pub struct ToolNodeMarker;

/// `graph.add_node("tools", ToolNode::new(tools))`.
impl<S: HasMessages + Default> IntoNode<S, ToolNodeMarker> for ToolNode {
    fn into_node(self) -> Arc<dyn NodeFn<S>> {
        Arc::new(ToolNodeFn::<S> { node: self, _state: PhantomData })
    }
}

struct ToolNodeFn<S> {
    node: ToolNode,
    _state: PhantomData<fn() -> S>,
}

impl<S: HasMessages + Default> ToolNodeFn<S> {
    /// Runs the pending calls of the state, or the call a `Send` carried (with the step's state when the
    /// engine hands it over).
    async fn run(
        &self,
        input: NodeInput<'_, S>,
        state: Option<&S>,
        runtime: Runtime,
    ) -> Result<NodeOutput<S>> {
        let (calls, invalid, json, state) = match input {
            NodeInput::State(state) => {
                let (_, calls) = pending_tool_calls(state.messages())
                    .ok_or_else(|| Error::custom(ToolNodeError::NoAiMessage))?;
                let invalid = pending_invalid_tool_calls(state.messages());
                let json = if calls.iter().any(|c| self.node.needs_state(&c.name)) {
                    Some(state_json(state)?)
                } else {
                    None
                };
                (calls, invalid, json, Some(state))
            }
            NodeInput::Payload(payload) => {
                let sent = payload.downcast_ref::<ToolCallWithContext>().ok_or_else(|| {
                    Error::custom(ToolNodeError::UnexpectedPayload(payload.type_name().to_owned()))
                })?;
                let json = match (&sent.state, state) {
                    (Some(json), _) => Some(json.clone()),
                    (None, Some(state)) if self.node.needs_state(&sent.tool_call.name) => {
                        Some(state_json(state)?)
                    }
                    (None, _) => None,
                };
                (vec![sent.tool_call.clone()], Vec::new(), json, state)
            }
        };
        let ctx = task_context(&runtime, state, json);
        let mut outputs = self.node.run_or_answer(calls.clone(), ctx).await?;
        // Calls whose arguments could not be parsed are answered after the others, with the error.
        let mut calls = calls;
        for call in &invalid {
            outputs.push(ToolCallOutput::Message(self.node.answer_invalid_call(call)?));
            calls.push(ToolCall {
                name: call.name.clone().unwrap_or_default(),
                args: Value::Null,
                id: call.id.clone(),
            });
        }
        node_output::<S>(outputs, &calls)
    }
}

impl<S: HasMessages + Default> NodeFn<S> for ToolNodeFn<S> {
    fn call<'a>(&'a self, input: NodeInput<'a, S>, runtime: Runtime) -> BoxFuture<'a, Result<NodeOutput<S>>> {
        self.run(input, None, runtime).boxed()
    }

    fn call_sent<'a>(
        &'a self,
        payload: Payload,
        state: &'a S,
        runtime: Runtime,
    ) -> BoxFuture<'a, Result<NodeOutput<S>>> {
        self.run(NodeInput::Payload(payload), Some(state), runtime).boxed()
    }

    fn payload_from_json(&self, value: Value) -> Result<Payload> {
        Ok(Payload::new(serde_json::from_value::<ToolCallWithContext>(value)?))
    }
}

/// On a bare message list: the tool messages answering the last AI message's pending calls, in call order.
/// A tool returning a command is an error here ([`ToolNodeError::CommandOutsideGraph`]).
#[async_trait]
impl Runnable<Vec<Message>, Vec<ToolMessage>> for ToolNode {
    fn name(&self) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed("tools")
    }

    fn kind(&self) -> RunKind {
        RunKind::Chain
    }

    async fn invoke(&self, input: Vec<Message>, config: &RunnableConfig) -> Result<Vec<ToolMessage>> {
        let (_, calls) =
            pending_tool_calls(&input).ok_or_else(|| Error::custom(ToolNodeError::NoAiMessage))?;
        let ctx = ToolContext::new(config.clone());
        let outputs = self.run_or_answer(calls.clone(), ctx).await?;
        let mut messages = outputs
            .into_iter()
            .zip(&calls)
            .map(|(output, call)| match output {
                ToolCallOutput::Message(message) => Ok(message),
                ToolCallOutput::Command(_) | ToolCallOutput::Many(_) => {
                    Err(Error::custom(ToolNodeError::CommandOutsideGraph(call.name.clone())))
                }
            })
            .collect::<Result<Vec<_>>>()?;
        for call in pending_invalid_tool_calls(&input) {
            messages.push(self.answer_invalid_call(&call)?);
        }
        Ok(messages)
    }
}
