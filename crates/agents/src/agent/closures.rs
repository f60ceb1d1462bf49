//! Middleware of one hook made from a closure (LangChain's `@before_model`, `@after_model`,
//! `@dynamic_prompt`, `@wrap_model_call`, `@wrap_tool_call` decorators).

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use futures::future::BoxFuture;
use weft_runnable_core::{Result, ToolCallOutput};

use super::SystemPrompt;
use super::middleware::{
    HookResult, Hooks, Middleware, ModelHandler, ModelRequest, ModelResponse, NodeHook, ToolCallRequest,
    ToolHandler,
};
use super::runtime::AgentRuntime;
use super::state::{AgentState, JumpTo, StateChannel};

type NodeFn<C> = dyn Fn(&AgentState, &AgentRuntime<C>) -> HookResult + Send + Sync;
type ModelWrapFn<C> = dyn for<'a> Fn(ModelRequest<C>, ModelHandler<'a, C>) -> BoxFuture<'a, Result<ModelResponse>>
    + Send
    + Sync;
type ToolWrapFn<C> = dyn for<'a> Fn(ToolCallRequest<C>, ToolHandler<'a, C>) -> BoxFuture<'a, Result<ToolCallOutput>>
    + Send
    + Sync;

enum Body<C> {
    Node(NodeHook, Arc<NodeFn<C>>),
    WrapModel(Arc<ModelWrapFn<C>>),
    WrapTool(Arc<ToolWrapFn<C>>),
}

/// A middleware of one hook, made from a closure by [`before_model`], [`after_model`],
/// [`before_agent`], [`after_agent`], [`dynamic_prompt`], [`wrap_model_call`] or [`wrap_tool_call`].
pub struct FnMiddleware<C = ()> {
    name: String,
    hooks: Hooks,
    channels: Vec<StateChannel>,
    body: Body<C>,
}

impl<C> fmt::Debug for FnMiddleware<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FnMiddleware")
            .field("name", &self.name)
            .field("hooks", &self.hooks)
            .finish_non_exhaustive()
    }
}

impl<C> FnMiddleware<C> {
    /// Lets the hook jump to `targets` (LangChain's `can_jump_to`).
    #[must_use]
    pub fn can_jump_to(mut self, targets: impl IntoIterator<Item = JumpTo>) -> Self {
        self.hooks = self.hooks.can_jump_to(targets);
        self
    }

    /// Adds a channel to the agent's state (LangChain's `state_schema` of a decorated hook).
    #[must_use]
    pub fn state_channel(mut self, channel: StateChannel) -> Self {
        self.channels.push(channel);
        self
    }
}

fn node<C>(name: impl Into<String>, hook: NodeHook, hooks: Hooks, f: Arc<NodeFn<C>>) -> FnMiddleware<C> {
    FnMiddleware { name: name.into(), hooks, channels: Vec::new(), body: Body::Node(hook, f) }
}

/// A middleware named `name` whose `before_model` hook is `f`.
///
/// ```
/// use weft_agents::agent::{AgentUpdate, JumpTo, before_model};
/// use weft_runnable_core::Message;
///
/// let stop = before_model("stop_after_ten", |state, _rt| {
///     Ok((state.messages().len() >= 10)
///         .then(|| AgentUpdate::new().messages(vec![Message::ai("Done.")]).jump_to(JumpTo::End)))
/// })
/// .can_jump_to([JumpTo::End]);
/// # let _: weft_agents::agent::FnMiddleware = stop;
/// ```
pub fn before_model<C>(
    name: impl Into<String>,
    f: impl Fn(&AgentState, &AgentRuntime<C>) -> HookResult + Send + Sync + 'static,
) -> FnMiddleware<C> {
    node(name, NodeHook::BeforeModel, Hooks::new().before_model(), Arc::new(f))
}

/// A middleware named `name` whose `after_model` hook is `f`.
pub fn after_model<C>(
    name: impl Into<String>,
    f: impl Fn(&AgentState, &AgentRuntime<C>) -> HookResult + Send + Sync + 'static,
) -> FnMiddleware<C> {
    node(name, NodeHook::AfterModel, Hooks::new().after_model(), Arc::new(f))
}

/// A middleware named `name` whose `before_agent` hook is `f`.
pub fn before_agent<C>(
    name: impl Into<String>,
    f: impl Fn(&AgentState, &AgentRuntime<C>) -> HookResult + Send + Sync + 'static,
) -> FnMiddleware<C> {
    node(name, NodeHook::BeforeAgent, Hooks::new().before_agent(), Arc::new(f))
}

/// A middleware named `name` whose `after_agent` hook is `f`.
pub fn after_agent<C>(
    name: impl Into<String>,
    f: impl Fn(&AgentState, &AgentRuntime<C>) -> HookResult + Send + Sync + 'static,
) -> FnMiddleware<C> {
    node(name, NodeHook::AfterAgent, Hooks::new().after_agent(), Arc::new(f))
}

/// A middleware named `name` wrapping every model call with `f`.
///
/// ```
/// use weft_agents::agent::wrap_model_call;
///
/// // Calls the model once more when the first call fails.
/// let retry_once = wrap_model_call("retry_once", |request, next| {
///     Box::pin(async move {
///         match next.call(request.clone()).await {
///             Ok(response) => Ok(response),
///             Err(_) => next.call(request).await,
///         }
///     })
/// });
/// # let _: weft_agents::agent::FnMiddleware = retry_once;
/// ```
pub fn wrap_model_call<C, F>(name: impl Into<String>, f: F) -> FnMiddleware<C>
where
    F: for<'a> Fn(ModelRequest<C>, ModelHandler<'a, C>) -> BoxFuture<'a, Result<ModelResponse>>
        + Send
        + Sync
        + 'static,
{
    FnMiddleware {
        name: name.into(),
        hooks: Hooks::new().wrap_model_call(),
        channels: Vec::new(),
        body: Body::WrapModel(Arc::new(f)),
    }
}

/// A middleware named `name` wrapping every tool call with `f`.
pub fn wrap_tool_call<C, F>(name: impl Into<String>, f: F) -> FnMiddleware<C>
where
    F: for<'a> Fn(ToolCallRequest<C>, ToolHandler<'a, C>) -> BoxFuture<'a, Result<ToolCallOutput>>
        + Send
        + Sync
        + 'static,
{
    FnMiddleware {
        name: name.into(),
        hooks: Hooks::new().wrap_tool_call(),
        channels: Vec::new(),
        body: Body::WrapTool(Arc::new(f)),
    }
}

/// A middleware named `name` that sets the system prompt of every model call to what `f` makes of the
/// request (LangChain's `@dynamic_prompt`).
///
/// ```
/// use weft_agents::agent::dynamic_prompt;
///
/// let prompt = dynamic_prompt("by_length", |request: &weft_agents::agent::ModelRequest| {
///     if request.messages.len() > 10 { "Be brief." } else { "Be thorough." }
/// });
/// # let _ = prompt;
/// ```
pub fn dynamic_prompt<C: Send + Sync + 'static, P: Into<SystemPrompt>>(
    name: impl Into<String>,
    f: impl Fn(&ModelRequest<C>) -> P + Send + Sync + 'static,
) -> FnMiddleware<C> {
    let f = Arc::new(f);
    wrap_model_call(name, move |mut request: ModelRequest<C>, next: ModelHandler<'_, C>| {
        request.system_message = Some(f(&request).into().0);
        next.call(request)
    })
}

#[async_trait]
impl<C: Send + Sync + 'static> Middleware<C> for FnMiddleware<C> {
    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed(&self.name)
    }

    fn hooks(&self) -> Hooks {
        self.hooks.clone()
    }

    fn state_channels(&self) -> Vec<StateChannel> {
        self.channels.clone()
    }

    async fn before_agent(&self, state: &AgentState, runtime: &AgentRuntime<C>) -> HookResult {
        self.run_node(NodeHook::BeforeAgent, state, runtime)
    }

    async fn before_model(&self, state: &AgentState, runtime: &AgentRuntime<C>) -> HookResult {
        self.run_node(NodeHook::BeforeModel, state, runtime)
    }

    async fn after_model(&self, state: &AgentState, runtime: &AgentRuntime<C>) -> HookResult {
        self.run_node(NodeHook::AfterModel, state, runtime)
    }

    async fn after_agent(&self, state: &AgentState, runtime: &AgentRuntime<C>) -> HookResult {
        self.run_node(NodeHook::AfterAgent, state, runtime)
    }

    async fn wrap_model_call(
        &self,
        request: ModelRequest<C>,
        next: ModelHandler<'_, C>,
    ) -> Result<ModelResponse> {
        match &self.body {
            Body::WrapModel(f) => f(request, next).await,
            _ => next.call(request).await,
        }
    }

    async fn wrap_tool_call(
        &self,
        request: ToolCallRequest<C>,
        next: ToolHandler<'_, C>,
    ) -> Result<ToolCallOutput> {
        match &self.body {
            Body::WrapTool(f) => f(request, next).await,
            _ => next.call(request).await,
        }
    }
}

impl<C: Send + Sync + 'static> FnMiddleware<C> {
    fn run_node(&self, hook: NodeHook, state: &AgentState, runtime: &AgentRuntime<C>) -> HookResult {
        match &self.body {
            Body::Node(h, f) if *h == hook => f(state, runtime),
            _ => Ok(None),
        }
    }
}
