//! Subgraphs: a compiled graph used as a node, or invoked inside a node.
//!
//! A subgraph run finds a `ParentRun` in its config's extensions (put there by the parent for each task).
//! It inherits the parent's checkpointer when it has none of its own, saves its checkpoints under the
//! namespace `<node>:<task id>` (nested with `|`), shares the parent's resume values, and resumes from its
//! own checkpoint when the parent is resuming, so the subgraph's finished nodes are not re-run.

use std::sync::Arc;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use serde_json::Value;
use weft_runnable_core::{Error, Result};

use crate::compiled::{CompiledGraph, GraphInput};
use crate::node::{IntoNode, NodeFn, NodeInput, NodeOutput};
use crate::runtime::Runtime;
use crate::state::State;
use crate::types::Payload;

mod reader;

pub use crate::parent_command::ParentCommand;
pub use crate::subgraph_reader::SubgraphStateReader;

/// Marker of the [`IntoNode`] implementation for compiled graphs.
#[derive(Debug)]
pub struct SubgraphMarker<C>(std::marker::PhantomData<fn(C)>);

struct SubgraphNode<C: State> {
    graph: CompiledGraph<C>,
}

/// A `Send` packet (an object keyed by channel names) as an update of the subgraph's state; keys the
/// subgraph lacks are dropped.
fn payload_update<C: State>(payload: &Payload, child: &C) -> Result<C::Update> {
    let json = payload.to_json().map_err(Error::Serialization)?;
    let Value::Object(fields) = json else {
        return Err(Error::InvalidInput(format!(
            "a Send to a subgraph carries an object of its channels, not {json}"
        )));
    };
    let writes = fields.into_iter().filter_map(|(k, v)| Some((child.channel_index(&k)?, v))).collect();
    child.update_from_json(writes).map_err(|e| Error::Serialization(e.to_string()))
}

/// A state's non-empty tracked channels by name.
fn named_values<C: State>(state: &C) -> Result<Vec<(String, Value)>> {
    let mut out = Vec::new();
    for (i, spec) in state.channels().iter().enumerate() {
        if !spec.kind.is_tracked() {
            continue;
        }
        if let Some(v) = state.channel_to_json(i).map_err(|e| Error::Serialization(e.to_string()))? {
            out.push((spec.name.to_string(), v));
        }
    }
    Ok(out)
}

/// Maps the shared channels of `from` (by name) into an update of `to`'s state type.
fn map_state<A: State, B: State>(from: &A, to: &B) -> Result<B::Update> {
    let mut writes = Vec::new();
    for (i, spec) in from.channels().iter().enumerate() {
        if let Some(j) = to.channel_index(&spec.name) {
            if let Some(v) = from.channel_to_json(i).map_err(|e| Error::Serialization(e.to_string()))? {
                writes.push((j, v));
            }
        }
    }
    to.update_from_json(writes).map_err(|e| Error::Serialization(e.to_string()))
}

impl<S: State, C: State> NodeFn<S> for SubgraphNode<C> {
    fn call<'a>(&'a self, input: NodeInput<'a, S>, runtime: Runtime) -> BoxFuture<'a, Result<NodeOutput<S>>> {
        async move {
            let child_initial = &self.graph.inner.spec.initial;
            let parent_state = match input {
                NodeInput::State(parent_state) => parent_state,
                // A `Send`: its packet is the subgraph's input (its keys naming the subgraph's channels),
                // and the channels the subgraph has at the end go back to the parent by name.
                NodeInput::Payload(payload) => {
                    if payload.as_command::<S>().is_some() {
                        return Err(Error::InvalidInput(format!(
                            "a Send to subgraph node '{}' carries a Command; a subgraph takes an object of \
                             its channels",
                            runtime.node()
                        )));
                    }
                    let update = payload_update(&payload, child_initial)?;
                    let out = self
                        .graph
                        .invoke(GraphInput::Update(vec![update]), runtime.config())
                        .await
                        .map_err(Error::from)?;
                    return Ok(NodeOutput::Writes(named_values(&out.value)?));
                }
            };
            let update = map_state(parent_state, child_initial)?;
            // A pause of the subgraph comes back as `GraphError::Interrupted`, which `?` turns into the
            // node's own pause.
            let out = self
                .graph
                .invoke(GraphInput::Update(vec![update]), runtime.config())
                .await
                .map_err(Error::from)?;
            Ok(NodeOutput::Update(map_state(&out.value, parent_state)?))
        }
        .boxed()
    }

    fn payload_from_json(&self, value: Value) -> Result<Payload> {
        Ok(Payload::new(value))
    }

    fn subgraph(&self) -> Option<&dyn SubgraphStateReader> {
        Some(&self.graph)
    }
}

impl<S: State, C: State> IntoNode<S, SubgraphMarker<C>> for CompiledGraph<C> {
    fn into_node(self) -> Arc<dyn NodeFn<S>> {
        Arc::new(SubgraphNode { graph: self })
    }
}
