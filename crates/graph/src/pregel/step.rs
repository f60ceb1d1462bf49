//! Running one superstep's tasks: reusing saved writes, running the rest concurrently, saving their writes.

use std::collections::VecDeque;
use std::sync::Arc;

use futures::stream::FuturesUnordered;
use futures::{FutureExt as _, StreamExt as _};
use serde_json::Value;
use smallvec::SmallVec;

use crate::checkpoint::{ChannelName, special};
use crate::error::{GraphError, GraphResult};
use crate::pregel::calls::{CallSite, CallStep};
use crate::pregel::channels::Channels;
use crate::pregel::emit::{emit_task_result, emit_update, emit_whole_messages};
use crate::pregel::execute::{InPlace, execute, execute_in_place, execute_retry};
use crate::pregel::plan::task_triggers;
use crate::pregel::run::Ctx;
use crate::pregel::save::unsaveable;
use crate::pregel::saved::SavedWrites;
use crate::pregel::sink::Sink;
use crate::pregel::task::{
    Task, TaskKind, TaskOutcome, TaskWrites, handler_task, state_json, writes_from_json, writes_to_json,
};
use crate::pregel::task_runtime::{make_runtime, with_node_error};
use crate::runtime::{NodeError, Runtime};
use crate::state::State;
use crate::stream::{StreamData, StreamMode};
use crate::types::Interrupt;

pub(crate) enum StepOutcome<S: State> {
    /// Writes per task in task order (a failed task's are those of its error handler, after the writes
    /// the task made before failing; `routed` says whether the routes are already in them). Then the
    /// error handler nodes that ran.
    Done(Vec<TaskWrites<S>>, Vec<usize>),
    /// The step paused: the interrupts in task order, and the writes of the tasks that finished (saved, so
    /// a resume reuses them; the run's result shows them applied).
    Interrupted { interrupts: Vec<Interrupt>, finished: Vec<TaskWrites<S>> },
}

/// What runs in a step: one of its tasks, or the error handler of one (by the failed task's index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Task(usize),
    Handler(usize),
}

/// A step's tasks and, per task whose node has an error handler, the handler's task.
struct StepTasks<'t, S: State> {
    tasks: &'t [Task<S>],
    handlers: Vec<Option<Task<S>>>,
}

impl<S: State> StepTasks<'_, S> {
    fn get(&self, slot: Slot) -> Option<&Task<S>> {
        match slot {
            Slot::Task(i) => self.tasks.get(i),
            Slot::Handler(i) => self.handlers.get(i).and_then(Option::as_ref),
        }
    }
}

/// What a step has gathered so far: per task, its writes and whether they hold its routes (a failed task's
/// writes made before it failed wait there for its handler's); the interrupts by task; the handlers that
/// ran; the failures handlers handle, by failed task.
struct Gathered<S: State> {
    results: Vec<Option<TaskWrites<S>>>,
    interrupts: Vec<(usize, Vec<Interrupt>)>,
    handled: Vec<usize>,
    failures: Vec<Option<Arc<NodeError>>>,
}

/// How a finished run of a step leaves the step.
enum Next {
    /// The step goes on.
    Continue,
    /// The task failed and its error handler runs next.
    Handle(usize),
    /// The step fails with this error.
    Fail(GraphError),
}

/// Runs one superstep's tasks. `CALLS` is set for an entrypoint's graph, whose task may call tasks
/// (functional API); other graphs' steps are compiled without that bookkeeping.
pub(crate) async fn run_step<S: State, const CALLS: bool>(
    ctx: &mut Ctx<'_, S>,
    ch: &Channels<S>,
    tasks: &[Task<S>],
    saved: &SavedWrites,
    step: i64,
    stop: i64,
) -> GraphResult<StepOutcome<S>> {
    let step_tasks = StepTasks { tasks, handlers: handler_tasks(ctx, tasks, step) };
    let mut got = Gathered {
        results: (0..tasks.len()).map(|_| None).collect(),
        interrupts: Vec::new(),
        handled: Vec::new(),
        // Only a step with error handlers has failures to hand them.
        failures: step_tasks.handlers.iter().map(|_| None).collect(),
    };
    let mut first_error: Option<GraphError> = None;
    if let Some(sink) = ctx.sink.filter(|s| s.modes.tasks()) {
        announce_step(ctx, sink, ch, &step_tasks, saved, step);
    }
    let to_run = reuse_saved(ctx, ch, &step_tasks, saved, &mut got)?;

    // The task calls of an entrypoint's step (functional API): ids from the step's checkpoint.
    let calls = if CALLS { Some(call_step(ctx, saved, step)) } else { None };
    let limit = ctx.config.max_concurrency.unwrap_or(usize::MAX).max(1);
    let inner = ctx.inner;
    let is_subgraph = ctx.parent.is_some();
    // A lone task is awaited directly; several run concurrently, polled by this task.
    let mut lone = if to_run.len() == 1 { to_run.first().copied() } else { None };
    let mut running = if lone.is_none() { Some(FuturesUnordered::new()) } else { None };
    let mut queue: VecDeque<Slot> =
        if lone.is_none() { to_run.into_iter().collect() } else { VecDeque::new() };
    // A lone task's routers run after its writes are applied, on the step's own state (no copy). In `exit`
    // mode they run with the task, as for several tasks: a router's failure must leave the state the step
    // started from, which is the checkpoint such a run saves when it stops. So do those of a task whose
    // failure goes to an error handler (the router's failure is the task's), and a handler's own.
    let exit_mode = ctx.saver.as_ref().is_some_and(|s| s.durability == crate::types::Durability::Exit);
    let with_handlers = step_tasks.handlers.iter().any(Option::is_some);
    let route_inline = tasks.len() != 1 || exit_mode || with_handlers;
    loop {
        if let Some(running) = running.as_mut() {
            while running.len() < limit {
                let Some(slot) = queue.pop_front() else { break };
                let Some(task) = step_tasks.get(slot) else { continue };
                let runtime = begin(ctx, ch, task, slot, &got, saved, (step, stop), (calls.as_ref(), None));
                running.push(
                    execute(inner, ch, task, runtime, route_inline, is_subgraph).map(move |r| (slot, r)),
                );
            }
        }
        let next = match (lone.take(), running.as_mut()) {
            (Some(slot), _) => match step_tasks.get(slot) {
                Some(task) => {
                    let spare = ctx.spare_runtime.take();
                    let runtime =
                        begin(ctx, ch, task, slot, &got, saved, (step, stop), (calls.as_ref(), spare));
                    let result = match &calls {
                        // An entrypoint: the results of its task calls are saved as they come (boxed: other
                        // graphs' steps keep a small future).
                        Some(calls) => {
                            let run = execute(inner, ch, task, runtime, route_inline, is_subgraph);
                            Box::pin(run_saving_calls(ctx, calls, run)).await?
                        }
                        // A task that cannot wait runs here, with no future to build and move.
                        None => {
                            match execute_in_place(inner, (ch, task), runtime, (route_inline, is_subgraph)) {
                                InPlace::Done(result, runtime) => {
                                    ctx.spare_runtime = Some(runtime);
                                    result
                                }
                                InPlace::Not(runtime) => {
                                    execute(inner, ch, task, runtime, route_inline, is_subgraph).await
                                }
                                // Boxed: rare, and the step's future need not hold a retry's space.
                                InPlace::Retry(runtime, n, wait) => {
                                    let how = (route_inline, is_subgraph);
                                    Box::pin(execute_retry(inner, ch, task, (runtime, n, wait), how)).await
                                }
                            }
                        }
                    };
                    Some((slot, result))
                }
                None => None,
            },
            (None, Some(running)) => running.next().await,
            (None, None) => None,
        };
        let Some((slot, result)) = next else { break };
        if let Some(progress) = crate::control::Progress::of(&ctx.config) {
            progress.note();
        }
        // The results of the tasks it called are saved before its own writes.
        if let Some(calls) = &calls {
            // Boxed: other graphs' steps keep a small future.
            Box::pin(save_calls(ctx, calls)).await?;
        }
        // A task done with nothing to save here is kept with no future (the common case).
        let result = match result {
            Ok((TaskOutcome::Done(writes), resumed)) if !route_inline || ctx.saver.is_none() => {
                let writes = finished(ctx, ch, &step_tasks, slot, (writes, resumed), step);
                keep_done(ctx, ch, &step_tasks, slot, writes, &mut got, route_inline, step);
                continue;
            }
            other => other,
        };
        match finish(ctx, ch, &step_tasks, slot, result, &mut got, route_inline, step).await? {
            Next::Continue => {}
            Next::Handle(i) if running.is_some() => queue.push_front(Slot::Handler(i)),
            Next::Handle(i) => lone = Some(Slot::Handler(i)),
            Next::Fail(err) => {
                first_error = Some(err);
                break;
            }
        }
    }
    drop(running);
    if let Some(calls) = &calls {
        ctx.called.extend(calls.called());
    }
    if let Some(err) = first_error {
        return Err(err);
    }
    Ok(outcome(got))
}

/// The task of each of `tasks` whose node has an error handler: the handler's (see
/// [`handler_task`]).
fn handler_tasks<S: State>(ctx: &Ctx<'_, S>, tasks: &[Task<S>], step: i64) -> Vec<Option<Task<S>>> {
    let spec = &ctx.inner.spec;
    let handler_of = |t: &Task<S>| t.node().and_then(|n| spec.nodes[n].error_handler);
    if !tasks.iter().any(|t| handler_of(t).is_some()) {
        return Vec::new();
    }
    let checkpoint_id = step_checkpoint_id(ctx);
    tasks
        .iter()
        .map(|t| {
            handler_of(t).map(|h| handler_task(spec, h, t, (checkpoint_id.as_str(), ctx.ns.as_str(), step)))
        })
        .collect()
}

/// The id of the checkpoint the step was planned from (task ids derive from it).
fn step_checkpoint_id<S: State>(ctx: &Ctx<'_, S>) -> String {
    match &ctx.unsaved {
        Some((id, _)) => id.clone(),
        None => {
            let current = ctx.saver.as_ref().map(|s| Arc::clone(s.current_config()));
            current.and_then(|c| c.checkpoint_id.clone()).unwrap_or_default()
        }
    }
}

/// Makes the runtime of the run in `slot` (its start was streamed with the step's, see [`announce_step`]).
#[allow(clippy::too_many_arguments)]
fn begin<S: State>(
    ctx: &Ctx<'_, S>,
    ch: &Channels<S>,
    task: &Task<S>,
    slot: Slot,
    got: &Gathered<S>,
    saved: &SavedWrites,
    (step, stop): (i64, i64),
    (calls, spare): (Option<&Arc<CallStep>>, Option<Runtime>),
) -> Runtime {
    match slot {
        Slot::Task(_) => start_task(ctx, ch, task, saved, (step, stop), calls, spare),
        Slot::Handler(i) => {
            let failure = got.failures.get(i).and_then(Option::as_ref);
            let runtime = start_task(ctx, ch, task, saved, (step, stop), calls, spare);
            match failure {
                Some(error) => with_node_error(runtime, Arc::clone(error)),
                None => runtime,
            }
        }
    }
}

/// Streams and saves what one run of the step ended with, and says how the step goes on.
#[allow(clippy::too_many_arguments)]
async fn finish<S: State>(
    ctx: &mut Ctx<'_, S>,
    ch: &Channels<S>,
    step_tasks: &StepTasks<'_, S>,
    slot: Slot,
    result: GraphResult<(TaskOutcome<S>, Option<Vec<Value>>)>,
    got: &mut Gathered<S>,
    route_inline: bool,
    step: i64,
) -> GraphResult<Next> {
    let Some(task) = step_tasks.get(slot) else { return Ok(Next::Continue) };
    let (Slot::Task(i) | Slot::Handler(i)) = slot;
    let spec = &ctx.inner.spec;
    match &result {
        // Its result follows its `updates` chunk (below, or after routing for a lone task).
        Ok((TaskOutcome::Done(_), _)) => {}
        Ok((TaskOutcome::Interrupted(list), _)) => {
            // As LangGraph: an `__interrupt__` update, the state with the interrupt, then the result.
            if let Some(sink) = ctx.sink {
                if sink.modes.has(StreamMode::Updates) {
                    sink.send(StreamData::Interrupt(list.clone()));
                }
                if sink.modes.has(StreamMode::Values) {
                    sink.send(StreamData::Values { state: ch.state.clone(), interrupts: list.clone() });
                }
            }
            emit_task_result(ctx, &ch.state, task, None, None, list.clone(), step);
        }
        Ok((TaskOutcome::RouteFailed(writes, e), _)) => {
            emit_task_result(ctx, &ch.state, task, Some(saved_error(e)), Some(writes), Vec::new(), step);
        }
        Err(e) => emit_task_result(ctx, &ch.state, task, Some(saved_error(e)), None, Vec::new(), step),
    }
    let (partial, err) = match result {
        Ok((TaskOutcome::Done(writes), resumed)) => {
            let writes = finished(ctx, ch, step_tasks, slot, (writes, resumed), step);
            // Routed with the task: its writes are saved now, before they are streamed.
            if let (true, Some(saver)) = (route_inline, ctx.saver.as_mut()) {
                let thread = saver.thread.thread_id.clone();
                let json = writes_to_json(spec, &ctx.inner.names, &ch.state, &writes)
                    .map_err(|e| unsaveable(e, &thread, &task.name, step))?;
                if let Some(op) = saver.put_writes(task.id.text(), &task.path, json)? {
                    // Boxed: only a step of several tasks with a saver saves here, and every task's
                    // future would otherwise hold this save's space (an allocation per task here
                    // against a copy of that space per task everywhere).
                    Box::pin(saver.submit(op)).await?;
                }
            }
            keep_done(ctx, ch, step_tasks, slot, writes, got, route_inline, step);
            return Ok(Next::Continue);
        }
        Ok((TaskOutcome::Interrupted(list), resumed)) => {
            let json = crate::pregel::task::paused_writes(&list, resumed);
            if let Some(saver) = ctx.saver.as_mut() {
                Box::pin(saver.put_writes_now(task.id.text(), &task.path, json)).await?;
            }
            got.interrupts.push((i, list));
            return Ok(Next::Continue);
        }
        Ok((TaskOutcome::RouteFailed(writes, err), _)) => (Some(writes), *err),
        Err(err) => (None, err),
    };
    let handled =
        slot == Slot::Task(i) && step_tasks.get(Slot::Handler(i)).is_some() && goes_to_handler(&err);
    let source = handled.then_some(&*task.name);
    Box::pin(save_failed(ctx, task, &ch.state, partial.as_ref(), &err, source)).await?;
    if !handled {
        return Ok(Next::Fail(err));
    }
    let message = saved_error(&err);
    let own = match err {
        GraphError::Node { source, .. } => Some(source),
        // What the node returned is its own failure too.
        GraphError::InvalidNodeReturn { got, .. } => {
            Some(weft_runnable_core::Error::custom(crate::error::InvalidNodeReturn(got)))
        }
        _ => None,
    };
    got.failures[i] = Some(Arc::new(NodeError::live(&task.name, message, own)));
    got.results[i] = partial.map(TaskWrites::marked_routed);
    Ok(Next::Handle(i))
}

/// A finished task's writes as the step keeps and saves them: the messages they hold streamed first
/// (`messages` mode, as soon as the task finishes), and the answers it used set in them (saved with
/// them as `__resume__`).
fn finished<S: State>(
    ctx: &Ctx<'_, S>,
    ch: &Channels<S>,
    step_tasks: &StepTasks<'_, S>,
    slot: Slot,
    (mut writes, resumed): (TaskWrites<S>, Option<Vec<Value>>),
    step: i64,
) -> TaskWrites<S> {
    if let Some(task) =
        step_tasks.get(slot).filter(|_| ctx.sink.is_some_and(|s| s.modes.has(StreamMode::Messages)))
    {
        let triggers = task_triggers(&ctx.inner.spec, task);
        emit_whole_messages(ctx, &ch.state, task, &writes, step, &triggers);
    }
    writes.set_resumed(resumed);
    writes
}

/// Keeps a task's writes (with the answers it used) for the step's end (saved already when it routes
/// inline), streaming them first when it routes inline.
#[allow(clippy::too_many_arguments)]
fn keep_done<S: State>(
    ctx: &Ctx<'_, S>,
    ch: &Channels<S>,
    step_tasks: &StepTasks<'_, S>,
    slot: Slot,
    mut writes: TaskWrites<S>,
    got: &mut Gathered<S>,
    route_inline: bool,
    step: i64,
) {
    let Some(task) = step_tasks.get(slot) else { return };
    let (Slot::Task(i) | Slot::Handler(i)) = slot;
    if route_inline {
        emit_update(ctx, task, &writes, writes.cached);
        emit_task_result(ctx, &ch.state, task, None, Some(&writes), Vec::new(), step);
    }
    if let (Slot::Handler(_), Some(n)) = (slot, task.node()) {
        got.handled.push(n);
        // After what the failed task wrote before failing.
        if let Some(mut before) = got.results[i].take() {
            before.updates.append(&mut writes.updates);
            writes.updates = before.updates;
        }
    }
    // Saved with the writes once the task's routes are known (`persist_single`) when not inline.
    writes.routed = route_inline;
    got.results[i] = Some(writes);
}

/// A failed task's error as it is saved (`__error__`) and told to its error handler: the node's own error
/// (LangGraph saves the exception the node raised), else the engine's.
fn saved_error(err: &GraphError) -> String {
    err.node_error().map_or_else(|| err.to_string(), ToString::to_string)
}

/// Whether a task's failure goes to its node's error handler: any error of the node, its routers or its
/// output, except a pause, a drain, and a failure of the checkpointer.
fn goes_to_handler(err: &GraphError) -> bool {
    match err {
        GraphError::Node { source, .. } => !source.is_control_flow(),
        GraphError::Interrupted(_)
        | GraphError::Drained { .. }
        | GraphError::Storage(_)
        | GraphError::Checkpoint(_) => false,
        _ => true,
    }
}

/// Reuses the writes saved before a crash or an interrupt for the tasks that finished then; the runs left
/// to do. A task saved as failed with its error handler due (`__error_source_node__`) is not run again:
/// its handler is, told the failure as saved (or its saved writes reused, when it finished).
fn reuse_saved<S: State>(
    ctx: &mut Ctx<'_, S>,
    ch: &Channels<S>,
    step_tasks: &StepTasks<'_, S>,
    saved: &SavedWrites,
    got: &mut Gathered<S>,
) -> GraphResult<SmallVec<[Slot; 4]>> {
    if saved.is_empty() {
        return Ok((0..step_tasks.tasks.len()).map(Slot::Task).collect());
    }
    let mut to_run = SmallVec::new();
    for (i, task) in step_tasks.tasks.iter().enumerate() {
        let failure = saved.failure_to_handle(&task.id);
        if let Some((node, message)) = failure {
            // Its node has no handler now (the graph changed): it runs again, as in LangGraph.
            let Some(handler) = step_tasks.get(Slot::Handler(i)) else {
                to_run.push(Slot::Task(i));
                continue;
            };
            // What the task wrote before it failed (a router's failure), then its handler's writes.
            let before = saved.written(&task.id);
            let mut writes = writes_from_json(&ctx.inner.spec, &ch.state, &before, saved.origin())?;
            match saved.finished(&handler.id) {
                Some(w) => {
                    let mut own = writes_from_json(&ctx.inner.spec, &ch.state, w, saved.origin())?;
                    emit_update(ctx, handler, &own, true);
                    writes.updates.append(&mut own.updates);
                    own.updates = writes.updates;
                    own.routed = true;
                    got.results[i] = Some(own);
                    got.handled.extend(handler.node());
                }
                None => {
                    writes.routed = true;
                    got.results[i] = (!before.is_empty()).then_some(writes);
                    got.failures[i] = Some(Arc::new(NodeError::saved(node, message)));
                    to_run.push(Slot::Handler(i));
                }
            }
        } else if let Some(w) = saved.finished(&task.id) {
            let mut writes = writes_from_json(&ctx.inner.spec, &ch.state, w, saved.origin())?;
            emit_update(ctx, task, &writes, true);
            writes.routed = true;
            got.results[i] = Some(writes);
        } else {
            to_run.push(Slot::Task(i));
        }
    }
    Ok(to_run)
}

/// The step's outcome once no task failed: paused when some task was interrupted, else every task's
/// writes (with whether they were saved) and the handlers that ran.
fn outcome<S: State>(got: Gathered<S>) -> StepOutcome<S> {
    let Gathered { results, mut interrupts, handled, .. } = got;
    if !interrupts.is_empty() {
        // Finished siblings were saved as they finished (a single-task step cannot be both finished and
        // interrupted), so a resume reuses them.
        interrupts.sort_by_key(|(i, _)| *i);
        return StepOutcome::Interrupted {
            interrupts: interrupts.into_iter().flat_map(|(_, list)| list).collect(),
            finished: results.into_iter().flatten().collect(),
        };
    }
    StepOutcome::Done(
        results.into_iter().map(|r| r.unwrap_or_else(|| TaskWrites::default().marked_routed())).collect(),
        handled,
    )
}

/// The task calls of an entrypoint's step (functional API): ids from the step's checkpoint.
#[cold]
#[inline(never)]
fn call_step<S: State>(ctx: &Ctx<'_, S>, saved: &SavedWrites, step: i64) -> Arc<CallStep> {
    Arc::new(CallStep::new(ctx, saved, &step_checkpoint_id(ctx), step))
}

/// The call site of an entrypoint's task: it reads the run's input from there (its graph has no START
/// task writing it).
#[cold]
#[inline(never)]
fn call_site<S: State>(ch: &Channels<S>, task: &Task<S>, calls: &Arc<CallStep>) -> Arc<CallSite> {
    Arc::new(CallSite::new(Arc::clone(calls), Arc::clone(&task.path), entrypoint_input(ch)))
}

/// Runs a task that calls tasks, saving each call's result as soon as it finishes (so a run that dies
/// while the task still runs resumes without running the finished calls again).
async fn run_saving_calls<S: State, T>(
    ctx: &mut Ctx<'_, S>,
    calls: &CallStep,
    run: impl std::future::Future<Output = T>,
) -> GraphResult<T> {
    let mut run = std::pin::pin!(run);
    loop {
        let finished = std::pin::pin!(calls.finished());
        match futures::future::select(run.as_mut(), finished).await {
            futures::future::Either::Left((result, _)) => return Ok(result),
            futures::future::Either::Right(((), _)) => save_calls(ctx, calls).await?,
        }
    }
}

/// Saves the writes of the task calls that finished, in the order they finished.
async fn save_calls<S: State>(ctx: &mut Ctx<'_, S>, calls: &CallStep) -> GraphResult<()> {
    let Some(saver) = ctx.saver.as_mut() else { return Ok(()) };
    for (id, path, writes) in calls.take_writes() {
        if let Some(op) = saver.put_writes(&id, &path, writes)? {
            saver.submit(op).await?;
        }
    }
    Ok(())
}

/// Makes a task's runtime.
fn start_task<S: State>(
    ctx: &Ctx<'_, S>,
    ch: &Channels<S>,
    task: &Task<S>,
    saved: &SavedWrites,
    (step, stop): (i64, i64),
    calls: Option<&Arc<CallStep>>,
    spare: Option<Runtime>,
) -> Runtime {
    // Named only where someone reads them: streams of task events and the metadata of observed runs.
    let events = ctx.sink.is_some_and(|s| s.modes.tasks() || s.modes.has(StreamMode::Messages));
    let triggers = if events || ctx.config.callbacks.is_some() {
        task_triggers(&ctx.inner.spec, task)
    } else {
        Vec::new()
    };
    let calls = calls.map(|c| call_site(ch, task, c) as Arc<dyn crate::runtime::TaskCalls>);
    make_runtime(ctx, task, saved, (step, stop), triggers, calls, spare)
}

/// Streams the start of every task of the step in the `tasks` modes before any runs, as LangGraph does:
/// those whose writes were saved before an interrupt or a crash too (their saved result follows, as a
/// cached update), then the error handlers that a resumed run starts for failures saved with their
/// handler due (LangGraph streams no start for a handler it schedules as the node fails).
fn announce_step<S: State>(
    ctx: &Ctx<'_, S>,
    sink: &Sink<S>,
    ch: &Channels<S>,
    step_tasks: &StepTasks<'_, S>,
    saved: &SavedWrites,
    step: i64,
) {
    let handlers = step_tasks.tasks.iter().enumerate().filter_map(|(i, task)| {
        let handler = step_tasks.get(Slot::Handler(i))?;
        let due = saved.failure_to_handle(&task.id).is_some() && saved.finished(&handler.id).is_none();
        due.then_some(handler)
    });
    for task in step_tasks.tasks.iter().chain(handlers) {
        if task.kind == TaskKind::Start {
            continue;
        }
        let input = match &task.input {
            Some(p) => crate::pregel::channels::payload_json(&ch.state, p),
            // An entrypoint's input is the run's input, as LangGraph shows it.
            None if ctx.inner.spec.functional => entrypoint_input(ch).unwrap_or_default(),
            None => state_json(&ch.state),
        };
        sink.send(StreamData::TaskStart {
            id: task.id.to_string(),
            name: task.name.to_string(),
            input,
            triggers: task_triggers(&ctx.inner.spec, task),
            step,
        });
    }
}

/// The input an entrypoint runs on, as JSON (`None` when none is pending).
fn entrypoint_input<S: State>(ch: &Channels<S>) -> Option<Value> {
    let index = ch.state.channel_index(crate::func::state::INPUT_CHANNEL);
    ch.start
        .iter()
        .flatten()
        .flat_map(|u| ch.state.update_to_json(u).unwrap_or_default())
        .find(|(i, _)| Some(*i) == index)
        .map(|(_, v)| v)
}

/// Saves the writes of a single-task step (made after its routes were computed).
pub(crate) async fn persist_single<S: State>(
    ctx: &mut Ctx<'_, S>,
    task: &Task<S>,
    state: &S,
    writes: &TaskWrites<S>,
    saved: &SavedWrites,
    step: i64,
) -> GraphResult<()> {
    if !saved.is_empty() && saved.finished(&task.id).is_some() {
        return Ok(());
    }
    let Some(saver) = ctx.saver.as_mut() else { return Ok(()) };
    let json = writes_to_json(&ctx.inner.spec, &ctx.inner.names, state, writes)
        .map_err(|e| unsaveable(e, &saver.thread.thread_id, &task.name, step))?;
    match saver.put_writes(task.id.text(), &task.path, json)? {
        Some(op) => saver.submit(op).await,
        None => Ok(()),
    }
}

/// Saves a failed task's error, with the state writes it made before failing (a router's failure comes
/// after its node's writes). When its node's error handler runs next (`source`: the node's name), the
/// name is saved with the error, in the same write, and stored before the handler starts.
pub(crate) async fn save_failed<S: State>(
    ctx: &mut Ctx<'_, S>,
    task: &Task<S>,
    state: &S,
    writes: Option<&TaskWrites<S>>,
    err: &GraphError,
    source: Option<&str>,
) -> GraphResult<()> {
    let Some(saver) = ctx.saver.as_mut() else { return Ok(()) };
    let mut json = match writes {
        Some(w) => writes_to_json(&ctx.inner.spec, &ctx.inner.names, state, w)?
            .into_iter()
            .filter(|(c, _)| &**c != special::NO_WRITES)
            .collect(),
        None => Vec::new(),
    };
    json.push((ChannelName::from(special::ERROR), Value::String(saved_error(err))));
    match source {
        Some(node) => {
            json.push((ChannelName::from(special::ERROR_SOURCE_NODE), Value::String(node.to_owned())));
            saver.put_writes_confirmed(task.id.text(), &task.path, json).await
        }
        None => saver.put_writes_now(task.id.text(), &task.path, json).await,
    }
}
