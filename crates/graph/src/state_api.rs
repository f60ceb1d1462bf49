//! Reading and writing a thread's state: `get_state`, `get_state_history`, `update_state`.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use weft_runnable_core::RunnableConfig;

use crate::checkpoint::{
    ChannelAppends, ChannelName, CheckpointConfig, CheckpointMetadata, CheckpointSource, CheckpointTuple,
    ExpectedHead, ListOptions, SaveOp, special,
};
use crate::compiled::CompiledGraph;
use crate::error::{GraphError, GraphResult};
use crate::pregel::channels::Channels;
use crate::pregel::saved::{SavedWrites, last_interrupts};
use crate::pregel::task::{Task, TaskWrites, writes_from_json};
use crate::state::{ChannelSet, State};
use crate::types::{END, Interrupt, START};

/// A task planned from a checkpoint, with what it did if it already ran.
#[derive(Debug, Clone, PartialEq)]
pub struct PregelTask {
    /// The task id.
    pub id: String,
    /// The node.
    pub name: String,
    /// Its path (`~__pregel_pull, <node>` or `~__pregel_push, <index>, False`).
    pub path: String,
    /// The error text, if it failed.
    pub error: Option<String>,
    /// Interrupts it raised and that are not answered yet.
    pub interrupts: Vec<Interrupt>,
    /// Its saved writes, as `(channel, value)`, if it finished.
    pub result: Option<Vec<(String, Value)>>,
    /// For a subgraph node: the subgraph's checkpoint address, or its whole state when asked for with
    /// [`get_state_with_subgraphs`](CompiledGraph::get_state_with_subgraphs).
    pub state: Option<TaskState>,
}

/// The state of a subgraph task.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskState {
    /// Where the subgraph's checkpoints are.
    Config(CheckpointConfig),
    /// The subgraph's state (its state type differs from the parent's, so values are JSON).
    Snapshot(Box<JsonSnapshot>),
}

/// A state snapshot with JSON values (a subgraph's, nested in its parent's).
#[derive(Debug, Clone, PartialEq)]
pub struct JsonSnapshot {
    /// The values, one key per non-empty channel.
    pub values: Value,
    /// The nodes that run next.
    pub next: Vec<String>,
    /// The checkpoint's address.
    pub config: Option<CheckpointConfig>,
    /// The checkpoint it was made from.
    pub parent_config: Option<CheckpointConfig>,
    /// The checkpoint's metadata.
    pub metadata: Option<CheckpointMetadata>,
    /// When the checkpoint was made (RFC 3339).
    pub created_at: Option<String>,
    /// The planned tasks.
    pub tasks: Vec<PregelTask>,
    /// Unanswered interrupts.
    pub interrupts: Vec<Interrupt>,
}

impl<S: State> StateSnapshot<S> {
    /// The snapshot with its values as JSON (one key per channel that has a value).
    pub fn into_json(self) -> JsonSnapshot {
        JsonSnapshot {
            values: crate::pregel::task::state_json(&self.values),
            next: self.next,
            config: self.config,
            parent_config: self.parent_config,
            metadata: self.metadata,
            created_at: self.created_at,
            tasks: self.tasks,
            interrupts: self.interrupts,
        }
    }
}

/// One update of a bulk update: the writes and the node they are attributed to.
#[derive(Debug, Clone)]
pub struct StateUpdate<S: State> {
    /// The node the writes come from (`None` infers it; required when a superstep has several updates).
    pub as_node: Option<String>,
    /// The writes.
    pub updates: Vec<S::Update>,
}

/// A thread's state at one checkpoint.
#[derive(Debug, Clone)]
pub struct StateSnapshot<S> {
    /// The state values.
    pub values: S,
    /// The nodes that run next.
    pub next: Vec<String>,
    /// The checkpoint's address (`None` for a thread with no checkpoint).
    pub config: Option<CheckpointConfig>,
    /// The checkpoint's metadata.
    pub metadata: Option<CheckpointMetadata>,
    /// When it was made.
    pub created_at: Option<String>,
    /// The checkpoint it was made from.
    pub parent_config: Option<CheckpointConfig>,
    /// The tasks planned from it.
    pub tasks: Vec<PregelTask>,
    /// Unanswered interrupts.
    pub interrupts: Vec<Interrupt>,
}

/// A task's id, path and writes, as `update_state` records them.
type TaskRecord = (String, String, Vec<(ChannelName, Value)>);

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
    fn saver(&self) -> GraphResult<&std::sync::Arc<dyn crate::checkpoint::Checkpointer>> {
        self.inner
            .config
            .checkpointer
            .as_ref()
            .ok_or_else(|| GraphError::Checkpoint("no checkpointer set".to_owned()))
    }

    /// The thread's state: the latest checkpoint with the writes of tasks that already finished in the
    /// pending step applied (live view), or, when the config names a `checkpoint_id`, the state as saved at
    /// that checkpoint (record view).
    pub async fn get_state(&self, config: &RunnableConfig) -> GraphResult<StateSnapshot<S>> {
        let address = thread_of(config)?;
        let live = address.checkpoint_id.is_none();
        let tuple = self.saver()?.get_tuple(&address).await.map_err(cp_err)?;
        match tuple {
            None => Ok(StateSnapshot {
                values: self.inner.spec.initial.clone(),
                next: Vec::new(),
                config: None,
                metadata: None,
                created_at: None,
                parent_config: None,
                tasks: Vec::new(),
                interrupts: Vec::new(),
            }),
            Some(t) => {
                let mut snapshot = self.snapshot(t, live)?;
                if let Some(address) = snapshot.config.clone() {
                    self.nest_subgraphs(&address, &mut snapshot.tasks, false).await?;
                }
                Ok(snapshot)
            }
        }
    }

    /// Like [`get_state`](CompiledGraph::get_state), with the state of each subgraph task nested in it
    /// (recursively).
    pub async fn get_state_with_subgraphs(&self, config: &RunnableConfig) -> GraphResult<StateSnapshot<S>> {
        let mut snapshot = self.get_state(config).await?;
        let Some(address) = snapshot.config.clone() else { return Ok(snapshot) };
        self.nest_subgraphs(&address, &mut snapshot.tasks, true).await?;
        Ok(snapshot)
    }

    async fn nest_subgraphs(
        &self,
        address: &CheckpointConfig,
        tasks: &mut [PregelTask],
        nested: bool,
    ) -> GraphResult<()> {
        let saver = self.inner.config.checkpointer.clone();
        for task in tasks {
            let Some(&n) = self.inner.spec.node_names.get(&task.name) else { continue };
            // A subgraph node, or (nested snapshots only) the subgraph a function node called.
            let called = if nested { self.inner.called_subgraphs.get(&task.name) } else { None };
            let declared = self.inner.spec.nodes[n].func.as_ref().and_then(|f| f.subgraph());
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
                    saver.clone(),
                    address.thread_id.clone(),
                    prefix(&segment),
                    prefix(&task.name),
                    nested,
                )
                .await?;
        }
        Ok(())
    }

    /// The live state at `address` as a JSON snapshot, subgraphs nested (`None` without a checkpoint).
    pub(crate) async fn snapshot_json_at(
        &self,
        saver: &std::sync::Arc<dyn crate::checkpoint::Checkpointer>,
        address: &CheckpointConfig,
    ) -> GraphResult<Option<JsonSnapshot>> {
        let Some(tuple) = saver.get_tuple(address).await.map_err(cp_err)? else { return Ok(None) };
        let snapshot = self.snapshot(tuple, true)?;
        let mut tasks = snapshot.tasks;
        if let Some(addr) = &snapshot.config {
            Box::pin(self.nest_subgraphs(addr, &mut tasks, true)).await?;
        }
        Ok(Some(StateSnapshot { tasks, ..snapshot }.into_json()))
    }

    /// Every checkpoint of the thread, newest first, as record-view snapshots (only the addressed one when
    /// the config names a `checkpoint_id`, as LangGraph's `list` does).
    pub async fn get_state_history(
        &self,
        config: &RunnableConfig,
        options: ListOptions,
    ) -> GraphResult<Vec<StateSnapshot<S>>> {
        let address = thread_of(config)?;
        let tuples = self.saver()?.list(Some(&address), options).await.map_err(cp_err)?;
        let mut snapshots = Vec::with_capacity(tuples.len());
        for tuple in tuples {
            let mut snapshot = self.snapshot(tuple, false)?;
            // Subgraph tasks name where their checkpoints are, as in `get_state`.
            if let Some(address) = snapshot.config.clone() {
                self.nest_subgraphs(&address, &mut snapshot.tasks, false).await?;
            }
            snapshots.push(snapshot);
        }
        Ok(snapshots)
    }

    fn snapshot(&self, tuple: CheckpointTuple, live: bool) -> GraphResult<StateSnapshot<S>> {
        let spec = &self.inner.spec;
        let mut ch = Channels::from_checkpoint(spec, &self.inner.names, &tuple.checkpoint)?;
        let saved = SavedWrites::from_pending(
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
        // A task's result holds its writes to state channels, not the engine's own (`branch:to:*`,
        // barriers, `__pregel_tasks`, control writes).
        let state_names = &self.inner.names.channels[..ch.layout.n_state];
        let state_channel = |c: &str| state_names.iter().any(|n| &**n == c);
        let mut tasks = Vec::new();
        let mut interrupts = Vec::new();
        let mut finished: Vec<TaskWrites<S>> = Vec::new();
        let mut next: Vec<String> = Vec::new();
        for task in crate::pregel::plan::listing_order(&planned) {
            let writes = saved.by_task.get(&*task.id);
            let error =
                writes.and_then(|w| w.iter().find(|(c, _)| c == special::ERROR)).map(|(_, v)| match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                });
            let output = saved.finished(&task.id);
            // Live: the questions still waiting for an answer; record: those the task raised in the step.
            let task_interrupts = match output {
                Some(_) if live => Vec::new(),
                _ => last_interrupts(writes.map(Vec::as_slice).unwrap_or_default()),
            };
            let result =
                output.map(|w| w.iter().filter(|(c, _)| state_channel(c)).cloned().collect::<Vec<_>>());
            match output {
                Some(w) => finished.push(writes_from_json(spec, &ch.state, w)?),
                None => next.push(task.name.to_string()),
            }
            interrupts.extend(task_interrupts.iter().cloned());
            tasks.push(PregelTask {
                id: task.id.to_string(),
                name: task.name.to_string(),
                path: task.path.to_string(),
                error,
                interrupts: task_interrupts,
                result,
                state: None,
            });
        }
        // Both views show the input a command gave the step; the live view also the writes of its finished
        // tasks, and only the tasks still to run in `next`.
        let null: Vec<(String, Value)> = tuple
            .pending_writes
            .iter()
            .filter(|w| w.task_id == special::NULL_TASK_ID)
            .map(|w| (w.channel.clone(), w.value.clone()))
            .collect();
        let mut updates: Vec<S::Update> = writes_from_json(spec, &ch.state, &null)?.updates;
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

    /// Writes `updates` to the thread as if node `as_node` had returned them: the node's edges and routers
    /// run too, so the next nodes are the ones `as_node` leads to. Saves an `update` checkpoint (on top of
    /// the addressed checkpoint, which makes a branch when it is an old one) and returns its address.
    ///
    /// `as_node`: `None` infers the node that wrote last (an error when ambiguous); `END` clears pending
    /// tasks; `"__input__"` treats the update as new input; `"__copy__"` forks the checkpoint unchanged.
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
        let saver = std::sync::Arc::clone(self.saver()?);
        let mut address = thread_of(config)?;
        let mut last = None;
        for superstep in supersteps {
            if superstep.len() > 1 && superstep.iter().any(|u| u.as_node.is_none()) {
                return Err(GraphError::AsNodeRequired);
            }
            let saved = self.apply_superstep(&saver, &address, superstep).await?;
            // The next superstep builds on the checkpoint just saved.
            address.checkpoint_id = saved.checkpoint_id.clone();
            last = Some(saved);
        }
        last.ok_or_else(|| GraphError::Checkpoint("bulk_update_state needs at least one update".to_owned()))
    }

    async fn apply_superstep(
        &self,
        saver: &std::sync::Arc<dyn crate::checkpoint::Checkpointer>,
        address: &CheckpointConfig,
        superstep: Vec<StateUpdate<S>>,
    ) -> GraphResult<CheckpointConfig> {
        let spec = &self.inner.spec;
        let names = &self.inner.names;
        let tuple = saver.get_tuple(address).await.map_err(cp_err)?;
        let (mut ch, step, parent) = match &tuple {
            Some(t) => (
                Channels::from_checkpoint(spec, names, &t.checkpoint)?,
                t.metadata.step,
                Some(t.checkpoint.id.clone()),
            ),
            // A fresh thread's first update is step 0 (new input: step -1), as in LangGraph.
            None => (Channels::new(spec), -1, None),
        };
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
        // The thread's latest checkpoint: the head the new checkpoint must extend.
        let latest = match (&tuple, &address.checkpoint_id) {
            (Some(_), Some(_)) => {
                let latest = CheckpointConfig { checkpoint_id: None, ..address.clone() };
                saver.get_tuple(&latest).await.map_err(cp_err)?.map(|l| l.checkpoint.id)
            }
            (_, None) => parent.clone(),
            (None, Some(_)) => None,
        };
        let head = parent.is_some() && latest == parent;
        // (task id, task path, writes) of the tasks the update stands for.
        let mut task_writes: Vec<TaskRecord> = Vec::new();
        let mut changed = ChannelSet::new();
        // An update is a superstep of its own: the triggers and packets pending from the checkpoint it
        // builds on end with it (LangGraph's ephemeral `branch:to:*` and `__pregel_tasks` channels), so only
        // what the updating nodes route to runs next.
        let as_nodes = superstep.iter().filter_map(|u| u.as_node.as_deref());
        if as_nodes.clone().all(|n| !matches!(n, "__copy__" | "__input__" | END)) {
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
                        return Err(GraphError::Checkpoint(
                            "cannot copy a non-existent checkpoint".to_owned(),
                        ));
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
                            let writes =
                                TaskWrites::<S> { updates: updates.clone(), ..TaskWrites::default() };
                            let json = crate::pregel::task::writes_to_json(spec, names, &ch.state, &writes)?;
                            task_writes.push((task.id.to_string(), task.path.to_string(), json));
                        }
                    }
                    self.apply_as_node(&mut ch, &planned, name, updates, step + 1, &mut changed)?;
                }
            }
        }
        if let (Some(t), false) = (&tuple, task_writes.is_empty()) {
            for (task_id, path, writes) in task_writes {
                let writes = crate::checkpoint::owned_writes(writes);
                saver.put_writes(&t.config, writes, &task_id, &path).await.map_err(cp_err)?;
            }
        }
        ch.bump(&changed);
        self.put_update(saver, address, (parent, latest), &mut ch, source, next_step, &changed, &changed)
            .await
    }

    /// Applies `updates` as the output of node `name` (its planned task consumed, its edges and routers
    /// run).
    fn apply_as_node(
        &self,
        ch: &mut Channels<S>,
        planned: &[Task<S>],
        name: &str,
        updates: Vec<S::Update>,
        step: i64,
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
        let mut writes = TaskWrites::<S> { updates, ..TaskWrites::default() };
        crate::pregel::apply::route(spec, node_spec, &ch.state, &mut writes, step)?;
        let source_index = if name == START { None } else { spec.node_names.get(name).copied() };
        crate::pregel::apply::apply_control(ch, spec, &writes, source_index, changed);
        if let Some(n) = source_index {
            let seen_version = ch.max_version() + 1;
            ch.seen[n].insert(ch.layout.branch(n), seen_version);
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
        saver: &std::sync::Arc<dyn crate::checkpoint::Checkpointer>,
        address: &CheckpointConfig,
        (parent, head): (Option<String>, Option<String>),
        ch: &mut Channels<S>,
        source: CheckpointSource,
        step: i64,
        values_of: &ChannelSet,
        updated: &ChannelSet,
    ) -> GraphResult<CheckpointConfig> {
        let spec = &self.inner.spec;
        let stamps = crate::pregel::stamp::checkpoint_stamps();
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
        let metadata = CheckpointMetadata { source, step, parents: BTreeMap::new(), extra: Map::new() };
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
