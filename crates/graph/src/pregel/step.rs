//! Running one superstep's tasks: reusing saved writes, running the rest concurrently, saving their writes.

use std::sync::Arc;

use futures::stream::FuturesUnordered;
use futures::{FutureExt as _, StreamExt as _};
use serde_json::Value;

use crate::checkpoint::{ChannelName, special};
use crate::error::{GraphError, GraphResult};
use crate::pregel::calls::{CallSite, CallStep};
use crate::pregel::channels::Channels;
use crate::pregel::emit::{emit_task_result, emit_update, emit_whole_messages};
use crate::pregel::execute::execute;
use crate::pregel::plan::task_triggers;
use crate::pregel::run::Ctx;
use crate::pregel::save::unsaveable;
use crate::pregel::saved::SavedWrites;
use crate::pregel::task::{
    Task, TaskKind, TaskOutcome, TaskWrites, state_json, writes_from_json, writes_to_json,
};
use crate::pregel::task_runtime::make_runtime;
use crate::runtime::Runtime;
use crate::state::State;
use crate::stream::{StreamData, StreamMode};
use crate::types::Interrupt;

pub(crate) enum StepOutcome<S: State> {
    /// Writes per task in task order (`routed` says whether the routes are already in them).
    Done(Vec<TaskWrites<S>>),
    /// The step paused: the interrupts in task order, and the writes of the tasks that finished (saved, so
    /// a resume reuses them; the run's result shows them applied).
    Interrupted { interrupts: Vec<Interrupt>, finished: Vec<TaskWrites<S>> },
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
    let spec = &ctx.inner.spec;
    let single = tasks.len() == 1;
    let mut results: Vec<Option<TaskWrites<S>>> = (0..tasks.len()).map(|_| None).collect();
    let mut interrupts = Vec::new();
    let mut first_error: Option<GraphError> = None;

    reuse_saved(ctx, ch, tasks, saved, &mut results)?;

    // The task calls of an entrypoint's step (functional API): ids from the step's checkpoint.
    let calls = if CALLS { Some(call_step(ctx, saved, step)) } else { None };
    let limit = ctx.config.max_concurrency.unwrap_or(usize::MAX).max(1);
    let inner = ctx.inner;
    let is_subgraph = ctx.parent.is_some();
    // A lone task is awaited directly; several run concurrently, polled by this task.
    let (mut lone, to_run) = left_to_run(&results);
    let mut running = if lone.is_none() { Some(FuturesUnordered::new()) } else { None };
    let mut queue = to_run.into_iter();
    // A lone task's routers run after its writes are applied, on the step's own state (no copy). In `exit`
    // mode they run with the task, as for several tasks: a router's failure must leave the state the step
    // started from, which is the checkpoint such a run saves when it stops.
    let exit_mode = ctx.saver.as_ref().is_some_and(|s| s.durability == crate::types::Durability::Exit);
    let route_inline = !single || exit_mode;
    loop {
        if let Some(running) = running.as_mut() {
            while running.len() < limit {
                let Some(i) = queue.next() else { break };
                let runtime = start_task(ctx, ch, &tasks[i], saved, step, stop, calls.as_ref());
                let task = &tasks[i];
                running
                    .push(execute(inner, ch, task, runtime, route_inline, is_subgraph).map(move |r| (i, r)));
            }
        }
        let next = match (lone.take(), running.as_mut()) {
            (Some(i), _) => {
                let runtime = start_task(ctx, ch, &tasks[i], saved, step, stop, calls.as_ref());
                let run = execute(inner, ch, &tasks[i], runtime, route_inline, is_subgraph);
                let result = match &calls {
                    // An entrypoint: the results of its task calls are saved as they come (boxed: other
                    // graphs' steps keep a small future).
                    Some(calls) => Box::pin(run_saving_calls(ctx, calls, run)).await?,
                    None => run.await,
                };
                Some((i, result))
            }
            (None, Some(running)) => running.next().await,
            (None, None) => None,
        };
        let Some((i, result)) = next else { break };
        if let Some(progress) = crate::control::Progress::of(&ctx.config) {
            progress.note();
        }
        let task = &tasks[i];
        // The results of the tasks it called are saved before its own writes.
        if let Some(calls) = &calls {
            // Boxed: other graphs' steps keep a small future.
            Box::pin(save_calls(ctx, calls)).await?;
        }
        stream_unfinished(ctx, ch, task, &result, step);
        match result {
            Ok((TaskOutcome::Done(mut writes), resumed)) => {
                if ctx.sink.is_some_and(|s| s.modes.has(StreamMode::Messages)) {
                    let triggers = task_triggers(ch, spec, task);
                    emit_whole_messages(ctx, &ch.state, task, &writes, step, &triggers);
                }
                writes.resumed = resumed;
                if route_inline {
                    if let Some(saver) = ctx.saver.as_mut() {
                        let thread = saver.thread.thread_id.clone();
                        let json = writes_to_json(spec, &inner.names, &ch.state, &writes)
                            .map_err(|e| unsaveable(e, &thread, &task.name, step))?;
                        if let Some(op) = saver.put_writes(&task.id, &task.path, json)? {
                            saver.submit(op).await?;
                        }
                    }
                    emit_update(ctx, task, &writes, writes.cached);
                    emit_task_result(ctx, &ch.state, task, None, Some(&writes), Vec::new(), step);
                    writes.routed = true;
                    results[i] = Some(writes);
                } else {
                    // Saved with the writes once the task's routes are known (`persist_single`).
                    results[i] = Some(writes);
                }
            }
            Ok((TaskOutcome::Interrupted(list), resumed)) => {
                let json = crate::pregel::task::paused_writes(&list, resumed);
                if let Some(saver) = ctx.saver.as_mut() {
                    saver.put_writes_now(&task.id, &task.path, json).await?;
                }
                interrupts.push((i, list));
            }
            Ok((TaskOutcome::RouteFailed(writes, err), _)) => {
                save_failed(ctx, task, &ch.state, Some(&writes), &err).await?;
                first_error = Some(err);
                break;
            }
            Err(err) => {
                save_failed(ctx, task, &ch.state, None, &err).await?;
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
    Ok(outcome(results, interrupts))
}

/// The chunks of a task that did not finish (a finished task's result follows its `updates` chunk, in
/// `run_step` or after routing for a lone task).
fn stream_unfinished<S: State>(
    ctx: &Ctx<'_, S>,
    ch: &Channels<S>,
    task: &Task<S>,
    result: &GraphResult<(TaskOutcome<S>, Option<Vec<Value>>)>,
    step: i64,
) {
    match result {
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
            emit_task_result(ctx, &ch.state, task, Some(e.to_string()), Some(writes), Vec::new(), step);
        }
        Err(e) => emit_task_result(ctx, &ch.state, task, Some(e.to_string()), None, Vec::new(), step),
    }
}

/// The tasks left to run (those without results): the lone one, awaited directly, or else all of them, to
/// run concurrently.
fn left_to_run<S: State>(results: &[Option<TaskWrites<S>>]) -> (Option<usize>, Vec<usize>) {
    let mut left = results.iter().enumerate().filter(|(_, r)| r.is_none()).map(|(i, _)| i);
    match (left.next(), left.next()) {
        (Some(i), None) => (Some(i), Vec::new()),
        (Some(a), Some(b)) => (None, [a, b].into_iter().chain(left).collect()),
        (None, _) => (None, Vec::new()),
    }
}

/// Reuses the writes saved before a crash or an interrupt for the tasks that finished then (the others'
/// results stay empty).
fn reuse_saved<S: State>(
    ctx: &mut Ctx<'_, S>,
    ch: &Channels<S>,
    tasks: &[Task<S>],
    saved: &SavedWrites,
    results: &mut [Option<TaskWrites<S>>],
) -> GraphResult<()> {
    for (i, task) in tasks.iter().enumerate() {
        if let Some(w) = saved.finished(&task.id) {
            let mut writes = writes_from_json(&ctx.inner.spec, &ch.state, w, saved.origin())?;
            emit_update(ctx, task, &writes, true);
            writes.routed = true;
            results[i] = Some(writes);
        }
    }
    Ok(())
}

/// The step's outcome once no task failed: paused when some task was interrupted, else every task's
/// writes (with whether they were saved).
fn outcome<S: State>(
    results: Vec<Option<TaskWrites<S>>>,
    mut interrupts: Vec<(usize, Vec<Interrupt>)>,
) -> StepOutcome<S> {
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
        results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| TaskWrites { routed: true, ..TaskWrites::default() }))
            .collect(),
    )
}

/// The task calls of an entrypoint's step (functional API): ids from the step's checkpoint.
#[cold]
#[inline(never)]
fn call_step<S: State>(ctx: &Ctx<'_, S>, saved: &SavedWrites, step: i64) -> Arc<CallStep> {
    let current = ctx.saver.as_ref().map(|s| Arc::clone(s.current_config()));
    let checkpoint_id = match &ctx.unsaved {
        Some((id, _)) => id.clone(),
        None => current.and_then(|c| c.checkpoint_id.clone()).unwrap_or_default(),
    };
    Arc::new(CallStep::new(ctx, saved, &checkpoint_id, step))
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

/// Makes a task's runtime and reports its start in the `tasks` stream mode.
#[allow(clippy::too_many_arguments)]
pub(crate) fn start_task<S: State>(
    ctx: &Ctx<'_, S>,
    ch: &Channels<S>,
    task: &Task<S>,
    saved: &SavedWrites,
    step: i64,
    stop: i64,
    calls: Option<&Arc<CallStep>>,
) -> Runtime {
    // Named only where someone reads them: task events and the metadata of observed runs.
    let events = ctx.sink.is_some_and(|s| s.modes.tasks() || s.modes.has(StreamMode::Messages));
    let triggers = if events || ctx.config.callbacks.is_some() {
        task_triggers(ch, &ctx.inner.spec, task)
    } else {
        Vec::new()
    };
    let calls = calls.map(|c| call_site(ch, task, c) as Arc<dyn crate::runtime::TaskCalls>);
    let runtime = make_runtime(ctx, task, saved, step, stop, triggers.clone(), calls);
    if let Some(sink) = ctx.sink.filter(|s| s.modes.tasks()) {
        if task.kind != TaskKind::Start {
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
                triggers,
                step,
            });
        }
    }
    runtime
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

/// Saves a failed task's error, with the state writes it made before failing (a router's failure comes
/// after its node's writes).
pub(crate) async fn save_failed<S: State>(
    ctx: &mut Ctx<'_, S>,
    task: &Task<S>,
    state: &S,
    writes: Option<&TaskWrites<S>>,
    err: &GraphError,
) -> GraphResult<()> {
    let Some(saver) = ctx.saver.as_mut() else { return Ok(()) };
    let mut json = match writes {
        Some(w) => writes_to_json(&ctx.inner.spec, &ctx.inner.names, state, w)?
            .into_iter()
            .filter(|(c, _)| &**c != special::NO_WRITES)
            .collect(),
        None => Vec::new(),
    };
    json.push((ChannelName::from(special::ERROR), Value::String(err.to_string())));
    saver.put_writes_now(&task.id, &task.path, json).await
}
