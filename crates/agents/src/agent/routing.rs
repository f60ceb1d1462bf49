//! The edges of [`create_agent`](crate::create_agent)'s graph: after the model (or its last
//! `after_model` hook), after the tools, after a middleware node that may jump (LangChain's
//! `_make_model_to_tools_edge`, `_make_tools_to_model_edge`, `_make_model_to_model_edge`,
//! `_add_middleware_edge`).

use std::collections::HashSet;

use weft_graph::{END, Route, Send};
use weft_runnable_core::{AiMessage, Message, ToolMessage, ToolStatus};

use super::state::{AgentState, JumpTo};
use crate::tool_node::ToolCallWithContext;

/// The name of the tools node.
pub(crate) const TOOLS: &str = "tools";

/// Where the loop starts again and where it leaves.
#[derive(Debug, Clone)]
pub(crate) struct Ends {
    /// The first `before_model` hook, or `model`.
    pub(crate) loop_entry: String,
    /// The last `after_agent` hook, or `END`.
    pub(crate) exit: String,
}

fn to(node: &str) -> Route {
    if node == END { Route::End } else { Route::Node(node.to_owned()) }
}

impl Ends {
    /// Where `jump` leads (LangChain's `_resolve_jump`).
    pub(crate) fn resolve(&self, jump: Option<JumpTo>) -> Option<Route> {
        match jump? {
            JumpTo::Model => Some(to(&self.loop_entry)),
            JumpTo::End => Some(to(&self.exit)),
            JumpTo::Tools => Some(Route::Node(TOOLS.to_owned())),
        }
    }

    /// After a middleware node: its jump, else its next node.
    pub(crate) fn after_hook(&self, state: &AgentState, next: &str) -> Route {
        self.resolve(state.jump_to()).unwrap_or_else(|| to(next))
    }
}

/// The last AI message and the tool messages after it.
fn last_ai_and_tools(messages: &[Message]) -> Option<(&AiMessage, Vec<&ToolMessage>)> {
    let at = messages.iter().rposition(|m| matches!(m, Message::Ai(_)))?;
    let ai = messages[at].as_ai()?;
    Some((ai, messages[at + 1..].iter().filter_map(Message::as_tool).collect()))
}

/// The routers of one agent.
#[derive(Debug, Clone)]
pub(crate) struct Routing {
    pub(crate) ends: Ends,
    /// The structured-output tools' names.
    pub(crate) output_tools: HashSet<String>,
    /// The tools node's tools that return directly.
    pub(crate) return_direct: HashSet<String>,
    /// The tools node's tools.
    pub(crate) tools: HashSet<String>,
}

impl Routing {
    /// After the model's side of the loop: a jump, the end when the model called no tool, one `Send` to
    /// the tools per pending call, the end after a structured response, else the model again (tool
    /// messages a middleware added).
    pub(crate) fn model_to_tools(&self, state: &AgentState) -> Vec<Route> {
        if let Some(route) = self.ends.resolve(state.jump_to()) {
            return vec![route];
        }
        let Some((ai, answered)) = last_ai_and_tools(state.messages()) else {
            return vec![to(&self.ends.exit)];
        };
        if ai.tool_calls.is_empty() {
            return vec![to(&self.ends.exit)];
        }
        let pending: Vec<Route> = ai
            .tool_calls
            .iter()
            .filter(|c| {
                !answered.iter().any(|t| Some(t.tool_call_id.as_str()) == c.id.as_deref())
                    && !self.output_tools.contains(&c.name)
            })
            .map(|c| Route::Send(Send::new(TOOLS, ToolCallWithContext { tool_call: c.clone(), state: None })))
            .collect();
        if !pending.is_empty() {
            return pending;
        }
        if has_structured_response(state) {
            return vec![to(&self.ends.exit)];
        }
        vec![to(&self.ends.loop_entry)]
    }

    /// Without tools but with structured output: the end once a structured response exists, else the
    /// model again.
    pub(crate) fn model_to_model(&self, state: &AgentState) -> Route {
        if let Some(route) = self.ends.resolve(state.jump_to()) {
            return route;
        }
        if has_structured_response(state) { to(&self.ends.exit) } else { to(&self.ends.loop_entry) }
    }

    /// After the tools: the end when every tool that ran returns directly or a structured-output tool
    /// answered, else the model.
    pub(crate) fn tools_to_model(&self, state: &AgentState) -> Route {
        let Some((ai, answered)) = last_ai_and_tools(state.messages()) else {
            return to(&self.ends.loop_entry);
        };
        let ran: Vec<&str> = ai
            .tool_calls
            .iter()
            .filter_map(|c| {
                // A reviewer may have redirected the call to another tool: the tool message names it.
                let by_message = answered
                    .iter()
                    .find(|t| Some(t.tool_call_id.as_str()) == c.id.as_deref())
                    .and_then(|t| t.name.as_deref())
                    .filter(|n| self.tools.contains(*n));
                Some(by_message.unwrap_or(&c.name)).filter(|n| self.tools.contains(*n))
            })
            .collect();
        if !ran.is_empty() && ran.iter().all(|n| self.return_direct.contains(*n)) {
            return to(&self.ends.exit);
        }
        let structured = answered.iter().any(|t| {
            t.name.as_ref().is_some_and(|n| self.output_tools.contains(n)) && t.status != ToolStatus::Error
        });
        if structured { to(&self.ends.exit) } else { to(&self.ends.loop_entry) }
    }
}

/// Whether a structured response exists (`null`, written by a turn without one, does not count).
fn has_structured_response(state: &AgentState) -> bool {
    state.structured_response().is_some_and(|v| !v.is_null())
}
