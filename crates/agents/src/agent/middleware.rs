//! [`Middleware`]: LangChain's `AgentMiddleware`, hooks around the agent loop of
//! [`create_agent`](crate::create_agent), and what the hooks see.

use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use futures::future::BoxFuture;
use serde_json::{Map, Value};
use weft_runnable_core::{
    ChatModel, Message, Result, SharedTool, SystemMessage, Tool, ToolCall, ToolCallOutput, ToolChoice,
    ToolMessage, ToolStatus,
};

use super::runtime::AgentRuntime;
use super::state::{AgentState, AgentUpdate, JumpTo, StateChannel};
use super::structured::ResponseFormat;

/// Which hooks a middleware runs, and where its node hooks may jump (LangChain finds the overridden
/// methods and their `@hook_config(can_jump_to=...)`; Rust says it here).
///
/// Each node hook present becomes a graph node named `<middleware>.<hook>`; `wrap_*` hooks wrap every
/// model or tool call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hooks {
    /// `before_agent`, with its jump destinations.
    pub before_agent: Option<Vec<JumpTo>>,
    /// `before_model`, with its jump destinations.
    pub before_model: Option<Vec<JumpTo>>,
    /// `after_model`, with its jump destinations.
    pub after_model: Option<Vec<JumpTo>>,
    /// `after_agent`, with its jump destinations.
    pub after_agent: Option<Vec<JumpTo>>,
    /// `wrap_model_call`.
    pub wrap_model_call: bool,
    /// `wrap_tool_call`.
    pub wrap_tool_call: bool,
}

impl Hooks {
    /// No hook.
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs `before_agent` (once per run, before the loop).
    #[must_use]
    pub fn before_agent(mut self) -> Self {
        self.before_agent.get_or_insert_with(Vec::new);
        self
    }

    /// Runs `before_model` (before every model call).
    #[must_use]
    pub fn before_model(mut self) -> Self {
        self.before_model.get_or_insert_with(Vec::new);
        self
    }

    /// Runs `after_model` (after every model call).
    #[must_use]
    pub fn after_model(mut self) -> Self {
        self.after_model.get_or_insert_with(Vec::new);
        self
    }

    /// Runs `after_agent` (once per run, after the loop).
    #[must_use]
    pub fn after_agent(mut self) -> Self {
        self.after_agent.get_or_insert_with(Vec::new);
        self
    }

    /// Runs `wrap_model_call` around every model call.
    #[must_use]
    pub fn wrap_model_call(mut self) -> Self {
        self.wrap_model_call = true;
        self
    }

    /// Runs `wrap_tool_call` around every tool call.
    #[must_use]
    pub fn wrap_tool_call(mut self) -> Self {
        self.wrap_tool_call = true;
        self
    }

    /// Lets the hooks declared so far jump to `targets` (LangChain's `can_jump_to`); declare the hooks
    /// first.
    #[must_use]
    pub fn can_jump_to(mut self, targets: impl IntoIterator<Item = JumpTo>) -> Self {
        let targets: Vec<JumpTo> = targets.into_iter().collect();
        for hook in
            [&mut self.before_agent, &mut self.before_model, &mut self.after_model, &mut self.after_agent]
                .into_iter()
                .flatten()
        {
            for t in &targets {
                if !hook.contains(t) {
                    hook.push(*t);
                }
            }
        }
        self
    }
}

/// The node hooks, by the suffix of their node names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NodeHook {
    BeforeAgent,
    BeforeModel,
    AfterModel,
    AfterAgent,
}

impl NodeHook {
    pub(crate) fn suffix(self) -> &'static str {
        match self {
            Self::BeforeAgent => "before_agent",
            Self::BeforeModel => "before_model",
            Self::AfterModel => "after_model",
            Self::AfterAgent => "after_agent",
        }
    }

    pub(crate) fn jumps(self, hooks: &Hooks) -> Option<&[JumpTo]> {
        match self {
            Self::BeforeAgent => hooks.before_agent.as_deref(),
            Self::BeforeModel => hooks.before_model.as_deref(),
            Self::AfterModel => hooks.after_model.as_deref(),
            Self::AfterAgent => hooks.after_agent.as_deref(),
        }
    }
}

/// What a node hook returns: an update of the agent's state (with a [`JumpTo`] to route), or nothing.
pub type HookResult = Result<Option<AgentUpdate>>;

/// Hooks around the agent loop of [`create_agent`](crate::create_agent) (LangChain's `AgentMiddleware`).
///
/// Every hook has a no-op default; [`hooks`](Middleware::hooks) says which ones this middleware runs
/// (Rust cannot see which methods a type overrides, so a hook not listed there never runs). Node hooks
/// (`before_agent`, `before_model`, `after_model`, `after_agent`) become graph nodes named
/// `<name>.<hook>` and return state updates; `wrap_model_call` and `wrap_tool_call` wrap every model and
/// tool call and may call the wrapped call several times (retries), never (short-circuit), or change
/// what goes in and out.
///
/// Order, as LangChain composes it: `before_*` hooks run in list order, `after_*` hooks in reverse list
/// order, and the first middleware's `wrap_*` hook is the outermost.
///
/// ```
/// use async_trait::async_trait;
/// use weft_agents::agent::{AgentRuntime, AgentState, AgentUpdate, HookResult, Hooks, JumpTo, Middleware};
/// use weft_runnable_core::Message;
///
/// /// Ends the run once the conversation is long.
/// struct StopWhenLong(usize);
///
/// #[async_trait]
/// impl Middleware for StopWhenLong {
///     fn hooks(&self) -> Hooks {
///         Hooks::new().before_model().can_jump_to([JumpTo::End])
///     }
///
///     async fn before_model(&self, state: &AgentState, _rt: &AgentRuntime) -> HookResult {
///         if state.messages().len() < self.0 {
///             return Ok(None);
///         }
///         Ok(Some(AgentUpdate::new().messages(vec![Message::ai("That is enough.")]).jump_to(JumpTo::End)))
///     }
/// }
/// ```
#[async_trait]
pub trait Middleware<C: Send + Sync + 'static = ()>: Send + Sync + 'static {
    /// The name of its nodes' prefix; two middleware of one agent must differ (default: the type's name).
    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed(short_type_name::<Self>())
    }

    /// The hooks it runs.
    fn hooks(&self) -> Hooks;

    /// Channels it adds to the agent's state (LangChain's `state_schema`).
    fn state_channels(&self) -> Vec<StateChannel> {
        Vec::new()
    }

    /// Tools it adds to the agent (LangChain's `tools`).
    fn tools(&self) -> Vec<SharedTool> {
        Vec::new()
    }

    /// Runs once per invocation, before the loop.
    async fn before_agent(&self, state: &AgentState, runtime: &AgentRuntime<C>) -> HookResult {
        let _ = (state, runtime);
        Ok(None)
    }

    /// Runs before every model call.
    async fn before_model(&self, state: &AgentState, runtime: &AgentRuntime<C>) -> HookResult {
        let _ = (state, runtime);
        Ok(None)
    }

    /// Runs after every model call.
    async fn after_model(&self, state: &AgentState, runtime: &AgentRuntime<C>) -> HookResult {
        let _ = (state, runtime);
        Ok(None)
    }

    /// Runs once per invocation, after the loop.
    async fn after_agent(&self, state: &AgentState, runtime: &AgentRuntime<C>) -> HookResult {
        let _ = (state, runtime);
        Ok(None)
    }

    /// Wraps a model call: call `next` (any number of times) to run the inner middleware and the model.
    async fn wrap_model_call(
        &self,
        request: ModelRequest<C>,
        next: ModelHandler<'_, C>,
    ) -> Result<ModelResponse> {
        next.call(request).await
    }

    /// Wraps a tool call: call `next` (any number of times) to run the inner middleware and the tool.
    async fn wrap_tool_call(
        &self,
        request: ToolCallRequest<C>,
        next: ToolHandler<'_, C>,
    ) -> Result<ToolCallOutput> {
        next.call(request).await
    }
}

/// The last segment of a type's path, without generics.
pub(crate) fn short_type_name<T: ?Sized>() -> &'static str {
    let full = std::any::type_name::<T>();
    let base = full.split('<').next().unwrap_or(full);
    base.rsplit("::").next().unwrap_or(base)
}

/// A model call as `wrap_model_call` sees it (LangChain's `ModelRequest`): change a field and pass it on.
pub struct ModelRequest<C = ()> {
    /// The model to call.
    pub model: Arc<dyn ChatModel>,
    /// The conversation sent, without the system message.
    pub messages: Vec<Message>,
    /// The system message put before the conversation.
    pub system_message: Option<SystemMessage>,
    /// The tools the model may call (the agent's tools, those middleware added, minus any a
    /// middleware removed); a structured-output tool is added when the call is made.
    pub tools: Vec<SharedTool>,
    /// Which tool the model must call.
    pub tool_choice: Option<ToolChoice>,
    /// How the reply becomes a structured response.
    pub response_format: Option<ResponseFormat>,
    /// Provider settings sent with the call.
    pub model_settings: Map<String, Value>,
    /// The agent's state as the model node got it.
    pub state: AgentState,
    /// The node's runtime.
    pub runtime: AgentRuntime<C>,
}

impl<C> Clone for ModelRequest<C> {
    fn clone(&self) -> Self {
        Self {
            model: Arc::clone(&self.model),
            messages: self.messages.clone(),
            system_message: self.system_message.clone(),
            tools: self.tools.clone(),
            tool_choice: self.tool_choice.clone(),
            response_format: self.response_format.clone(),
            model_settings: self.model_settings.clone(),
            state: self.state.clone(),
            runtime: self.runtime.clone(),
        }
    }
}

impl<C> fmt::Debug for ModelRequest<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelRequest")
            .field("model", &self.model.model_name())
            .field("messages", &self.messages.len())
            .field("system_message", &self.system_message)
            .field("tools", &self.tools.iter().map(|t| Tool::name(t.as_ref()).to_owned()).collect::<Vec<_>>())
            .field("tool_choice", &self.tool_choice)
            .field("response_format", &self.response_format)
            .finish_non_exhaustive()
    }
}

impl<C> ModelRequest<C> {
    /// The system message's text, if any (LangChain's `system_prompt`).
    pub fn system_prompt(&self) -> Option<String> {
        self.system_message.as_ref().map(|s| s.content.text())
    }
}

/// What a model call produced (LangChain's `ModelResponse`, with `ExtendedModelResponse`'s command as
/// `updates`): the messages to add (the AI message, and a tool message when a structured-output tool was
/// called), the structured response, and extra state updates a middleware asks for.
#[derive(Debug, Clone, Default)]
pub struct ModelResponse {
    /// Messages to add to the conversation.
    pub result: Vec<Message>,
    /// The structured response parsed from the reply, if any.
    pub structured_response: Option<Value>,
    /// Extra updates applied after the model node's own (LangChain's `ExtendedModelResponse.command`):
    /// messages in them are added alongside the reply.
    pub updates: Vec<AgentUpdate>,
}

impl ModelResponse {
    /// A response of one message.
    pub fn message(message: impl Into<Message>) -> Self {
        Self { result: vec![message.into()], ..Self::default() }
    }

    /// Adds an update applied after the reply (LangChain's `ExtendedModelResponse(command=...)`).
    #[must_use]
    pub fn with_update(mut self, update: AgentUpdate) -> Self {
        self.updates.push(update);
        self
    }
}

/// The innermost model call, below every `wrap_model_call`.
pub(crate) trait ModelCall<C>: Send + Sync {
    fn call<'a>(&'a self, request: ModelRequest<C>) -> BoxFuture<'a, Result<ModelResponse>>;
}

/// The rest of the model-call chain, handed to [`Middleware::wrap_model_call`]: [`call`](Self::call) runs
/// the inner middleware and the model. Call it again to retry.
pub struct ModelHandler<'a, C> {
    chain: &'a [Arc<dyn Middleware<C>>],
    base: &'a dyn ModelCall<C>,
    captured: &'a Mutex<Vec<AgentUpdate>>,
}

impl<C> Clone for ModelHandler<'_, C> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<C> Copy for ModelHandler<'_, C> {}

impl<C> fmt::Debug for ModelHandler<'_, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelHandler").field("remaining", &self.chain.len()).finish()
    }
}

impl<'a, C: Send + Sync + 'static> ModelHandler<'a, C> {
    /// Runs the inner middleware and the model. The updates the inner middleware asked for are kept
    /// apart (from this call only, so a retry starts clean) and join the outer response's.
    pub fn call(&self, request: ModelRequest<C>) -> BoxFuture<'a, Result<ModelResponse>> {
        let this = *self;
        Box::pin(async move {
            let mut response = run_model_chain(this.chain, this.base, request).await?;
            let mut captured = this.captured.lock().unwrap_or_else(PoisonError::into_inner);
            *captured = std::mem::take(&mut response.updates);
            Ok(response)
        })
    }
}

/// Runs `chain` around `base`: the first middleware is the outermost; the updates of inner layers come
/// before the outer ones'.
pub(crate) fn run_model_chain<'a, C: Send + Sync + 'static>(
    chain: &'a [Arc<dyn Middleware<C>>],
    base: &'a dyn ModelCall<C>,
    request: ModelRequest<C>,
) -> BoxFuture<'a, Result<ModelResponse>> {
    Box::pin(async move {
        let Some((first, rest)) = chain.split_first() else { return base.call(request).await };
        let captured = Mutex::new(Vec::new());
        let next = ModelHandler { chain: rest, base, captured: &captured };
        let mut response = first.wrap_model_call(request, next).await?;
        let mut updates = captured.into_inner().unwrap_or_else(PoisonError::into_inner);
        updates.append(&mut response.updates);
        response.updates = updates;
        Ok(response)
    })
}

/// A tool call as `wrap_tool_call` sees it (LangChain's `ToolCallRequest`).
pub struct ToolCallRequest<C = ()> {
    /// The call: name, arguments, id.
    pub tool_call: ToolCall,
    /// The tool it names, `None` when the agent has no such tool (running it then answers with the
    /// invalid-tool message).
    pub tool: Option<SharedTool>,
    /// Every tool the agent runs (LangChain's `ToolRuntime.tools`).
    pub tools: Arc<[SharedTool]>,
    /// The agent's state as of the step.
    pub state: AgentState,
    /// The tool node's runtime.
    pub runtime: AgentRuntime<C>,
}

impl<C> Clone for ToolCallRequest<C> {
    fn clone(&self) -> Self {
        Self {
            tool_call: self.tool_call.clone(),
            tool: self.tool.clone(),
            tools: Arc::clone(&self.tools),
            state: self.state.clone(),
            runtime: self.runtime.clone(),
        }
    }
}

impl<C> ToolCallRequest<C> {
    /// The called tool's name: the tool's own, or the call's when the agent has no such tool.
    pub fn tool_name(&self) -> &str {
        self.tool.as_ref().map_or(self.tool_call.name.as_str(), |t| Tool::name(t.as_ref()))
    }

    /// Whether a middleware limited to the tools `only` names (every tool when `None`) handles this call.
    pub fn is_for(&self, only: Option<&[String]>) -> bool {
        only.is_none_or(|names| names.iter().any(|name| name == self.tool_name()))
    }

    /// A tool message with status `error` answering this call with `content`.
    pub fn error_reply(&self, content: String) -> ToolCallOutput {
        ToolCallOutput::Message(ToolMessage {
            content: content.into(),
            tool_call_id: self.tool_call.id.clone().unwrap_or_default(),
            name: Some(self.tool_name().to_owned()),
            status: ToolStatus::Error,
            ..ToolMessage::default()
        })
    }
}

impl<C> fmt::Debug for ToolCallRequest<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolCallRequest")
            .field("tool_call", &self.tool_call)
            .field("tool", &self.tool.as_ref().map(|t| Tool::name(t.as_ref()).to_owned()))
            .finish_non_exhaustive()
    }
}

/// The innermost tool call, below every `wrap_tool_call`.
pub(crate) trait ToolExecute<C>: Send + Sync {
    fn call<'a>(&'a self, request: ToolCallRequest<C>) -> BoxFuture<'a, Result<ToolCallOutput>>;
}

/// The rest of the tool-call chain, handed to [`Middleware::wrap_tool_call`]: [`call`](Self::call) runs
/// the inner middleware and the tool. Call it again to retry.
pub struct ToolHandler<'a, C> {
    chain: &'a [Arc<dyn Middleware<C>>],
    base: &'a dyn ToolExecute<C>,
}

impl<C> Clone for ToolHandler<'_, C> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<C> Copy for ToolHandler<'_, C> {}

impl<C> fmt::Debug for ToolHandler<'_, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolHandler").field("remaining", &self.chain.len()).finish()
    }
}

impl<'a, C: Send + Sync + 'static> ToolHandler<'a, C> {
    /// Runs the inner middleware and the tool.
    pub fn call(&self, request: ToolCallRequest<C>) -> BoxFuture<'a, Result<ToolCallOutput>> {
        run_tool_chain(self.chain, self.base, request)
    }
}

/// Runs `chain` around `base`, the first middleware outermost.
pub(crate) fn run_tool_chain<'a, C: Send + Sync + 'static>(
    chain: &'a [Arc<dyn Middleware<C>>],
    base: &'a dyn ToolExecute<C>,
    request: ToolCallRequest<C>,
) -> BoxFuture<'a, Result<ToolCallOutput>> {
    Box::pin(async move {
        let Some((first, rest)) = chain.split_first() else { return base.call(request).await };
        first.wrap_tool_call(request, ToolHandler { chain: rest, base }).await
    })
}
