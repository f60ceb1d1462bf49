//! [`tools_condition`]: the router between a model node and a tool node.

use weft_graph::END;
use weft_runnable_core::{Error, Message, Result};

use crate::state::HasMessages;
use crate::tool_node::ToolNodeError;

/// Routes to `"tools"` when the last message is an AI message with tool calls, else to `END`
/// (LangGraph's `tools_condition`); a state without messages is an error. Calls whose arguments could not
/// be parsed (`invalid_tool_calls`) count: the tool node answers them with the parse error, so that the
/// model can try again (LangGraph ends the run there, with nothing said to the model).
///
/// ```
/// use weft_agents::tools_condition;
/// use weft_graph::{END, MessagesState, START, StateGraph};
///
/// let mut graph = StateGraph::<MessagesState>::new();
/// graph.add_node("agent", |_s: MessagesState| ());
/// graph.add_node("tools", |_s: MessagesState| ());
/// graph.add_edge(START, "agent");
/// graph.add_conditional_edges("agent", tools_condition, ["tools", END]);
/// graph.add_edge("tools", "agent");
/// assert!(graph.compile().is_ok());
/// ```
pub fn tools_condition<S: HasMessages>(state: &S) -> Result<&'static str> {
    route_messages(state.messages())
}

/// [`tools_condition`] on a bare message list.
pub fn route_messages(messages: &[Message]) -> Result<&'static str> {
    let last = messages.last().ok_or_else(|| Error::custom(ToolNodeError::NoMessages))?;
    let calls_tools =
        last.as_ai().is_some_and(|ai| !ai.tool_calls.is_empty() || !ai.invalid_tool_calls.is_empty());
    Ok(if calls_tools { "tools" } else { END })
}
