//! Executing one task: cache, retries, interrupts, commands to the parent graph, routes.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt as _;
use serde_json::Value;
use tracing::Instrument as _;
use weft_runnable_core::trace::{record_error, records_content};
use weft_runnable_core::{Error, RunKind, RunScope};

use crate::checkpoint::owned_writes;
use crate::error::{GraphError, GraphResult, InvalidNodeReturn, NodeRef};
use crate::node::{NodeFn, NodeInput, NodeOutput};
use crate::parent_command::typed_parent_command;
use crate::pregel::apply::route;
use crate::pregel::channels::Channels;
use crate::pregel::graph::Inner;
use crate::pregel::parent::{EncodedParentCommand, parent_command, raise_parent_command};
use crate::pregel::spec::{GraphSpec, NodeSpec};
use crate::pregel::task::{
    Replay, Task, TaskOutcome, TaskWrites, flatten_output, state_json, writes_from_json, writes_to_json,
};
use crate::pregel::task_runtime::{with_attempt, with_clock, with_config};
use crate::pregel::trace;
use crate::runtime::{GraphInterrupt, Runtime};
use crate::state::State;
use crate::timeout::{AttemptClock, TimeoutPolicy, run_timed};

/// Runs one task with its retry policy; returns its writes (routes included unless `route_later`) and the
/// resume values to save when they changed.
pub(crate) async fn execute<S: State>(
    inner: &Inner<S>,
    ch: &Channels<S>,
    task: &Task<S>,
    runtime: Runtime,
    route_inline: bool,
    is_subgraph: bool,
) -> TaskResult<S> {
    let how = How { route_inline, is_subgraph };
    let Some(n) = task.node() else {
        return Ok((TaskOutcome::Done(start_writes(inner, ch, task, &runtime, route_inline)?), None));
    };
    let node = &inner.spec.nodes[n];
    let Some(func) = &node.func else { return Ok((TaskOutcome::Done(TaskWrites::default()), None)) };
    let cache_key = cache_key(inner, node, ch, task, &runtime);
    if let (Some(key), Some(cache)) = (&cache_key, &inner.config.cache) {
        if let Some(saved) = cache.get(&node.name, key).await {
            let mut writes = writes_from_json(&inner.spec, &ch.state, &saved, Replay::Cache)?;
            writes.cached = true;
            return Ok((TaskOutcome::Done(writes), None));
        }
    }
    let result = attempts(inner, node, func, ch, task, runtime, 1, how).await;
    if let (Ok((TaskOutcome::Done(writes), _)), Some(key), Some(cache)) =
        (&result, &cache_key, &inner.config.cache)
    {
        let json = owned_writes(writes_to_json(&inner.spec, &inner.names, &ch.state, writes)?);
        cache.set(&node.name, key, json, node.config.cache.as_ref().and_then(|c| c.ttl)).await;
    }
    result
}

/// What running a task yields: its outcome and the resume values to save when they changed.
pub(crate) type TaskResult<S> = GraphResult<(TaskOutcome<S>, Option<Vec<Value>>)>;

/// How a task's writes are finished: routed with the task or later, and whether it runs in a subgraph.
#[derive(Clone, Copy)]
struct How {
    route_inline: bool,
    is_subgraph: bool,
}

/// A task run in place ([`execute_in_place`]), or why it was not.
pub(crate) enum InPlace<S: State> {
    /// Ran to its end; its runtime handed back (see [`make_runtime`](super::task_runtime::make_runtime)).
    Done(TaskResult<S>, Runtime),
    /// Something in it may wait (a cache, a timeout, an async node, callbacks): run [`execute`].
    Not(Runtime),
    /// Its first attempt (of node `usize`) failed and its retry policy tries again after this wait:
    /// run [`execute_retry`].
    Retry(Runtime, usize, std::time::Duration),
}

/// Runs a task with no future when nothing in it waits: START's, or a sync node's on the state with no
/// cache and no timeout, in a run that no callbacks observe. The result is [`execute`]'s.
pub(crate) fn execute_in_place<S: State>(
    inner: &Inner<S>,
    (ch, task): (&Channels<S>, &Task<S>),
    runtime: Runtime,
    (route_inline, is_subgraph): (bool, bool),
) -> InPlace<S> {
    let how = How { route_inline, is_subgraph };
    let Some(n) = task.node() else {
        let writes = start_writes(inner, ch, task, &runtime, route_inline);
        return InPlace::Done(writes.map(|w| (TaskOutcome::Done(w), None)), runtime);
    };
    let node = &inner.spec.nodes[n];
    let in_place = task.input.is_none()
        && node.config.timeout.is_none()
        && (node.config.cache.is_none() || inner.config.cache.is_none())
        && !(runtime.inner.observed && runtime.config().callbacks.is_some());
    let (true, Some(func)) = (in_place, &node.func) else { return InPlace::Not(runtime) };
    if !func.is_sync() {
        return InPlace::Not(runtime);
    }
    let traced = trace::enabled();
    let span = open_span(&node.name, &runtime, traced, || state_json(&ch.state));
    // A node that says it is sync but runs no sync call: the engine calls it.
    let Some(result) = call_sync_caught(func, &ch.state, &runtime, traced, &span) else {
        return InPlace::Not(runtime);
    };
    if traced {
        trace_failure(&span, false, &result);
    }
    match after_attempt(inner, node, ch, result, &runtime, 1, how) {
        Attempt::Done(result) => InPlace::Done(result, runtime),
        Attempt::Retry(wait) => InPlace::Retry(runtime, n, wait),
    }
}

/// Goes on with a task whose first attempt [`execute_in_place`] ran and whose retry policy tries again
/// after `wait`.
pub(crate) async fn execute_retry<S: State>(
    inner: &Inner<S>,
    ch: &Channels<S>,
    task: &Task<S>,
    (runtime, n, wait): (Runtime, usize, std::time::Duration),
    (route_inline, is_subgraph): (bool, bool),
) -> TaskResult<S> {
    let how = How { route_inline, is_subgraph };
    let node = &inner.spec.nodes[n];
    // As `execute`: a node without a function writes nothing (`execute_in_place` retries only nodes with one).
    let Some(func) = &node.func else { return Ok((TaskOutcome::Done(TaskWrites::default()), None)) };
    tokio::time::sleep(wait).await;
    attempts(inner, node, func, ch, task, runtime, 2, how).await
}

/// The attempts of a node from attempt `first` on, as its retry policy allows.
#[allow(clippy::too_many_arguments)]
async fn attempts<S: State>(
    inner: &Inner<S>,
    node: &NodeSpec<S>,
    func: &Arc<dyn NodeFn<S>>,
    ch: &Channels<S>,
    task: &Task<S>,
    runtime: Runtime,
    first: u32,
    how: How,
) -> TaskResult<S> {
    let mut attempt = first;
    loop {
        let mut rt = if attempt == 1 { runtime.clone() } else { with_attempt(&runtime, attempt) };
        let result = match &node.config.timeout {
            None => call_once(node, func, ch, task, &mut rt).await,
            // Boxed: most nodes have no timeout (a smaller task future).
            Some(policy) => Box::pin(call_timed(policy, node, func, ch, task, &mut rt)).await,
        };
        match after_attempt(inner, node, ch, result, &rt, attempt, how) {
            Attempt::Done(result) => return result,
            Attempt::Retry(wait) => {
                Box::pin(tokio::time::sleep(wait)).await;
                attempt += 1;
            }
        }
    }
}

/// What an attempt of a node leads to.
enum Attempt<S: State> {
    /// The task's result.
    Done(TaskResult<S>),
    /// Another attempt, after this wait.
    Retry(std::time::Duration),
}

/// The task's result from its attempt's: its writes (a command sent up by a subgraph of the node counts
/// as its output), an interrupt, another attempt as the retry policy says, or the node's error.
fn after_attempt<S: State>(
    inner: &Inner<S>,
    node: &NodeSpec<S>,
    ch: &Channels<S>,
    result: Result<NodeOutput<S>, Error>,
    rt: &Runtime,
    attempt: u32,
    how: How,
) -> Attempt<S> {
    let step = rt.inner.site.step;
    let node_error = |source: Error| {
        let node = NodeRef::new(inner.name.as_str(), &*node.name);
        match source.downcast_custom::<InvalidNodeReturn>() {
            Some(InvalidNodeReturn(got)) => GraphError::InvalidNodeReturn { node, step, got: got.clone() },
            None => GraphError::Node { node, step, source },
        }
    };
    let output = match result {
        Ok(output) => output,
        Err(err) => match after_error::<S>(&inner.spec, &err, how.is_subgraph) {
            Err(stop) => return Attempt::Done(Err(stop.into_graph_error(node_error))),
            Ok(Some(command)) => NodeOutput::Command(command),
            Ok(None) => {
                if let Some(GraphInterrupt(list)) = control_interrupt(&err) {
                    return Attempt::Done(Ok((TaskOutcome::Interrupted(list), resume_to_save(rt))));
                }
                let policies =
                    if node.config.retry.is_empty() { &inner.config.retry } else { &node.config.retry };
                return match crate::retry::next_retry(policies, &err, attempt) {
                    Some(wait) => Attempt::Retry(wait),
                    None => Attempt::Done(Err(node_error(err))),
                };
            }
        },
    };
    Attempt::Done(finish_output(inner, node, ch, output, rt, how).map_err(|e| match e {
        Finish::Node(err) => node_error(err),
        Finish::Graph(err) => err,
    }))
}

/// Why a node's output could not be made the task's writes.
enum Finish {
    /// A command for the parent graph that cannot be sent up: the node's error.
    Node(Error),
    /// The output is not a valid update.
    Graph(GraphError),
}

/// A node's output as the task's writes, routed when the task routes inline.
fn finish_output<S: State>(
    inner: &Inner<S>,
    node: &NodeSpec<S>,
    ch: &Channels<S>,
    output: NodeOutput<S>,
    rt: &Runtime,
    how: How,
) -> Result<(TaskOutcome<S>, Option<Vec<Value>>), Finish> {
    let spec = &inner.spec;
    let mut writes = TaskWrites::default();
    // Only a subgraph's node has commands to lift (the root graph's output stays where it is).
    let output = if how.is_subgraph {
        lift_parent_commands(&ch.state, output, true).map_err(Finish::Node)?
    } else {
        output
    };
    flatten_output(spec, &node.name, output, &mut writes).map_err(Finish::Graph)?;
    for u in &mut writes.updates {
        ch.state.prepare_update(u);
    }
    if how.route_inline {
        if let Err(err) = route_task(spec, node, ch, &mut writes, rt.inner.site.step) {
            let written = TaskWrites::from_updates(std::mem::take(&mut writes.updates));
            return Ok((TaskOutcome::RouteFailed(written, Box::new(err)), None));
        }
    }
    Ok((TaskOutcome::Done(writes), resume_to_save(rt)))
}

/// One attempt of a node with a timeout policy: the attempt is dropped (cancelled) when it runs past
/// `run_timeout`, or goes `idle_timeout` without progress, and fails with a [`NodeTimeoutError`].
async fn call_timed<S: State>(
    policy: &TimeoutPolicy,
    node: &NodeSpec<S>,
    func: &Arc<dyn NodeFn<S>>,
    ch: &Channels<S>,
    task: &Task<S>,
    rt: &mut Runtime,
) -> Result<NodeOutput<S>, Error> {
    let clock = Arc::new(AttemptClock::new(policy.refreshed_on()));
    *rt = with_clock(rt, Arc::clone(&clock));
    run_timed(policy, &clock, &node.name, call_once(node, func, ch, task, rt)).await
}

/// START's task: the input becomes the state update; its edges are its routes.
fn start_writes<S: State>(
    inner: &Inner<S>,
    ch: &Channels<S>,
    task: &Task<S>,
    runtime: &Runtime,
    route_inline: bool,
) -> GraphResult<TaskWrites<S>> {
    let spec = &inner.spec;
    let mut writes = TaskWrites::from_updates(ch.start.clone().unwrap_or_default());
    if route_inline {
        let mut view = ch.state.clone();
        view.apply(writes.updates.clone()).map_err(|error| GraphError::InvalidUpdate {
            error,
            step: runtime.execution_info().step,
            nodes: vec![task.name.to_string()],
        })?;
        route(spec, &spec.start, &view, &mut writes, runtime.execution_info().step)?;
    }
    Ok(writes)
}

/// The task's routes, taken on the state as its writes leave it (the state as it is when the node has
/// no router).
fn route_task<S: State>(
    spec: &GraphSpec<S>,
    node: &NodeSpec<S>,
    ch: &Channels<S>,
    writes: &mut TaskWrites<S>,
    step: i64,
) -> GraphResult<()> {
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
    route(spec, node, view.as_ref().unwrap_or(&ch.state), writes, step)
}

/// The task's cache key, when both the node and the graph have a cache.
fn cache_key<S: State>(
    inner: &Inner<S>,
    node: &NodeSpec<S>,
    ch: &Channels<S>,
    task: &Task<S>,
    runtime: &Runtime,
) -> Option<String> {
    let (Some(cp), Some(_)) = (&node.config.cache, &inner.config.cache) else { return None };
    let input = match &task.input {
        // A packet that cannot be written as JSON has no key: the task runs uncached (a shared `null` key
        // would hand one packet's writes to another).
        Some(p) => crate::pregel::channels::payload_to_json(&ch.state, p)
            .inspect_err(|e| {
                tracing::warn!(
                    node = %node.name,
                    "node '{}' runs uncached: its input cannot be written as JSON for a cache key: {e}",
                    node.name
                );
            })
            .ok(),
        // An entrypoint's input is the run's, not in the state.
        None if inner.spec.functional => {
            Some(runtime.inner.calls.as_ref().and_then(|c| c.input()).unwrap_or_default())
        }
        None => Some(state_json(&ch.state)),
    };
    input.map(|input| cp.key_of(&input))
}

/// One attempt of a node, traced and observed as configured; a node that panics fails like one that
/// returns an error (`Error::Panicked`) instead of unwinding through the caller (a server's connection,
/// say). `rt` becomes the runtime the attempt ran with (an observed run's carries its child config).
async fn call_once<S: State>(
    node: &NodeSpec<S>,
    func: &Arc<dyn NodeFn<S>>,
    ch: &Channels<S>,
    task: &Task<S>,
    rt: &mut Runtime,
) -> Result<NodeOutput<S>, Error> {
    let input = match &task.input {
        Some(payload) => NodeInput::Payload(payload.clone()),
        None => NodeInput::State(&ch.state),
    };
    let traced = trace::enabled();
    let input_json = |input: &NodeInput<'_, S>| match input {
        NodeInput::State(s) => state_json(*s),
        NodeInput::Payload(p) => crate::pregel::channels::payload_json(&ch.state, p),
    };
    let span = open_span(&node.name, rt, traced, || input_json(&input));
    let scope = (rt.inner.observed && rt.config().callbacks.is_some()).then(|| {
        let input_json = input_json(&input);
        // Boxed: it lives across the node's await, and most tasks have none (a smaller task future).
        Box::new(RunScope::start_in_span(
            rt.config(),
            &node.name,
            RunKind::Chain,
            Some(input_json),
            span.clone(),
        ))
    });
    if let Some(s) = &scope {
        *rt = with_config(rt, s.child_config().clone());
    }
    let rt = &*rt;
    // A sync node on the state runs here, with no future (`None`: the node runs below instead).
    let ran = match &input {
        NodeInput::State(state) if func.is_sync() => call_sync_caught(func, *state, rt, traced, &span),
        _ => None,
    };
    // (A function node runs when called, an async one when polled: both are caught.)
    let call = || match input {
        NodeInput::Payload(payload) => func.call_sent(payload, &ch.state, rt.clone()),
        input => func.call(input, rt.clone()),
    };
    let result = match ran {
        Some(result) => result,
        None => match std::panic::catch_unwind(AssertUnwindSafe(call)) {
            Ok(call) => {
                let call = AssertUnwindSafe(call).catch_unwind();
                let result = if traced { call.instrument(span.clone()).await } else { call.await };
                result.unwrap_or_else(|payload| Err(Error::from_panic(payload.as_ref())))
            }
            Err(payload) => Err(Error::from_panic(payload.as_ref())),
        },
    };
    if let Some(scope) = &scope {
        match &result {
            Ok(_) => scope.end(None, &Value::Null),
            Err(e) => scope.fail(None, e),
        }
    }
    if traced {
        trace_failure(&span, scope.is_some(), &result);
    }
    result
}

/// A task's span (disabled when nothing traces), with its input recorded when spans record content.
fn open_span(node: &str, rt: &Runtime, traced: bool, input: impl FnOnce() -> Value) -> tracing::Span {
    let span = if traced { trace::task_span(node, rt) } else { tracing::Span::none() };
    if traced && records_content() && !span.is_disabled() {
        span.record("input.value", input().to_string().as_str());
    }
    span
}

/// A sync node run in place on `state`, inside `span` when traced, a panic as its error (`None`: the node
/// runs no sync call, see [`NodeFn::call_sync`]).
fn call_sync_caught<S: State>(
    func: &Arc<dyn NodeFn<S>>,
    state: &S,
    rt: &Runtime,
    traced: bool,
    span: &tracing::Span,
) -> Option<Result<NodeOutput<S>, Error>> {
    let _entered = traced.then(|| span.enter());
    std::panic::catch_unwind(AssertUnwindSafe(|| func.call_sync(NodeInput::State(state), rt)))
        .unwrap_or_else(|payload| Some(Err(Error::from_panic(payload.as_ref()))))
}

/// Records an attempt's interrupt or error on its task span (an error that `scoped`, an observed run's
/// scope, recorded already is not recorded again).
fn trace_failure<S: State>(span: &tracing::Span, scoped: bool, result: &Result<NodeOutput<S>, Error>) {
    let Err(e) = result else { return };
    match control_interrupt(e) {
        Some(GraphInterrupt(list)) => trace::record_interrupts(span, &list),
        None if !scoped && !matches!(e, Error::ControlFlow(_)) => record_error(span, e),
        None => {}
    }
}

/// Why a node's error ends its task other than by a retry or an interrupt.
enum Stop {
    /// The node failed with this error.
    Node(Error),
    /// A command for a parent graph, at the root graph.
    NoParentGraph,
}

impl Stop {
    fn into_graph_error(self, node_error: impl FnOnce(Error) -> GraphError) -> GraphError {
        match self {
            Stop::Node(e) => node_error(e),
            Stop::NoParentGraph => GraphError::NoParentGraph,
        }
    }
}

/// A node's error that is a command for this graph (a subgraph of the node sent it up): the command, as
/// the node's output. A command for the parent graph stops the task (or fails at the root graph); other
/// errors are none of this.
fn after_error<S: State>(
    spec: &GraphSpec<S>,
    err: &Error,
    is_subgraph: bool,
) -> Result<Option<crate::types::Command<S>>, Stop> {
    if let Some(cmd) = parent_command(err) {
        // A subgraph sent this command to us: it is this node's output.
        return cmd.decode(spec).map(Some).map_err(Stop::Node);
    }
    let Some(typed) = typed_parent_command(err) else { return Ok(None) };
    if typed.is_lifted() {
        // A subgraph of this node sent it: it is this node's output, in this graph's terms.
        return typed.command::<S>().map(Some).ok_or_else(|| {
            Stop::Node(Error::InvalidInput(format!(
                "a command for the parent graph was written for state {}, but the parent graph's state is {}",
                typed.state_type(),
                std::any::type_name::<S>()
            )))
        });
    }
    if !is_subgraph {
        return Err(Stop::NoParentGraph);
    }
    Err(Stop::Node(typed.lifted().into_error()))
}

/// In a subgraph, a `Command` for the parent graph stops the node and travels up as control flow.
pub(crate) fn lift_parent_commands<S: State>(
    state: &S,
    output: crate::node::NodeOutput<S>,
    is_subgraph: bool,
) -> weft_runnable_core::Result<crate::node::NodeOutput<S>> {
    use crate::node::NodeOutput;
    match output {
        NodeOutput::Command(cmd) if is_subgraph && cmd.graph == crate::types::CommandGraph::Parent => {
            Err(raise_parent_command(EncodedParentCommand::encode(state, cmd)?))
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

pub(crate) fn control_interrupt(err: &Error) -> Option<GraphInterrupt> {
    match err {
        Error::ControlFlow(flow) => flow.downcast_ref::<GraphInterrupt>().cloned(),
        _ => None,
    }
}

pub(crate) fn resume_to_save(rt: &Runtime) -> Option<Vec<Value>> {
    let pad = rt.inner.scratchpad.lock().ok()?;
    pad.resume_changed.then(|| pad.resume.clone())
}
