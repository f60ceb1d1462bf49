//! Applying a step's writes to the channels, and routing a node's output along its edges.

use crate::branch::Target;
use crate::error::{GraphError, GraphResult, NodeRef};
use crate::pregel::channels::Channels;
use crate::pregel::run::invalid;
use crate::pregel::task::{Task, TaskWrites, push_goto, push_node};
use crate::state::{ChannelSet, State};

pub(crate) fn apply_new_writes<S: State>(
    ch: &mut Channels<S>,
    spec: &crate::pregel::spec::GraphSpec<S>,
    writes: &mut [TaskWrites<S>],
    changed: &mut ChannelSet,
    step: i64,
) -> GraphResult<()> {
    apply_new_writes_with_tasks::<S>(ch, spec, writes, changed, step, &[])
}

pub(crate) fn apply_new_writes_with_tasks<S: State>(
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
    for &j in writes.joins() {
        if let Some(pos) = spec.joins[j].sources.iter().position(|s| *s == source) {
            ch.joins[j][pos] = true;
            changed.insert(ch.layout.join(j));
        }
    }
    if !writes.sends().is_empty() {
        ch.sends.extend(writes.sends().iter().cloned());
        changed.insert(ch.layout.tasks());
    }
}

pub(crate) fn apply_control_writes<S: State>(
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
    step: i64,
) -> GraphResult<()> {
    if !node.edges.is_empty() {
        writes.goto.extend(node.edges.iter().copied());
    }
    if !node.joins.is_empty() {
        writes.extend_joins(node.joins.iter().copied());
    }
    for branch in &node.branches {
        // The first destination that cannot be taken fails the route once the router is done (its own
        // failure comes first).
        let mut refused: Option<GraphError> = None;
        let mut take = |target: Target<'_>| {
            if refused.is_some() {
                return;
            }
            let taken = match target {
                Target::End => Ok(()),
                Target::Node(n) => {
                    writes.goto.push(n);
                    Ok(())
                }
                Target::Name(name) => push_node(spec, &node.name, name, writes),
                Target::Send(s) => push_goto(spec, &node.name, crate::types::Goto::Send(s), writes),
            };
            refused = taken.err();
        };
        // A router that panics fails like one that returns an error (`Error::Panicked`).
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| branch.route(view, &mut take)))
            .unwrap_or_else(|payload| Err(weft_runnable_core::Error::from_panic(payload.as_ref())))
            // The run names the graph (`run` fills it in).
            .map_err(|source| GraphError::Node { node: NodeRef::new("", &*node.name), step, source })?
            .map_err(|_| GraphError::NoDestination {
                node: node.name.to_string(),
                branch: branch.name.clone(),
                step,
            })?;
        if let Some(err) = refused {
            return Err(err);
        }
    }
    Ok(())
}
