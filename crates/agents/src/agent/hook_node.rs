//! A middleware's node hook as a graph node (`<middleware>.before_model`, ...).

use std::sync::Arc;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use serde_json::Value;
use weft_graph::node::{NodeFn, NodeInput};
use weft_graph::{NodeOutput, Payload, Runtime};
use weft_runnable_core::{Error, Result};

use super::middleware::{Middleware, NodeHook};
use super::model_node::ModelNode;
use super::runtime::{AgentRuntime, ContextType};
use super::state::AgentState;

/// One node hook of one middleware.
pub(crate) struct HookNode<C> {
    pub(crate) middleware: Arc<dyn Middleware<C>>,
    pub(crate) hook: NodeHook,
}

/// The state a node got from an edge; agent nodes are never the target of a `Send`.
fn state_of<'a>(input: NodeInput<'a, AgentState>) -> Result<&'a AgentState> {
    match input {
        NodeInput::State(state) => Ok(state),
        NodeInput::Payload(payload) => Err(Error::InvalidInput(format!(
            "an agent node runs on the agent's state, not on a Send carrying {}",
            payload.type_name()
        ))),
    }
}

impl<C: ContextType> NodeFn<AgentState> for HookNode<C> {
    fn call<'a>(
        &'a self,
        input: NodeInput<'a, AgentState>,
        runtime: Runtime,
    ) -> BoxFuture<'a, Result<NodeOutput<AgentState>>> {
        async move {
            let state = state_of(input)?;
            let rt = AgentRuntime::<C>::new(runtime)?;
            let m = &self.middleware;
            let update = match self.hook {
                NodeHook::BeforeAgent => m.before_agent(state, &rt).await?,
                NodeHook::BeforeModel => m.before_model(state, &rt).await?,
                NodeHook::AfterModel => m.after_model(state, &rt).await?,
                NodeHook::AfterAgent => m.after_agent(state, &rt).await?,
            };
            Ok(update.map_or(NodeOutput::Empty, NodeOutput::Update))
        }
        .boxed()
    }

    fn payload_from_json(&self, _value: Value) -> Result<Payload> {
        Err(Error::InvalidInput("an agent's middleware node takes no Send".to_owned()))
    }
}

impl<C: ContextType> NodeFn<AgentState> for ModelNode<C> {
    fn call<'a>(
        &'a self,
        input: NodeInput<'a, AgentState>,
        runtime: Runtime,
    ) -> BoxFuture<'a, Result<NodeOutput<AgentState>>> {
        async move { self.run(state_of(input)?, runtime).await }.boxed()
    }

    fn payload_from_json(&self, _value: Value) -> Result<Payload> {
        Err(Error::InvalidInput("an agent's model node takes no Send".to_owned()))
    }
}
