//! [`create_agent`]: LangChain 1.x's agent, a model and tools in a loop with middleware around it.
//!
//! The graph has LangChain's shape and names: a `model` node, a `tools` node (one task per tool call,
//! sent by `Send`), and one node per middleware hook, `<middleware>.before_agent`, `.before_model`,
//! `.after_model`, `.after_agent`. Its state is [`AgentState`]: `messages`, `structured_response`,
//! `jump_to` and the channels the middleware declare.

mod closures;
mod hook_node;
mod middleware;
mod model_node;
mod routing;
mod runtime;
mod state;
mod structured;
mod tools_node;

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use weft_graph::{
    Checkpointer, CompileConfig, CompiledGraph, END, GraphError, PathMap, START, StateGraph, Store,
};
use weft_runnable_core::{ChatModel, Error, SharedTool, SystemMessage, Tool};

pub use closures::{
    FnMiddleware, after_agent, after_model, before_agent, before_model, dynamic_prompt, wrap_model_call,
    wrap_tool_call,
};
pub use middleware::{
    HookResult, Hooks, Middleware, ModelHandler, ModelRequest, ModelResponse, ToolCallRequest, ToolHandler,
};
pub use runtime::{AgentRuntime, ContextType};
pub use state::{AgentState, AgentUpdate, JumpTo, StateChannel, Visibility};
pub use structured::{
    ProviderStrategy, ResponseFormat, SchemaSpec, StructuredErrors, StructuredOutputError, ToolStrategy,
    supports_provider_strategy,
};

use hook_node::HookNode;
use middleware::NodeHook;
use model_node::ModelNode;
use routing::{Ends, Routing, TOOLS};
use tools_node::AgentToolsNode;

use crate::tool_node::ToolNode;

const MODEL: &str = "model";

/// A path map of node names.
fn paths(names: Vec<String>) -> PathMap {
    PathMap::from(names.iter().map(String::as_str).collect::<Vec<_>>())
}

/// Errors of building and running an agent made by [`create_agent`].
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// Two middleware share a name (their nodes would clash).
    #[error("Please remove duplicate middleware instances: {0} appears twice.")]
    DuplicateMiddleware(String),
    /// `context_schema` was called after middleware were added (they are typed by the context).
    #[error("call context_schema before adding middleware: middleware are typed by the agent's context")]
    ContextAfterMiddleware,
    /// A middleware's settings are wrong (a limit of zero, no model to fall back to, ...).
    #[error("invalid {middleware} settings: {message}")]
    InvalidMiddleware {
        /// The middleware.
        middleware: String,
        /// What is wrong.
        message: String,
    },
    /// A request asked for tools the agent cannot run (and no middleware wraps tool calls).
    #[error(
        "Middleware added tools that the agent doesn't know how to execute.\n\nUnknown tools: {unknown:?}\n\
         Registered tools: {available:?}\n\nThis happens when middleware modifies `request.tools` in \
         `wrap_model_call` to include tools that weren't passed to `create_agent()`."
    )]
    UnknownTools {
        /// The tools it does not have.
        unknown: Vec<String>,
        /// The tools it has.
        available: Vec<String>,
    },
    /// A tool strategy named a structured-output tool not declared when the agent was made.
    #[error(
        "ToolStrategy specifies tool '{0}' which wasn't declared in the original response format when \
         creating the agent."
    )]
    UndeclaredOutputTool(String),
    /// The model's structured response was wrong and the strategy does not retry.
    #[error(transparent)]
    StructuredOutput(#[from] StructuredOutputError),
    /// The graph could not be compiled.
    #[error(transparent)]
    Graph(#[from] GraphError),
}

impl From<AgentError> for Error {
    fn from(err: AgentError) -> Self {
        match err {
            AgentError::StructuredOutput(e) => e.into(),
            other => Error::custom(other),
        }
    }
}

/// Builds an agent; made by [`create_agent`] (or [`AgentBuilder::new`] for a typed context), finished
/// by [`build`](Self::build).
pub struct AgentBuilder<C = ()> {
    model: Arc<dyn ChatModel>,
    tools: Vec<SharedTool>,
    system_message: Option<SystemMessage>,
    middleware: Vec<Arc<dyn Middleware<C>>>,
    response_format: Option<ResponseFormat>,
    channels: Vec<StateChannel>,
    compile: CompileConfig,
    name: Option<String>,
    context_after_middleware: bool,
}

impl<C: Send + Sync + 'static> fmt::Debug for AgentBuilder<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentBuilder")
            .field("model", &self.model.model_name())
            .field("tools", &self.tools.iter().map(|t| Tool::name(t.as_ref()).to_owned()).collect::<Vec<_>>())
            .field("system_message", &self.system_message)
            .field("middleware", &self.middleware.iter().map(|m| m.name().into_owned()).collect::<Vec<_>>())
            .field("response_format", &self.response_format)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// An agent that calls tools in a loop until the model stops asking for them (LangChain 1.x's
/// `create_agent`), with middleware around the loop. Set options on the builder, then
/// [`build`](AgentBuilder::build).
///
/// ```
/// use serde_json::json;
/// use weft_agents::agent::AgentState;
/// use weft_agents::create_agent;
/// use weft_runnable_core::fakes::{FakeChatModel, FakeReply};
/// use weft_runnable_core::{Message, RunnableConfig, StructuredTool, ToolExt};
///
/// # tokio_test::block_on(async {
/// let add = StructuredTool::from_fn("add", "Adds.", json!({"type": "object"}), |args, _ctx| async move {
///     Ok(json!(args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)))
/// });
/// let model = FakeChatModel::new([FakeReply::tool_call("add", json!({"a": 2, "b": 3}), "c1"), "5".into()]);
/// let agent = create_agent(model, [add.shared()]).system_prompt("You add numbers.").build().unwrap();
/// let out = agent.invoke(AgentState::update().messages(vec![Message::human("2 + 3?")]), &RunnableConfig::default()).await.unwrap();
/// let kinds: Vec<&str> = out.value.messages().iter().map(Message::type_name).collect();
/// assert_eq!(kinds, ["human", "ai", "tool", "ai"]);
/// # });
/// ```
pub fn create_agent<M: ChatModel + 'static>(
    model: M,
    tools: impl IntoIterator<Item = SharedTool>,
) -> AgentBuilder<()> {
    AgentBuilder::new(model, tools)
}

impl AgentBuilder<()> {
    /// Types the run's context as `C2` (LangChain's `context_schema`); call it before adding middleware.
    pub fn context_schema<C2: ContextType>(self) -> AgentBuilder<C2> {
        AgentBuilder {
            model: self.model,
            tools: self.tools,
            system_message: self.system_message,
            middleware: Vec::new(),
            response_format: self.response_format,
            channels: self.channels,
            compile: self.compile,
            name: self.name,
            context_after_middleware: self.context_after_middleware || !self.middleware.is_empty(),
        }
    }
}

impl<C: ContextType> AgentBuilder<C> {
    /// An agent over `model` and `tools` whose context is a `C`.
    pub fn new<M: ChatModel + 'static>(model: M, tools: impl IntoIterator<Item = SharedTool>) -> Self {
        Self {
            model: Arc::new(model),
            tools: tools.into_iter().collect(),
            system_message: None,
            middleware: Vec::new(),
            response_format: None,
            channels: Vec::new(),
            compile: CompileConfig { recursion_limit: Some(9_999), ..CompileConfig::default() }
                .trace_as_agent(true),
            name: None,
            context_after_middleware: false,
        }
    }

    /// The system prompt put before the conversation at every model call (a text or a
    /// [`SystemMessage`]).
    pub fn system_prompt(mut self, prompt: impl Into<SystemPrompt>) -> Self {
        self.system_message = Some(prompt.into().0);
        self
    }

    /// Adds a middleware (after those already added).
    pub fn middleware(mut self, middleware: impl Middleware<C>) -> Self {
        self.middleware.push(Arc::new(middleware));
        self
    }

    /// Adds a shared middleware.
    pub fn middleware_arc(mut self, middleware: Arc<dyn Middleware<C>>) -> Self {
        self.middleware.push(middleware);
        self
    }

    /// Asks for a structured response (LangChain's `response_format`): a [`ToolStrategy`], a
    /// [`ProviderStrategy`], or a [`SchemaSpec`] whose strategy the model decides.
    pub fn response_format(mut self, format: impl Into<ResponseFormat>) -> Self {
        self.response_format = Some(format.into());
        self
    }

    /// Adds a channel to the state (LangChain's `state_schema` fields).
    pub fn state_channel(mut self, channel: StateChannel) -> Self {
        self.channels.push(channel);
        self
    }

    compile_setters!();

    /// The compile settings, for what the builder does not set (retry policies, retention, cache).
    pub fn compile_config(mut self, f: impl FnOnce(CompileConfig) -> CompileConfig) -> Self {
        self.compile = f(self.compile);
        self
    }

    /// Builds and compiles the graph.
    pub fn build(self) -> Result<CompiledGraph<AgentState>, AgentError> {
        if self.context_after_middleware {
            return Err(AgentError::ContextAfterMiddleware);
        }
        let mut seen = HashSet::new();
        for m in &self.middleware {
            if !seen.insert(m.name().into_owned()) {
                return Err(AgentError::DuplicateMiddleware(m.name().into_owned()));
            }
        }
        let mut graph = StateGraph::with_initial(self.initial_state());
        Assembly::new(&self).assemble(&mut graph, &self)?;
        Ok(graph.compile_with(self.compile.clone())?)
    }

    fn initial_state(&self) -> AgentState {
        let mut channels: Vec<StateChannel> =
            self.middleware.iter().flat_map(|m| m.state_channels()).collect();
        channels.extend(self.channels.iter().cloned());
        AgentState::with_channels(&channels)
    }
}

/// A system prompt: a text or a [`SystemMessage`].
#[derive(Debug, Clone)]
pub struct SystemPrompt(pub(crate) SystemMessage);

impl From<&str> for SystemPrompt {
    fn from(text: &str) -> Self {
        Self(SystemMessage { content: text.into(), ..SystemMessage::default() })
    }
}

impl From<String> for SystemPrompt {
    fn from(text: String) -> Self {
        Self(SystemMessage { content: text.into(), ..SystemMessage::default() })
    }
}

impl From<SystemMessage> for SystemPrompt {
    fn from(message: SystemMessage) -> Self {
        Self(message)
    }
}

/// The middleware sorted by hook, and the loop's ends: what the graph is assembled from.
struct Assembly<C> {
    with: [Vec<Arc<dyn Middleware<C>>>; 4],
    ends: Ends,
}

const HOOKS: [NodeHook; 4] =
    [NodeHook::BeforeAgent, NodeHook::BeforeModel, NodeHook::AfterModel, NodeHook::AfterAgent];

fn node_name<C: Send + Sync + 'static>(m: &Arc<dyn Middleware<C>>, hook: NodeHook) -> String {
    format!("{}.{}", m.name(), hook.suffix())
}

impl<C: ContextType> Assembly<C> {
    fn new(builder: &AgentBuilder<C>) -> Self {
        let with = HOOKS.map(|hook| {
            builder
                .middleware
                .iter()
                .filter(|m| hook.jumps(&m.hooks()).is_some())
                .cloned()
                .collect::<Vec<_>>()
        });
        let [_, before_model, _, after_agent] = &with;
        let loop_entry =
            before_model.first().map_or_else(|| MODEL.to_owned(), |m| node_name(m, NodeHook::BeforeModel));
        let exit = after_agent.last().map_or_else(|| END.to_owned(), |m| node_name(m, NodeHook::AfterAgent));
        Self { ends: Ends { loop_entry, exit }, with }
    }

    fn assemble(
        &self,
        graph: &mut StateGraph<AgentState>,
        builder: &AgentBuilder<C>,
    ) -> Result<(), AgentError> {
        let wrappers = |pick: fn(&Hooks) -> bool| {
            builder.middleware.iter().filter(|m| pick(&m.hooks())).cloned().collect::<Vec<_>>()
        };
        let tool_wrappers = wrappers(|h| h.wrap_tool_call);
        let model_wrappers = wrappers(|h| h.wrap_model_call);
        let mut tools: Vec<SharedTool> = builder.middleware.iter().flat_map(|m| m.tools()).collect();
        tools.extend(builder.tools.iter().cloned());
        let tool_node = ToolNode::new(tools.clone());
        let has_tools = !tools.is_empty() || !tool_wrappers.is_empty();
        let output_tools = match &builder.response_format {
            Some(ResponseFormat::Tool(s)) => s.specs.clone(),
            Some(ResponseFormat::Auto(spec)) => vec![spec.clone()],
            _ => Vec::new(),
        };
        let routing = Routing {
            ends: self.ends.clone(),
            output_tools: output_tools.iter().map(|s| s.name().to_owned()).collect(),
            return_direct: tools
                .iter()
                .filter(|t| t.return_direct())
                .map(|t| Tool::name(t.as_ref()).to_owned())
                .collect(),
            tools: tool_node.tool_names().into_iter().map(str::to_owned).collect(),
        };
        let model = ModelNode {
            model: Arc::clone(&builder.model),
            system_message: builder.system_message.clone(),
            tools,
            known: routing.tools.clone(),
            wraps_tool_calls: !tool_wrappers.is_empty(),
            response_format: builder.response_format.clone(),
            output_tools,
            wrappers: model_wrappers.clone(),
            name: builder.name.clone(),
            default_binding: std::sync::OnceLock::new(),
        };
        graph.add_node(MODEL, Arc::new(model) as Arc<dyn weft_graph::node::NodeFn<AgentState>>);
        if has_tools {
            let all: Arc<[SharedTool]> = Arc::from(tool_node.tools().to_vec());
            let node = AgentToolsNode { node: tool_node, tools: all, wrappers: tool_wrappers };
            graph.add_node(TOOLS, Arc::new(node) as Arc<dyn weft_graph::node::NodeFn<AgentState>>);
        }
        for m in &builder.middleware {
            for hook in HOOKS {
                if hook.jumps(&m.hooks()).is_some() {
                    let node = HookNode { middleware: Arc::clone(m), hook };
                    graph.add_node(
                        node_name(m, hook),
                        Arc::new(node) as Arc<dyn weft_graph::node::NodeFn<AgentState>>,
                    );
                }
            }
        }
        let entry = self.with[0]
            .first()
            .map(|m| node_name(m, NodeHook::BeforeAgent))
            .unwrap_or_else(|| self.ends.loop_entry.clone());
        graph.add_edge(START, entry);
        self.loop_edges(graph, &routing, has_tools, builder, !model_wrappers.is_empty());
        self.hook_edges(graph);
        Ok(())
    }

    /// The edges out of the model's side of the loop and out of the tools.
    fn loop_edges(
        &self,
        graph: &mut StateGraph<AgentState>,
        routing: &Routing,
        has_tools: bool,
        builder: &AgentBuilder<C>,
        wraps_model_calls: bool,
    ) {
        let after_model = &self.with[2];
        let loop_exit =
            after_model.first().map_or_else(|| MODEL.to_owned(), |m| node_name(m, NodeHook::AfterModel));
        let ends = &self.ends;
        if has_tools {
            let mut back = vec![ends.loop_entry.clone()];
            if !routing.return_direct.is_empty() || !routing.output_tools.is_empty() {
                back.push(ends.exit.clone());
            }
            let r = routing.clone();
            graph.add_conditional_edges(TOOLS, move |s: &AgentState| r.tools_to_model(s), paths(back));
            let mut out = vec![TOOLS.to_owned(), ends.exit.clone()];
            if builder.response_format.is_some() || loop_exit != MODEL || wraps_model_calls {
                out.push(ends.loop_entry.clone());
            }
            let r = routing.clone();
            graph.add_conditional_edges(loop_exit, move |s: &AgentState| r.model_to_tools(s), paths(out));
        } else if !routing.output_tools.is_empty() {
            let r = routing.clone();
            let targets = vec![ends.loop_entry.clone(), ends.exit.clone()];
            graph.add_conditional_edges(loop_exit, move |s: &AgentState| r.model_to_model(s), paths(targets));
        } else if loop_exit == MODEL {
            graph.add_edge(MODEL, ends.exit.clone());
        } else if let Some(first) = after_model.first() {
            self.jump_edge(graph, first, NodeHook::AfterModel, &ends.exit);
        }
    }

    /// The chains of hooks: `before_*` in list order, `after_*` in reverse list order.
    fn hook_edges(&self, graph: &mut StateGraph<AgentState>) {
        let [before_agent, before_model, after_model, after_agent] = &self.with;
        for pair in before_agent.windows(2) {
            self.jump_edge(
                graph,
                &pair[0],
                NodeHook::BeforeAgent,
                &node_name(&pair[1], NodeHook::BeforeAgent),
            );
        }
        if let Some(last) = before_agent.last() {
            self.jump_edge(graph, last, NodeHook::BeforeAgent, &self.ends.loop_entry);
        }
        for pair in before_model.windows(2) {
            self.jump_edge(
                graph,
                &pair[0],
                NodeHook::BeforeModel,
                &node_name(&pair[1], NodeHook::BeforeModel),
            );
        }
        if let Some(last) = before_model.last() {
            self.jump_edge(graph, last, NodeHook::BeforeModel, MODEL);
        }
        if let Some(last) = after_model.last() {
            graph.add_edge(MODEL, node_name(last, NodeHook::AfterModel));
        }
        for pair in after_model.windows(2) {
            self.jump_edge(graph, &pair[1], NodeHook::AfterModel, &node_name(&pair[0], NodeHook::AfterModel));
        }
        for pair in after_agent.windows(2) {
            self.jump_edge(graph, &pair[1], NodeHook::AfterAgent, &node_name(&pair[0], NodeHook::AfterAgent));
        }
        if let Some(first) = after_agent.first() {
            self.jump_edge(graph, first, NodeHook::AfterAgent, END);
        }
    }

    /// The edge out of `m`'s `hook` node: to `next`, or, when the hook may jump, wherever it jumps.
    fn jump_edge(
        &self,
        graph: &mut StateGraph<AgentState>,
        m: &Arc<dyn Middleware<C>>,
        hook: NodeHook,
        next: &str,
    ) {
        let name = node_name(m, hook);
        let jumps = hook.jumps(&m.hooks()).map(<[JumpTo]>::to_vec).unwrap_or_default();
        if jumps.is_empty() {
            graph.add_edge(name, next);
            return;
        }
        let mut targets = vec![next.to_owned()];
        if jumps.contains(&JumpTo::End) {
            targets.push(self.ends.exit.clone());
        }
        if jumps.contains(&JumpTo::Tools) {
            targets.push(TOOLS.to_owned());
        }
        if jumps.contains(&JumpTo::Model) && name != self.ends.loop_entry {
            targets.push(self.ends.loop_entry.clone());
        }
        let ends = self.ends.clone();
        let next = next.to_owned();
        graph.add_conditional_edges(name, move |s: &AgentState| ends.after_hook(s, &next), paths(targets));
    }
}
