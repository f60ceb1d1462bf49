//! The `tools` node of [`create_agent`](crate::create_agent): a [`ToolNode`] whose calls run through the
//! middleware's `wrap_tool_call` chain (LangChain's `ToolNode(tools, wrap_tool_call=...)`).

use std::sync::Arc;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use serde_json::Value;
use weft_graph::node::{NodeFn, NodeInput};
use weft_graph::{NodeOutput, Payload, Runtime};
use weft_runnable_core::{Error, Result, SharedTool, ToolCall, ToolCallOutput};

use super::middleware::{Middleware, ToolCallRequest, ToolExecute, run_tool_chain};
use super::runtime::{AgentRuntime, ContextType};
use super::state::AgentState;
use crate::state::state_json;
use crate::tool_node::{
    ToolCallWithContext, ToolNode, ToolNodeError, node_output, pending_tool_calls, task_context,
};

/// The agent's tools node.
pub(crate) struct AgentToolsNode<C> {
    pub(crate) node: ToolNode,
    pub(crate) tools: Arc<[SharedTool]>,
    pub(crate) wrappers: Vec<Arc<dyn Middleware<C>>>,
}

impl<C: ContextType> AgentToolsNode<C> {
    async fn run(
        &self,
        calls: Vec<ToolCall>,
        state: &AgentState,
        runtime: Runtime,
    ) -> Result<NodeOutput<AgentState>> {
        let agent_runtime = AgentRuntime::<C>::new(runtime)?;
        let runs = calls.iter().map(|call| {
            let request = ToolCallRequest {
                tool_call: call.clone(),
                tool: self.node.tool(&call.name).cloned(),
                tools: Arc::clone(&self.tools),
                state: state.clone(),
                runtime: agent_runtime.clone(),
            };
            run_tool_chain(&self.wrappers, self, request)
        });
        let mut outputs = Vec::with_capacity(calls.len());
        for result in futures::future::join_all(runs).await {
            outputs.push(result?);
        }
        node_output::<AgentState>(outputs, &calls)
    }
}

impl<C: ContextType> ToolExecute<C> for AgentToolsNode<C> {
    fn call<'a>(&'a self, request: ToolCallRequest<C>) -> BoxFuture<'a, Result<ToolCallOutput>> {
        Box::pin(async move {
            let ToolCallRequest { tool_call, tool, state, runtime, .. } = request;
            let needs_state = tool.as_ref().is_some_and(|t| {
                t.injected_args().iter().any(|a| {
                    matches!(
                        a.source,
                        weft_runnable_core::Injection::State | weft_runnable_core::Injection::StateKey(_)
                    )
                })
            });
            let json = if needs_state { Some(state_json(&state)?) } else { None };
            let ctx = task_context(runtime.graph(), Some(&state), json);
            self.node.run_tool(tool.as_ref(), tool_call, ctx).await
        })
    }
}

impl<C: ContextType> NodeFn<AgentState> for AgentToolsNode<C> {
    fn call<'a>(
        &'a self,
        input: NodeInput<'a, AgentState>,
        runtime: Runtime,
    ) -> BoxFuture<'a, Result<NodeOutput<AgentState>>> {
        async move {
            match input {
                // `jump_to: tools` runs the node from an edge: every pending call of the last AI message.
                NodeInput::State(state) => {
                    let (_, calls) = pending_tool_calls(state.messages())
                        .ok_or_else(|| Error::custom(ToolNodeError::NoAiMessage))?;
                    self.run(calls, state, runtime).await
                }
                NodeInput::Payload(payload) => Err(Error::custom(ToolNodeError::UnexpectedPayload(format!(
                    "{} without the state",
                    payload.type_name()
                )))),
            }
        }
        .boxed()
    }

    fn call_sent<'a>(
        &'a self,
        payload: Payload,
        state: &'a AgentState,
        runtime: Runtime,
    ) -> BoxFuture<'a, Result<NodeOutput<AgentState>>> {
        async move {
            let sent = payload.downcast_ref::<ToolCallWithContext>().ok_or_else(|| {
                Error::custom(ToolNodeError::UnexpectedPayload(payload.type_name().to_owned()))
            })?;
            self.run(vec![sent.tool_call.clone()], state, runtime).await
        }
        .boxed()
    }

    fn payload_from_json(&self, value: Value) -> Result<Payload> {
        Ok(Payload::new(serde_json::from_value::<ToolCallWithContext>(value)?))
    }
}
