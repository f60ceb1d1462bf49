//! Reading and writing a subgraph's state without knowing its state type: `get_state` nesting subgraph
//! snapshots, and the state calls a parent hands to the subgraph its `checkpoint_ns` names.

use std::any::Any;
use std::sync::Arc;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use serde_json::Value;

use crate::checkpoint::{CheckpointConfig, Checkpointer, ListOptions};
use crate::compiled::{CompiledGraph, SubgraphCheckpoints};
use crate::error::{GraphError, GraphResult};
use crate::state::State;
use crate::state_api::{JsonSnapshot, TaskState};

use crate::subgraph_reader::SubgraphStateReader;

impl<C: State> CompiledGraph<C> {
    /// The checkpointer this graph's state calls use: its own for a call of its own (`lent` is `None`);
    /// as a subgraph, its own or else its parent's, none when it keeps no checkpoints.
    pub(crate) fn state_saver(
        &self,
        lent: Option<Arc<dyn Checkpointer>>,
    ) -> GraphResult<Arc<dyn Checkpointer>> {
        let own = self.inner.config.checkpointer.clone();
        let saver = match (lent, self.inner.config.subgraph_checkpoints) {
            (None, _) => own,
            (Some(_), SubgraphCheckpoints::Never) => None,
            (Some(lent), _) => own.or(Some(lent)),
        };
        saver.ok_or_else(|| GraphError::Checkpoint("no checkpointer set".to_owned()))
    }

    /// Where this graph, called as a subgraph at `address`, keeps its checkpoints: a
    /// [`SubgraphCheckpoints::PerNode`] subgraph keeps one history per node, its namespace without task
    /// ids (`parent|child`); others keep them at the task's namespace.
    pub(crate) fn own_address(&self, mut address: CheckpointConfig) -> CheckpointConfig {
        if self.inner.config.subgraph_checkpoints == SubgraphCheckpoints::PerNode {
            let names: Vec<&str> =
                address.checkpoint_ns.split('|').map(|part| part.split(':').next().unwrap_or(part)).collect();
            address.checkpoint_ns = names.join("|");
        }
        address
    }

    /// The subgraph a `checkpoint_ns` names, found by node names (task ids and the numbers of a node's
    /// later subgraph calls left out, as LangGraph's `recast_checkpoint_ns` does): `sub:<id>` names node
    /// `sub`'s subgraph, `sub:<id>|inner:<id>` node `inner` of that subgraph. `None` for the empty
    /// namespace and for one that names no subgraph of this graph.
    pub(crate) fn subgraph_at(&self, checkpoint_ns: &str) -> Option<Arc<dyn SubgraphStateReader>> {
        let mut names = checkpoint_ns
            .split('|')
            .filter(|part| !part.is_empty() && !part.bytes().all(|b| b.is_ascii_digit()))
            .map(|part| part.split(':').next().unwrap_or(part));
        let mut found = SubgraphStateReader::subgraph(self, names.next()?)?;
        for name in names {
            found = found.subgraph(name)?;
        }
        Some(found)
    }

    /// With `lent` (called as a subgraph): the checkpointer and the address of its own checkpoints.
    fn lent_target(
        &self,
        lent: Option<Arc<dyn Checkpointer>>,
        address: CheckpointConfig,
    ) -> GraphResult<(Arc<dyn Checkpointer>, CheckpointConfig)> {
        let address = if lent.is_some() { self.own_address(address) } else { address };
        Ok((self.state_saver(lent)?, address))
    }
}

impl<C: State> SubgraphStateReader for CompiledGraph<C> {
    fn graph_name(&self) -> Option<&str> {
        Some(self.name())
    }

    fn erased_handle(&self) -> Option<Box<dyn Any + Send>> {
        Some(Box::new(self.erase()))
    }

    fn read_state<'a>(
        &'a self,
        parent_saver: Option<Arc<dyn Checkpointer>>,
        thread_id: String,
        task_ns: String,
        node_ns: String,
        nested: bool,
    ) -> BoxFuture<'a, GraphResult<Option<TaskState>>> {
        async move {
            let mode = self.inner.config.subgraph_checkpoints;
            let saver = match mode {
                SubgraphCheckpoints::Never => None,
                _ => self.inner.config.checkpointer.clone().or(parent_saver),
            };
            let Some(saver) = saver else { return Ok(None) };
            let ns = if mode == SubgraphCheckpoints::PerNode { node_ns } else { task_ns };
            let address = CheckpointConfig { thread_id, checkpoint_ns: ns, checkpoint_id: None };
            if !nested {
                return Ok(Some(TaskState::Config(address)));
            }
            Ok(Some(match self.saved_snapshot(&saver, &address, true).await? {
                Some(s) => TaskState::Snapshot(Box::new(JsonSnapshot::from_typed(s))),
                None => TaskState::Config(address),
            }))
        }
        .boxed()
    }

    fn state_json<'a>(
        &'a self,
        lent: Option<Arc<dyn Checkpointer>>,
        address: CheckpointConfig,
        subgraphs: bool,
    ) -> BoxFuture<'a, GraphResult<JsonSnapshot>> {
        async move {
            let (saver, address) = self.lent_target(lent, address)?;
            Ok(JsonSnapshot::from_typed(self.snapshot_at(&saver, &address, subgraphs).await?))
        }
        .boxed()
    }

    fn history_json<'a>(
        &'a self,
        lent: Option<Arc<dyn Checkpointer>>,
        address: CheckpointConfig,
        options: ListOptions,
    ) -> BoxFuture<'a, GraphResult<Vec<JsonSnapshot>>> {
        async move {
            let (saver, address) = self.lent_target(lent, address)?;
            let history = self.history_at(&saver, &address, options).await?;
            Ok(history.into_iter().map(JsonSnapshot::from_typed).collect())
        }
        .boxed()
    }

    fn update_json<'a>(
        &'a self,
        lent: Option<Arc<dyn Checkpointer>>,
        address: CheckpointConfig,
        values: Value,
        as_node: Option<String>,
    ) -> BoxFuture<'a, GraphResult<CheckpointConfig>> {
        async move {
            let (saver, address) = self.lent_target(lent, address)?;
            let update = self.update_from_json(values)?;
            let superstep = vec![crate::state_api::StateUpdate { as_node, updates: vec![update] }];
            self.bulk_update_at(&saver, address, vec![superstep]).await
        }
        .boxed()
    }

    fn subgraph(&self, node: &str) -> Option<Arc<dyn SubgraphStateReader>> {
        let &n = self.inner.spec.node_names.get(node)?;
        let declared = self.inner.spec.nodes[n].subgraph();
        declared.map(SubgraphStateReader::shared).or_else(|| self.inner.called_subgraphs.get(node))
    }

    fn shared(&self) -> Arc<dyn SubgraphStateReader> {
        Arc::new(self.clone())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
