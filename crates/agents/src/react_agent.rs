//! [`create_react_agent`]: the tool-calling agent loop as a compiled graph (LangGraph's prebuilt
//! `create_react_agent`).

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;
use weft_graph::branch::Route;
use weft_graph::node::{IntoNode, NodeFn};
use weft_graph::{
    Checkpointer, CompileConfig, CompiledGraph, END, GraphError, NodeOutput, PathMap, Runtime, START, Send,
    StateGraph, Store,
};
use weft_runnable_core::{
    AiMessage, ChatModel, ChatModelExt, Error, Message, PromptValue, Result, RunValue, Runnable,
    RunnableConfig, SharedTool, StructuredOutputMethod, SystemMessage, Tool, ToolCall, ToolSpec,
};

use crate::approval::HumanApproval;
use crate::state::{AgentState, ReactAgentState, state_json};
use crate::tool_node::{HandleToolErrors, ToolCallWithContext, ToolNode, pending_invalid_tool_calls};

/// The answer of the agent when the recursion limit leaves too few steps for another tool round.
pub const NEED_MORE_STEPS: &str = "Sorry, need more steps to process this request.";

const AGENT: &str = "agent";
const TOOLS: &str = "tools";
const PRE_MODEL_HOOK: &str = "pre_model_hook";
const POST_MODEL_HOOK: &str = "post_model_hook";
const HUMAN_APPROVAL: &str = "human_approval";
const STRUCTURED_RESPONSE: &str = "generate_structured_response";

/// How tool calls reach the tool node (LangGraph's `version`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AgentVersion {
    /// One `tools` task runs every call of the AI message concurrently.
    V1,
    /// Each call is sent to `tools` as its own task (a `Send` of a [`ToolCallWithContext`]): the calls
    /// run as parallel tasks, each with its own pending writes and interrupts (the default).
    #[default]
    V2,
}

type PromptFn<S> = dyn Fn(&S, &[Message]) -> Result<Vec<Message>> + std::marker::Send + Sync;

/// What the model sees before the conversation: a system message, or a function of the state and the
/// conversation that returns the model's whole input. It is not kept in the state.
pub enum Prompt<S> {
    /// Put before the conversation (a string becomes a system message).
    System(Box<SystemMessage>),
    /// Builds the model's input from the state and the messages of this call (the conversation, or the
    /// `llm_input_messages` a pre-model hook chose).
    Function(Arc<PromptFn<S>>),
}

impl<S> Prompt<S> {
    /// A prompt built by `f` from the state and the messages of the call.
    pub fn from_fn(
        f: impl Fn(&S, &[Message]) -> Result<Vec<Message>> + std::marker::Send + Sync + 'static,
    ) -> Self {
        Self::Function(Arc::new(f))
    }

    fn apply(&self, state: &S, messages: &[Message]) -> Result<Vec<Message>> {
        match self {
            Self::System(system) => {
                let mut input = Vec::with_capacity(messages.len() + 1);
                input.push(Message::System((**system).clone()));
                input.extend_from_slice(messages);
                Ok(input)
            }
            Self::Function(f) => f(state, messages),
        }
    }
}

impl<S> Clone for Prompt<S> {
    fn clone(&self) -> Self {
        match self {
            Self::System(system) => Self::System(system.clone()),
            Self::Function(f) => Self::Function(Arc::clone(f)),
        }
    }
}

impl<S> fmt::Debug for Prompt<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::System(system) => f.debug_tuple("System").field(system).finish(),
            Self::Function(_) => f.write_str("Function(..)"),
        }
    }
}

impl<S> From<&str> for Prompt<S> {
    fn from(text: &str) -> Self {
        Self::System(Box::new(SystemMessage { content: text.into(), ..SystemMessage::default() }))
    }
}

impl<S> From<String> for Prompt<S> {
    fn from(text: String) -> Self {
        Self::System(Box::new(SystemMessage { content: text.into(), ..SystemMessage::default() }))
    }
}

impl<S> From<SystemMessage> for Prompt<S> {
    fn from(system: SystemMessage) -> Self {
        Self::System(Box::new(system))
    }
}

/// Errors of building and running a ReAct agent.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ReactAgentError {
    /// The history sent to the model has AI tool calls without tool results.
    #[error(
        "Found AIMessages with tool_calls that do not have a corresponding ToolMessage. Here are the first few \
         of those tool calls: {}.\n\nEvery tool call (LLM requesting to call a tool) in the message history \
         MUST have a corresponding ToolMessage (result of a tool invocation to return to the LLM) - this is \
         required by most LLM providers.",
        calls_json(.calls)
    )]
    InvalidChatHistory {
        /// The first (at most three) calls without a result.
        calls: Vec<ToolCall>,
    },
    /// A response format was set but the state has no channel for the structured response.
    #[error("a response format needs a state with a structured response channel, and {0} has none")]
    NoStructuredResponseChannel(&'static str),
    /// The graph could not be compiled.
    #[error(transparent)]
    Graph(#[from] GraphError),
}

impl From<ReactAgentError> for Error {
    fn from(err: ReactAgentError) -> Self {
        Error::custom(err)
    }
}

fn calls_json(calls: &[ToolCall]) -> String {
    serde_json::to_string(calls).unwrap_or_else(|e| format!("<unprintable tool calls: {e}>"))
}

/// Checks that every tool call of an AI message in `messages` has a tool message answering it.
pub(crate) fn validate_chat_history(messages: &[Message]) -> Result<()> {
    let answered: HashSet<&str> =
        messages.iter().filter_map(Message::as_tool).map(|t| t.tool_call_id.as_str()).collect();
    let missing: Vec<ToolCall> = messages
        .iter()
        .filter_map(Message::as_ai)
        .flat_map(|ai| &ai.tool_calls)
        .filter(|call| !answered.contains(call.id.as_deref().unwrap_or_default()))
        .take(3)
        .cloned()
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(Error::custom(ReactAgentError::InvalidChatHistory { calls: missing }))
    }
}

type StructuredFn = dyn Fn(Arc<dyn ChatModel>, Vec<Message>, RunnableConfig) -> BoxFuture<'static, Result<Value>>
    + std::marker::Send
    + Sync;

#[derive(Clone)]
struct ResponseFormat {
    prompt: Option<String>,
    generate: Arc<StructuredFn>,
}

/// Builds a ReAct agent; made by [`create_react_agent`] (over [`AgentState`]) or
/// [`ReactAgentBuilder::new`] (over a state of your own), finished by [`build`](Self::build).
pub struct ReactAgentBuilder<S: ReactAgentState> {
    model: Arc<dyn ChatModel>,
    tools: Vec<SharedTool>,
    prompt: Option<Prompt<S>>,
    response_format: Option<ResponseFormat>,
    pre_model_hook: Option<Arc<dyn NodeFn<S>>>,
    post_model_hook: Option<Arc<dyn NodeFn<S>>>,
    approval: Option<HumanApproval>,
    handle_tool_errors: HandleToolErrors,
    version: AgentVersion,
    name: Option<String>,
    compile: CompileConfig,
}

impl<S: ReactAgentState> fmt::Debug for ReactAgentBuilder<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReactAgentBuilder")
            .field("model", &self.model.model_name())
            .field("tools", &self.tools.iter().map(|t| Tool::name(t.as_ref()).to_owned()).collect::<Vec<_>>())
            .field("prompt", &self.prompt)
            .field("response_format", &self.response_format.is_some())
            .field("pre_model_hook", &self.pre_model_hook.is_some())
            .field("post_model_hook", &self.post_model_hook.is_some())
            .field("approval", &self.approval)
            .field("version", &self.version)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// The tool-calling agent (LangGraph's `create_react_agent`): a graph of an `agent` node that calls
/// `model` with the `tools` bound, and a `tools` node ([`ToolNode`]) that runs the calls it asks for,
/// looping until the model answers without tool calls. Set options on the builder, then
/// [`build`](ReactAgentBuilder::build).
///
/// ```
/// use serde_json::json;
/// use weft_agents::create_react_agent;
/// use weft_graph::{GraphInput, MessagesState};
/// use weft_runnable_core::fakes::{FakeChatModel, FakeReply};
/// use weft_runnable_core::{Message, RunnableConfig, StructuredTool, ToolExt};
///
/// # tokio_test::block_on(async {
/// let add = StructuredTool::from_fn("add", "Adds.", json!({"type": "object"}), |args, _ctx| async move {
///     Ok(json!(args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)))
/// });
/// let model = FakeChatModel::new([FakeReply::tool_call("add", json!({"a": 2, "b": 3}), "c1"), "5".into()]);
/// let agent = create_react_agent(model, [add.shared()]).prompt("You add numbers.").build().unwrap();
/// let input = weft_agents::AgentState::update().messages(vec![Message::human("2 + 3?")]);
/// let out = agent.invoke(input, &RunnableConfig::default()).await.unwrap();
/// let kinds: Vec<&str> = out.value.messages.iter().map(Message::type_name).collect();
/// assert_eq!(kinds, ["human", "ai", "tool", "ai"]);
/// assert_eq!(out.value.messages[2].text(), "5");
/// # });
/// ```
pub fn create_react_agent<M: ChatModel + 'static>(
    model: M,
    tools: impl IntoIterator<Item = SharedTool>,
) -> ReactAgentBuilder<AgentState> {
    ReactAgentBuilder::new(model, tools)
}

impl<S: ReactAgentState> ReactAgentBuilder<S> {
    /// An agent over the state `S` (LangGraph's `state_schema`).
    ///
    /// The tools' specs are bound to `model` (over any options already bound to it); with no tools the
    /// graph is the model node alone.
    pub fn new<M: ChatModel + 'static>(model: M, tools: impl IntoIterator<Item = SharedTool>) -> Self {
        Self {
            model: Arc::new(model),
            tools: tools.into_iter().collect(),
            prompt: None,
            response_format: None,
            pre_model_hook: None,
            post_model_hook: None,
            approval: None,
            handle_tool_errors: HandleToolErrors::default(),
            version: AgentVersion::default(),
            name: None,
            compile: CompileConfig::default().trace_as_agent(true),
        }
    }

    /// Sets the prompt: a system text, a [`SystemMessage`], or [`Prompt::from_fn`].
    pub fn prompt(mut self, prompt: impl Into<Prompt<S>>) -> Self {
        self.prompt = Some(prompt.into());
        self
    }

    /// After the loop, asks the model (without the tools) for a `T` by function calling and stores it as
    /// JSON in the state's structured response (an extra model call, node `generate_structured_response`).
    pub fn response_format<T>(self) -> Self
    where
        T: DeserializeOwned + JsonSchema + RunValue,
    {
        self.structured(
            None::<String>,
            StructuredOutputMethod::FunctionCalling,
            std::marker::PhantomData::<T>,
        )
    }

    /// Like [`response_format`](Self::response_format), with a system prompt put before the conversation
    /// for that call, and a choice of method.
    pub fn response_format_with<T>(
        self,
        prompt: Option<impl Into<String>>,
        method: StructuredOutputMethod,
    ) -> Self
    where
        T: DeserializeOwned + JsonSchema + RunValue,
    {
        self.structured(prompt, method, std::marker::PhantomData::<T>)
    }

    fn structured<T>(
        mut self,
        prompt: Option<impl Into<String>>,
        method: StructuredOutputMethod,
        _t: std::marker::PhantomData<T>,
    ) -> Self
    where
        T: DeserializeOwned + JsonSchema + RunValue,
    {
        let generate = move |model: Arc<dyn ChatModel>, messages: Vec<Message>, config: RunnableConfig| {
            let fut: BoxFuture<'static, Result<Value>> = Box::pin(async move {
                let structured = model.with_structured_output::<T>(method);
                let value = structured.invoke(PromptValue::Messages(messages), &config).await?;
                Ok(serde_json::to_value(value)?)
            });
            fut
        };
        self.response_format =
            Some(ResponseFormat { prompt: prompt.map(Into::into), generate: Arc::new(generate) });
        self
    }

    /// Adds a node `pre_model_hook` that runs before every model call (trimming, summarizing, ...). Its
    /// update is applied to the state; to change what the model sees without changing the conversation,
    /// write `llm_input_messages` ([`ReactAgentState::llm_input_messages`]).
    pub fn pre_model_hook<M>(mut self, node: impl IntoNode<S, M>) -> Self {
        self.pre_model_hook = Some(node.into_node());
        self
    }

    /// Adds a node `post_model_hook` that runs after every model call (guardrails, validation, review);
    /// the routing to the tools, back to the model or to the end happens after it.
    pub fn post_model_hook<M>(mut self, node: impl IntoNode<S, M>) -> Self {
        self.post_model_hook = Some(node.into_node());
        self
    }

    /// Pauses for a human decision before the chosen tools run (a node `human_approval`).
    pub fn human_approval(mut self, approval: HumanApproval) -> Self {
        self.approval = Some(approval);
        self
    }

    /// Sets which tool errors become tool messages for the model (see [`HandleToolErrors`]).
    pub fn handle_tool_errors(mut self, policy: HandleToolErrors) -> Self {
        self.handle_tool_errors = policy;
        self
    }

    /// Sets how tool calls are dispatched (default [`AgentVersion::V2`]).
    pub fn version(mut self, version: AgentVersion) -> Self {
        self.version = version;
        self
    }

    compile_setters!();

    /// Builds and compiles the graph.
    pub fn build(self) -> std::result::Result<CompiledGraph<S>, ReactAgentError> {
        if self.response_format.is_some() && S::structured_response_update(Value::Null).is_none() {
            return Err(ReactAgentError::NoStructuredResponseChannel(std::any::type_name::<S>()));
        }
        let entry = if self.pre_model_hook.is_some() { PRE_MODEL_HOOK } else { AGENT };
        let specs: Vec<ToolSpec> = self.tools.iter().map(ToolSpec::from).collect();
        let bound: Arc<dyn ChatModel> = if specs.is_empty() {
            Arc::clone(&self.model)
        } else {
            Arc::new(Arc::clone(&self.model).bind_tools(specs, None))
        };
        let tool_node = ToolNode::new(self.tools.clone()).handle_tool_errors(self.handle_tool_errors.clone());
        let return_direct: HashSet<String> = self
            .tools
            .iter()
            .filter(|t| t.return_direct())
            .map(|t| Tool::name(t.as_ref()).to_owned())
            .collect();
        let routing = Arc::new(Routing {
            version: self.version,
            entry,
            has_post: self.post_model_hook.is_some(),
            has_approval: self.approval.is_some(),
            has_response_format: self.response_format.is_some(),
            tool_node: tool_node.clone(),
            return_direct: return_direct.clone(),
        });
        let model_call = Arc::new(ModelCall {
            model: bound,
            prompt: self.prompt.clone(),
            name: self.name.clone(),
            return_direct: return_direct.clone(),
        });

        let mut graph = StateGraph::<S>::new();
        graph.add_node(AGENT, move |state: S, rt: Runtime| {
            let call = Arc::clone(&model_call);
            async move { call.run(&state, &rt).await }
        });
        if let Some(hook) = self.pre_model_hook.clone() {
            graph.add_node(PRE_MODEL_HOOK, hook);
            graph.add_edge(PRE_MODEL_HOOK, AGENT);
        }
        graph.add_edge(START, entry);
        if let Some(hook) = self.post_model_hook.clone() {
            graph.add_node(POST_MODEL_HOOK, hook);
            graph.add_edge(AGENT, POST_MODEL_HOOK);
        }
        if let Some(format) = self.response_format.clone() {
            let model = Arc::clone(&self.model);
            graph.add_node(STRUCTURED_RESPONSE, move |state: S, rt: Runtime| {
                let format = format.clone();
                let model = Arc::clone(&model);
                async move { structured_response::<S>(&state, &rt, &format, model).await }
            });
            graph.add_edge(STRUCTURED_RESPONSE, END);
        }

        if self.tools.is_empty() {
            let last = if self.post_model_hook.is_some() { POST_MODEL_HOOK } else { AGENT };
            let next = if self.response_format.is_some() { STRUCTURED_RESPONSE } else { END };
            graph.add_edge(last, next);
        } else {
            self.wire_tools(&mut graph, &routing, tool_node, return_direct.is_empty());
        }
        Ok(graph.compile_with(self.compile)?)
    }

    /// The tools node and the conditional edges around it: after the model (or its post hook), after the
    /// human approval, and after the tools (back to the entry, or to the end for a `return_direct` tool).
    fn wire_tools(
        &self,
        graph: &mut StateGraph<S>,
        routing: &Arc<Routing>,
        tool_node: ToolNode,
        no_return_direct: bool,
    ) {
        let entry = routing.entry;
        graph.add_node(TOOLS, tool_node);
        let optional = |flag: bool, name: &'static str| flag.then_some(name);
        let finish = optional(self.response_format.is_some(), STRUCTURED_RESPONSE);
        if self.post_model_hook.is_some() {
            let r = Arc::clone(routing);
            let targets: Vec<&str> = [
                Some(entry),
                Some(TOOLS),
                optional(self.approval.is_some(), HUMAN_APPROVAL),
                finish,
                Some(END),
            ]
            .into_iter()
            .flatten()
            .collect();
            graph.add_conditional_edges(
                POST_MODEL_HOOK,
                move |s: &S| r.after_review(s, true),
                PathMap::from(targets),
            );
        } else {
            let r = Arc::clone(routing);
            let targets: Vec<&str> =
                [Some(TOOLS), optional(self.approval.is_some(), HUMAN_APPROVAL), finish, Some(END)]
                    .into_iter()
                    .flatten()
                    .collect();
            graph.add_conditional_edges(AGENT, move |s: &S| r.after_model(s), PathMap::from(targets));
        }
        if let Some(approval) = self.approval.clone() {
            let approval = Arc::new(approval);
            graph.add_node(HUMAN_APPROVAL, move |state: &S, rt: &Runtime| -> Result<NodeOutput<S>> {
                let messages = approval.review(state.messages(), rt)?;
                Ok(if messages.is_empty() {
                    NodeOutput::Empty
                } else {
                    NodeOutput::Update(S::messages_update(messages))
                })
            });
            let r = Arc::clone(routing);
            let targets: Vec<&str> =
                [Some(entry), Some(TOOLS), finish, Some(END)].into_iter().flatten().collect();
            graph.add_conditional_edges(
                HUMAN_APPROVAL,
                move |s: &S| r.after_review(s, false),
                PathMap::from(targets),
            );
        }
        if no_return_direct {
            graph.add_edge(TOOLS, entry);
        } else {
            let r = Arc::clone(routing);
            graph.add_conditional_edges(
                TOOLS,
                move |s: &S| r.after_tools(s),
                PathMap::from(vec![entry, END]),
            );
        }
    }
}

/// The model node's work.
struct ModelCall<S> {
    model: Arc<dyn ChatModel>,
    prompt: Option<Prompt<S>>,
    name: Option<String>,
    return_direct: HashSet<String>,
}

impl<S: ReactAgentState> ModelCall<S> {
    async fn run(&self, state: &S, rt: &Runtime) -> Result<NodeOutput<S>> {
        let messages = state.llm_input_messages().unwrap_or_else(|| state.messages());
        validate_chat_history(messages)?;
        let input = match &self.prompt {
            Some(prompt) => prompt.apply(state, messages)?,
            None => messages.to_vec(),
        };
        let mut response: AiMessage =
            Runnable::invoke(self.model.as_ref(), PromptValue::Messages(input), rt.config()).await?;
        if let Some(name) = &self.name {
            response.name = Some(name.clone());
        }
        let remaining = rt.remaining_steps();
        let has_calls = !response.tool_calls.is_empty() || !response.invalid_tool_calls.is_empty();
        let all_return_direct = response.tool_calls.iter().all(|c| self.return_direct.contains(&c.name));
        let reply = if (remaining < 1 && all_return_direct) || (remaining < 2 && has_calls) {
            AiMessage { id: response.id, content: NEED_MORE_STEPS.into(), ..AiMessage::default() }
        } else {
            response
        };
        Ok(NodeOutput::Update(S::messages_update(vec![Message::Ai(reply)])))
    }
}

async fn structured_response<S: ReactAgentState>(
    state: &S,
    rt: &Runtime,
    format: &ResponseFormat,
    model: Arc<dyn ChatModel>,
) -> Result<NodeOutput<S>> {
    let mut messages = Vec::with_capacity(state.messages().len() + 1);
    if let Some(prompt) = &format.prompt {
        messages.push(Message::system(prompt.as_str()));
    }
    messages.extend_from_slice(state.messages());
    let value = (format.generate)(model, messages, rt.config().clone()).await?;
    let update = S::structured_response_update(value).ok_or_else(|| {
        Error::custom(ReactAgentError::NoStructuredResponseChannel(std::any::type_name::<S>()))
    })?;
    Ok(NodeOutput::Update(update))
}

/// The agent's routers.
struct Routing {
    version: AgentVersion,
    entry: &'static str,
    has_post: bool,
    has_approval: bool,
    has_response_format: bool,
    tool_node: ToolNode,
    return_direct: HashSet<String>,
}

impl Routing {
    fn finish(&self) -> Route {
        if self.has_response_format { Route::Node(STRUCTURED_RESPONSE.to_owned()) } else { Route::End }
    }

    /// After the model (no post-model hook): the tools, the approval step, or the end.
    fn after_model<S: ReactAgentState>(&self, state: &S) -> Result<Vec<Route>> {
        debug_assert!(!self.has_post);
        // Calls whose arguments could not be parsed go to the tools too, which answer them with the error.
        let calls = match state.messages().last() {
            Some(Message::Ai(ai)) if !ai.tool_calls.is_empty() || !ai.invalid_tool_calls.is_empty() => {
                ai.tool_calls.clone()
            }
            _ => return Ok(vec![self.finish()]),
        };
        if self.has_approval {
            return Ok(vec![Route::Node(HUMAN_APPROVAL.to_owned())]);
        }
        self.dispatch(state, calls)
    }

    /// After the post-model hook or the approval step: the calls of the last AI message still without a
    /// result go to the tools (through the approval step first, after the hook), else back to the model if
    /// the last message is a tool result, else the end.
    fn after_review<S: ReactAgentState>(&self, state: &S, from_hook: bool) -> Result<Vec<Route>> {
        let messages = state.messages();
        let pending = unanswered_calls(messages);
        if !pending.is_empty() || !pending_invalid_tool_calls(messages).is_empty() {
            if from_hook && self.has_approval {
                return Ok(vec![Route::Node(HUMAN_APPROVAL.to_owned())]);
            }
            return self.dispatch(state, pending);
        }
        if matches!(messages.last(), Some(Message::Tool(_))) {
            return Ok(vec![Route::Node(self.entry.to_owned())]);
        }
        Ok(vec![self.finish()])
    }

    /// v1: the `tools` node; v2: one `Send` per call, unless some calls could not be parsed: then the
    /// `tools` node, which answers those with the error and runs the others.
    fn dispatch<S: ReactAgentState>(&self, state: &S, calls: Vec<ToolCall>) -> Result<Vec<Route>> {
        match self.version {
            AgentVersion::V1 => Ok(vec![Route::Node(TOOLS.to_owned())]),
            AgentVersion::V2 if !pending_invalid_tool_calls(state.messages()).is_empty() => {
                Ok(vec![Route::Node(TOOLS.to_owned())])
            }
            AgentVersion::V2 => {
                let mut shared_state: Option<Value> = None;
                let mut routes = Vec::with_capacity(calls.len());
                for call in calls {
                    let state_value = if self.tool_node.needs_state(&call.name) {
                        if shared_state.is_none() {
                            shared_state = Some(state_json(state)?);
                        }
                        shared_state.clone()
                    } else {
                        None
                    };
                    let payload = ToolCallWithContext { tool_call: call, state: state_value };
                    routes.push(Route::Send(Send::new(TOOLS, payload)));
                }
                Ok(routes)
            }
        }
    }

    /// After the tools, when some tools return directly: the end if one of them just ran, else the model.
    fn after_tools<S: ReactAgentState>(&self, state: &S) -> Route {
        for message in state.messages().iter().rev() {
            match message {
                Message::Tool(tool) => {
                    if tool.name.as_ref().is_some_and(|n| self.return_direct.contains(n)) {
                        return Route::End;
                    }
                }
                Message::Ai(ai) => {
                    if ai.tool_calls.iter().any(|c| self.return_direct.contains(&c.name)) {
                        return Route::End;
                    }
                    break;
                }
                _ => break,
            }
        }
        Route::Node(self.entry.to_owned())
    }
}

/// The calls of the last AI message that no tool message in `messages` answers.
fn unanswered_calls(messages: &[Message]) -> Vec<ToolCall> {
    let Some(ai) = messages.iter().rev().find_map(Message::as_ai) else { return Vec::new() };
    let answered: HashSet<&str> =
        messages.iter().filter_map(Message::as_tool).map(|t| t.tool_call_id.as_str()).collect();
    ai.tool_calls
        .iter()
        .filter(|c| !answered.contains(c.id.as_deref().unwrap_or_default()))
        .cloned()
        .collect()
}
