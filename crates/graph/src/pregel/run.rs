//! The run loop.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use futures::stream::{BoxStream, FuturesUnordered};
use futures::{FutureExt as _, StreamExt as _};
use serde_json::{Map, Value, json};
use weft_runnable_core::{
    AiMessage, Error, EventSink, Message, RunKind, RunScope, RunnableConfig, StreamEvent,
};

use crate::checkpoint::{
    ChannelAppends, ChannelName, CheckpointConfig, CheckpointMetadata, CheckpointSource, owned_writes,
    special,
};
use crate::compiled::{DEFAULT_GRAPH_RECURSION_LIMIT, GraphInput, GraphOutput, Inner, RunOptions};
use crate::error::{GraphError, GraphResult};
use crate::node::NodeInput;
use crate::pregel::channels::Channels;
use crate::pregel::saver::RunSaver;
use crate::pregel::stamp::checkpoint_stamps;
use crate::pregel::task::{
    Task, TaskKind, TaskOutcome, TaskWrites, flatten_output, push_goto, state_json, task_id,
    writes_from_json, writes_to_json,
};
use crate::runtime::{GraphInterrupt, Runtime, RuntimeInner, Scratchpad, TaskSite, interrupt_id, task_ns};
use crate::state::{ChannelSet, State};
use crate::stream::{ErasedData, Forward, Modes, StreamData, StreamMode, StreamPart};
use crate::subgraph::{ParentCommand, ParentRun, parent_command, raise_parent_command};
use crate::types::{Interrupt, Resume};

type SendPart<S> = Arc<dyn Fn(StreamPart<S>) + std::marker::Send + Sync>;

/// Where a streaming run sends its chunks: the caller's channel, or (for a subgraph) the parent's stream.
pub(crate) struct Sink<S: State> {
    send: SendPart<S>,
    pub(crate) modes: Modes,
    /// Whether subgraphs stream into this run's stream too.
    pub(crate) subgraphs: bool,
}

impl<S: State> Sink<S> {
    /// A sink feeding the caller's channel.
    pub(crate) fn root(
        tx: tokio::sync::mpsc::UnboundedSender<GraphResult<StreamPart<S>>>,
        modes: Modes,
        subgraphs: bool,
    ) -> Self {
        // A consumer that dropped the stream no longer wants chunks; the run still completes.
        let send: SendPart<S> = Arc::new(move |part| {
            let _ = tx.send(Ok(part));
        });
        Self { send, modes, subgraphs }
    }

    /// A sink of a subgraph run, forwarding its chunks (state erased) to the parent's stream.
    fn forwarding(forward: Forward, modes: Modes, state: S) -> Self {
        let send: SendPart<S> =
            Arc::new(move |part: StreamPart<S>| forward(part.ns, ErasedData::erase(part.data, &state)));
        Self { send, modes, subgraphs: true }
    }

    fn send(&self, data: StreamData<S>) {
        (self.send)(StreamPart { ns: Vec::new(), data });
    }

    /// What the subgraphs of one task forward through, naming that task's namespace segment.
    fn forward_for(&self, segment: String) -> Forward {
        let send = Arc::clone(&self.send);
        Arc::new(move |mut ns: Vec<String>, data: ErasedData| {
            ns.insert(0, segment.clone());
            send(StreamPart { ns, data: data.typed::<S>() });
        })
    }
}

/// Polls the run and its chunk receiver together, yielding chunks as they come and the run's error last.
pub(crate) fn drive<S: State>(
    run: impl Future<Output = Option<GraphError>> + Send + 'static,
    rx: tokio::sync::mpsc::UnboundedReceiver<GraphResult<StreamPart<S>>>,
) -> BoxStream<'static, GraphResult<StreamPart<S>>> {
    enum Item<S: State> {
        Part(Box<GraphResult<StreamPart<S>>>),
        Done(Option<GraphError>),
    }
    let mut rx = rx;
    let parts = futures::stream::poll_fn(move |cx| rx.poll_recv(cx)).map(|p| Item::Part(Box::new(p)));
    let done = futures::stream::once(Box::pin(run)).map(Item::Done);
    let merged = futures::stream::select(parts, done);
    futures::stream::unfold((merged, None::<GraphError>), |(mut merged, mut failure)| async move {
        loop {
            match merged.next().await {
                Some(Item::Part(p)) => return Some((*p, (merged, failure))),
                Some(Item::Done(err)) => failure = err,
                None => return failure.take().map(|e| (Err(e), (merged, None))),
            }
        }
    })
    .boxed()
}

/// Writes saved for the tasks of the step being resumed.
#[derive(Default)]
struct SavedWrites {
    by_task: HashMap<String, Vec<(String, Value)>>,
}

impl SavedWrites {
    fn finished(&self, task: &str) -> Option<&Vec<(String, Value)>> {
        let writes = self.by_task.get(task)?;
        let failed = writes.iter().any(|(c, _)| c == special::ERROR || c == special::INTERRUPT);
        (!failed && !writes.is_empty()).then_some(writes)
    }

    fn resume_values(&self, task: &str) -> Vec<Value> {
        self.by_task
            .get(task)
            .and_then(|w| w.iter().rev().find(|(c, _)| c == special::RESUME))
            .and_then(|(_, v)| v.as_array().cloned())
            .unwrap_or_default()
    }

    fn interrupts(&self) -> Vec<Interrupt> {
        let mut out = Vec::new();
        for writes in self.by_task.values() {
            for (c, v) in writes {
                if c == special::INTERRUPT {
                    if let Ok(list) = serde_json::from_value::<Vec<Interrupt>>(v.clone()) {
                        out.extend(list);
                    }
                }
            }
        }
        out
    }
}

struct Ctx<'a, S: State> {
    inner: &'a Inner<S>,
    config: RunnableConfig,
    /// The run's config, shared by the tasks' lazily built configs.
    base_config: Arc<RunnableConfig>,
    sink: Option<&'a Sink<S>>,
    saver: Option<RunSaver>,
    options: &'a RunOptions,
    null_resume: Arc<Mutex<Option<Value>>>,
    resume_by_id: Map<String, Value>,
    ns: String,
    thread_id: Option<String>,
    scope: Option<RunScope>,
    /// Set when this run is a subgraph of another run.
    parent: Option<ParentRun>,
    /// Whether the run continues a paused or failed step (its subgraphs then resume too).
    resuming: bool,
    /// The store nodes reach through their runtime.
    store: Option<Arc<dyn crate::store::Store>>,
}

/// Runs a graph from `input` to the end or to an interrupt.
pub(crate) async fn run<S: State>(
    inner: &Inner<S>,
    input: GraphInput<S>,
    config: &RunnableConfig,
    options: &RunOptions,
    sink: Option<&Sink<S>>,
) -> GraphResult<GraphOutput<S>> {
    let limit = config.recursion_limit_or(DEFAULT_GRAPH_RECURSION_LIMIT);
    if limit < 1 {
        return Err(GraphError::InvalidRecursionLimit);
    }
    let scope = config.callbacks.as_ref().map(|_| {
        let input_json = match &input {
            GraphInput::Update(_) => json!("<input>"),
            GraphInput::Command(_) => json!("<command>"),
            GraphInput::Resume => Value::Null,
        };
        RunScope::start(config, &inner.name, RunKind::Chain, Some(input_json))
    });
    let run_config = scope.as_ref().map_or_else(|| config.clone(), |s| s.child_config().clone());
    let parent = config.extensions.get::<ParentRun>().cloned();
    let resuming = match &input {
        GraphInput::Resume => true,
        GraphInput::Command(cmd) => cmd.resume.is_some(),
        GraphInput::Update(_) => parent.as_ref().is_some_and(|p| p.resuming),
    };
    let child_sink = match (sink, parent.as_ref().and_then(|p| p.stream.clone())) {
        (None, Some((forward, modes))) => Some(Sink::forwarding(forward, modes, inner.spec.initial.clone())),
        _ => None,
    };
    let sink = sink.or(child_sink.as_ref());
    let mut ctx = Ctx {
        inner,
        base_config: Arc::new(run_config.clone()),
        config: run_config,
        sink,
        saver: None,
        options,
        null_resume: parent
            .as_ref()
            .map_or_else(|| Arc::new(Mutex::new(None)), |p| Arc::clone(&p.null_resume)),
        resume_by_id: parent.as_ref().map(|p| p.resume_by_id.clone()).unwrap_or_default(),
        ns: match &parent {
            Some(p) if inner.config.subgraph_checkpoints == crate::compiled::SubgraphCheckpoints::PerNode => {
                p.node_ns.clone()
            }
            Some(p) => p.ns.clone(),
            None => config.configurable_str("checkpoint_ns").unwrap_or_default().to_owned(),
        },
        store: inner.config.store.clone().or_else(|| parent.as_ref().and_then(|p| p.store.clone())),
        thread_id: config.configurable_str("thread_id").map(str::to_owned),
        scope,
        parent,
        resuming,
    };
    let result = run_inner(&mut ctx, input, limit).await;
    let result = match ctx.saver.as_mut() {
        Some(saver) => match saver.finish().await {
            Ok(()) => result,
            Err(e) => result.and(Err(e)),
        },
        None => result,
    };
    // Retention runs once the run's saves are done (root runs only: a subgraph's checkpoints go with its
    // thread's).
    let result = match (&result, &inner.config.retention, &ctx.saver, &ctx.parent) {
        (Ok(_), Some(policy), Some(saver), None) => {
            match policy.apply(saver.checkpointer.as_ref(), &saver.thread.thread_id).await {
                Ok(()) => result,
                Err(e) => Err(GraphError::Storage(e)),
            }
        }
        _ => result,
    };
    if let Some(scope) = &ctx.scope {
        match &result {
            Ok(out) => scope.end(None, &state_json(&out.value)),
            Err(e) => scope.fail(None, &Error::from(e.clone())),
        }
    }
    result
}

async fn run_inner<S: State>(
    ctx: &mut Ctx<'_, S>,
    input: GraphInput<S>,
    limit: u32,
) -> GraphResult<GraphOutput<S>> {
    let inner = ctx.inner;
    let spec = &inner.spec;
    let names = &inner.names;

    // Load the thread.
    let mut saved = SavedWrites::default();
    let mut loaded_step: Option<i64> = None;
    let mut ch = Channels::new(spec);
    let mut replay = false;
    let checkpointer = match (&ctx.parent, inner.config.subgraph_checkpoints) {
        (Some(_), crate::compiled::SubgraphCheckpoints::Never) => None,
        (Some(p), _) => inner.config.checkpointer.clone().or_else(|| p.checkpointer.clone()),
        (None, _) => inner.config.checkpointer.clone(),
    };
    if let Some(cp) = &checkpointer {
        let thread_id = ctx.thread_id.clone().ok_or(GraphError::MissingThreadId)?;
        let checkpoint_id = match ctx.parent {
            Some(_) => None,
            None => ctx.config.configurable_str("checkpoint_id").map(str::to_owned),
        };
        replay = checkpoint_id.is_some();
        let address =
            CheckpointConfig { thread_id: thread_id.clone(), checkpoint_ns: ctx.ns.clone(), checkpoint_id };
        let mut saver = RunSaver::new(
            Arc::clone(cp),
            CheckpointConfig { thread_id, checkpoint_ns: ctx.ns.clone(), checkpoint_id: None },
            ctx.options.durability,
        );
        let tuple = cp.get_tuple(&address).await?;
        // The head the run's first checkpoint must extend: for a fork, the thread's latest checkpoint,
        // not the one forked from.
        let head = match (&tuple, replay) {
            (Some(t), false) => Some(t.checkpoint.id.clone()),
            (None, false) => None,
            (_, true) => cp.get_tuple(saver.current_config()).await?.map(|t| t.checkpoint.id),
        };
        saver.set_head(head);
        if let Some(tuple) = tuple {
            ch = Channels::from_checkpoint(spec, names, &tuple.checkpoint)?;
            loaded_step = Some(tuple.metadata.step);
            saver.set_current(tuple.checkpoint.id.clone());
            if !replay {
                for w in tuple.pending_writes {
                    saved.by_task.entry(w.task_id).or_default().push((w.channel, w.value));
                }
            }
        } else if replay {
            return Err(GraphError::Checkpoint(format!(
                "checkpoint '{}' not found",
                address.checkpoint_id.unwrap_or_default()
            )));
        }
        ctx.saver = Some(saver);
    }

    // A subgraph whose parent is resuming continues its own pending step instead of starting over.
    let input = match input {
        GraphInput::Update(_) if ctx.parent.is_some() && ctx.resuming && loaded_step.is_some() => {
            if plan_tasks(&ch, spec, 0, "", &ctx.ns).is_empty() {
                input
            } else {
                GraphInput::Resume
            }
        }
        other => other,
    };

    // Apply the input.
    let mut step: i64;
    let mut dirty = ChannelSet::new();
    match input {
        GraphInput::Resume => {
            let Some(s) = loaded_step else { return Err(GraphError::EmptyInput) };
            step = s + 1;
            ch.interrupt_seen =
                (0..ch.versions.len()).filter(|&i| ch.versions[i] > 0).map(|i| (i, ch.versions[i])).collect();
            if replay {
                // Time travel: fork the addressed checkpoint, then re-run what follows it.
                let all = (0..names.channels.len()).collect::<ChannelSet>();
                save_checkpoint(ctx, &mut ch, CheckpointSource::Fork, step, Some(&all), &ChannelSet::new())
                    .await?;
                step += 1;
            }
        }
        GraphInput::Command(cmd) => {
            if cmd.is_empty() {
                return Err(GraphError::EmptyCommand);
            }
            if let Some(resume) = cmd.resume.clone() {
                if ctx.saver.is_none() {
                    return Err(GraphError::ResumeWithoutCheckpointer);
                }
                match resume {
                    Resume::Value(v) => {
                        let pending = saved.interrupts();
                        if pending.len() > 1 {
                            return Err(GraphError::AmbiguousResume(
                                pending.into_iter().map(|i| i.id).collect(),
                            ));
                        }
                        if let Ok(mut slot) = ctx.null_resume.lock() {
                            *slot = Some(v);
                        }
                    }
                    Resume::ById(map) => ctx.resume_by_id = map,
                }
            }
            // A command continues a thread: without a saved checkpoint there is nothing to continue.
            let Some(s) = loaded_step else { return Err(GraphError::EmptyInput) };
            step = s + 1;
            ch.interrupt_seen =
                (0..ch.versions.len()).filter(|&i| ch.versions[i] > 0).map(|i| (i, ch.versions[i])).collect();
            if !cmd.update.is_empty() || !cmd.goto.is_empty() {
                let mut writes = TaskWrites { updates: cmd.update, ..TaskWrites::default() };
                for u in &mut writes.updates {
                    ch.state.prepare_update(u);
                }
                for g in cmd.goto {
                    push_goto(spec, special::START, g, &mut writes)?;
                }
                let mut changed = ChannelSet::new();
                apply_new_writes(&mut ch, spec, std::slice::from_mut(&mut writes), &mut changed, step)?;
                ch.bump(&changed);
                dirty.union_with(&changed);
            }
        }
        GraphInput::Update(mut updates) => {
            for u in &mut updates {
                ch.state.prepare_update(u);
            }
            // Fresh input discards the unfinished step of the previous run.
            let mut changed = ChannelSet::new();
            let base = loaded_step.map_or(-1, |s| s + 1);
            let discarded = plan_tasks(&ch, spec, base, "", &ctx.ns);
            consume_tasks(&mut ch, spec, &discarded, &mut changed);
            ch.start = Some(updates);
            changed.insert(ch.layout.start());
            ch.bump(&changed);
            step = base;
            saved = SavedWrites::default();
            dirty.union_with(&changed);
            if durable(ctx) {
                save_checkpoint(ctx, &mut ch, CheckpointSource::Input, step, Some(&dirty), &changed).await?;
                dirty = ChannelSet::new();
            }
            step += 1;
        }
    }
    let stop = step - 1 + i64::from(limit) + 1;

    loop {
        if step > stop {
            return Err(GraphError::RecursionLimit { limit });
        }
        let current = ctx.saver.as_ref().map(|s| Arc::clone(s.current_config()));
        let current_id = current.as_ref().and_then(|c| c.checkpoint_id.as_deref()).unwrap_or_default();
        let tasks = plan_tasks(&ch, spec, step, current_id, &ctx.ns);
        if tasks.is_empty() {
            break;
        }

        // Static breakpoints before nodes.
        if tasks.iter().any(|t| t.node().is_some_and(|n| ctx.inner.interrupt_before[n]))
            && changed_since_interrupt(&ch)
        {
            ch.interrupt_seen = current_versions(&ch);
            if !dirty.is_empty() {
                save_checkpoint(
                    ctx,
                    &mut ch,
                    CheckpointSource::Loop,
                    step - 1,
                    Some(&dirty),
                    &ChannelSet::new(),
                )
                .await?;
            }
            if let Some(sink) = ctx.sink.filter(|s| s.modes.has(StreamMode::Updates)) {
                sink.send(StreamData::Interrupt(Vec::new()));
            }
            return Ok(GraphOutput { value: ch.state, interrupts: Vec::new() });
        }

        let outcome = match run_step(ctx, &ch, &tasks, &saved, step, stop).await {
            Ok(outcome) => outcome,
            Err(err) => {
                save_on_exit(ctx, &mut ch, step, &dirty).await?;
                return Err(err);
            }
        };
        let mut results = match outcome {
            StepOutcome::Done(results) => results,
            StepOutcome::Interrupted(interrupts) => {
                save_on_exit(ctx, &mut ch, step, &dirty).await?;
                if let Some(sink) = ctx.sink.filter(|s| s.modes.has(StreamMode::Updates)) {
                    sink.send(StreamData::Interrupt(interrupts.clone()));
                }
                return Ok(GraphOutput { value: ch.state, interrupts });
            }
        };

        // Apply the step's writes in task order.
        let mut changed = ChannelSet::new();
        consume_tasks(&mut ch, spec, &tasks, &mut changed);
        let single = tasks.len() == 1;
        let route_after = single && !results[0].1;
        let mut writes: Vec<TaskWrites<S>> = results.iter_mut().map(|(w, _)| std::mem::take(w)).collect();
        if route_after {
            // One task: its routers see exactly the state after its own writes, which is the applied state.
            let updates: Vec<S::Update> = std::mem::take(&mut writes[0].updates);
            let applied = ch.apply_updates(updates.clone()).map_err(|error| invalid(error, step, &tasks))?;
            changed.union_with(&applied);
            writes[0].updates = updates;
            let node = tasks[0].node().map_or(&spec.start, |n| &spec.nodes[n]);
            route(spec, node, &ch.state, &mut writes[0])?;
            apply_control_writes(&mut ch, spec, &writes, &mut changed, &tasks);
            persist_single(ctx, &tasks[0], &ch.state, &writes[0], &saved, step).await?;
            emit_update(
                ctx,
                &tasks[0],
                &writes[0],
                writes[0].cached || saved.finished(&tasks[0].id).is_some(),
            );
        } else {
            apply_new_writes_with_tasks(&mut ch, spec, &mut writes, &mut changed, step, &tasks)?;
        }
        let written = written_channels(&ch.state, &writes);
        let ended = ch.end_step(&written);
        changed.union_with(&ended);
        ch.bump(&changed);
        for task in &tasks {
            let slot = task.node().unwrap_or(ch.layout.n_nodes);
            for trigger in triggers_of(&ch, spec, task) {
                ch.seen[slot].insert(trigger, ch.versions[trigger]);
            }
        }
        dirty.union_with(&changed);
        saved = SavedWrites::default();
        if let Some(saver) = ctx.saver.as_mut() {
            saver.clear_deferred();
        }

        let durable = durable(ctx);
        if durable {
            save_checkpoint(ctx, &mut ch, CheckpointSource::Loop, step, Some(&dirty), &changed).await?;
            dirty = ChannelSet::new();
        }
        if let Some(sink) = ctx.sink.filter(|s| s.modes.has(StreamMode::Values)) {
            if (0..ch.layout.n_state).any(|i| changed.contains(i)) {
                sink.send(StreamData::Values(ch.state.clone()));
            }
        }

        // Static breakpoints after nodes.
        if tasks.iter().any(|t| t.node().is_some_and(|n| ctx.inner.interrupt_after[n]))
            && changed_since_interrupt(&ch)
        {
            ch.interrupt_seen = current_versions(&ch);
            if !durable {
                save_checkpoint(ctx, &mut ch, CheckpointSource::Loop, step, Some(&dirty), &changed).await?;
            }
            if let Some(sink) = ctx.sink.filter(|s| s.modes.has(StreamMode::Updates)) {
                sink.send(StreamData::Interrupt(Vec::new()));
            }
            return Ok(GraphOutput { value: ch.state, interrupts: Vec::new() });
        }
        step += 1;
    }

    if !dirty.is_empty() && ctx.saver.is_some() {
        save_checkpoint(ctx, &mut ch, CheckpointSource::Loop, step - 1, Some(&dirty), &ChannelSet::new())
            .await?;
    }
    Ok(GraphOutput { value: ch.state, interrupts: Vec::new() })
}

/// A write that cannot be saved, named by thread, node, step and the channel and path inside the value.
fn unsaveable(err: GraphError, thread: &str, node: &str, step: i64) -> GraphError {
    match err {
        GraphError::InvalidUpdate {
            error: crate::state::UpdateError::Serialization { key, message },
            ..
        } => GraphError::Checkpoint(format!(
            "cannot serialize channel '{key}' written by node '{node}' at step {step} of thread '{thread}' (pending write of the current checkpoint): {message}"
        )),
        other => other,
    }
}

/// Whether checkpoints are saved as the run goes (a checkpointer in `sync` or `async` mode).
fn durable<S: State>(ctx: &Ctx<'_, S>) -> bool {
    ctx.saver.as_ref().is_some_and(|s| s.durability != crate::compiled::Durability::Exit)
}

/// In `exit` mode, a run that stops on an error or an interrupt saves the checkpoint its last step started
/// from, then the writes of that step's tasks.
async fn save_on_exit<S: State>(
    ctx: &mut Ctx<'_, S>,
    ch: &mut Channels<S>,
    step: i64,
    dirty: &ChannelSet,
) -> GraphResult<()> {
    if ctx.saver.is_none() || durable(ctx) {
        return Ok(());
    }
    if !dirty.is_empty() {
        save_checkpoint(ctx, ch, CheckpointSource::Loop, step - 1, Some(dirty), &ChannelSet::new()).await?;
    }
    match ctx.saver.as_mut() {
        Some(saver) => saver.flush_deferred().await,
        None => Ok(()),
    }
}

fn invalid<S: State>(error: crate::state::UpdateError, step: i64, tasks: &[Task<S>]) -> GraphError {
    GraphError::InvalidUpdate { error, step, nodes: tasks.iter().map(|t| t.name.to_string()).collect() }
}

fn current_versions<S: State>(ch: &Channels<S>) -> BTreeMap<usize, u64> {
    (0..ch.versions.len()).filter(|&i| ch.versions[i] > 0).map(|i| (i, ch.versions[i])).collect()
}

fn changed_since_interrupt<S: State>(ch: &Channels<S>) -> bool {
    (0..ch.versions.len()).any(|i| ch.versions[i] > ch.interrupt_seen.get(&i).copied().unwrap_or(0))
}

fn written_channels<S: State>(state: &S, writes: &[TaskWrites<S>]) -> ChannelSet {
    let mut set = ChannelSet::new();
    for w in writes {
        for u in &w.updates {
            state.written(u, &mut set);
        }
    }
    set
}

/// The trigger channels a task consumed.
fn triggers_of<S: State>(
    ch: &Channels<S>,
    spec: &crate::pregel::spec::GraphSpec<S>,
    task: &Task<S>,
) -> Vec<usize> {
    match task.kind {
        TaskKind::Start => vec![ch.layout.start()],
        TaskKind::Pull(n) => {
            let mut t = vec![ch.layout.branch(n)];
            t.extend(
                spec.joins
                    .iter()
                    .enumerate()
                    .filter(|(_, j)| j.target == Some(n))
                    .map(|(i, _)| ch.layout.join(i)),
            );
            t
        }
        TaskKind::Push { .. } => vec![ch.layout.tasks()],
    }
}

/// The tasks of the next superstep: `Send`s first (in send order), then triggered nodes (by name); the
/// START task when input is waiting. Deferred nodes run only when nothing else would.
pub(crate) fn plan_tasks<S: State>(
    ch: &Channels<S>,
    spec: &crate::pregel::spec::GraphSpec<S>,
    step: i64,
    checkpoint_id: &str,
    ns: &str,
) -> Vec<Task<S>> {
    let mut tasks = Vec::new();
    if ch.start.is_some() {
        tasks.push(Task {
            id: task_id(checkpoint_id, ns, step, special::START, "start"),
            kind: TaskKind::Start,
            name: Arc::from(special::START),
            path: std::sync::Arc::clone(&spec.start.pull_path),
            input: None,
            _state: std::marker::PhantomData,
        });
    }
    for (index, send) in ch.sends.iter().enumerate() {
        let Some(&node) = spec.node_names.get(&send.node) else { continue };
        tasks.push(Task {
            id: task_id(checkpoint_id, ns, step, &send.node, &format!("push:{index}")),
            kind: TaskKind::Push { index, node },
            name: Arc::from(send.node.as_str()),
            path: format!("~__pregel_push, {index:010}, False").into(),
            input: Some(send.payload.clone()),
            _state: std::marker::PhantomData,
        });
    }
    let mut pulls = Vec::new();
    let mut deferred = Vec::new();
    for (n, node) in spec.nodes.iter().enumerate() {
        let by_join =
            spec.joins.iter().enumerate().any(|(j, js)| js.target == Some(n) && ch.join_complete(j));
        if ch.triggered[n] || by_join {
            if node.config.defer { deferred.push(n) } else { pulls.push(n) }
        }
    }
    if pulls.is_empty() && tasks.is_empty() {
        pulls = deferred;
    }
    for n in pulls {
        let name = &spec.nodes[n].name;
        tasks.push(Task {
            id: task_id(checkpoint_id, ns, step, name, "pull"),
            kind: TaskKind::Pull(n),
            name: Arc::clone(name),
            path: std::sync::Arc::clone(&spec.nodes[n].pull_path),
            // Built when the task runs, so no copy of the state outlives the step (the state is then
            // updated in place instead of copied).
            input: None,
            _state: std::marker::PhantomData,
        });
    }
    // Deterministic apply order: START, pulls by name, then pushes by index.
    tasks.sort_by_key(|t| match t.kind {
        TaskKind::Start => (0, 0),
        TaskKind::Pull(n) => (1, n),
        TaskKind::Push { index, .. } => (2, index),
    });
    tasks
}

/// Consumes the triggers of the tasks that ran.
pub(crate) fn consume_tasks<S: State>(
    ch: &mut Channels<S>,
    spec: &crate::pregel::spec::GraphSpec<S>,
    tasks: &[Task<S>],
    changed: &mut ChannelSet,
) {
    let mut had_push = false;
    for task in tasks {
        match task.kind {
            TaskKind::Start => {
                if ch.start.take().is_some() {
                    changed.insert(ch.layout.start());
                }
            }
            TaskKind::Pull(n) => {
                if std::mem::replace(&mut ch.triggered[n], false) {
                    changed.insert(ch.layout.branch(n));
                }
                for (j, join) in spec.joins.iter().enumerate() {
                    if join.target == Some(n) && ch.join_complete(j) {
                        ch.joins[j].iter_mut().for_each(|s| *s = false);
                        changed.insert(ch.layout.join(j));
                    }
                }
            }
            TaskKind::Push { .. } => had_push = true,
        }
    }
    if had_push && !ch.sends.is_empty() {
        ch.sends.clear();
        changed.insert(ch.layout.tasks());
    }
}

fn apply_new_writes<S: State>(
    ch: &mut Channels<S>,
    spec: &crate::pregel::spec::GraphSpec<S>,
    writes: &mut [TaskWrites<S>],
    changed: &mut ChannelSet,
    step: i64,
) -> GraphResult<()> {
    apply_new_writes_with_tasks::<S>(ch, spec, writes, changed, step, &[])
}

fn apply_new_writes_with_tasks<S: State>(
    ch: &mut Channels<S>,
    spec: &crate::pregel::spec::GraphSpec<S>,
    writes: &mut [TaskWrites<S>],
    changed: &mut ChannelSet,
    step: i64,
    tasks: &[Task<S>],
) -> GraphResult<()> {
    let updates: Vec<S::Update> = writes.iter_mut().flat_map(|w| std::mem::take(&mut w.updates)).collect();
    if !updates.is_empty() {
        let applied = ch.apply_updates(updates).map_err(|error| invalid(error, step, tasks))?;
        changed.union_with(&applied);
    }
    apply_control_writes(ch, spec, writes, changed, tasks);
    Ok(())
}

/// Applies the control writes (triggers, barriers, sends) of one task whose node is `source`.
pub(crate) fn apply_control<S: State>(
    ch: &mut Channels<S>,
    spec: &crate::pregel::spec::GraphSpec<S>,
    writes: &TaskWrites<S>,
    source: Option<usize>,
    changed: &mut ChannelSet,
) {
    for &g in &writes.goto {
        ch.triggered[g] = true;
        changed.insert(ch.layout.branch(g));
    }
    for &j in &writes.joins {
        if let Some(pos) = spec.joins[j].sources.iter().position(|s| *s == source) {
            ch.joins[j][pos] = true;
            changed.insert(ch.layout.join(j));
        }
    }
    if !writes.sends.is_empty() {
        ch.sends.extend(writes.sends.iter().cloned());
        changed.insert(ch.layout.tasks());
    }
}

fn apply_control_writes<S: State>(
    ch: &mut Channels<S>,
    spec: &crate::pregel::spec::GraphSpec<S>,
    writes: &[TaskWrites<S>],
    changed: &mut ChannelSet,
    tasks: &[Task<S>],
) {
    for (i, w) in writes.iter().enumerate() {
        apply_control(ch, spec, w, tasks.get(i).and_then(Task::node), changed);
    }
}

/// Adds the static edges, barrier writes and conditional routes of `node` to a task's writes.
pub(crate) fn route<S: State>(
    spec: &crate::pregel::spec::GraphSpec<S>,
    node: &crate::pregel::spec::NodeSpec<S>,
    view: &S,
    writes: &mut TaskWrites<S>,
) -> GraphResult<()> {
    writes.goto.extend(node.edges.iter().copied());
    writes.joins.extend(node.joins.iter().copied());
    for branch in &node.branches {
        let routes = branch.route(view).map_err(|source| GraphError::Node {
            node: node.name.to_string(),
            step: -1,
            source,
        })?;
        for r in routes {
            match r {
                crate::branch::Route::End => {}
                crate::branch::Route::Node(name) => {
                    push_goto(spec, &node.name, crate::types::Goto::Node(name), writes)?
                }
                crate::branch::Route::Send(s) => {
                    push_goto(spec, &node.name, crate::types::Goto::Send(s), writes)?
                }
            }
        }
    }
    Ok(())
}

enum StepOutcome<S: State> {
    /// Writes per task in task order; the flag says whether the routes are already in them.
    Done(Vec<(TaskWrites<S>, bool)>),
    Interrupted(Vec<Interrupt>),
}

async fn run_step<S: State>(
    ctx: &mut Ctx<'_, S>,
    ch: &Channels<S>,
    tasks: &[Task<S>],
    saved: &SavedWrites,
    step: i64,
    stop: i64,
) -> GraphResult<StepOutcome<S>> {
    let spec = &ctx.inner.spec;
    let single = tasks.len() == 1;
    let mut results: Vec<Option<(TaskWrites<S>, bool)>> = (0..tasks.len()).map(|_| None).collect();
    let mut interrupts = Vec::new();
    let mut first_error: Option<GraphError> = None;

    // Reuse writes saved before a crash or an interrupt.
    let mut to_run = Vec::new();
    for (i, task) in tasks.iter().enumerate() {
        if let Some(w) = saved.finished(&task.id) {
            let writes = writes_from_json(spec, &ch.state, w)?;
            emit_update(ctx, task, &writes, true);
            results[i] = Some((writes, true));
        } else {
            to_run.push(i);
        }
    }

    let limit = ctx.config.max_concurrency.unwrap_or(usize::MAX).max(1);
    let inner = ctx.inner;
    let is_subgraph = ctx.parent.is_some();
    let mut streamed: Vec<Option<StreamedIds>> = vec![None; tasks.len()];
    // A lone task is awaited directly; several run concurrently, polled by this task.
    let mut lone = if to_run.len() == 1 { to_run.first().copied() } else { None };
    let mut running = if lone.is_none() { Some(FuturesUnordered::new()) } else { None };
    let mut queue = if lone.is_none() { to_run } else { Vec::new() }.into_iter();
    let route_inline = !single;
    loop {
        if let Some(running) = running.as_mut() {
            while running.len() < limit {
                let Some(i) = queue.next() else { break };
                let runtime = start_task(ctx, ch, &tasks[i], saved, step, stop, &mut streamed[i]);
                let task = &tasks[i];
                running
                    .push(execute(inner, ch, task, runtime, route_inline, is_subgraph).map(move |r| (i, r)));
            }
        }
        let next = match (lone.take(), running.as_mut()) {
            (Some(i), _) => {
                let runtime = start_task(ctx, ch, &tasks[i], saved, step, stop, &mut streamed[i]);
                Some((i, execute(inner, ch, &tasks[i], runtime, route_inline, is_subgraph).await))
            }
            (None, Some(running)) => running.next().await,
            (None, None) => None,
        };
        let Some((i, result)) = next else { break };
        let task = &tasks[i];
        if let Some(sink) = ctx.sink.filter(|s| s.modes.tasks() && task.kind != TaskKind::Start) {
            let (error, result_json, interrupts) = match &result {
                Ok((TaskOutcome::Done(w), _)) => (
                    None,
                    owned_writes(writes_to_json(spec, &inner.names, &ch.state, w).unwrap_or_default()),
                    Vec::new(),
                ),
                Ok((TaskOutcome::Interrupted(list), _)) => (None, Vec::new(), list.clone()),
                Err(e) => (Some(e.to_string()), Vec::new(), Vec::new()),
            };
            sink.send(StreamData::TaskResult {
                id: task.id.to_string(),
                name: task.name.to_string(),
                error,
                result: result_json,
                interrupts,
                step,
            });
        }
        match result {
            Ok((TaskOutcome::Done(writes), resumed)) => {
                emit_whole_messages(ctx, &ch.state, task, &writes, streamed[i].as_ref(), step);
                if route_inline {
                    if let Some(saver) = ctx.saver.as_mut() {
                        let thread = saver.thread.thread_id.clone();
                        let mut json = writes_to_json(spec, &inner.names, &ch.state, &writes)
                            .map_err(|e| unsaveable(e, &thread, &task.name, step))?;
                        if let Some(r) = resumed {
                            json.push((ChannelName::from(special::RESUME), Value::Array(r)));
                        }
                        if let Some(op) = saver.put_writes(&task.id, &task.path, json)? {
                            saver.submit(op).await?;
                        }
                    }
                    emit_update(ctx, task, &writes, writes.cached);
                    results[i] = Some((writes, true));
                } else {
                    results[i] = Some((writes, false));
                }
            }
            Ok((TaskOutcome::Interrupted(list), resumed)) => {
                let mut json = vec![(
                    ChannelName::from(special::INTERRUPT),
                    serde_json::to_value(&list).unwrap_or(Value::Null),
                )];
                if let Some(r) = resumed {
                    json.push((ChannelName::from(special::RESUME), Value::Array(r)));
                }
                if let Some(saver) = ctx.saver.as_mut() {
                    saver.put_writes_now(&task.id, &task.path, json).await?;
                }
                interrupts.extend(list);
            }
            Err(err) => {
                if let Some(saver) = ctx.saver.as_mut() {
                    saver
                        .put_writes_now(
                            &task.id,
                            &task.path,
                            vec![(ChannelName::from(special::ERROR), Value::String(err.to_string()))],
                        )
                        .await?;
                }
                first_error = Some(err);
                break;
            }
        }
    }
    drop(running);
    if let Some(err) = first_error {
        return Err(err);
    }
    if !interrupts.is_empty() {
        // Finished siblings were saved as they finished (a single-task step cannot be both finished and
        // interrupted), so a resume reuses them.
        return Ok(StepOutcome::Interrupted(interrupts));
    }
    Ok(StepOutcome::Done(
        results.into_iter().map(|r| r.unwrap_or_else(|| (TaskWrites::default(), true))).collect(),
    ))
}

/// Makes a task's runtime and reports its start in the `tasks` stream mode.
#[allow(clippy::too_many_arguments)]
fn start_task<S: State>(
    ctx: &Ctx<'_, S>,
    ch: &Channels<S>,
    task: &Task<S>,
    saved: &SavedWrites,
    step: i64,
    stop: i64,
    streamed: &mut Option<StreamedIds>,
) -> Runtime {
    let (runtime, ids) = make_runtime(ctx, task, saved, step, stop);
    *streamed = ids;
    if let Some(sink) = ctx.sink.filter(|s| s.modes.tasks()) {
        if task.kind != TaskKind::Start {
            let input = match &task.input {
                Some(p) => p.to_json().unwrap_or(Value::Null),
                None => state_json(&ch.state),
            };
            sink.send(StreamData::TaskStart {
                id: task.id.to_string(),
                name: task.name.to_string(),
                input,
                step,
            });
        }
    }
    runtime
}

/// Saves the writes of a single-task step (made after its routes were computed).
async fn persist_single<S: State>(
    ctx: &mut Ctx<'_, S>,
    task: &Task<S>,
    state: &S,
    writes: &TaskWrites<S>,
    saved: &SavedWrites,
    step: i64,
) -> GraphResult<()> {
    if saved.finished(&task.id).is_some() {
        return Ok(());
    }
    let Some(saver) = ctx.saver.as_mut() else { return Ok(()) };
    let json = writes_to_json(&ctx.inner.spec, &ctx.inner.names, state, writes)
        .map_err(|e| unsaveable(e, &saver.thread.thread_id, &task.name, step))?;
    match saver.put_writes(&task.id, &task.path, json)? {
        Some(op) => saver.submit(op).await,
        None => Ok(()),
    }
}

fn emit_update<S: State>(ctx: &Ctx<'_, S>, task: &Task<S>, writes: &TaskWrites<S>, cached: bool) {
    if task.kind == TaskKind::Start {
        return;
    }
    if let Some(sink) = ctx.sink.filter(|s| s.modes.has(StreamMode::Updates)) {
        sink.send(StreamData::Updates {
            node: task.name.to_string(),
            updates: writes.updates.clone(),
            cached,
        });
    }
}

/// Ids of the messages a task's chat models streamed token by token.
type StreamedIds = Arc<Mutex<HashSet<String>>>;

/// The `langgraph_*` metadata of a task's runs and stream chunks.
fn task_metadata(name: &str, path: &str, task_ns: &str, step: i64) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("langgraph_step".to_owned(), json!(step));
    m.insert("langgraph_node".to_owned(), json!(name));
    m.insert("langgraph_path".to_owned(), json!(path));
    m.insert("langgraph_checkpoint_ns".to_owned(), json!(task_ns));
    m
}

/// In `messages` mode, sends the messages a task wrote that were not streamed token by token and are not
/// already in the state (LangGraph de-duplicates by id the same way).
fn emit_whole_messages<S: State>(
    ctx: &Ctx<'_, S>,
    state: &S,
    task: &Task<S>,
    writes: &TaskWrites<S>,
    streamed: Option<&StreamedIds>,
    step: i64,
) {
    let Some(sink) = ctx.sink.filter(|s| s.modes.has(StreamMode::Messages)) else { return };
    if task.kind == TaskKind::Start {
        return;
    }
    for u in &writes.updates {
        let Ok(values) = state.update_to_json(u) else { continue };
        for (channel, value) in values {
            let value = match value {
                Value::Object(mut o) if o.contains_key("__overwrite__") => {
                    o.remove("__overwrite__").unwrap_or(Value::Null)
                }
                v => v,
            };
            let items = match value {
                Value::Array(items) => items,
                v @ Value::Object(_) => vec![v],
                _ => continue,
            };
            let mut existing: Option<HashSet<String>> = None;
            for item in items {
                let is_message =
                    item.get("type").or_else(|| item.get("role")).is_some() && item.get("content").is_some();
                if !is_message {
                    continue;
                }
                let Ok(message) = Message::from_like(item) else { continue };
                if let Some(id) = message.id() {
                    if streamed.and_then(|s| s.lock().ok()).is_some_and(|s| s.contains(id)) {
                        continue;
                    }
                    let present = existing.get_or_insert_with(|| message_ids(state, channel));
                    if present.contains(id) {
                        continue;
                    }
                }
                let mut metadata = ctx.config.metadata.clone();
                metadata.extend(task_metadata(
                    &task.name,
                    &task.path,
                    &format!("{}:{}", task.name, task.id),
                    step,
                ));
                sink.send(StreamData::Message { chunk: Box::new(message), metadata });
            }
        }
    }
}

/// Ids of the messages of a channel (empty when the channel holds no messages).
fn message_ids<S: State>(state: &S, channel: usize) -> HashSet<String> {
    let Ok(Some(Value::Array(items))) = state.channel_to_json(channel) else { return HashSet::new() };
    items.iter().filter_map(|m| m.get("id").and_then(Value::as_str).map(str::to_owned)).collect()
}

fn make_runtime<S: State>(
    ctx: &Ctx<'_, S>,
    task: &Task<S>,
    saved: &SavedWrites,
    step: i64,
    stop: i64,
) -> (Runtime, Option<StreamedIds>) {
    let messages_sink = ctx.sink.filter(|s| s.modes.has(StreamMode::Messages));
    let streamed: Option<StreamedIds> = messages_sink.map(|_| Arc::new(Mutex::new(HashSet::new())));
    let observed = ctx.config.callbacks.is_some() || messages_sink.is_some();
    let address = ctx.saver.as_ref().map(|s| Arc::clone(s.current_config()));

    // Everything the task's config needs, captured cheaply (shared handles); strings and maps are made if
    // the node asks for its config.
    let builder: crate::runtime::ConfigBuilder = {
        let base = Arc::clone(&ctx.base_config);
        let (name, path, id, run_ns) =
            (Arc::clone(&task.name), Arc::clone(&task.path), Arc::clone(&task.id), ctx.ns.clone());
        let messages = messages_sink.zip(streamed.clone()).map(|(sink, seen)| (Arc::clone(&sink.send), seen));
        let stream = ctx.sink.filter(|s| s.subgraphs).map(|s| (s.forward_for(task_ns(&name, &id)), s.modes));
        let checkpointer = ctx.saver.as_ref().map(|s| Arc::clone(&s.checkpointer));
        let current = address.clone();
        let outer_parents = ctx.parent.as_ref().map(|p| p.parents.clone()).unwrap_or_default();
        let (store, resuming, null_resume) = (ctx.store.clone(), ctx.resuming, Arc::clone(&ctx.null_resume));
        let resume_by_id = ctx.resume_by_id.clone();
        Box::new(move || {
            let own_ns = task_ns(&name, &id);
            let mut config = base.child(Some(format!("graph:step:{step}")));
            config.metadata.extend(task_metadata(&name, &path, &own_ns, step));
            let mut parents = outer_parents;
            if let Some(current) = current.and_then(|c| c.checkpoint_id.clone()) {
                parents.insert(run_ns.clone(), current);
            }
            let (ns, node_ns) = if run_ns.is_empty() {
                (own_ns.clone(), name.to_string())
            } else {
                (format!("{run_ns}|{own_ns}"), format!("{run_ns}|{name}"))
            };
            if let Some((send, seen)) = messages {
                config.callbacks = Some(match config.callbacks.take() {
                    Some(existing) => existing.and(messages_sink_for(send, seen, own_ns)),
                    None => messages_sink_for(send, seen, own_ns),
                });
            }
            config.extensions.insert(ParentRun {
                stream,
                checkpointer,
                ns,
                node_ns,
                store,
                parents,
                resuming,
                null_resume,
                resume_by_id,
            });
            config
        })
    };
    let writer = ctx.sink.filter(|s| s.modes.has(StreamMode::Custom)).map(|sink| {
        let send = Arc::clone(&sink.send);
        let node = task.name.to_string();
        Arc::new(move |value: Value| {
            send(StreamPart { ns: Vec::new(), data: StreamData::Custom { node: node.clone(), value } });
        }) as crate::runtime::CustomWriter
    });
    let mut resume = saved.resume_values(&task.id);
    let mut resume_changed = false;
    if !ctx.resume_by_id.is_empty() {
        let next = interrupt_id(&task_ns(&task.name, &task.id), resume.len());
        if let Some(v) = ctx.resume_by_id.get(&next) {
            resume.push(v.clone());
            resume_changed = true;
        }
    }
    // Without a saver, the thread and namespace are the run's own.
    let (thread_id, ns) = match address {
        Some(_) => (None, String::new()),
        None => (ctx.thread_id.clone(), ctx.ns.clone()),
    };
    let runtime = Runtime {
        inner: Arc::new(RuntimeInner {
            node: Arc::clone(&task.name),
            config: std::sync::OnceLock::new(),
            config_builder: Mutex::new(Some(builder)),
            observed,
            site: TaskSite { address, thread_id, ns, task_id: Arc::clone(&task.id), attempt: 1, step },
            info: std::sync::OnceLock::new(),
            stop,
            scratchpad: Mutex::new(Scratchpad { counter: 0, resume, resume_changed }),
            writer,
            null_resume: Arc::clone(&ctx.null_resume),
            context: ctx.options.context.clone(),
            store: ctx.store.clone(),
        }),
    };
    (runtime, streamed)
}

/// The event sink that turns a task's chat-model tokens into `messages` chunks.
fn messages_sink_for<S: State>(send: SendPart<S>, seen: StreamedIds, own_ns: String) -> EventSink {
    EventSink::new(move |event: StreamEvent| {
        if event.event != "on_chat_model_stream" {
            return;
        }
        // Tokens of models inside subgraphs belong to the subgraph's own tasks.
        if event.metadata.get("langgraph_checkpoint_ns").and_then(Value::as_str) != Some(own_ns.as_str()) {
            return;
        }
        let Some(chunk) = event.data.chunk.and_then(|c| serde_json::from_value::<AiMessage>(c).ok()) else {
            return;
        };
        if let (Some(id), Ok(mut seen)) = (chunk.id.clone(), seen.lock()) {
            seen.insert(id);
        }
        send(StreamPart {
            ns: Vec::new(),
            data: StreamData::Message { chunk: Box::new(Message::Ai(chunk)), metadata: event.metadata },
        });
    })
}

/// Runs one task with its retry policy; returns its writes (routes included unless `route_later`) and the
/// resume values to save when they changed.
async fn execute<S: State>(
    inner: &Inner<S>,
    ch: &Channels<S>,
    task: &Task<S>,
    runtime: Runtime,
    route_inline: bool,
    is_subgraph: bool,
) -> GraphResult<(TaskOutcome<S>, Option<Vec<Value>>)> {
    let spec = &inner.spec;
    let Some(n) = task.node() else {
        // START: the input becomes the state update; its edges are its routes.
        let mut writes =
            TaskWrites { updates: ch.start.clone().unwrap_or_default(), ..TaskWrites::default() };
        if route_inline {
            let mut view = ch.state.clone();
            view.apply(writes.updates.clone()).map_err(|error| GraphError::InvalidUpdate {
                error,
                step: runtime.execution_info().step,
                nodes: vec![task.name.to_string()],
            })?;
            route(spec, &spec.start, &view, &mut writes)?;
        }
        return Ok((TaskOutcome::Done(writes), None));
    };
    let node = &spec.nodes[n];
    let Some(func) = &node.func else { return Ok((TaskOutcome::Done(TaskWrites::default()), None)) };
    let policy = node.config.retry.as_ref().or(inner.config.retry.as_ref());
    let step = runtime.inner.site.step;
    let cache_key = match (&node.config.cache, &inner.config.cache) {
        (Some(cp), Some(_)) => {
            let input = match &task.input {
                Some(p) => p.to_json().unwrap_or(Value::Null),
                None => state_json(&ch.state),
            };
            Some(cp.key_of(&input))
        }
        _ => None,
    };
    if let (Some(key), Some(cache)) = (&cache_key, &inner.config.cache) {
        if let Some(saved) = cache.get(&node.name, key).await {
            let mut writes = writes_from_json(spec, &ch.state, &saved)?;
            writes.cached = true;
            return Ok((TaskOutcome::Done(writes), None));
        }
    }
    let mut attempt = 1u32;
    let output = loop {
        let rt = if attempt == 1 { runtime.clone() } else { with_attempt(&runtime, attempt) };
        let input = match &task.input {
            Some(payload) => NodeInput::Payload(payload.clone()),
            None => NodeInput::State(&ch.state),
        };
        let scope = (rt.inner.observed && rt.config().callbacks.is_some()).then(|| {
            let input_json = match &input {
                NodeInput::State(s) => state_json(*s),
                NodeInput::Payload(p) => p.to_json().unwrap_or(Value::Null),
            };
            // Boxed: it lives across the node's await, and most tasks have none (a smaller task future).
            Box::new(RunScope::start(rt.config(), &node.name, RunKind::Chain, Some(input_json)))
        });
        let rt = match &scope {
            Some(s) => with_config(&rt, s.child_config().clone()),
            None => rt,
        };
        let result = func.call(input, rt.clone()).await;
        if let Some(scope) = &scope {
            match &result {
                Ok(_) => scope.end(None, &Value::Null),
                Err(e) => scope.fail(None, e),
            }
        }
        match result {
            Ok(out) => break out,
            Err(err) => {
                if let Some(cmd) = parent_command(&err) {
                    // A subgraph sent this command to us: it is this node's output.
                    let cmd = cmd.decode(spec).map_err(|source| GraphError::Node {
                        node: node.name.to_string(),
                        step,
                        source,
                    })?;
                    break crate::node::NodeOutput::Command(cmd);
                }
                if let Some(GraphInterrupt(list)) = control_interrupt(&err) {
                    let resumed = resume_to_save(&rt);
                    return Ok((TaskOutcome::Interrupted(list), resumed));
                }
                match policy {
                    Some(p) if attempt < p.max_attempts && p.should_retry(&err) => {
                        Box::pin(tokio::time::sleep(p.delay(attempt))).await;
                        attempt += 1;
                    }
                    _ => return Err(GraphError::Node { node: node.name.to_string(), step, source: err }),
                }
            }
        }
    };
    let mut writes = TaskWrites::default();
    let output = lift_parent_commands(&ch.state, output, is_subgraph).map_err(|source| GraphError::Node {
        node: node.name.to_string(),
        step,
        source,
    })?;
    flatten_output(spec, &node.name, output, &mut writes)?;
    for u in &mut writes.updates {
        ch.state.prepare_update(u);
    }
    if route_inline {
        let view = if node.branches.is_empty() {
            None
        } else {
            let mut view = ch.state.clone();
            view.apply(writes.updates.clone()).map_err(|error| GraphError::InvalidUpdate {
                error,
                step,
                nodes: vec![node.name.to_string()],
            })?;
            Some(view)
        };
        route(spec, node, view.as_ref().unwrap_or(&ch.state), &mut writes).map_err(|e| with_step(e, step))?;
    }
    if let (Some(key), Some(cache)) = (&cache_key, &inner.config.cache) {
        let json = owned_writes(writes_to_json(spec, &inner.names, &ch.state, &writes)?);
        cache.set(&node.name, key, json, node.config.cache.as_ref().and_then(|c| c.ttl)).await;
    }
    Ok((TaskOutcome::Done(writes), resume_to_save(&runtime)))
}

/// In a subgraph, a `Command` for the parent graph stops the node and travels up as control flow.
fn lift_parent_commands<S: State>(
    state: &S,
    output: crate::node::NodeOutput<S>,
    is_subgraph: bool,
) -> weft_runnable_core::Result<crate::node::NodeOutput<S>> {
    use crate::node::NodeOutput;
    match output {
        NodeOutput::Command(cmd) if is_subgraph && cmd.graph == crate::types::CommandGraph::Parent => {
            Err(raise_parent_command(ParentCommand::encode(state, cmd)?))
        }
        NodeOutput::Many(items) => Ok(NodeOutput::Many(
            items
                .into_iter()
                .map(|o| lift_parent_commands(state, o, is_subgraph))
                .collect::<Result<_, _>>()?,
        )),
        other => Ok(other),
    }
}

fn with_step(err: GraphError, step: i64) -> GraphError {
    match err {
        GraphError::Node { node, source, .. } => GraphError::Node { node, step, source },
        other => other,
    }
}

fn control_interrupt(err: &Error) -> Option<GraphInterrupt> {
    match err {
        Error::ControlFlow(flow) => flow.downcast_ref::<GraphInterrupt>().cloned(),
        _ => None,
    }
}

fn resume_to_save(rt: &Runtime) -> Option<Vec<Value>> {
    let pad = rt.inner.scratchpad.lock().ok()?;
    pad.resume_changed.then(|| pad.resume.clone())
}

fn with_attempt(rt: &Runtime, attempt: u32) -> Runtime {
    let site = TaskSite { attempt, ..rt.inner.site.clone() };
    rebuild(rt, site, rt.config().clone())
}

fn with_config(rt: &Runtime, config: RunnableConfig) -> Runtime {
    rebuild(rt, rt.inner.site.clone(), config)
}

fn rebuild(rt: &Runtime, site: TaskSite, config: RunnableConfig) -> Runtime {
    let pad = rt.inner.scratchpad.lock().map(|p| Scratchpad {
        counter: 0,
        resume: p.resume.clone(),
        resume_changed: p.resume_changed,
    });
    Runtime {
        inner: Arc::new(RuntimeInner {
            node: Arc::clone(&rt.inner.node),
            config: std::sync::OnceLock::from(config),
            config_builder: Mutex::new(None),
            observed: rt.inner.observed,
            site,
            info: std::sync::OnceLock::new(),
            stop: rt.inner.stop,
            scratchpad: Mutex::new(pad.unwrap_or_default()),
            writer: rt.inner.writer.clone(),
            null_resume: Arc::clone(&rt.inner.null_resume),
            context: rt.inner.context.clone(),
            store: rt.inner.store.clone(),
        }),
    }
}

async fn save_checkpoint<S: State>(
    ctx: &mut Ctx<'_, S>,
    ch: &mut Channels<S>,
    source: CheckpointSource,
    step: i64,
    values_of: Option<&ChannelSet>,
    updated: &ChannelSet,
) -> GraphResult<()> {
    let Some(saver) = ctx.saver.as_mut() else { return Ok(()) };
    let spec = &ctx.inner.spec;
    let (id, ts) = checkpoint_stamps();
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
            GraphError::InvalidUpdate { error: crate::state::UpdateError::Serialization { key, message }, .. } => {
                GraphError::Checkpoint(format!(
                    "cannot serialize channel '{key}' of thread '{}' for checkpoint '{id}' (step {step}): {message}",
                    saver.thread.thread_id
                ))
            }
            other => other,
        })?;
    checkpoint.id = id;
    let mut extra = Map::new();
    for (k, v) in ctx.config.metadata.iter().chain(ctx.config.configurable.iter()) {
        let scalar = matches!(v, Value::String(_) | Value::Number(_) | Value::Bool(_));
        let reserved =
            matches!(k.as_str(), "thread_id" | "checkpoint_id" | "checkpoint_ns" | "checkpoint_map")
                || k.starts_with("langgraph_")
                || k.starts_with("__");
        if scalar && !reserved {
            extra.insert(k.clone(), v.clone());
        }
    }
    let parents = ctx.parent.as_ref().map(|p| p.parents.clone()).unwrap_or_default();
    let metadata = CheckpointMetadata { source, step, parents, extra };
    let values =
        if ctx.sink.is_some_and(|s| s.modes.checkpoints()) { Some(state_json(&ch.state)) } else { None };
    if let Some(op) = saver.put(checkpoint, metadata, new_versions, appends)? {
        saver.submit(op).await?;
    }
    ch.mark_saved();
    if let (Some(sink), Some(values)) = (ctx.sink, values) {
        let address = CheckpointConfig::clone(saver.current_config());
        let next = plan_tasks(ch, spec, step + 1, "", &ctx.ns).iter().map(|t| t.name.to_string()).collect();
        sink.send(StreamData::Checkpoint { config: address, step, values, next });
    }
    Ok(())
}
