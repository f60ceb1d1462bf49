//! # weft-agents
//!
//! Prebuilt agents, built from the public API of `weft-runnable-core` and `weft-graph` only.
//!
//! - [`create_agent`]: LangChain 1.x's agent with [`Middleware`] around its loop ([`agent`]), and the
//!   built-in middleware ([`middleware`]): human review, summarization, limits, retries, fallbacks, PII,
//!   planning, tool selection, context editing.
//! - [`ToolRuntime`]: what a tool running in a tool node reaches.
//! - [`ToolNode`]: a graph node that runs the tool calls of the last AI message concurrently and answers
//!   each with a tool message, with LangGraph's error policy, commands and injected arguments.
//! - [`tools_condition`]: routes to the tool node while the model asks for tools.
//! - [`create_react_agent`] (LangGraph's older prebuilt): the tool-calling agent loop (prompt, structured
//!   response, pre- and post-model hooks, checkpointer, store, breakpoints, v1/v2 tool dispatch), with
//!   [`HumanApproval`] of chosen tool calls.
//! - [`text_react`]: the classic text ReAct loop for models without function calling,
//!   [`AgentExecutor`] with [`create_text_react_agent`].
//!
//! The guide with runnable examples is `docs/agents.md` in the repository; `weft::agents` re-exports this
//! crate.

#[macro_use]
mod setters;

pub mod agent;
mod approval;
pub mod middleware;
mod react_agent;
mod state;
pub mod text_react;
mod tool_node;
mod tool_runtime;
mod tools_condition;

pub use agent::{AgentBuilder, AgentError, Middleware, create_agent};
pub use approval::{ActionRequest, ApprovalDecision, ApprovalError, ApprovalRequest, HumanApproval};
pub use react_agent::{
    AgentVersion, NEED_MORE_STEPS, Prompt, ReactAgentBuilder, ReactAgentError, create_react_agent,
};
pub use state::{AgentState, AgentStateUpdate, HasMessages, ReactAgentState};
pub use weft_macros::HasMessages;

#[doc(hidden)]
pub mod __private {
    //! Re-exports used by weft's macros. Not a public API.
    pub use weft_graph as graph;
}
pub use text_react::{AgentExecutor, create_text_react_agent};
pub use tool_node::{
    HandleToolErrors, ToolCallWithContext, ToolNode, ToolNodeError, ToolNodeMarker,
    invalid_tool_call_message, invalid_tool_call_text, invalid_tool_text, pending_invalid_tool_calls,
    pending_tool_calls, tool_command, tool_runtime, tool_store,
};
pub use tool_runtime::ToolRuntime;
pub use tools_condition::{route_messages, tools_condition};

/// The crate's README, whose example is tested as a doc test so that it cannot fall out of date.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
