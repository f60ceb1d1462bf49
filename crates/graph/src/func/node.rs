//! The node that runs an entrypoint's function, and an entrypoint as a node of another graph.

use std::sync::Arc;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use weft_runnable_core::{Error, Result};

use crate::compiled::CompiledGraph;
use crate::func::state::{FuncState, FuncUpdate, FuncValue};
use crate::func::task::{Caller, with_caller};
use crate::func::{Final, FuncError};
use crate::node::{IntoNodeOutput, NodeFn, NodeInput, NodeOutput};
use crate::runtime::Runtime;
use crate::state::State;
use crate::types::Payload;

/// An entrypoint's function, boxed.
pub(crate) type Body<I, O, P> =
    Arc<dyn Fn(I, Option<P>, Runtime) -> BoxFuture<'static, Result<Final<O, P>>> + Send + Sync>;

/// The node of an entrypoint's graph: reads the input and `previous`, runs the function with task calls
/// enabled, writes the return value and the saved value.
pub struct EntrypointNode<I, O, P> {
    name: Arc<str>,
    body: Body<I, O, P>,
}

impl<I, O, P> std::fmt::Debug for EntrypointNode<I, O, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EntrypointNode").field("name", &self.name).finish_non_exhaustive()
    }
}

impl<I: FuncValue, O: FuncValue, P: FuncValue> EntrypointNode<I, O, P> {
    pub(crate) fn new(name: &str, body: Body<I, O, P>) -> Self {
        Self { name: Arc::from(name), body }
    }

    pub(crate) fn into_node(self) -> Arc<dyn NodeFn<FuncState<I, O, P>>> {
        Arc::new(self)
    }
}

impl<I: FuncValue, O: FuncValue, P: FuncValue> NodeFn<FuncState<I, O, P>> for EntrypointNode<I, O, P> {
    fn call<'a>(
        &'a self,
        input: NodeInput<'a, FuncState<I, O, P>>,
        runtime: Runtime,
    ) -> BoxFuture<'a, Result<NodeOutput<FuncState<I, O, P>>>> {
        let previous = match input {
            NodeInput::State(s) => s.previous().cloned(),
            NodeInput::Payload(_) => None,
        };
        // The run's input comes with the task (an entrypoint's graph has no START task writing it).
        let site = crate::pregel::calls::site_of(&runtime);
        let arg = match site.as_ref().and_then(|s| s.input()) {
            None => {
                let err = FuncError::NoInput { entrypoint: self.name.to_string() };
                return futures::future::ready(Err(Error::Custom(Arc::new(err)))).boxed();
            }
            Some(json) => match serde_json::from_value::<I>(json) {
                Ok(arg) => arg,
                Err(e) => {
                    let err = Error::InvalidInput(format!("input of entrypoint '{}': {e}", self.name));
                    return futures::future::ready(Err(err)).boxed();
                }
            },
        };
        let caller = runtime.clone();
        let run = (self.body)(arg, previous, runtime);
        async move {
            let done = match site {
                Some(site) => with_caller(Caller { site, runtime: caller }, run).await,
                None => run.await,
            }?;
            Ok(NodeOutput::Update(FuncUpdate::returned(done.value, done.save)))
        }
        .boxed()
    }

    fn payload_from_json(&self, _value: serde_json::Value) -> Result<Payload> {
        Err(Error::InvalidInput(format!("entrypoint '{}' takes no Send payloads", self.name)))
    }
}

impl<I: FuncValue, O: FuncValue, P: FuncValue> IntoNodeOutput<FuncState<I, O, P>> for FuncUpdate<I, O, P> {
    fn into_node_output(self) -> Result<NodeOutput<FuncState<I, O, P>>> {
        Ok(NodeOutput::Update(self))
    }
}

impl<I: FuncValue, O: FuncValue, P: FuncValue> CompiledGraph<FuncState<I, O, P>> {
    /// This entrypoint as a node of a graph over `S`: the node runs the entrypoint on its state (turned
    /// into the entrypoint's input) and writes what it returns. The entrypoint runs as a subgraph of the
    /// node (with the parent's checkpointer, under the node's namespace): an interrupt inside it pauses the
    /// parent, and the parent's resume continues it, reusing its finished task calls.
    pub fn as_node<S>(&self) -> Arc<dyn NodeFn<S>>
    where
        S: State + serde::Serialize + serde::de::DeserializeOwned + Into<I>,
        O: IntoNodeOutput<S>,
    {
        let graph = self.clone();
        let node = move |state: S, rt: Runtime| {
            let graph = graph.clone();
            async move {
                let out = graph.invoke(FuncUpdate::input(state.into()), rt.config()).await?;
                match out.value.into_value() {
                    Some(value) => value.into_node_output(),
                    None => Ok(NodeOutput::Empty),
                }
            }
        };
        crate::node::IntoNode::into_node(node)
    }
}
