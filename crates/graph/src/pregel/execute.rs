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
) -> GraphResult<(TaskOutcome<S>, Option<Vec<Value>>)> {
    let spec = &inner.spec;
    let Some(n) = task.node() else {
        return Ok((TaskOutcome::Done(start_writes(inner, ch, task, &runtime, route_inline)?), None));
    };
    let node = &spec.nodes[n];
    let Some(func) = &node.func else { return Ok((TaskOutcome::Done(TaskWrites::default()), None)) };
    let policies = if node.config.retry.is_empty() { &inner.config.retry } else { &node.config.retry };
    let step = runtime.inner.site.step;
    let node_error = |source: Error| {
        let node = NodeRef::new(inner.name.as_str(), &*node.name);
        match source.downcast_custom::<InvalidNodeReturn>() {
            Some(InvalidNodeReturn(got)) => GraphError::InvalidNodeReturn { node, step, got: got.clone() },
            None => GraphError::Node { node, step, source },
        }
    };
    let cache_key = cache_key(inner, node, ch, task, &runtime);
    if let (Some(key), Some(cache)) = (&cache_key, &inner.config.cache) {
        if let Some(saved) = cache.get(&node.name, key).await {
            let mut writes = writes_from_json(spec, &ch.state, &saved, Replay::Cache)?;
            writes.cached = true;
            return Ok((TaskOutcome::Done(writes), None));
        }
    }
    let mut attempt = 1u32;
    let (output, rt) = loop {
        let mut rt = if attempt == 1 { runtime.clone() } else { with_attempt(&runtime, attempt) };
        let result = match &node.config.timeout {
            None => call_once(node, func, ch, task, &mut rt).await,
            // Boxed: most nodes have no timeout (a smaller task future).
            Some(policy) => Box::pin(call_timed(policy, node, func, ch, task, &mut rt)).await,
        };
        let err = match result {
            Ok(out) => break (out, rt),
            Err(err) => err,
        };
        let command =
            after_error::<S>(spec, &err, is_subgraph).map_err(|e| e.into_graph_error(node_error))?;
        if let Some(command) = command {
            break (NodeOutput::Command(command), rt);
        }
        if let Some(GraphInterrupt(list)) = control_interrupt(&err) {
            return Ok((TaskOutcome::Interrupted(list), resume_to_save(&rt)));
        }
        match crate::retry::next_retry(policies, &err, attempt) {
            Some(wait) => {
                Box::pin(tokio::time::sleep(wait)).await;
                attempt += 1;
            }
            None => return Err(node_error(err)),
        }
    };
    let mut writes = TaskWrites::default();
    // Only a subgraph's node has commands to lift (the root graph's output stays where it is).
    let output =
        if is_subgraph { lift_parent_commands(&ch.state, output, true).map_err(node_error)? } else { output };
    flatten_output(spec, &node.name, output, &mut writes)?;
    for u in &mut writes.updates {
        ch.state.prepare_update(u);
    }
    if route_inline {
        if let Err(err) = route_task(spec, node, ch, &mut writes, step) {
            let written =
                TaskWrites { updates: std::mem::take(&mut writes.updates), ..TaskWrites::default() };
            return Ok((TaskOutcome::RouteFailed(written, err), None));
        }
    }
    if let (Some(key), Some(cache)) = (&cache_key, &inner.config.cache) {
        let json = owned_writes(writes_to_json(spec, &inner.names, &ch.state, &writes)?);
        cache.set(&node.name, key, json, node.config.cache.as_ref().and_then(|c| c.ttl)).await;
    }
    Ok((TaskOutcome::Done(writes), resume_to_save(&rt)))
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
    let mut writes = TaskWrites { updates: ch.start.clone().unwrap_or_default(), ..TaskWrites::default() };
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
    let span = if traced { trace::task_span(&node.name, rt) } else { tracing::Span::none() };
    let input_json = |input: &NodeInput<'_, S>| match input {
        NodeInput::State(s) => state_json(*s),
        NodeInput::Payload(p) => crate::pregel::channels::payload_json(&ch.state, p),
    };
    if traced && records_content() && !span.is_disabled() {
        span.record("input.value", input_json(&input).to_string().as_str());
    }
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
        NodeInput::State(state) if func.is_sync() => {
            let _entered = traced.then(|| span.enter());
            std::panic::catch_unwind(AssertUnwindSafe(|| func.call_sync(NodeInput::State(state), rt)))
                .unwrap_or_else(|payload| Some(Err(Error::from_panic(payload.as_ref()))))
        }
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
    if let (true, Err(e)) = (traced, &result) {
        match control_interrupt(e) {
            Some(GraphInterrupt(list)) => trace::record_interrupts(&span, &list),
            // An observed run's scope recorded it.
            None if scope.is_none() && !matches!(e, Error::ControlFlow(_)) => record_error(&span, e),
            None => {}
        }
    }
    result
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
