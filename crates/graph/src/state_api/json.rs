//! The state calls whose config's `checkpoint_ns` may name a subgraph, handed to that subgraph as
//! LangGraph hands them: the typed calls when the subgraph has the same state type, the JSON calls
//! (`get_state_json`, `get_state_history_json`, `update_state_json`) for any subgraph.

use std::sync::Arc;

use serde_json::Value;
use weft_runnable_core::RunnableConfig;

use super::{JsonSnapshot, thread_of};
use crate::checkpoint::{CheckpointConfig, Checkpointer, ListOptions};
use crate::compiled::CompiledGraph;
use crate::error::{GraphError, GraphResult};
use crate::state::State;
use crate::subgraph::SubgraphStateReader;

/// The graph a JSON state call addresses: the reader, the checkpointer it is lent (when it is a subgraph)
/// and the address.
struct JsonTarget {
    reader: Arc<dyn SubgraphStateReader>,
    lent: Option<Arc<dyn Checkpointer>>,
    address: CheckpointConfig,
}

/// The graph a typed state call addresses, where its checkpoints are, and their address.
pub(super) struct Addressed<S: State> {
    pub(super) graph: CompiledGraph<S>,
    pub(super) saver: Arc<dyn Checkpointer>,
    pub(super) address: CheckpointConfig,
}

impl<S: State> CompiledGraph<S> {
    /// [`get_state`](CompiledGraph::get_state) (with subgraph snapshots nested when `subgraphs` is set) with
    /// the values as JSON, so that it can read any subgraph: when the config's `checkpoint_ns` names a
    /// subgraph of this graph (`node:<task id>`, as a task's [`TaskState::Config`](super::TaskState)
    /// gives it), the subgraph reads its own checkpoints, as LangGraph's `get_state` hands the call to it.
    pub async fn get_state_json(
        &self,
        config: &RunnableConfig,
        subgraphs: bool,
    ) -> GraphResult<JsonSnapshot> {
        let JsonTarget { reader, lent, address } = self.json_target(config)?;
        reader.state_json(lent, address, subgraphs).await
    }

    /// [`get_state_history`](CompiledGraph::get_state_history) with the values as JSON, handed to the
    /// subgraph the config's `checkpoint_ns` names, if any (see [`get_state_json`](Self::get_state_json)).
    pub async fn get_state_history_json(
        &self,
        config: &RunnableConfig,
        options: ListOptions,
    ) -> GraphResult<Vec<JsonSnapshot>> {
        let JsonTarget { reader, lent, address } = self.json_target(config)?;
        reader.history_json(lent, address, options).await
    }

    /// [`update_state`](CompiledGraph::update_state) with the values as a JSON object keyed by channel
    /// name (keys the state lacks are dropped, with a warning, as LangGraph ignores them), handed to the
    /// subgraph the config's `checkpoint_ns` names, if any (see [`get_state_json`](Self::get_state_json)).
    pub async fn update_state_json(
        &self,
        config: &RunnableConfig,
        values: Value,
        as_node: Option<&str>,
    ) -> GraphResult<CheckpointConfig> {
        let JsonTarget { reader, lent, address } = self.json_target(config)?;
        reader.update_json(lent, address, values, as_node.map(str::to_owned)).await
    }

    /// The graph a JSON state call addresses: the subgraph the `checkpoint_ns` names (lent this graph's
    /// checkpointer), or this graph.
    fn json_target(&self, config: &RunnableConfig) -> GraphResult<JsonTarget> {
        let address = thread_of(config)?;
        Ok(match self.subgraph_at(&address.checkpoint_ns) {
            Some(reader) => JsonTarget { reader, lent: Some(Arc::clone(self.saver()?)), address },
            None => JsonTarget { reader: self.shared(), lent: None, address },
        })
    }

    /// The graph a typed state call addresses: this one, or the subgraph the `checkpoint_ns` names when
    /// its state type is `S` (an error names the namespace otherwise).
    pub(super) fn addressed(&self, config: &RunnableConfig) -> GraphResult<Addressed<S>> {
        let address = thread_of(config)?;
        let saver = Arc::clone(self.saver()?);
        let Some(subgraph) = self.subgraph_at(&address.checkpoint_ns) else {
            return Ok(Addressed { graph: self.clone(), saver, address });
        };
        let Some(graph) = subgraph.as_any().downcast_ref::<CompiledGraph<S>>().cloned() else {
            return Err(GraphError::SubgraphStateType { checkpoint_ns: address.checkpoint_ns });
        };
        let saver = graph.state_saver(Some(saver))?;
        let address = graph.own_address(address);
        Ok(Addressed { graph, saver, address })
    }

    /// A JSON object keyed by channel name as an update of this graph's state.
    pub(crate) fn update_from_json(&self, values: Value) -> GraphResult<S::Update> {
        let Value::Object(fields) = values else {
            return Err(GraphError::Serialization(format!(
                "an update is an object keyed by channel name, not {values}"
            )));
        };
        let state = &self.inner.spec.initial;
        let mut writes = Vec::with_capacity(fields.len());
        for (name, value) in fields {
            match state.channel_index(&name) {
                Some(index) => writes.push((index, value)),
                None => {
                    tracing::warn!(channel = %name, "dropping a write to a channel the state does not declare")
                }
            }
        }
        state.update_from_json(writes).map_err(|e| GraphError::Serialization(e.to_string()))
    }
}
