//! Reading and writing a thread's state: `get_state`, `get_state_history`, `update_state`.

use std::sync::Arc;

use serde_json::Value;
use weft_runnable_core::RunnableConfig;

use crate::checkpoint::{CheckpointConfig, CheckpointTuple, Checkpointer, ListOptions, special};
use crate::compiled::CompiledGraph;
use crate::error::{GraphError, GraphResult};
use crate::pregel::channels::Channels;
use crate::pregel::saved::{SavedWrites, result_channel};
use crate::pregel::task::{TaskWrites, writes_from_json};
use crate::state::State;

mod json;
mod update;

pub use crate::snapshot::{JsonSnapshot, PregelTask, StateSnapshot, TaskState};

use json::Addressed;

/// One update of a bulk update: the writes and the node they are attributed to.
#[derive(Debug, Clone)]
pub struct StateUpdate<S: State> {
    /// The node the writes come from (`None` infers it; required when a superstep has several updates).
    pub as_node: Option<String>,
    /// The writes.
    pub updates: Vec<S::Update>,
}

fn thread_of(config: &RunnableConfig) -> GraphResult<CheckpointConfig> {
    let thread_id = config.configurable_str("thread_id").ok_or(GraphError::MissingThreadId)?;
    Ok(CheckpointConfig {
        thread_id: thread_id.to_owned(),
        checkpoint_ns: config.configurable_str("checkpoint_ns").unwrap_or_default().to_owned(),
        checkpoint_id: config.configurable_str("checkpoint_id").map(str::to_owned),
    })
}

fn cp_err(e: crate::checkpoint::CheckpointError) -> GraphError {
    GraphError::Storage(e)
}

impl<S: State> CompiledGraph<S> {
    fn saver(&self) -> GraphResult<&Arc<dyn Checkpointer>> {
        self.inner
            .config
            .checkpointer
            .as_ref()
            .ok_or_else(|| GraphError::Checkpoint("no checkpointer set".to_owned()))
    }

    /// The thread's state: the latest checkpoint with the writes of tasks that already finished in the
    /// pending step applied (live view), or, when the config names a `checkpoint_id`, the state as saved at
    /// that checkpoint (record view).
    ///
    /// A `checkpoint_ns` naming a subgraph of this graph (`node:<task id>`, as a task's
    /// [`TaskState::Config`] gives it) hands the call to that subgraph, as LangGraph does, when its state
    /// type is `S`; for a subgraph of another state type this is a [`GraphError::SubgraphStateType`]:
    /// read it with [`get_state_json`](CompiledGraph::get_state_json).
    pub async fn get_state(&self, config: &RunnableConfig) -> GraphResult<StateSnapshot<S>> {
        let Addressed { graph, saver, address } = self.addressed(config)?;
        graph.snapshot_at(&saver, &address, false).await
    }

    /// Like [`get_state`](CompiledGraph::get_state), with the state of each subgraph task nested in it
    /// (recursively).
    pub async fn get_state_with_subgraphs(&self, config: &RunnableConfig) -> GraphResult<StateSnapshot<S>> {
        let Addressed { graph, saver, address } = self.addressed(config)?;
        graph.snapshot_at(&saver, &address, true).await
    }

    /// The snapshot at `address` in `saver` (an empty one for a thread without checkpoints), subgraph
    /// snapshots nested when `nested` is set.
    pub(crate) async fn snapshot_at(
        &self,
        saver: &Arc<dyn Checkpointer>,
        address: &CheckpointConfig,
        nested: bool,
    ) -> GraphResult<StateSnapshot<S>> {
        Ok(self.saved_snapshot(saver, address, nested).await?.unwrap_or_else(|| StateSnapshot {
            values: self.inner.spec.initial.clone(),
            next: Vec::new(),
            config: None,
            metadata: None,
            created_at: None,
            parent_config: None,
            tasks: Vec::new(),
            interrupts: Vec::new(),
        }))
    }

    /// The snapshot at `address` in `saver`, `None` without a checkpoint there: live when the address names
    /// no checkpoint id; each subgraph task names its subgraph's address, or holds its snapshot when
    /// `nested` is set.
    pub(crate) async fn saved_snapshot(
        &self,
        saver: &Arc<dyn Checkpointer>,
        address: &CheckpointConfig,
        nested: bool,
    ) -> GraphResult<Option<StateSnapshot<S>>> {
        let live = address.checkpoint_id.is_none();
        let Some(tuple) = saver.get_tuple(address).await.map_err(cp_err)? else { return Ok(None) };
        let mut snapshot = self.snapshot(tuple, live)?;
        if let Some(address) = snapshot.config.clone() {
            Box::pin(self.nest_subgraphs(saver, &address, &mut snapshot.tasks, nested)).await?;
        }
        Ok(Some(snapshot))
    }

    async fn nest_subgraphs(
        &self,
        saver: &Arc<dyn Checkpointer>,
        address: &CheckpointConfig,
        tasks: &mut [PregelTask],
        nested: bool,
    ) -> GraphResult<()> {
        for task in tasks {
            let Some(&n) = self.inner.spec.node_names.get(&task.name) else { continue };
            // A subgraph node, or (nested snapshots only) the subgraph a function node called.
            let called = if nested { self.inner.called_subgraphs.get(&task.name) } else { None };
            let declared = self.inner.spec.nodes[n].subgraph();
            let Some(reader) = declared.or(called.as_deref()) else { continue };
            let segment = format!("{}:{}", task.name, task.id);
            let prefix = |s: &str| {
                if address.checkpoint_ns.is_empty() {
                    s.to_owned()
                } else {
                    format!("{}|{s}", address.checkpoint_ns)
                }
            };
            task.state = reader
                .read_state(
                    Some(Arc::clone(saver)),
                    address.thread_id.clone(),
                    prefix(&segment),
                    prefix(&task.name),
                    nested,
                )
                .await?;
        }
        Ok(())
    }

    /// Every checkpoint of the thread, newest first, as record-view snapshots (only the addressed one when
    /// the config names a `checkpoint_id`, as LangGraph's `list` does). A `checkpoint_ns` naming a subgraph
    /// hands the call to it, as in [`get_state`](CompiledGraph::get_state) (see
    /// [`get_state_history_json`](CompiledGraph::get_state_history_json) for a subgraph of another state
    /// type).
    pub async fn get_state_history(
        &self,
        config: &RunnableConfig,
        options: ListOptions,
    ) -> GraphResult<Vec<StateSnapshot<S>>> {
        let Addressed { graph, saver, address } = self.addressed(config)?;
        graph.history_at(&saver, &address, options).await
    }

    /// The checkpoints at `address` in `saver`, newest first, as record-view snapshots.
    pub(crate) async fn history_at(
        &self,
        saver: &Arc<dyn Checkpointer>,
        address: &CheckpointConfig,
        options: ListOptions,
    ) -> GraphResult<Vec<StateSnapshot<S>>> {
        let tuples = saver.list(Some(address), options).await.map_err(cp_err)?;
        let mut snapshots = Vec::with_capacity(tuples.len());
        for tuple in tuples {
            let mut snapshot = self.snapshot(tuple, false)?;
            // Subgraph tasks name where their checkpoints are, as in `get_state`.
            if let Some(address) = snapshot.config.clone() {
                self.nest_subgraphs(saver, &address, &mut snapshot.tasks, false).await?;
            }
            snapshots.push(snapshot);
        }
        Ok(snapshots)
    }

    fn snapshot(&self, tuple: CheckpointTuple, live: bool) -> GraphResult<StateSnapshot<S>> {
        let spec = &self.inner.spec;
        let mut ch =
            Channels::from_checkpoint(spec, &self.inner.names, &tuple.checkpoint, &tuple.config.thread_id)?;
        let saved = SavedWrites::from_pending(
            &tuple.config.thread_id,
            &tuple.checkpoint.id,
            tuple.pending_writes.iter().map(|w| (w.task_id.clone(), w.channel.clone(), w.value.clone())),
        );
        let step = tuple.metadata.step + 1;
        let planned = crate::pregel::plan::plan_tasks(
            &ch,
            spec,
            step,
            &tuple.checkpoint.id,
            &tuple.config.checkpoint_ns,
        );
        let is_result = result_channel(spec, &self.inner.names, ch.layout.n_state);
        let mut tasks = Vec::new();
        let mut interrupts = Vec::new();
        let mut finished: Vec<TaskWrites<S>> = Vec::new();
        let mut next: Vec<String> = Vec::new();
        for task in crate::pregel::plan::listing_order(&planned) {
            // Live: the questions still waiting for an answer; record: those the task raised in the step.
            let record = saved.recorded_task(task, live, &is_result);
            match saved.finished(&task.id) {
                Some(w) => finished.push(writes_from_json(spec, &ch.state, w, saved.origin())?),
                None => next.push(task.name.to_string()),
            }
            interrupts.extend(record.interrupts.iter().cloned());
            tasks.push(record);
        }
        // Both views show the input a command gave the step; the live view also the writes of its finished
        // tasks, and only the tasks still to run in `next`.
        let null: Vec<(String, Value)> = tuple
            .pending_writes
            .iter()
            .filter(|w| w.task_id == special::NULL_TASK_ID)
            .map(|w| (w.channel.clone(), w.value.clone()))
            .collect();
        let mut updates: Vec<S::Update> = writes_from_json(spec, &ch.state, &null, saved.origin())?.updates;
        if !live {
            next = crate::pregel::plan::listing_order(&planned).map(|t| t.name.to_string()).collect();
        } else {
            updates.extend(finished.into_iter().flat_map(|w| w.updates));
        }
        if !updates.is_empty() {
            ch.state.apply(updates).map_err(|error| GraphError::InvalidUpdate {
                error,
                step,
                nodes: Vec::new(),
            })?;
        }
        Ok(StateSnapshot {
            values: ch.state,
            next,
            config: Some(tuple.config),
            created_at: Some(tuple.checkpoint.ts.clone()),
            metadata: Some(tuple.metadata),
            parent_config: tuple.parent_config,
            tasks,
            interrupts,
        })
    }
}
