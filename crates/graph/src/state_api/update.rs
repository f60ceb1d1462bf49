//! `update_state`: writing a thread's state as if a node had returned the values.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;
use weft_runnable_core::RunnableConfig;

use super::{Addressed, StateUpdate, cp_err};
use crate::checkpoint::{
    ChannelAppends, ChannelName, CheckpointConfig, CheckpointMetadata, CheckpointSource, Checkpointer,
    ExpectedHead, SaveOp,
};
use crate::compiled::CompiledGraph;
use crate::error::{GraphError, GraphResult};
use crate::pregel::channels::Channels;
use crate::pregel::task::{Task, TaskWrites};
use crate::state::{ChannelSet, State};
use crate::types::{END, START};

/// A task's id, path and writes, as `update_state` records them.
type TaskRecord = (String, String, Vec<(ChannelName, Value)>);

impl<S: State> CompiledGraph<S> {
    /// Writes `updates` to the thread as if node `as_node` had returned them: the node's edges and routers
    /// run too, so the next nodes are the ones `as_node` leads to. Saves an `update` checkpoint (on top of
    /// the addressed checkpoint, which makes a branch when it is an old one) and returns its address.
    ///
    /// `as_node`: `None` infers the node that wrote last (an error when ambiguous); `END` clears pending
    /// tasks; `"__input__"` treats the update as new input; `"__copy__"` forks the checkpoint unchanged. A
    /// `checkpoint_ns` naming a subgraph hands the update to it, as in [`get_state`](CompiledGraph::get_state)
    /// (see [`update_state_json`](CompiledGraph::update_state_json) for a subgraph of another state type).
    pub async fn update_state(
        &self,
        config: &RunnableConfig,
        updates: Vec<S::Update>,
        as_node: Option<&str>,
    ) -> GraphResult<CheckpointConfig> {
        let update = StateUpdate { as_node: as_node.map(str::to_owned), updates };
        self.bulk_update_state(config, vec![vec![update]]).await
    }

    /// Applies several supersteps of updates, one checkpoint each; within a superstep every update must
    /// name its node. Replaying a thread's history this way rebuilds the same state.
    pub async fn bulk_update_state(
        &self,
        config: &RunnableConfig,
        supersteps: Vec<Vec<StateUpdate<S>>>,
    ) -> GraphResult<CheckpointConfig> {
        let Addressed { graph, saver, address } = self.addressed(config)?;
        graph.bulk_update_at(&saver, address, supersteps).await
    }

    /// [`bulk_update_state`](CompiledGraph::bulk_update_state) on the thread at `address` in `saver`.
    pub(crate) async fn bulk_update_at(
        &self,
        saver: &Arc<dyn Checkpointer>,
        mut address: CheckpointConfig,
        supersteps: Vec<Vec<StateUpdate<S>>>,
    ) -> GraphResult<CheckpointConfig> {
        if supersteps.is_empty() {
            return Err(GraphError::NoSupersteps);
        }
        if supersteps.iter().any(Vec::is_empty) {
            return Err(GraphError::NoUpdates);
        }
        let mut last = None;
        for superstep in supersteps {
            if superstep.len() > 1 && superstep.iter().any(|u| u.as_node.is_none()) {
                return Err(GraphError::AsNodeRequired);
            }
            if superstep.len() > 1 && superstep.iter().any(|u| u.as_node.as_deref() == Some("__copy__")) {
                return Err(GraphError::CopyWithOtherUpdates);
            }
            let saved = self.apply_superstep(saver, &address, superstep).await?;
            // The next superstep builds on the checkpoint just saved.
            address.checkpoint_id = saved.checkpoint_id.clone();
            last = Some(saved);
        }
        last.ok_or(GraphError::NoSupersteps)
    }

    async fn apply_superstep(
        &self,
        saver: &Arc<dyn Checkpointer>,
        address: &CheckpointConfig,
        superstep: Vec<StateUpdate<S>>,
    ) -> GraphResult<CheckpointConfig> {
        let spec = &self.inner.spec;
        let names = &self.inner.names;
        let tuple = saver.get_tuple(address).await.map_err(cp_err)?;
        let (mut ch, step, parent) = match &tuple {
            Some(t) => (
                Channels::from_checkpoint(spec, names, &t.checkpoint, &t.config.thread_id)?,
                t.metadata.step,
                Some(t.checkpoint.id.clone()),
            ),
            // A fresh thread's first update is step 0 (new input: step -1), as in LangGraph.
            None => (Channels::new(spec), -1, None),
        };
        ch.set_versioner(Arc::clone(saver));
        // The version this update gives what it changes (nodes it runs as have seen it).
        let next_version = ch.next_version()?;
        let planned = crate::pregel::plan::plan_tasks(
            &ch,
            spec,
            step + 1,
            parent.as_deref().unwrap_or(""),
            &address.checkpoint_ns,
        );
        // The update's writes are recorded as the results of the tasks they stand for, on the checkpoint
        // it builds on, unless the thread has moved past that checkpoint (its other children would
        // replay them).
        let latest = latest_checkpoint(saver, address, tuple.is_some(), &parent).await?;
        let head = parent.is_some() && latest == parent;
        // (task id, task path, writes) of the tasks the update stands for.
        let mut task_writes: Vec<TaskRecord> = Vec::new();
        let mut changed = ChannelSet::new();
        // An update is a superstep of its own: the triggers and packets pending from the checkpoint it
        // builds on end with it (LangGraph's ephemeral `branch:to:*` and `__pregel_tasks` channels), so only
        // what the updating nodes route to runs next.
        let as_nodes = superstep.iter().filter_map(|u| u.as_node.as_deref());
        if as_nodes.clone().all(|n| !matches!(n, "__copy__" | "__input__" | END)) {
            end_pending(&mut ch, &mut changed);
        }
        let mut source = CheckpointSource::Update;
        let mut next_step = step + 1;
        for StateUpdate { as_node, mut updates } in superstep {
            for u in &mut updates {
                ch.state.prepare_update(u);
            }
            let as_node = match as_node {
                Some(n) => n,
                None => self.infer_as_node(&ch, tuple.is_some())?,
            };
            match as_node.as_str() {
                "__copy__" => {
                    // A copy is a sibling of the copied checkpoint: same values, same parent.
                    let Some(copied) = &tuple else {
                        return Err(GraphError::Storage(crate::checkpoint::CheckpointError::Invalid(
                            format!(
                                "cannot copy a non-existent checkpoint of thread '{}'",
                                address.thread_id
                            ),
                        )));
                    };
                    let all = (0..names.channels.len()).collect::<ChannelSet>();
                    let grandparent = copied.parent_config.as_ref().and_then(|p| p.checkpoint_id.clone());
                    return self
                        .put_update(
                            saver,
                            address,
                            (grandparent, latest),
                            &mut ch,
                            CheckpointSource::Fork,
                            step + 1,
                            &all,
                            &ChannelSet::new(),
                        )
                        .await;
                }
                "__input__" => {
                    ch.start = Some(updates);
                    ch.input_seen = true;
                    changed.insert(ch.layout.start());
                    source = CheckpointSource::Input;
                    if tuple.is_none() {
                        next_step = -1;
                    }
                }
                END => crate::pregel::plan::consume_tasks(&mut ch, spec, &planned, &mut changed),
                name => {
                    if head {
                        if let Some(task) = planned.iter().find(|t| *t.name == *name) {
                            let writes = TaskWrites::<S>::from_updates(updates.clone());
                            let json = crate::pregel::task::writes_to_json(spec, names, &ch.state, &writes)?;
                            task_writes.push((task.id.to_string(), task.path.to_string(), json));
                        }
                    }
                    self.apply_as_node(
                        &mut ch,
                        &planned,
                        name,
                        updates,
                        step + 1,
                        &next_version,
                        &mut changed,
                    )?;
                }
            }
        }
        if let (Some(t), false) = (&tuple, task_writes.is_empty()) {
            for (task_id, path, writes) in task_writes {
                let writes = crate::checkpoint::owned_writes(writes);
                saver.put_writes(&t.config, writes, &task_id, &path).await.map_err(cp_err)?;
            }
        }
        ch.bump_to(&changed, next_version);
        self.put_update(saver, address, (parent, latest), &mut ch, source, next_step, &changed, &changed)
            .await
    }

    /// Applies `updates` as the output of node `name` (its planned task consumed, its edges and routers
    /// run); the node has seen `seen_version`, the version the update gives.
    #[allow(clippy::too_many_arguments)]
    fn apply_as_node(
        &self,
        ch: &mut Channels<S>,
        planned: &[Task<S>],
        name: &str,
        updates: Vec<S::Update>,
        step: i64,
        seen_version: &(u64, crate::checkpoint::ChannelVersion),
        changed: &mut ChannelSet,
    ) -> GraphResult<()> {
        let spec = &self.inner.spec;
        let node_spec = if name == START {
            &spec.start
        } else {
            let &n =
                spec.node_names.get(name).ok_or_else(|| GraphError::UpdateUnknownNode(name.to_owned()))?;
            &spec.nodes[n]
        };
        let mine: Vec<&Task<S>> = planned.iter().filter(|t| *t.name == *name).collect();
        for task in mine {
            crate::pregel::plan::consume_tasks(ch, spec, std::slice::from_ref(task), changed);
        }
        let applied = ch.apply_updates(updates.clone()).map_err(|error| GraphError::InvalidUpdate {
            error,
            step,
            nodes: vec![name.to_owned()],
        })?;
        changed.union_with(&applied);
        let mut writes = TaskWrites::<S>::from_updates(updates);
        crate::pregel::apply::route(spec, node_spec, &ch.state, &mut writes, step)?;
        let source_index = if name == START { None } else { spec.node_names.get(name).copied() };
        crate::pregel::apply::apply_control(ch, spec, &writes, source_index, changed);
        if let Some(n) = source_index {
            ch.see_version(n, ch.layout.branch(n), seen_version.clone());
        }
        Ok(())
    }

    fn infer_as_node(&self, ch: &Channels<S>, has_checkpoint: bool) -> GraphResult<String> {
        if !has_checkpoint {
            return Ok(START.to_owned());
        }
        let mut best: Option<(u64, Vec<usize>)> = None;
        for (n, seen) in ch.seen.iter().enumerate().take(ch.layout.n_nodes) {
            let Some(&v) = seen.values().max() else { continue };
            match &mut best {
                Some((bv, nodes)) if v == *bv => nodes.push(n),
                Some((bv, _)) if v < *bv => {}
                _ => best = Some((v, vec![n])),
            }
        }
        match best {
            None => Ok(START.to_owned()),
            Some((_, nodes)) if nodes.len() == 1 => Ok(self.inner.spec.nodes[nodes[0]].name.to_string()),
            Some(_) => Err(GraphError::AmbiguousUpdate),
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn put_update(
        &self,
        saver: &Arc<dyn Checkpointer>,
        address: &CheckpointConfig,
        (parent, head): (Option<String>, Option<String>),
        ch: &mut Channels<S>,
        source: CheckpointSource,
        step: i64,
        values_of: &ChannelSet,
        updated: &ChannelSet,
    ) -> GraphResult<CheckpointConfig> {
        let spec = &self.inner.spec;
        let stamps = crate::checkpoint::stamp::checkpoint_stamps();
        // A checkpoint stores values only for the channels whose version changed; a fork of an old
        // checkpoint stores all of them (they are new versions for this branch of history). A list
        // channel the update only appended to goes as its new items to a saver that takes them.
        let mut appends = ChannelAppends::new();
        let (checkpoint, new_versions) = ch.build_checkpoint(
            spec,
            &self.inner.names,
            stamps,
            Some(values_of),
            updated,
            saver.stores_appends().then_some(&mut appends),
        )?;
        let metadata =
            CheckpointMetadata { source, step, parents: BTreeMap::new(), extra: Default::default() };
        // The checkpoint must extend the thread's head (`head`, read before the update was made), also
        // when it forks an older checkpoint or copies one.
        let saved = CheckpointConfig { checkpoint_id: Some(checkpoint.id.clone()), ..address.clone() };
        let parent_config = CheckpointConfig { checkpoint_id: parent, ..address.clone() };
        let op = SaveOp::Put {
            config: std::sync::Arc::new(parent_config),
            checkpoint,
            metadata,
            new_versions,
            appends,
            expected_head: ExpectedHead::from_head(head),
        };
        saver.put_batch(vec![op]).await.map_err(cp_err)?;
        Ok(saved)
    }
}

/// The thread's latest checkpoint: the head the new checkpoint must extend (`parent`, the one the update
/// builds on, unless the update names an older one).
async fn latest_checkpoint(
    saver: &Arc<dyn Checkpointer>,
    address: &CheckpointConfig,
    exists: bool,
    parent: &Option<String>,
) -> GraphResult<Option<String>> {
    Ok(match (exists, &address.checkpoint_id) {
        (true, Some(_)) => {
            let latest = CheckpointConfig { checkpoint_id: None, ..address.clone() };
            saver.get_tuple(&latest).await.map_err(cp_err)?.map(|l| l.checkpoint.id)
        }
        (_, None) => parent.clone(),
        (false, Some(_)) => None,
    })
}

/// Ends the triggers, packets and input pending from the checkpoint an update builds on, noting the
/// channels that change.
fn end_pending<S: State>(ch: &mut Channels<S>, changed: &mut ChannelSet) {
    for n in 0..ch.layout.n_nodes {
        if std::mem::replace(&mut ch.triggered[n], false) {
            changed.insert(ch.layout.branch(n));
        }
    }
    if !ch.sends.is_empty() {
        ch.sends.clear();
        changed.insert(ch.layout.tasks());
    }
    if ch.start.take().is_some() {
        changed.insert(ch.layout.start());
    }
}
