//! Planning a superstep: which tasks run, and consuming the triggers of those that ran.

use std::sync::Arc;

use crate::checkpoint::special;
use crate::pregel::channels::Channels;
use crate::pregel::spec::Layout;
use crate::pregel::task::{Task, TaskKind, task_id};
use crate::state::{ChannelSet, State};

/// The trigger channels a task consumed.
pub(crate) fn triggers_of<'a, S: State>(
    layout: Layout,
    spec: &'a crate::pregel::spec::GraphSpec<S>,
    task: &Task<S>,
) -> impl Iterator<Item = usize> + 'a {
    let (first, node) = match task.kind {
        TaskKind::Start => (Some(layout.start()), None),
        // An entrypoint reads the input itself, as LangGraph's functional graphs do.
        TaskKind::Pull(_) if spec.functional => (Some(layout.start()), None),
        TaskKind::Pull(n) => (Some(layout.branch(n)), Some(n)),
        TaskKind::Push { .. } => (Some(layout.tasks()), None),
        // Run by a failure, not by a channel.
        TaskKind::Handler(_) => (None, None),
    };
    let joins = spec
        .joins
        .iter()
        .enumerate()
        .filter(move |(_, j)| node.is_some() && j.target == node)
        .map(move |(i, _)| layout.join(i));
    first.into_iter().chain(joins)
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
    plan_tasks_into(&mut tasks, ch, spec, step, checkpoint_id, ns);
    tasks
}

/// [`plan_tasks`] into `tasks` (emptied first), so that a run's loop reuses one list.
pub(crate) fn plan_tasks_into<S: State>(
    tasks: &mut Vec<Task<S>>,
    ch: &Channels<S>,
    spec: &crate::pregel::spec::GraphSpec<S>,
    step: i64,
    checkpoint_id: &str,
    ns: &str,
) {
    tasks.clear();
    if spec.functional {
        // An entrypoint's graph has no START task: its one node runs on the input, in the step after it.
        if ch.start.is_some() {
            if let Some(node) = spec.nodes.first() {
                tasks.push(Task {
                    id: task_id(checkpoint_id, ns, step, &node.name, "pull"),
                    kind: TaskKind::Pull(0),
                    name: Arc::clone(&node.name),
                    path: Arc::clone(&node.pull_path),
                    input: None,
                    _state: std::marker::PhantomData,
                });
            }
        }
        return;
    }
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
            // The node's own name (the send names it).
            name: Arc::clone(&spec.nodes[node].name),
            path: format!("~__pregel_push, {index:010}, False").into(),
            input: Some(send.payload.clone()),
            _state: std::marker::PhantomData,
        });
    }
    let pull = |n: usize| {
        let node = &spec.nodes[n];
        Task {
            id: task_id(checkpoint_id, ns, step, &node.name, "pull"),
            kind: TaskKind::Pull(n),
            name: Arc::clone(&node.name),
            path: Arc::clone(&node.pull_path),
            // Built when the task runs, so no copy of the state outlives the step (the state is then
            // updated in place instead of copied).
            input: None,
            _state: std::marker::PhantomData,
        }
    };
    let mut deferred = Vec::new();
    for (n, node) in spec.nodes.iter().enumerate() {
        let by_join =
            spec.joins.iter().enumerate().any(|(j, js)| js.target == Some(n) && ch.join_complete(j));
        if ch.triggered[n] || by_join {
            if node.config.defer { deferred.push(n) } else { tasks.push(pull(n)) }
        }
    }
    // Deferred nodes run only when nothing else would.
    if tasks.is_empty() {
        tasks.extend(deferred.into_iter().map(pull));
    }
    // Deterministic apply order: START, pulls by name, then pushes by index.
    tasks.sort_by_key(|t| match t.kind {
        TaskKind::Start => (0, 0),
        TaskKind::Pull(n) => (1, n),
        TaskKind::Push { index, .. } => (2, index),
        TaskKind::Handler(n) => (3, n),
    });
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
            TaskKind::Pull(_) if spec.functional => {
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
            TaskKind::Handler(_) => {}
        }
    }
    if had_push && !ch.sends.is_empty() {
        ch.sends.clear();
        changed.insert(ch.layout.tasks());
    }
}

/// The tasks in the order LangGraph lists them (a snapshot's `next` and `tasks`): `Send`s first, then the
/// triggered nodes. Writes still apply in `plan_tasks`' order.
pub(crate) fn listing_order<S: State>(tasks: &[Task<S>]) -> impl Iterator<Item = &Task<S>> {
    let pushes = tasks.iter().filter(|t| matches!(t.kind, TaskKind::Push { .. }));
    pushes.chain(tasks.iter().filter(|t| !matches!(t.kind, TaskKind::Push { .. })))
}

/// The trigger channels of a task, by name, as LangGraph reports them (`triggers` of task events,
/// `langgraph_triggers` of run metadata): `__start__`, `__pregel_push`, or every trigger channel of the
/// node, sorted (its `branch:to:*` and the barriers of its waiting edges), whichever fired.
pub(crate) fn task_triggers<S: State>(
    spec: &crate::pregel::spec::GraphSpec<S>,
    task: &Task<S>,
) -> Vec<String> {
    match task.kind {
        TaskKind::Start => vec![special::START.to_owned()],
        // A handler's trigger is LangGraph's push trigger too.
        TaskKind::Push { .. } | TaskKind::Handler(_) => vec!["__pregel_push".to_owned()],
        TaskKind::Pull(_) if spec.functional => vec![special::START.to_owned()],
        TaskKind::Pull(n) => {
            let mut out = vec![spec.nodes[n].trigger.clone()];
            out.extend(spec.joins.iter().filter(|j| j.target == Some(n)).map(|j| j.name.clone()));
            out.sort_unstable();
            out
        }
    }
}
