#![doc = include_str!("../README.md")]

pub use weft_runnable_core as core;
pub use weft_runnable_core::*;

/// The graph engine: [`StateGraph`](graph::StateGraph), `#[derive(State)]`, checkpoints, interrupts,
/// streaming, time travel (the `weft-graph` crate). The names most programs use are in the
/// [`prelude`]; the rest (`InMemorySaver`, `ListOptions`, `Send`, ...) are reached as `weft::graph::...`.
pub use weft_graph as graph;

/// Prebuilt agents: [`ToolNode`](agents::ToolNode), [`tools_condition`](agents::tools_condition),
/// [`create_react_agent`](agents::create_react_agent), [`HumanApproval`](agents::HumanApproval) of tool
/// calls, and for models without function calling the text ReAct
/// [`AgentExecutor`](agents::AgentExecutor) (the `weft-agents` crate). The names most programs use are also in the [`prelude`].
pub use weft_agents as agents;

/// SQLite checkpointer and store ([`SqliteSaver`](sqlite::SqliteSaver), [`SqliteStore`](sqlite::SqliteStore));
/// feature `sqlite`.
#[cfg(feature = "sqlite")]
pub use weft_integrations::sqlite;

/// PostgreSQL checkpointer and store; feature `postgres`.
#[cfg(feature = "postgres")]
pub use weft_integrations::postgres;

/// Redis checkpointer and store; feature `redis`.
#[cfg(feature = "redis")]
pub use weft_integrations::redis;

/// OpenAI-compatible chat models and embeddings ([`ChatOpenAI`](openai::ChatOpenAI)); feature `openai`.
#[cfg(feature = "openai")]
pub use weft_integrations::openai;

/// OpenTelemetry export of weft's traces ([`otel::init`]); feature `otel`.
#[cfg(feature = "otel")]
pub use weft_integrations::otel;

/// Model Context Protocol: MCP servers' tools, prompts and resources for weft agents
/// ([`MultiServerMcpClient`](mcp::MultiServerMcpClient)), and weft tools and graphs served over MCP
/// ([`McpServer`](mcp::McpServer)); feature `mcp`.
#[cfg(feature = "mcp")]
pub use weft_integrations::mcp;

/// The HTTP server (LangGraph Platform API) and the studio; feature `server`.
#[cfg(feature = "server")]
pub use weft_server as server;

/// The traits and types most programs use: `use weft::prelude::*;`.
///
/// It holds the traits (`Runnable`, `RunnableExt`, `ChatModel`, `ChatModelExt`, `Tool`, `ToolExt`), the
/// building blocks of a chain (prompts, parsers, lambdas, parallel maps, passthrough, branches), messages,
/// run events and the `#[tool]` attribute; and for graphs `StateGraph`, `START`, `END`, the `State` trait
/// and its derive, `#[node]` and `BoxNode`, `Command`, `Runtime`, `CompileConfig`, `GraphInput`, `StreamMode`,
/// `StreamData`, `MessagesState` and `Messages`; for agents `create_agent` and `Middleware` (the agent's state is
/// `weft::agents::agent::AgentState`), and the older `create_react_agent` with its `AgentState`,
/// `ToolNode`, `tools_condition`, `HumanApproval` and `ApprovalDecision`. It leaves out names that would shadow the standard prelude: write
/// `weft::Result`, and `weft::graph::Send` for a graph's `Send` packet. The test fakes live in
/// [`weft::fakes`](crate::fakes).
///
/// A tool is both a [`Tool`] and a [`Runnable`], and both traits have a `name` method: write
/// `Tool::name(&tool)`.
pub mod prelude {
    pub use weft_agents::{
        AgentState, ApprovalDecision, HumanApproval, Middleware, ToolNode, create_agent, create_react_agent,
        tools_condition,
    };
    pub use weft_graph::{
        BoxNode, Command, CompileConfig, END, GraphInput, Messages, MessagesState, Runtime, START, State,
        StateGraph, StreamData, StreamMode, node,
    };
    pub use weft_runnable_core::{
        AiMessage, BoxRunnable, CallOptions, ChatModel, ChatModelExt, ChatPromptTemplate, Error, EventFilter,
        ExponentialBackoff, HumanMessage, JsonOutputParser, Merge, Message, MessagesPlaceholder,
        PromptTemplate, PromptValue, RunValue, Runnable, RunnableBranch, RunnableConfig, RunnableExt,
        RunnableGenerator, RunnableLambda, RunnableParallel, RunnablePassthrough, StrOutputParser,
        StreamEvent, StructuredOutputMethod, StructuredTool, SystemMessage, Tool, ToolCall, ToolChoice,
        ToolExt, ToolMessage, TypedOutputParser, tool,
    };
}

/// The repository's README, whose snippets must compile and run: they are tested as doc tests here.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct RepositoryReadme;

/// The graph guide (`docs/graph.md`), whose snippets must compile and run: they are tested as doc tests
/// here.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/graph.md")]
pub struct GraphGuide;

/// The MCP guide (`docs/mcp.md`), whose snippets must compile: they are tested as doc tests here.
#[cfg(all(doctest, feature = "mcp"))]
#[doc = include_str!("../../../docs/mcp.md")]
pub struct McpGuide;

/// The agents guide (`docs/agents.md`), whose snippets must compile and run: they are tested as doc tests
/// here.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/agents.md")]
pub struct AgentsGuide;

/// The server guide (`docs/server.md`), whose runnable snippets must compile and run: they are tested as
/// doc tests here (the others are marked `ignore`: they serve until Ctrl-C or need a deployment).
#[cfg(all(doctest, feature = "server"))]
#[doc = include_str!("../../../docs/server.md")]
pub struct ServerGuide;

/// The text ReAct guide (`docs/text-react.md`), whose snippets must compile and run: they are tested as
/// doc tests here.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/text-react.md")]
pub struct TextReactGuide;
