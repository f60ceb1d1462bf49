//! Saving checkpoints from the run loop.

use std::sync::Arc;

use serde_json::{Map, Value};
use weft_runnable_core::RunnableConfig;

use crate::checkpoint::stamp::checkpoint_stamps;
use crate::checkpoint::{ChannelAppends, CheckpointConfig, CheckpointMetadata, CheckpointSource};
use crate::error::{GraphError, GraphResult};
use crate::pregel::channels::Channels;
use crate::pregel::plan::{listing_order, plan_tasks};
use crate::pregel::run::Ctx;
use crate::pregel::saved::{SavedWrites, result_channel};
use crate::pregel::spec::GraphSpec;
use crate::pregel::task::{Task, state_json};
use crate::state::{ChannelSet, State};
use crate::stream::{CheckpointEvent, StreamData};

/// A write that cannot be saved, named by thread, node, step and the channel and path inside the value.
pub(crate) fn unsaveable(err: GraphError, thread: &str, node: &str, step: i64) -> GraphError {
    match err {
        GraphError::InvalidUpdate {
            error: crate::state::UpdateError::Serialization { key, message },
            ..
        } => GraphError::Storage(crate::checkpoint::CheckpointError::Serialize {
            thread_id: thread.to_owned(),
            channel: key,
            message: format!(
                "written by node '{node}' at step {step} (pending write of the current checkpoint): {message}"
            ),
        }),
        other => other,
    }
}

/// What of the run's config every checkpoint's metadata carries: the scalar values of its metadata and
/// configurable, less the engine's own keys.
fn checkpoint_extra(config: &RunnableConfig) -> Map<String, Value> {
    let mut extra = Map::new();
    for (k, v) in config.metadata.iter().chain(config.configurable.iter()) {
        let scalar = matches!(v, Value::String(_) | Value::Number(_) | Value::Bool(_));
        let reserved =
            matches!(k.as_str(), "thread_id" | "checkpoint_id" | "checkpoint_ns" | "checkpoint_map")
                || k.starts_with("langgraph_")
                || k.starts_with("__");
        if scalar && !reserved {
            extra.insert(k.clone(), v.clone());
        }
    }
    extra
}

pub(crate) async fn save_checkpoint<S: State>(
    ctx: &mut Ctx<'_, S>,
    ch: &mut Channels<S>,
    source: CheckpointSource,
    step: i64,
    values_of: Option<&ChannelSet>,
    updated: &ChannelSet,
) -> GraphResult<()> {
    let wants_end_state = ctx.wants_end_state();
    let Some(saver) = ctx.saver.as_mut() else { return Ok(()) };
    let spec = &ctx.inner.spec;
    // In `exit` mode the checkpoint keeps the id its step's tasks were planned with.
    let (id, ts) = ctx.unsaved.take().unwrap_or_else(checkpoint_stamps);
    let mut appends = ChannelAppends::new();
    let (mut checkpoint, new_versions) = ch
        .build_checkpoint(
            spec,
            &ctx.inner.names,
            (String::new(), ts),
            values_of,
            updated,
            saver.stores_appends.then_some(&mut appends),
        )
        .map_err(|e| match e {
            // A value that cannot be saved names the thread, the checkpoint, the channel and the path.
            GraphError::InvalidUpdate {
                error: crate::state::UpdateError::Serialization { key, message },
                ..
            } => GraphError::Storage(crate::checkpoint::CheckpointError::Serialize {
                thread_id: saver.thread.thread_id.clone(),
                channel: key,
                message: format!("for checkpoint '{id}' (step {step}): {message}"),
            }),
            other => other,
        })?;
    checkpoint.id = id;
    let extra =
        Arc::clone(ctx.checkpoint_extra.get_or_insert_with(|| Arc::new(checkpoint_extra(&ctx.config))));
    let parents = ctx.parent.as_ref().map(|p| p.parents.clone()).unwrap_or_default();
    let metadata = CheckpointMetadata { source, step, parents, extra };
    // The `checkpoints` event: what was saved, where, on top of what, and the tasks it plans.
    let event = ctx.sink.filter(|s| s.modes.checkpoints()).map(|_| {
        let parent = saver.current_config();
        let parent = parent.checkpoint_id.is_some().then(|| CheckpointConfig::clone(parent));
        (state_json(&ch.state), metadata.clone(), parent)
    });
    let last_saved = wants_end_state.then(|| {
        let parent = saver.current_config();
        LastSaved {
            id: checkpoint.id.clone(),
            ts: checkpoint.ts.clone(),
            metadata: metadata.clone(),
            parent: parent.checkpoint_id.is_some().then(|| CheckpointConfig::clone(parent)),
        }
    });
    if let Some(op) = saver.put(checkpoint, metadata, new_versions, appends)? {
        saver.submit(op).await?;
    }
    // A step boundary: the saves of the step before this one must be stored before the next step runs.
    saver.step_boundary().await?;
    ch.mark_saved();
    if let (Some(sink), Some((values, metadata, parent_config))) = (ctx.sink, event) {
        let config = CheckpointConfig::clone(saver.current_config());
        let id = config.checkpoint_id.as_deref().unwrap_or_default();
        let planned = plan_tasks(ch, spec, step + 1, id, &ctx.ns);
        let next = listing_order(&planned).map(|t| t.name.to_string()).collect();
        let tasks = listing_order(&planned)
            .map(|t| crate::snapshot::PregelTask {
                id: t.id.to_string(),
                name: t.name.to_string(),
                path: t.path.to_string(),
                error: None,
                interrupts: Vec::new(),
                result: None,
                state: subgraph_address(spec, t, &config.thread_id, &ctx.ns),
            })
            .collect();
        let event = CheckpointEvent { config, parent_config, metadata, step, values, next, tasks };
        sink.send(StreamData::Checkpoint(Box::new(event)));
    }
    if last_saved.is_some() {
        ctx.last_saved = last_saved;
    }
    Ok(())
}

/// A checkpoint a run loaded: its id, the checkpoint it was made from, and its metadata.
pub(crate) struct Origin {
    pub(crate) id: String,
    pub(crate) parent_config: Option<CheckpointConfig>,
    pub(crate) metadata: CheckpointMetadata,
}

/// Streams the `checkpoints` event of the checkpoint `origin` a resumed run starts from: the state `ch`
/// holds, and its tasks as the pending writes `saved` record them (their interrupts, results and errors),
/// as LangGraph streams the checkpoint each step starts from. Nothing when the run saved a checkpoint
/// since it loaded that one (that one was streamed as it was saved).
pub(crate) fn emit_loaded_checkpoint<S: State>(
    ctx: &Ctx<'_, S>,
    ch: &Channels<S>,
    saved: &SavedWrites,
    origin: Origin,
) {
    let Origin { id: loaded, parent_config, metadata } = origin;
    let (Some(sink), Some(saver)) = (ctx.sink, ctx.saver.as_ref()) else { return };
    let config = CheckpointConfig::clone(saver.current_config());
    let Some(id) = config.checkpoint_id.as_deref() else { return };
    if ctx.unsaved.is_some() || id != loaded {
        return;
    }
    let spec = &ctx.inner.spec;
    let step = metadata.step;
    let planned = plan_tasks(ch, spec, step + 1, id, &ctx.ns);
    let next = listing_order(&planned).map(|t| t.name.to_string()).collect();
    let is_result = result_channel(spec, &ctx.inner.names, ch.layout.n_state);
    let tasks = listing_order(&planned)
        .map(|t| crate::snapshot::PregelTask {
            state: subgraph_address(spec, t, &config.thread_id, &ctx.ns),
            ..saved.recorded_task(t, false, &is_result)
        })
        .collect();
    let values = state_json(&ch.state);
    let event = CheckpointEvent { config, parent_config, metadata, step, values, next, tasks };
    sink.send(StreamData::Checkpoint(Box::new(event)));
}

/// Where a subgraph task's checkpoints go (its namespace under the run's `ns`), as LangGraph's
/// `checkpoints` events tell it; `None` for a task of any other node.
fn subgraph_address<S: State>(
    spec: &GraphSpec<S>,
    task: &Task<S>,
    thread_id: &str,
    ns: &str,
) -> Option<crate::snapshot::TaskState> {
    spec.nodes[task.node()?].subgraph()?;
    let own = crate::runtime::task_ns(&task.name, &task.id);
    let checkpoint_ns = if ns.is_empty() { own } else { format!("{ns}|{own}") };
    let address = CheckpointConfig { thread_id: thread_id.to_owned(), checkpoint_ns, checkpoint_id: None };
    Some(crate::snapshot::TaskState::Config(address))
}

/// What a run keeps of the checkpoint it saved last, for [`end_snapshot`].
pub(crate) struct LastSaved {
    id: String,
    ts: String,
    metadata: CheckpointMetadata,
    /// The checkpoint it was made from, as a saver gives it back (`None` for the thread's first).
    parent: Option<CheckpointConfig>,
}

/// The thread's state as [`get_state`](crate::CompiledGraph::get_state) reads it from the run's last
/// checkpoint, when the run ends at step `step` with nothing left to run: that checkpoint is built again
/// from `ch` (which it was saved from) and read back as a reader loads it, so that the values are those
/// the saver holds (untracked channels left out). `None` when the run saved no checkpoint, its last is not
/// the thread's current one, or the checkpoint read back would plan a task (then the state is read).
pub(crate) fn end_snapshot<S: State>(
    ctx: &Ctx<'_, S>,
    ch: &mut Channels<S>,
    step: i64,
) -> Option<crate::snapshot::JsonSnapshot> {
    let (saver, saved) = (ctx.saver.as_ref()?, ctx.last_saved.as_ref()?);
    let config = CheckpointConfig::clone(saver.current_config());
    if config.checkpoint_id.as_deref() != Some(saved.id.as_str()) || saved.metadata.step != step - 1 {
        return None;
    }
    let (spec, names) = (&ctx.inner.spec, &ctx.inner.names);
    let stamps = (saved.id.clone(), saved.ts.clone());
    let (checkpoint, _) = ch.build_checkpoint(spec, names, stamps, None, &ChannelSet::new(), None).ok()?;
    let restored = Channels::from_checkpoint(spec, names, &checkpoint, &config.thread_id).ok()?;
    if !plan_tasks(&restored, spec, step, &saved.id, &ctx.ns).is_empty() {
        return None;
    }
    Some(crate::snapshot::JsonSnapshot {
        values: crate::state::state_json(&restored.state),
        next: Vec::new(),
        config: Some(config),
        parent_config: saved.parent.clone(),
        metadata: Some(saved.metadata.clone()),
        created_at: Some(saved.ts.clone()),
        tasks: Vec::new(),
        interrupts: Vec::new(),
    })
}
