//! The run loop: load the thread, apply the input, then plan, run, apply and save superstep by superstep.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};
use tracing::Instrument as _;
use weft_runnable_core::{Error, RunKind, RunScope, RunnableConfig};

use crate::checkpoint::stamp::checkpoint_stamps;
use crate::checkpoint::{CheckpointConfig, CheckpointSource, special};
use crate::control::{Progress, RunControl};
use crate::error::{GraphError, GraphResult};
use crate::pregel::apply::{apply_control_writes, apply_new_writes, apply_new_writes_with_tasks, route};
use crate::pregel::channels::Channels;
use crate::pregel::emit::{emit_task_result, emit_update};
use crate::pregel::graph::{
    DEFAULT_GRAPH_RECURSION_LIMIT, GraphInput, GraphOutput, Inner, RunOptions, SubgraphCheckpoints,
    breakpoint_flags,
};
use crate::pregel::parent::ParentRun;
use crate::pregel::plan::{consume_tasks, plan_tasks, plan_tasks_into, triggers_of};
use crate::pregel::save::save_checkpoint;
use crate::pregel::saved::SavedWrites;
use crate::pregel::saver::RunSaver;
use crate::pregel::sink::Sink;
use crate::pregel::step::{StepOutcome, persist_single, run_step, save_failed};
use crate::pregel::task::{
    Task, TaskKind, TaskWrites, push_goto, state_json, writes_from_json, writes_to_json,
};
use crate::pregel::trace;
use crate::state::{ChannelSet, State};
use crate::stream::{StreamData, StreamMode};
use crate::types::{Command, CommandGraph, Resume};

pub(crate) struct Ctx<'a, S: State> {
    pub(crate) inner: &'a Inner<S>,
    /// The run's config, shared by the tasks' lazily built configs.
    pub(crate) config: Arc<RunnableConfig>,
    pub(crate) sink: Option<&'a Sink<S>>,
    pub(crate) saver: Option<RunSaver>,
    pub(crate) options: &'a RunOptions,
    pub(crate) null_resume: Arc<Mutex<Option<Value>>>,
    pub(crate) resume_by_id: Map<String, Value>,
    pub(crate) ns: String,
    pub(crate) thread_id: Option<String>,
    pub(crate) scope: Option<RunScope>,
    /// The run's `tracing` span (disabled when nobody subscribes).
    pub(crate) span: tracing::Span,
    /// Set when this run is a subgraph of another run.
    pub(crate) parent: Option<ParentRun>,
    /// Whether the run continues a paused or failed step (its subgraphs then resume too).
    pub(crate) resuming: bool,
    /// In `exit` durability, the id and time of the checkpoint the run holds but has not saved yet: the
    /// step's task ids derive from it, and it is saved under it if the run stops there.
    pub(crate) unsaved: Option<(String, String)>,
    /// The store nodes reach through their runtime.
    pub(crate) store: Option<Arc<dyn crate::store::Store>>,
    /// Per node: whether the run pauses before it (the run's own list, or the compiled one).
    pub(crate) interrupt_before: std::borrow::Cow<'a, [bool]>,
    /// Per node: whether the run pauses after it.
    pub(crate) interrupt_after: std::borrow::Cow<'a, [bool]>,
    /// The functional-API tasks the step's tasks called, by name (for `versions_seen`).
    pub(crate) called: std::collections::BTreeSet<Arc<str>>,
    /// The caller's metadata every checkpoint of the run carries, built at its first save.
    pub(crate) checkpoint_extra: Option<Arc<Map<String, Value>>>,
    /// The run's last checkpoint, as far as [`EndState`](crate::EndState) needs it (only when asked for).
    pub(crate) last_saved: Option<crate::pregel::save::LastSaved>,
    /// The state to hand back through [`RunOptions::end_state`] once the run's saves are confirmed.
    pub(crate) end_state: Option<crate::snapshot::JsonSnapshot>,
    /// What its tasks' configs share, made by the first task that runs.
    pub(crate) config_source: std::sync::OnceLock<Arc<dyn crate::runtime::ConfigSource>>,
    /// The runtime of the last lone task that ran in place, for the next task of the same node to
    /// fill in again instead of making one (when nothing else holds it by then).
    pub(crate) spare_runtime: Option<crate::runtime::Runtime>,
}

impl<S: State> Ctx<'_, S> {
    /// Whether the run hands back the state it leaves: a root run of the root namespace that was asked
    /// to, saving every step (`sync` or `async`).
    pub(crate) fn wants_end_state(&self) -> bool {
        self.options.end_state.is_some()
            && self.parent.is_none()
            && self.ns.is_empty()
            && self.saver.as_ref().is_some_and(|s| s.durability != crate::types::Durability::Exit)
    }
}

/// The breakpoint flags of a run: its own list (root runs only: a run's breakpoints apply to the root graph,
/// as in LangGraph), else the compiled ones.
fn breakpoints<'a, S: State>(
    inner: &Inner<S>,
    own: &Option<Vec<String>>,
    compiled: &'a [bool],
    root: bool,
) -> std::borrow::Cow<'a, [bool]> {
    match own {
        Some(names) if root => std::borrow::Cow::Owned(breakpoint_flags(&inner.spec, names)),
        _ => std::borrow::Cow::Borrowed(compiled),
    }
}

/// Runs a graph from `input` to the end or to an interrupt.
pub(crate) async fn run<S: State>(
    inner: &Arc<Inner<S>>,
    input: GraphInput<S>,
    config: Cow<'_, RunnableConfig>,
    options: &RunOptions,
    sink: Option<&Sink<S>>,
) -> GraphResult<GraphOutput<S>> {
    let limit =
        config.recursion_limit_or(inner.config.recursion_limit.unwrap_or(DEFAULT_GRAPH_RECURSION_LIMIT));
    if limit < 1 {
        return Err(GraphError::InvalidRecursionLimit);
    }
    let span = trace::graph_span(&inner.name, inner.config.trace_as_agent, &config);
    let scope = config.callbacks.as_ref().map(|_| {
        let input_json = match &input {
            GraphInput::Update(_) => json!("<input>"),
            GraphInput::Command(_) => json!("<command>"),
            GraphInput::Resume => Value::Null,
        };
        RunScope::start_in_span(&config, &inner.name, RunKind::Chain, Some(input_json), span.clone())
    });
    if scope.is_none() {
        trace::record_run_id(&span, &config);
    }
    let parent = config.extensions.get::<ParentRun>().cloned();
    let (parent_ns, parent_node_ns) = parent.as_ref().map(ParentRun::next_namespaces).unzip();
    let ns = match (parent_ns, parent_node_ns) {
        (Some(_), Some(node_ns)) if inner.config.subgraph_checkpoints == SubgraphCheckpoints::PerNode => {
            node_ns
        }
        (Some(ns), _) => ns,
        _ => config.configurable_str("checkpoint_ns").unwrap_or_default().to_owned(),
    };
    let thread_id = config.configurable_str("thread_id").map(str::to_owned);
    // A streamed run owns its config: no copy is made of it here.
    let mut run_config = match &scope {
        Some(scope) => scope.child_config().clone(),
        None => config.into_owned(),
    };
    // A graph run inside a task (a tool running a graph) never reads that task's runtime, nor the state
    // its tools get with it (LangGraph 1.2.23: a graph inside a `Send` task never reads its parent's state).
    if run_config.extensions.get::<crate::runtime::Runtime>().is_some() {
        run_config.extensions.remove::<crate::runtime::Runtime>();
    }
    if let Some(p) = &parent {
        let (called, node) = &p.called;
        called.record(node, || (inner.reader)(inner));
    }
    let resuming = match &input {
        GraphInput::Resume => true,
        GraphInput::Command(cmd) => cmd.resume.is_some(),
        GraphInput::Update(_) => parent.as_ref().is_some_and(|p| p.resuming),
    };
    let child_sink = match (sink, parent.as_ref().and_then(|p| p.stream.clone())) {
        (None, Some(stream)) => Some(Sink::forwarding(stream, inner.spec.initial.clone())),
        _ => None,
    };
    let sink = sink.or(child_sink.as_ref());
    let root = parent.is_none();
    let interrupt_before = breakpoints(inner, &options.interrupt_before, &inner.interrupt_before, root);
    let interrupt_after = breakpoints(inner, &options.interrupt_after, &inner.interrupt_after, root);
    let mut ctx = Ctx {
        inner,
        config: Arc::new(run_config),
        sink,
        saver: None,
        options,
        null_resume: parent
            .as_ref()
            .map_or_else(|| Arc::new(Mutex::new(None)), |p| Arc::clone(&p.null_resume)),
        resume_by_id: parent.as_ref().map(|p| p.resume_by_id.clone()).unwrap_or_default(),
        ns,
        store: inner.config.store.clone().or_else(|| parent.as_ref().and_then(|p| p.store.clone())),
        thread_id,
        scope,
        span: span.clone(),
        parent,
        resuming,
        unsaved: None,
        interrupt_before,
        interrupt_after,
        called: std::collections::BTreeSet::new(),
        checkpoint_extra: None,
        last_saved: None,
        end_state: None,
        config_source: std::sync::OnceLock::new(),
        spare_runtime: None,
    };
    if !span.is_disabled() {
        span.record("checkpoint_ns", ctx.ns.as_str());
    }
    let result = run_inner(&mut ctx, input, limit).instrument(span.clone()).await.map_err(|mut e| {
        // A router's failure is raised where only the node is known.
        if let GraphError::Node { node, .. } = &mut e {
            if node.graph().is_empty() {
                *node = crate::error::NodeRef::new(inner.name.as_str(), node.name());
            }
        }
        e
    });
    let result = settle(&mut ctx, result).await;
    if !span.is_disabled() {
        let checkpoint = ctx.saver.as_ref().and_then(|s| s.current_config().checkpoint_id.clone());
        let interrupts = result.as_ref().map(|out| out.interrupts.as_slice());
        trace::record_graph_end(&span, checkpoint.as_deref(), interrupts);
        if let Ok(out) = &result {
            trace::record_output(&span, || state_json(&out.value));
        }
    }
    if let Some(scope) = &ctx.scope {
        match &result {
            Ok(out) => scope.end(None, &state_json(&out.value)),
            Err(e) => scope.fail(None, &Error::from(e.clone())),
        }
    }
    result
}

/// What follows a run's loop: its saves confirmed (a failed one fails the run), its end state handed
/// back when asked for, and (root runs only: a subgraph's checkpoints go with its thread's) the graph's
/// retention applied once the saves are done.
async fn settle<S: State>(
    ctx: &mut Ctx<'_, S>,
    result: GraphResult<GraphOutput<S>>,
) -> GraphResult<GraphOutput<S>> {
    // A run that hands back its end state leaves the saves of its last step, still held back, to the
    // caller when asked to (see `EndState::with_last_saves`); every other save is stored first.
    let handed = match (&result, ctx.end_state.is_some(), ctx.saver.as_mut()) {
        (Ok(_), true, Some(saver)) => saver.take_held(),
        _ => Vec::new(),
    };
    let result = match ctx.saver.as_mut() {
        Some(saver) => match saver.finish().await {
            Ok(()) => result,
            Err(e) => result.and(Err(e)),
        },
        None => result,
    };
    if let (Ok(_), Some(slot), Some(snapshot)) = (&result, &ctx.options.end_state, ctx.end_state.take()) {
        slot.set(snapshot, handed);
    }
    match (&result, &ctx.inner.config.retention, &ctx.saver, &ctx.parent) {
        (Ok(_), Some(policy), Some(saver), None) => {
            match policy.apply(saver.checkpointer.as_ref(), &saver.thread.thread_id).await {
                Ok(()) => result,
                Err(e) => Err(GraphError::Storage(e)),
            }
        }
        _ => result,
    }
}

pub(crate) async fn run_inner<S: State>(
    ctx: &mut Ctx<'_, S>,
    input: GraphInput<S>,
    limit: u32,
) -> GraphResult<GraphOutput<S>> {
    let mut loaded = load_thread(ctx).await?;
    let input = resume_subgraph_step(ctx, &loaded, input);
    let resumed = !matches!(input, GraphInput::Update(_));
    let (step, dirty) = apply_input(ctx, &mut loaded, input).await?;
    // A resumed run first streams the state it resumes (LangGraph's `values` mode does the same), and
    // the checkpoint it resumes from, as LangGraph's first step of a run does.
    if resumed && loaded.loaded_step.is_some() {
        if let Some(sink) = ctx.sink.filter(|s| s.modes.has(StreamMode::Values)) {
            sink.send(StreamData::Values { state: loaded.ch.state.clone(), interrupts: Vec::new() });
        }
        if !loaded.replay {
            if let Some(origin) = loaded.origin.take() {
                crate::pregel::save::emit_loaded_checkpoint(ctx, &loaded.ch, &loaded.saved, origin);
            }
        }
    }
    // LangGraph's count: a fresh run may take `limit` steps after its input step; a resumed one `limit`
    // steps after the step it resumes, plus that step.
    let stop = match (resumed, loaded.loaded_step) {
        (true, Some(s)) => s + 1 + i64::from(limit) + 1,
        _ => step - 1 + i64::from(limit) + 1,
    };
    let Loaded { ch, saved, .. } = loaded;
    supersteps(ctx, Pending { ch, saved, dirty }, step, stop, limit).await
}

/// The run's channels between supersteps: the state, the writes saved for the step to come, and the
/// channels changed since the last saved checkpoint.
struct Pending<S: State> {
    ch: Channels<S>,
    saved: SavedWrites,
    dirty: ChannelSet,
}

/// Plans, runs, applies and saves supersteps from `step` until nothing is triggered, an interrupt, a
/// drain, an error or the recursion limit.
async fn supersteps<S: State>(
    ctx: &mut Ctx<'_, S>,
    mut run: Pending<S>,
    mut step: i64,
    stop: i64,
    limit: u32,
) -> GraphResult<GraphOutput<S>> {
    let spec = &ctx.inner.spec;
    // A drain stops root runs only: a subgraph runs inside the step in flight, which finishes.
    let control =
        if ctx.parent.is_none() { ctx.config.extensions.get::<RunControl>().cloned() } else { None };
    let progress = Progress::of(&ctx.config).cloned();
    let mut tasks = Vec::new();
    loop {
        if let Some(progress) = &progress {
            progress.note();
        }
        // The last step's chunks wait for the reader before this one makes more.
        if let Some(sink) = ctx.sink {
            sink.ready().await;
        }
        if step > stop {
            return Err(GraphError::RecursionLimit { limit });
        }
        trace::record_step(&ctx.span, step);
        let current = ctx.saver.as_ref().map(|s| Arc::clone(s.current_config()));
        let current_id = match &ctx.unsaved {
            Some((id, _)) => id.as_str(),
            None => current.as_ref().and_then(|c| c.checkpoint_id.as_deref()).unwrap_or_default(),
        };
        plan_tasks_into(&mut tasks, &run.ch, spec, step, current_id, &ctx.ns);
        if tasks.is_empty() {
            break;
        }
        // The run goes on: the saves of the last step's end, if held back, go out now.
        if let Some(saver) = ctx.saver.as_mut() {
            saver.release().await?;
        }
        if control.as_ref().is_some_and(RunControl::is_drain_requested) {
            save_on_exit(ctx, &mut run.ch, step, &run.dirty).await?;
            return Err(GraphError::Drained { next_step: step });
        }
        if pauses_before(ctx, &run, &tasks) {
            // Boxed: a pause is rare, and the loop's future need not hold its save's space.
            Box::pin(pause_before(ctx, &mut run, step)).await?;
            return Ok(GraphOutput { value: run.ch.state, interrupts: Vec::new() });
        }
        let outcome = if spec.functional {
            Box::pin(run_step::<S, true>(ctx, &run.ch, &tasks, &run.saved, step, stop)).await
        } else {
            run_step::<S, false>(ctx, &run.ch, &tasks, &run.saved, step, stop).await
        };
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(err) => {
                save_on_exit(ctx, &mut run.ch, step, &run.dirty).await?;
                return Err(err);
            }
        };
        let (results, handled) = match outcome {
            StepOutcome::Done(results, handled) => (results, handled),
            StepOutcome::Interrupted { interrupts, finished } => {
                // Each paused task has streamed its interrupt as it paused.
                save_on_exit(ctx, &mut run.ch, step, &run.dirty).await?;
                // The result shows the writes of the tasks that finished, as `get_state` does.
                let updates: Vec<S::Update> = finished.into_iter().flat_map(|w| w.updates).collect();
                if !updates.is_empty() {
                    let changed =
                        run.ch.state.apply(updates).map_err(|error| invalid(error, step, &tasks))?;
                    // As LangGraph, a root run streams that state as its last `values` chunk.
                    let sink = ctx.sink.filter(|s| ctx.parent.is_none() && s.modes.has(StreamMode::Values));
                    if let Some(sink) = sink.filter(|_| writes_output(spec, &run.ch, &changed)) {
                        sink.send(StreamData::Values { state: run.ch.state.clone(), interrupts: Vec::new() });
                    }
                }
                return Ok(GraphOutput { value: run.ch.state, interrupts });
            }
        };
        if end_step(ctx, &mut run, (tasks.as_slice(), handled.as_slice()), results, step).await? {
            return Ok(GraphOutput { value: run.ch.state, interrupts: Vec::new() });
        }
        step += 1;
    }
    if !run.dirty.is_empty() && ctx.saver.is_some() {
        save_checkpoint(
            ctx,
            &mut run.ch,
            CheckpointSource::Loop,
            step - 1,
            Some(&run.dirty),
            &ChannelSet::new(),
        )
        .await?;
    }
    if ctx.wants_end_state() {
        ctx.end_state = crate::pregel::save::end_snapshot(ctx, &mut run.ch, step);
    }
    Ok(GraphOutput { value: run.ch.state, interrupts: Vec::new() })
}

/// Whether the run pauses before the step of `tasks`: one of them is to pause before (a static breakpoint)
/// and the channels changed since the last pause.
fn pauses_before<S: State>(ctx: &Ctx<'_, S>, run: &Pending<S>, tasks: &[Task<S>]) -> bool {
    tasks.iter().any(|t| t.node().is_some_and(|n| ctx.interrupt_before[n]))
        && changed_since_interrupt(&run.ch)
}

/// Pauses before a step ([`pauses_before`] said so): saves what changed and streams the pause.
async fn pause_before<S: State>(ctx: &mut Ctx<'_, S>, run: &mut Pending<S>, step: i64) -> GraphResult<()> {
    run.ch.see_for_interrupts();
    if !run.dirty.is_empty() {
        save_checkpoint(
            ctx,
            &mut run.ch,
            CheckpointSource::Loop,
            step - 1,
            Some(&run.dirty),
            &ChannelSet::new(),
        )
        .await?;
    }
    if let Some(sink) = ctx.sink.filter(|s| s.modes.has(StreamMode::Updates)) {
        sink.send(StreamData::Interrupt(Vec::new()));
    }
    Ok(())
}

/// The end of a superstep that ran to completion: applies its writes, saves (or stamps) its checkpoint,
/// streams its values, and takes the static breakpoints after nodes. Returns whether the run pauses.
/// `handled` are the error handler nodes that ran in the step.
async fn end_step<S: State>(
    ctx: &mut Ctx<'_, S>,
    run: &mut Pending<S>,
    (tasks, handled): (&[Task<S>], &[usize]),
    results: Vec<TaskWrites<S>>,
    step: i64,
) -> GraphResult<bool> {
    let spec = &ctx.inner.spec;
    // A handler ran from a failure (no trigger seen): its `versions_seen` entry is empty, as a `Send`'s.
    for &h in handled {
        run.ch.ran[h] = true;
    }
    // The saves of the step's end wait until the loop knows whether it goes on (when the run hands back
    // its last saves).
    if let Some(saver) = ctx.saver.as_mut() {
        saver.hold();
    }
    let (updated, changed) = apply_step(ctx, &mut run.ch, tasks, results, &run.saved, step).await?;
    run.dirty.union_with(&changed);
    run.saved = SavedWrites::default();
    if let Some(saver) = ctx.saver.as_mut() {
        saver.clear_deferred();
    }
    let durable = durable(ctx);
    if durable {
        save_checkpoint(ctx, &mut run.ch, CheckpointSource::Loop, step, Some(&run.dirty), &updated).await?;
        run.dirty = ChannelSet::new();
    } else if ctx.saver.is_some() {
        ctx.unsaved = Some(checkpoint_stamps());
    }
    if let Some(sink) = ctx.sink.filter(|s| s.modes.has(StreamMode::Values)) {
        // As LangGraph: after a step that wrote an output channel.
        if writes_output(spec, &run.ch, &changed) {
            sink.send(StreamData::Values { state: run.ch.state.clone(), interrupts: Vec::new() });
        }
    }
    // Static breakpoints after nodes.
    if !(tasks.iter().any(|t| t.node().is_some_and(|n| ctx.interrupt_after[n]))
        && changed_since_interrupt(&run.ch))
    {
        return Ok(false);
    }
    run.ch.see_for_interrupts();
    if !durable {
        Box::pin(save_checkpoint(ctx, &mut run.ch, CheckpointSource::Loop, step, Some(&run.dirty), &updated))
            .await?;
    }
    if let Some(sink) = ctx.sink.filter(|s| s.modes.has(StreamMode::Updates)) {
        sink.send(StreamData::Interrupt(Vec::new()));
    }
    Ok(true)
}

/// Whether `changed` holds an output channel of the graph: a state channel (an entrypoint's output is its
/// return value, on the channel named `END`).
fn writes_output<S: State>(
    spec: &crate::pregel::spec::GraphSpec<S>,
    ch: &Channels<S>,
    changed: &ChannelSet,
) -> bool {
    if spec.functional {
        ch.state.channel_index(crate::types::END).is_some_and(|i| changed.contains(i))
    } else {
        (0..ch.layout.n_state).any(|i| changed.contains(i))
    }
}

/// Applies a completed step's writes in task order (a lone task's routes run on the state after its own
/// writes). Returns the channels the tasks wrote (the checkpoint's `updated_channels`) and every channel
/// the step changed.
async fn apply_step<S: State>(
    ctx: &mut Ctx<'_, S>,
    ch: &mut Channels<S>,
    tasks: &[Task<S>],
    mut writes: Vec<TaskWrites<S>>,
    saved: &SavedWrites,
    step: i64,
) -> GraphResult<(ChannelSet, ChannelSet)> {
    let spec = &ctx.inner.spec;
    // The versions each task was triggered by (a `Send`'s task records none, as in LangGraph; nor does
    // a task call of the functional API).
    ch.called.append(&mut ctx.called);
    for task in tasks {
        let slot = task.node().unwrap_or(ch.layout.n_nodes);
        ch.ran[slot] = true;
        if !matches!(task.kind, TaskKind::Push { .. }) {
            for trigger in triggers_of(ch.layout, spec, task) {
                ch.see(slot, trigger);
            }
        }
    }
    // Apply the step's writes in task order.
    let mut consumed = ChannelSet::new();
    consume_tasks(ch, spec, tasks, &mut consumed);
    let mut changed = ChannelSet::new();
    let single = tasks.len() == 1;
    let route_after = single && !writes[0].routed;
    // Before applying: applying takes the updates out of the writes.
    let written = written_channels(&ch.state, &writes);
    if route_after {
        // One task: its routers see exactly the state after its own writes, which is the applied state.
        // Its updates are read again only to be saved or streamed: kept (a copy) only for that.
        let updates: Vec<S::Update> = std::mem::take(&mut writes[0].updates);
        let kept = if ctx.saver.is_some() || ctx.sink.is_some() { updates.clone() } else { Vec::new() };
        let applied = ch.apply_updates(updates).map_err(|error| invalid(error, step, tasks))?;
        changed.union_with(&applied);
        writes[0].updates = kept;
        let node = tasks[0].node().map_or(&spec.start, |n| &spec.nodes[n]);
        if let Err(err) = route(spec, node, &ch.state, &mut writes[0], step) {
            // The node's writes are saved with the error, as in LangGraph (see `save_failed`).
            let node_writes = TaskWrites::from_updates(std::mem::take(&mut writes[0].updates));
            Box::pin(save_failed(ctx, &tasks[0], &ch.state, Some(&node_writes), &err, None)).await?;
            emit_task_result(
                ctx,
                &ch.state,
                &tasks[0],
                Some(err.to_string()),
                Some(&node_writes),
                Vec::new(),
                step,
            );
            // Not in `exit` mode: there the task's routers ran with it (see `run_step`).
            return Err(err);
        }
        apply_control_writes(ch, spec, &writes, &mut changed, tasks);
        persist_single(ctx, &tasks[0], &ch.state, &writes[0], saved, step).await?;
        emit_update(
            ctx,
            &tasks[0],
            &writes[0],
            writes[0].cached || (!saved.is_empty() && saved.finished(&tasks[0].id).is_some()),
        );
        emit_task_result(ctx, &ch.state, &tasks[0], None, Some(&writes[0]), Vec::new(), step);
    } else {
        apply_new_writes_with_tasks(ch, spec, &mut writes, &mut changed, step, tasks)?;
    }
    // The checkpoint's `updated_channels`: what the tasks wrote, not the triggers they consumed.
    let updated = changed.clone();
    let ended = ch.end_step(&written);
    changed.union_with(&ended);
    changed.union_with(&consumed);
    ch.bump(&changed)?;
    Ok((updated, changed))
}

/// What a run found on its thread: the channels of the checkpoint it starts from, that checkpoint's pending
/// writes, and whether it replays an earlier checkpoint (time travel).
struct Loaded<S: State> {
    ch: Channels<S>,
    saved: SavedWrites,
    /// The null task's writes saved on the checkpoint (an earlier command's update and answer).
    null_writes: Vec<(String, Value)>,
    /// The step of the checkpoint loaded, when there is one.
    loaded_step: Option<i64>,
    replay: bool,
    /// The loaded checkpoint's id, parent and metadata, kept for its `checkpoints` event when a resumed
    /// run streams that mode.
    origin: Option<crate::pregel::save::Origin>,
}

/// Loads the thread the run continues (none without a checkpointer) and sets up the run's saver.
async fn load_thread<S: State>(ctx: &mut Ctx<'_, S>) -> GraphResult<Loaded<S>> {
    let inner = ctx.inner;
    let (spec, names) = (&inner.spec, &inner.names);
    let mut l = Loaded {
        ch: Channels::new(spec),
        saved: SavedWrites::default(),
        null_writes: Vec::new(),
        loaded_step: None,
        replay: false,
        origin: None,
    };
    let checkpointer = match (&ctx.parent, inner.config.subgraph_checkpoints) {
        (Some(_), SubgraphCheckpoints::Never) => None,
        (Some(p), _) => inner.config.checkpointer.clone().or_else(|| p.checkpointer.clone()),
        (None, _) => inner.config.checkpointer.clone(),
    };
    let Some(cp) = &checkpointer else { return Ok(l) };
    let thread_id = ctx.thread_id.clone().ok_or(GraphError::MissingThreadId)?;
    let checkpoint_id = match ctx.parent {
        Some(_) => None,
        None => ctx.config.configurable_str("checkpoint_id").map(str::to_owned),
    };
    l.replay = checkpoint_id.is_some();
    let address =
        CheckpointConfig { thread_id: thread_id.clone(), checkpoint_ns: ctx.ns.clone(), checkpoint_id };
    let mut saver = RunSaver::new(
        Arc::clone(cp),
        CheckpointConfig { thread_id, checkpoint_ns: ctx.ns.clone(), checkpoint_id: None },
        ctx.options.durability,
    );
    // The head the caller read for the run, if it did (for this thread's root namespace, no replay).
    let given = match (&ctx.parent, &address.checkpoint_id, &ctx.options.head) {
        (None, None, Some(head)) if ctx.ns.is_empty() => head.take_for(&address.thread_id),
        _ => None,
    };
    let tuple = match given {
        Some(tuple) => tuple,
        None => cp.get_tuple(&address).await?,
    };
    // The head the run's first checkpoint must extend: for a replay, the thread's latest checkpoint,
    // not the one it starts from.
    let head = match (&tuple, l.replay) {
        (Some(t), false) => Some(t.checkpoint.id.clone()),
        (None, false) => None,
        (_, true) => cp.get_tuple(saver.current_config()).await?.map(|t| t.checkpoint.id),
    };
    if let Some(tuple) = tuple {
        l.ch = Channels::from_checkpoint(spec, names, &tuple.checkpoint, &tuple.config.thread_id)?;
        l.loaded_step = Some(tuple.metadata.step);
        if ctx.sink.is_some_and(|s| s.modes.checkpoints()) {
            l.origin = Some(crate::pregel::save::Origin {
                id: tuple.checkpoint.id.clone(),
                parent_config: tuple.parent_config.clone(),
                metadata: tuple.metadata.clone(),
            });
        }
        saver.set_current(tuple.checkpoint.id.clone());
        // Replaying a checkpoint forks it, except one that `update_state` made (an update or a copy)
        // and that is still the thread's latest: the run continues from it as from any latest
        // checkpoint (LangGraph does the same).
        if l.replay && matches!(tuple.metadata.source, CheckpointSource::Update | CheckpointSource::Fork) {
            l.replay = head.as_deref() != Some(tuple.checkpoint.id.as_str());
        }
        if !l.replay {
            l.null_writes = tuple
                .pending_writes
                .iter()
                .filter(|w| w.task_id == special::NULL_TASK_ID)
                .map(|w| (w.channel.clone(), w.value.clone()))
                .collect();
            l.saved = SavedWrites::from_pending(
                &tuple.config.thread_id,
                &tuple.checkpoint.id,
                tuple.pending_writes.into_iter().map(|w| (w.task_id, w.channel, w.value)),
            );
        }
    } else if l.replay {
        return Err(GraphError::Storage(crate::checkpoint::CheckpointError::Invalid(format!(
            "checkpoint '{}' of thread '{}' not found",
            address.checkpoint_id.unwrap_or_default(),
            address.thread_id
        ))));
    }
    l.ch.set_versioner(Arc::clone(cp));
    saver.set_head(head);
    let hands_back = ctx.options.end_state.as_ref().is_some_and(crate::pregel::graph::EndState::hands_back);
    if hands_back && ctx.parent.is_none() && ctx.ns.is_empty() && inner.config.retention.is_none() {
        saver.hand_back_last_saves();
    }
    ctx.saver = Some(saver);
    Ok(l)
}

/// A subgraph whose parent is resuming continues its own pending step instead of starting over.
fn resume_subgraph_step<S: State>(ctx: &Ctx<'_, S>, l: &Loaded<S>, input: GraphInput<S>) -> GraphInput<S> {
    match input {
        GraphInput::Update(_) if ctx.parent.is_some() && ctx.resuming && l.loaded_step.is_some() => {
            if plan_tasks(&l.ch, &ctx.inner.spec, 0, "", &ctx.ns).is_empty() {
                input
            } else {
                GraphInput::Resume
            }
        }
        other => other,
    }
}

/// Applies the run's input (a resume, a command, or fresh input) to the loaded channels. Returns the first
/// step to plan and the channels changed since the last saved checkpoint.
async fn apply_input<S: State>(
    ctx: &mut Ctx<'_, S>,
    l: &mut Loaded<S>,
    input: GraphInput<S>,
) -> GraphResult<(i64, ChannelSet)> {
    let spec = &ctx.inner.spec;
    let mut dirty = ChannelSet::new();
    // A resume first re-applies the input an earlier command gave the same step (LangGraph's null-task
    // writes): an update sent with a resume holds even if the resumed node pauses again.
    if !l.null_writes.is_empty() && !matches!(input, GraphInput::Update(_)) {
        let mut writes = writes_from_json(spec, &l.ch.state, &l.null_writes, l.saved.origin())?;
        let mut changed = ChannelSet::new();
        let step = l.loaded_step.map_or(0, |s| s + 1);
        apply_new_writes(&mut l.ch, spec, std::slice::from_mut(&mut writes), &mut changed, step)?;
        l.ch.bump(&changed)?;
        dirty.union_with(&changed);
    }
    let step = match input {
        GraphInput::Resume => resume(ctx, l).await?,
        GraphInput::Command(cmd) => apply_command(ctx, l, cmd, &mut dirty).await?,
        GraphInput::Update(updates) => apply_fresh_input(ctx, l, updates, &mut dirty).await?,
    };
    Ok((step, dirty))
}

/// A resume without a command: the step after the loaded checkpoint (a replay first forks it).
async fn resume<S: State>(ctx: &mut Ctx<'_, S>, l: &mut Loaded<S>) -> GraphResult<i64> {
    let names = &ctx.inner.names;
    let Some(s) = l.loaded_step else { return Err(GraphError::EmptyInput) };
    let mut step = s + 1;
    // An answer an earlier `Command::resume` saved on this checkpoint (the null task's
    // `__resume__` write) still answers the first question that has none, as LangGraph's
    // scratchpad reads it from the checkpoint's pending writes.
    if ctx.parent.is_none()
        && let Some((_, v)) = l.null_writes.iter().rev().find(|(c, _)| c == special::RESUME)
        && let Ok(mut slot) = ctx.null_resume.lock()
    {
        *slot = Some(v.clone());
    }
    l.ch.see_for_interrupts();
    if l.replay {
        // Time travel: fork the addressed checkpoint, then re-run what follows it.
        let all = (0..names.channels.len()).collect::<ChannelSet>();
        save_checkpoint(ctx, &mut l.ch, CheckpointSource::Fork, step, Some(&all), &ChannelSet::new()).await?;
        step += 1;
    }
    Ok(step)
}

/// A command: checks it, takes its resume answers, applies its update and `goto` (saved as the null task's
/// writes on the checkpoint it resumes). Returns the step after that checkpoint.
async fn apply_command<S: State>(
    ctx: &mut Ctx<'_, S>,
    l: &mut Loaded<S>,
    cmd: Command<S>,
    dirty: &mut ChannelSet,
) -> GraphResult<i64> {
    let (spec, names) = (&ctx.inner.spec, &ctx.inner.names);
    if cmd.graph == CommandGraph::Parent && ctx.parent.is_none() {
        return Err(GraphError::NoParentGraph);
    }
    if cmd.is_empty() {
        return Err(GraphError::EmptyCommand);
    }
    let mut null_answer = match cmd.resume.clone() {
        Some(resume) => take_resume(ctx, &l.saved, resume)?,
        None => None,
    };
    // A command continues a thread: without a saved checkpoint there is nothing to continue.
    let Some(s) = l.loaded_step else { return Err(GraphError::EmptyInput) };
    let step = s + 1;
    if !cmd.update.is_empty() || !cmd.goto.is_empty() {
        let mut writes = TaskWrites::from_updates(cmd.update);
        for u in &mut writes.updates {
            l.ch.state.prepare_update(u);
        }
        for g in cmd.goto {
            push_goto(spec, special::START, g, &mut writes)?;
        }
        // Saved as the null task's writes on the checkpoint being resumed, so they hold until
        // the step completes (in `exit` mode they go with the checkpoint saved at exit).
        if let Some(saver) = ctx.saver.as_mut() {
            let mut json = writes_to_json(spec, names, &l.ch.state, &writes)?;
            if let Some(v) = null_answer.take() {
                json.push(crate::pregel::task::resume_write(v));
            }
            let (id, path) = (Arc::from(special::NULL_TASK_ID), Arc::from(""));
            saver.put_writes_now(&id, &path, json).await?;
        }
        let mut changed = ChannelSet::new();
        apply_new_writes(&mut l.ch, spec, std::slice::from_mut(&mut writes), &mut changed, step)?;
        l.ch.bump(&changed)?;
        dirty.union_with(&changed);
    }
    if let (Some(v), Some(saver)) = (null_answer, ctx.saver.as_mut()) {
        let (id, path) = (Arc::from(special::NULL_TASK_ID), Arc::from(""));
        saver.put_writes_now(&id, &path, vec![crate::pregel::task::resume_write(v)]).await?;
    }
    // The run proceeds past the checkpoint it resumes, the command's update included: a static
    // breakpoint already taken there does not pause it again.
    l.ch.see_for_interrupts();
    Ok(step)
}

/// A command's resume: a single answer (the one pending interrupt's, saved as the null task's answer) or
/// answers by interrupt id (checked against the pending ones at the root). Returns the single answer.
fn take_resume<S: State>(
    ctx: &mut Ctx<'_, S>,
    saved: &SavedWrites,
    resume: Resume,
) -> GraphResult<Option<Value>> {
    if ctx.saver.is_none() {
        return Err(GraphError::ResumeWithoutCheckpointer);
    }
    match resume {
        Resume::Value(v) => {
            let pending = saved.pending_interrupts();
            if pending.len() > 1 {
                return Err(GraphError::AmbiguousResume(pending.into_iter().map(|i| i.id).collect()));
            }
            // Saved as the null task's answer on the checkpoint being resumed, as LangGraph saves it.
            if let Ok(mut slot) = ctx.null_resume.lock() {
                *slot = Some(v.clone());
            }
            Ok(Some(v))
        }
        Resume::ById(map) => {
            // The root checks the ids; a subgraph gets the map of the whole run.
            if ctx.parent.is_none() {
                let pending: Vec<String> = saved.pending_interrupts().into_iter().map(|i| i.id).collect();
                let mut unknown: Vec<String> =
                    map.keys().filter(|id| !pending.contains(id)).cloned().collect();
                unknown.sort();
                if map.is_empty() || !unknown.is_empty() {
                    return Err(GraphError::UnknownInterrupt { ids: unknown, pending });
                }
            }
            ctx.resume_by_id = map;
            Ok(None)
        }
    }
}

/// Fresh input: discards the unfinished step of the previous run and writes the input to `__start__`
/// (saved as an `input` checkpoint when durable). Returns the first step to plan.
async fn apply_fresh_input<S: State>(
    ctx: &mut Ctx<'_, S>,
    l: &mut Loaded<S>,
    mut updates: Vec<S::Update>,
    dirty: &mut ChannelSet,
) -> GraphResult<i64> {
    let spec = &ctx.inner.spec;
    for u in &mut updates {
        l.ch.state.prepare_update(u);
    }
    // Fresh input discards the unfinished step of the previous run.
    let mut changed = ChannelSet::new();
    let base = l.loaded_step.map_or(-1, |s| s + 1);
    let discarded = plan_tasks(&l.ch, spec, base, "", &ctx.ns);
    consume_tasks(&mut l.ch, spec, &discarded, &mut changed);
    l.ch.start = Some(updates);
    l.ch.input_seen = true;
    changed.insert(l.ch.layout.start());
    l.ch.bump(&changed)?;
    let mut step = base;
    l.saved = SavedWrites::default();
    dirty.union_with(&changed);
    if durable(ctx) {
        save_checkpoint(ctx, &mut l.ch, CheckpointSource::Input, step, Some(dirty), &changed).await?;
        *dirty = ChannelSet::new();
    } else if ctx.saver.is_some() {
        ctx.unsaved = Some(checkpoint_stamps());
    }
    step += 1;
    Ok(step)
}

/// Whether checkpoints are saved as the run goes (a checkpointer in `sync` or `async` mode).
pub(crate) fn durable<S: State>(ctx: &Ctx<'_, S>) -> bool {
    ctx.saver.as_ref().is_some_and(|s| s.durability != crate::types::Durability::Exit)
}

/// In `exit` mode, a run that stops on an error or an interrupt saves the checkpoint its last step started
/// from (unless that is the checkpoint it loaded), then the writes of that step's tasks (and of the
/// command it was resumed with) against it, so a resume finds them under the same task ids.
pub(crate) async fn save_on_exit<S: State>(
    ctx: &mut Ctx<'_, S>,
    ch: &mut Channels<S>,
    step: i64,
    dirty: &ChannelSet,
) -> GraphResult<()> {
    if ctx.saver.is_none() || durable(ctx) {
        return Ok(());
    }
    if ctx.unsaved.is_some() {
        save_checkpoint(ctx, ch, CheckpointSource::Loop, step - 1, Some(dirty), &ChannelSet::new()).await?;
    }
    match ctx.saver.as_mut() {
        Some(saver) => saver.flush_deferred().await,
        None => Ok(()),
    }
}

pub(crate) fn invalid<S: State>(
    error: crate::state::UpdateError,
    step: i64,
    tasks: &[Task<S>],
) -> GraphError {
    GraphError::InvalidUpdate { error, step, nodes: tasks.iter().map(|t| t.name.to_string()).collect() }
}

pub(crate) fn changed_since_interrupt<S: State>(ch: &Channels<S>) -> bool {
    (0..ch.versions.len()).any(|i| ch.versions[i] > ch.interrupt_seen.get(&i).copied().unwrap_or(0))
}

pub(crate) fn written_channels<S: State>(state: &S, writes: &[TaskWrites<S>]) -> ChannelSet {
    let mut set = ChannelSet::new();
    for w in writes {
        for u in &w.updates {
            state.written(u, &mut set);
        }
    }
    set
}
