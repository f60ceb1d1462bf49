//! Tasks of a superstep and their writes.

use std::sync::Arc;

use serde_json::Value;

use crate::checkpoint::{ChannelName, CheckpointError, special};
use crate::error::{GraphError, GraphResult};
use crate::node::NodeOutput;
use crate::pregel::channels::{send_from_json, send_to_json};
use crate::pregel::spec::{CheckpointNames, GraphSpec};
use crate::runtime::TaskId;
use crate::state::State;
pub(crate) use crate::state::state_json;
use crate::types::{CommandGraph, Goto, Interrupt, Send};

/// What triggered a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TaskKind {
    /// The hidden START task that writes the input into the state.
    Start,
    /// A node triggered by an edge.
    Pull(usize),
    /// A node triggered by the `index`-th `Send` of the previous step.
    Push { index: usize, node: usize },
    /// The error handler `node`, run in the step of the task that failed (never planned).
    Handler(usize),
}

pub(crate) struct Task<S: State> {
    /// Shared: saves, streams and the runtime all name the task.
    pub(crate) id: TaskId,
    pub(crate) kind: TaskKind,
    pub(crate) name: std::sync::Arc<str>,
    pub(crate) path: std::sync::Arc<str>,
    /// The payload of a `Send` task (pull tasks read the state when they run).
    pub(crate) input: Option<crate::types::Payload>,
    pub(crate) _state: std::marker::PhantomData<fn() -> S>,
}

impl<S: State> Task<S> {
    /// The node index (`None` for START).
    pub(crate) fn node(&self) -> Option<usize> {
        match self.kind {
            TaskKind::Start => None,
            TaskKind::Pull(n) | TaskKind::Push { node: n, .. } | TaskKind::Handler(n) => Some(n),
        }
    }
}

/// The task of the error handler `handler` (a node index) for `failed`, a task of the step `step` planned
/// from checkpoint `checkpoint_id` in namespace `ns`: it runs on the failed task's input, and its id derives
/// from the failed task's, so a resumed run gives it the same one (and its saved writes and answers).
pub(crate) fn handler_task<S: State>(
    spec: &GraphSpec<S>,
    handler: usize,
    failed: &Task<S>,
    (checkpoint_id, ns, step): (&str, &str, i64),
) -> Task<S> {
    let name = &spec.nodes[handler].name;
    Task {
        id: task_id(checkpoint_id, ns, step, name, &format!("node_error_handler:{}", failed.id)),
        kind: TaskKind::Handler(handler),
        name: Arc::clone(name),
        // LangGraph's: the failed task's path, then `node_error_handler`.
        path: format!("{}, node_error_handler, False", failed.path).into(),
        input: failed.input.clone(),
        _state: std::marker::PhantomData,
    }
}

/// The writes a finished task made, typed.
pub(crate) struct TaskWrites<S: State> {
    pub(crate) updates: Vec<S::Update>,
    /// The nodes it goes to, by index (inline up to two: most tasks go to one or two nodes).
    pub(crate) goto: smallvec::SmallVec<[usize; 2]>,
    /// Whether the writes came from the node cache instead of a run.
    pub(crate) cached: bool,
    /// Whether the task's routes are in the writes already (taken with the task, or saved with it), or
    /// are still to take on the state the step leaves.
    pub(crate) routed: bool,
    /// Its sends, barrier writes and interrupt answers, which most tasks lack: boxed, so the writes every
    /// task makes (moved a few times on their way to the step's end) stay half the size.
    rare: Option<Box<RareWrites>>,
}

/// The rarely made writes of a task.
#[derive(Default, Clone)]
struct RareWrites {
    sends: Vec<Send>,
    joins: smallvec::SmallVec<[usize; 2]>,
    /// The answers to its interrupts the task used, when this run gave it new ones: saved with its writes
    /// (`__resume__`), as LangGraph saves them.
    resumed: Option<Vec<serde_json::Value>>,
}

impl<S: State> TaskWrites<S> {
    /// Writes of `updates` alone.
    pub(crate) fn from_updates(updates: Vec<S::Update>) -> Self {
        Self { updates, ..Self::default() }
    }

    /// The same writes, marked routed.
    pub(crate) fn marked_routed(self) -> Self {
        Self { routed: true, ..self }
    }

    /// The packets it sends.
    pub(crate) fn sends(&self) -> &[Send] {
        self.rare.as_ref().map_or(&[], |r| &r.sends)
    }

    /// The barriers it writes to, by index.
    pub(crate) fn joins(&self) -> &[usize] {
        self.rare.as_ref().map_or(&[], |r| &r.joins)
    }

    /// The answers to its interrupts it used, when this run gave it new ones.
    pub(crate) fn resumed(&self) -> Option<&[serde_json::Value]> {
        self.rare.as_ref().and_then(|r| r.resumed.as_deref())
    }

    /// Adds a packet it sends.
    pub(crate) fn push_send(&mut self, send: Send) {
        self.rare_mut().sends.push(send);
    }

    /// Adds barriers it writes to.
    pub(crate) fn extend_joins(&mut self, joins: impl IntoIterator<Item = usize>) {
        self.rare_mut().joins.extend(joins);
    }

    /// Sets the answers it used (none: it used no new ones).
    pub(crate) fn set_resumed(&mut self, resumed: Option<Vec<serde_json::Value>>) {
        match (resumed, self.rare.as_mut()) {
            (Some(answers), _) => self.rare_mut().resumed = Some(answers),
            (None, Some(rare)) => rare.resumed = None,
            (None, None) => {}
        }
    }

    fn rare_mut(&mut self) -> &mut RareWrites {
        self.rare.get_or_insert_with(Box::default)
    }
}

impl<S: State> Default for TaskWrites<S> {
    fn default() -> Self {
        Self {
            updates: Vec::new(),
            goto: smallvec::SmallVec::new(),
            cached: false,
            routed: false,
            rare: None,
        }
    }
}

impl<S: State> Clone for TaskWrites<S> {
    fn clone(&self) -> Self {
        Self {
            updates: self.updates.clone(),
            goto: self.goto.clone(),
            cached: self.cached,
            routed: self.routed,
            rare: self.rare.clone(),
        }
    }
}

/// How a task ended.
pub(crate) enum TaskOutcome<S: State> {
    Done(TaskWrites<S>),
    Interrupted(Vec<Interrupt>),
    /// The node finished but routing its output failed: its writes are saved with the error (LangGraph
    /// saves a failing task's writes too, and then counts it as finished).
    /// (The error boxed: every task's outcome is moved a few times, and this one is rare.)
    RouteFailed(TaskWrites<S>, Box<GraphError>),
}

/// Deterministic task id: the same checkpoint, namespace, step and node give the same id in any process
/// and any build (a 128-bit FNV-1a hash, formatted as a UUID; stable by construction, unlike std's hasher).
pub(crate) fn task_id(checkpoint_id: &str, ns: &str, step: i64, name: &str, extra: &str) -> TaskId {
    let mut h = Fnv128::new();
    let digits = itoa_buf(step);
    for part in [checkpoint_id.as_bytes(), ns.as_bytes(), digits.text(), name.as_bytes(), extra.as_bytes()] {
        h.write(part);
        h.write(&[0]);
    }
    TaskId::from_hash(h.0)
}

/// A step number's decimal digits, as `to_string` writes them, without allocating.
fn itoa_buf(n: i64) -> StepDigits {
    let mut out = StepDigits { buf: [0; 20], start: 20 };
    let mut rest = n.unsigned_abs();
    loop {
        out.start -= 1;
        out.buf[out.start] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    if n < 0 {
        out.start -= 1;
        out.buf[out.start] = b'-';
    }
    out
}

struct StepDigits {
    buf: [u8; 20],
    start: usize,
}

impl StepDigits {
    fn text(&self) -> &[u8] {
        &self.buf[self.start..]
    }
}

struct Fnv128(u128);

impl Fnv128 {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;

    fn new() -> Self {
        Self(Self::OFFSET)
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u128::from(*b);
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }
}

/// Splits a node output into state updates and destinations; `Command(graph: Parent)` is an error at
/// the root.
pub(crate) fn flatten_output<S: State>(
    spec: &GraphSpec<S>,
    node: &str,
    output: NodeOutput<S>,
    writes: &mut TaskWrites<S>,
) -> GraphResult<()> {
    match output {
        NodeOutput::Empty => Ok(()),
        NodeOutput::Update(u) => {
            writes.updates.push(u);
            Ok(())
        }
        NodeOutput::Command(cmd) => {
            if cmd.graph == CommandGraph::Parent {
                return Err(GraphError::NoParentGraph);
            }
            writes.updates.extend(cmd.update);
            for goto in cmd.goto {
                push_goto(spec, node, goto, writes)?;
            }
            Ok(())
        }
        NodeOutput::Many(items) => {
            for item in items {
                flatten_output(spec, node, item, writes)?;
            }
            Ok(())
        }
        NodeOutput::Writes(named) => {
            let state = &spec.initial;
            let indexed: Vec<(usize, Value)> =
                named.into_iter().filter_map(|(name, v)| Some((state.channel_index(&name)?, v))).collect();
            if !indexed.is_empty() {
                let update = state.update_from_json(indexed).map_err(|error| GraphError::InvalidUpdate {
                    error,
                    step: -1,
                    nodes: vec![node.to_owned()],
                })?;
                writes.updates.push(update);
            }
            Ok(())
        }
    }
}

pub(crate) fn push_goto<S: State>(
    spec: &GraphSpec<S>,
    source: &str,
    goto: Goto,
    writes: &mut TaskWrites<S>,
) -> GraphResult<()> {
    match goto {
        Goto::Node(name) => push_node(spec, source, &name, writes),
        Goto::Send(send) => {
            if send.node == crate::types::END {
                return Err(GraphError::SendToEnd);
            }
            if !spec.node_names.contains_key(&send.node) {
                return Err(GraphError::UnknownDestination {
                    source_node: source.to_owned(),
                    target: send.node,
                });
            }
            writes.push_send(send);
            Ok(())
        }
    }
}

/// Adds the node named `name` (`END`: nothing) to the nodes `source`'s task goes to; `START` and names
/// that are no node are refused.
pub(crate) fn push_node<S: State>(
    spec: &GraphSpec<S>,
    source: &str,
    name: &str,
    writes: &mut TaskWrites<S>,
) -> GraphResult<()> {
    if name == crate::types::END {
        return Ok(());
    }
    if name == crate::types::START {
        return Err(GraphError::InvalidDestination(source.to_owned()));
    }
    match spec.node_names.get(name) {
        Some(&i) => {
            writes.goto.push(i);
            Ok(())
        }
        None => {
            Err(GraphError::UnknownDestination { source_node: source.to_owned(), target: name.to_owned() })
        }
    }
}

/// The writes as `(channel, value)` pairs, as saved in pending writes (channel names shared from `names`).
pub(crate) fn writes_to_json<S: State>(
    spec: &GraphSpec<S>,
    names: &CheckpointNames,
    state: &S,
    writes: &TaskWrites<S>,
) -> GraphResult<Vec<(ChannelName, Value)>> {
    let layout = spec.layout();
    let channels = state.channels();
    let mut out = Vec::new();
    for u in &writes.updates {
        for (i, v) in state.update_to_json(u).map_err(|error| GraphError::InvalidUpdate {
            error,
            step: -1,
            nodes: Vec::new(),
        })? {
            // Untracked channels are never saved (LangGraph's `UntrackedValue`).
            if channels[i].kind.is_tracked() {
                out.push((Arc::clone(&names.channels[i]), v));
            }
        }
    }
    for &g in &writes.goto {
        out.push((Arc::clone(&names.channels[layout.branch(g)]), Value::Null));
    }
    for s in writes.sends() {
        out.push((Arc::clone(&names.channels[layout.tasks()]), send_to_json(state, s)?));
    }
    for &j in writes.joins() {
        out.push((Arc::clone(&names.channels[layout.join(j)]), Value::Null));
    }
    if out.is_empty() {
        out.push((ChannelName::from(special::NO_WRITES), Value::Null));
    }
    if let Some(answers) = writes.resumed() {
        out.push(resume_write(Value::Array(answers.to_vec())));
    }
    Ok(out)
}

/// The `__resume__` write: the answers a task used (a list), or the answer a `Command::resume` gave the
/// null task (the bare value), as LangGraph saves them.
pub(crate) fn resume_write(answers: Value) -> (ChannelName, Value) {
    (ChannelName::from(special::RESUME), answers)
}

/// The writes of a task that paused: its interrupts, and the answers it used before pausing.
pub(crate) fn paused_writes(
    interrupts: &[crate::types::Interrupt],
    resumed: Option<Vec<Value>>,
) -> Vec<(ChannelName, Value)> {
    let mut writes = vec![(
        ChannelName::from(special::INTERRUPT),
        serde_json::to_value(interrupts).unwrap_or(Value::Null),
    )];
    if let Some(answers) = resumed {
        writes.push(resume_write(Value::Array(answers)));
    }
    writes
}

/// Where writes being replayed were saved, for the error when they do not read back.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Replay<'a> {
    /// Pending writes of checkpoint `checkpoint_id` of thread `thread_id`: damage there is corruption.
    Checkpoint { thread_id: &'a str, checkpoint_id: &'a str },
    /// A node's cached writes.
    Cache,
}

impl Replay<'_> {
    fn damaged(self, channel: &str, message: String) -> GraphError {
        match self {
            Replay::Checkpoint { thread_id, checkpoint_id } => {
                GraphError::Storage(CheckpointError::Corrupt {
                    thread_id: thread_id.to_owned(),
                    checkpoint_id: checkpoint_id.to_owned(),
                    channel: Some(channel.to_owned()),
                    message: format!("a saved write does not replay: {message}"),
                })
            }
            Replay::Cache => {
                GraphError::Checkpoint(format!("cannot replay a cached write to '{channel}': {message}"))
            }
        }
    }
}

/// Rebuilds typed writes from saved pending writes (special channels skipped); `from` says where they
/// were saved, for the error when one does not read back (unknown node, channel or barrier, a value of
/// the wrong type).
pub(crate) fn writes_from_json<S: State>(
    spec: &GraphSpec<S>,
    state: &S,
    saved: &[(String, Value)],
    from: Replay<'_>,
) -> GraphResult<TaskWrites<S>> {
    let mut writes = TaskWrites::default();
    for (channel, value) in saved {
        let damaged = |m: String| from.damaged(channel, m);
        if let Some(node) = channel.strip_prefix("branch:to:") {
            let &i = spec.node_names.get(node).ok_or_else(|| damaged(format!("unknown node '{node}'")))?;
            writes.goto.push(i);
        } else if channel == special::TASKS {
            writes.push_send(send_from_json(spec, value).map_err(damaged)?);
        } else if channel.starts_with("join:") {
            let j = spec
                .joins
                .iter()
                .position(|j| &j.name == channel)
                .ok_or_else(|| damaged(format!("unknown barrier '{channel}'")))?;
            writes.extend_joins([j]);
        } else if channel.starts_with("__") && state.channel_index(channel).is_none() {
            continue;
        } else {
            let i = state
                .channel_index(channel)
                .ok_or_else(|| damaged(format!("unknown channel '{channel}'")))?;
            let update = state
                .update_from_json(vec![(i, value.clone())])
                .map_err(|error| damaged(error.to_string()))?;
            writes.updates.push(update);
        }
    }
    Ok(writes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_are_hyphenated_uuids_of_the_hash() {
        for value in [0, 1, u128::MAX, 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210, Fnv128::OFFSET] {
            let expected = uuid::Uuid::from_u128(value).hyphenated().to_string();
            assert_eq!(&**TaskId::from_hash(value).text(), expected);
        }
        let id = task_id("1ef-checkpoint", "", 3, "node", "");
        assert_eq!(
            uuid::Uuid::parse_str(&id).map(|u| u.hyphenated().to_string()).ok().as_deref(),
            Some(&*id)
        );
    }

    #[test]
    fn rare_writes_keep_a_tasks_writes_small_and_read_back() {
        type Writes = TaskWrites<crate::JsonState>;
        // Moved a few times a task on its way to the step's end: the rare parts stay out of line.
        assert!(std::mem::size_of::<Writes>() <= 72, "{} bytes", std::mem::size_of::<Writes>());
        let mut writes = Writes::default();
        assert!(writes.sends().is_empty() && writes.joins().is_empty() && writes.resumed().is_none());
        writes.set_resumed(None);
        assert!(writes.rare.is_none(), "no answers make no box");
        writes.push_send(Send::new("n", serde_json::json!(1)));
        writes.extend_joins([2, 0]);
        writes.set_resumed(Some(vec![serde_json::json!("yes")]));
        let copy = writes.clone().marked_routed();
        assert!(copy.routed && !writes.routed);
        assert_eq!(
            (copy.sends().len(), copy.joins(), copy.resumed()),
            (1, &[2, 0][..], Some(&[serde_json::json!("yes")][..]))
        );
        writes.set_resumed(None);
        assert!(writes.resumed().is_none() && writes.sends().len() == 1);
    }
}
