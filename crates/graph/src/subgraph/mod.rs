//! Subgraphs: a compiled graph used as a node, or invoked inside a node.
//!
//! A subgraph run finds a `ParentRun` in its config's extensions (put there by the parent for each task).
//! It inherits the parent's checkpointer when it has none of its own, saves its checkpoints under the
//! namespace `<node>:<task id>` (nested with `|`), shares the parent's resume values, and resumes from its
//! own checkpoint when the parent is resuming, so the subgraph's finished nodes are not re-run.

use std::sync::{Arc, Mutex};

use futures::FutureExt as _;
use futures::future::BoxFuture;
use serde_json::{Map, Value};
use weft_runnable_core::{ControlFlow, Error, Result};

use crate::checkpoint::Checkpointer;
use crate::compiled::{CompiledGraph, GraphInput};
use crate::node::{IntoNode, NodeFn, NodeInput, NodeOutput};
use crate::runtime::Runtime;
use crate::state::State;
use crate::types::{Command, CommandGraph, Goto, Payload};

mod reader;

pub use crate::subgraph_reader::SubgraphStateReader;

/// What a parent run hands the subgraph runs started by one of its tasks.
#[derive(Clone)]
pub(crate) struct ParentRun {
    /// The parent's stream, when it streams subgraphs: where the subgraph's chunks go.
    pub(crate) stream: Option<crate::pregel::sink::ParentStream>,
    pub(crate) checkpointer: Option<Arc<dyn Checkpointer>>,
    /// The checkpoint namespace of the subgraph run.
    pub(crate) ns: String,
    /// The namespace of a subgraph that keeps one namespace per node (`SubgraphCheckpoints::PerNode`).
    pub(crate) node_ns: String,
    /// The parent's store.
    pub(crate) store: Option<Arc<dyn crate::store::Store>>,
    /// Namespace to checkpoint id of every enclosing run (saved as the subgraph checkpoints' `parents`).
    pub(crate) parents: std::collections::BTreeMap<String, String>,
    pub(crate) resuming: bool,
    pub(crate) null_resume: Arc<Mutex<Option<Value>>>,
    pub(crate) resume_by_id: Map<String, Value>,
    /// How many subgraph runs the task has started: the second and later ones get namespaces of their own
    /// (`<ns>|1`, `<ns>|2`, ...), as in LangGraph, so two subgraphs called from one node never share one.
    pub(crate) calls: Arc<std::sync::atomic::AtomicUsize>,
    /// Where a subgraph run registers itself with the parent graph (under the task's node).
    pub(crate) called: (CalledSubgraphs, Arc<str>),
}

/// The subgraphs function nodes called, by node name: the first one each node ran (as LangGraph takes the
/// first subgraph it finds in a function).
#[derive(Clone, Default)]
pub(crate) struct CalledSubgraphs(Arc<Mutex<ReadersByNode>>);

/// Subgraph state readers by node name.
type ReadersByNode = std::collections::HashMap<Arc<str>, Arc<dyn SubgraphStateReader>>;

impl CalledSubgraphs {
    /// Records that `node` called `subgraph`, unless it called another one first.
    pub(crate) fn record(&self, node: &Arc<str>, subgraph: impl FnOnce() -> Arc<dyn SubgraphStateReader>) {
        if let Ok(mut map) = self.0.lock() {
            map.entry(Arc::clone(node)).or_insert_with(subgraph);
        }
    }

    /// The subgraph `node` called, if it ran one.
    pub(crate) fn get(&self, node: &str) -> Option<Arc<dyn SubgraphStateReader>> {
        self.0.lock().ok()?.get(node).cloned()
    }
}

impl ParentRun {
    /// The namespaces of the task's next subgraph run: (`ns`, `node_ns`).
    pub(crate) fn next_namespaces(&self) -> (String, String) {
        match self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
            0 => (self.ns.clone(), self.node_ns.clone()),
            n => (format!("{}|{n}", self.ns), format!("{}|{n}", self.node_ns)),
        }
    }
}

/// A command for the parent graph, travelling up as control flow; the parent applies it as the output of
/// the node that ran the subgraph.
#[derive(Debug, Clone)]
pub(crate) struct EncodedParentCommand {
    /// State writes by channel name.
    pub(crate) writes: Vec<(String, Value)>,
    /// Destinations: node names, or `Send`s as `(node, payload JSON)`.
    pub(crate) goto: Vec<(String, Option<Value>)>,
}

impl EncodedParentCommand {
    /// Encodes a command of a subgraph of state `C`.
    pub(crate) fn encode<C: State>(state: &C, cmd: Command<C>) -> Result<Self> {
        let names = state.channels();
        let mut writes = Vec::new();
        for u in &cmd.update {
            for (i, v) in state.update_to_json(u).map_err(|e| Error::Serialization(e.to_string()))? {
                writes.push((names[i].name.to_string(), v));
            }
        }
        let mut goto = Vec::new();
        for g in cmd.goto {
            match g {
                Goto::Node(n) => goto.push((n, None)),
                Goto::Send(s) => {
                    let arg = s.payload.to_json().map_err(Error::Serialization)?;
                    goto.push((s.node, Some(arg)));
                }
            }
        }
        Ok(Self { writes, goto })
    }

    /// Decodes it as a command of the parent graph of state `S`.
    pub(crate) fn decode<S: State>(self, spec: &crate::pregel::spec::GraphSpec<S>) -> Result<Command<S>> {
        let state = &spec.initial;
        let mut cmd = Command::new();
        let mut writes = Vec::new();
        for (name, value) in self.writes {
            let i = state.channel_index(&name).ok_or_else(|| {
                Error::InvalidInput(format!(
                    "a command for the parent graph writes '{name}', which the parent state lacks"
                ))
            })?;
            writes.push((i, value));
        }
        if !writes.is_empty() {
            for w in writes {
                cmd.update
                    .push(state.update_from_json(vec![w]).map_err(|e| Error::Serialization(e.to_string()))?);
            }
        }
        for (node, arg) in self.goto {
            match arg {
                None => cmd.goto.push(Goto::Node(node)),
                Some(arg) => {
                    let &i = spec.node_names.get(&node).ok_or_else(|| {
                        Error::InvalidInput(format!(
                            "a command for the parent graph sends to unknown node '{node}'"
                        ))
                    })?;
                    let func = spec.nodes[i]
                        .func
                        .as_ref()
                        .ok_or_else(|| Error::InvalidInput(format!("node '{node}' has no function")))?;
                    let payload: Payload = func.payload_from_json(arg)?;
                    cmd.goto.push(Goto::Send(crate::types::Send { node, payload }));
                }
            }
        }
        Ok(cmd)
    }
}

/// The parent command inside an error, if it carries one.
pub(crate) fn parent_command(err: &Error) -> Option<EncodedParentCommand> {
    match err {
        Error::ControlFlow(flow) => flow.downcast_ref::<EncodedParentCommand>().cloned(),
        _ => None,
    }
}

/// Turns a parent command into control flow.
pub(crate) fn raise_parent_command(cmd: EncodedParentCommand) -> Error {
    Error::ControlFlow(ControlFlow::new("command for the parent graph", cmd))
}

/// A command for the parent graph written in the parent's terms: a [`Command`] of the parent graph's
/// state, raised from a node of a subgraph whose state is another type (LangGraph's
/// `Command(graph=Command.PARENT, ...)`, whose update names the parent's keys).
///
/// A node raises it with [`into_error`](Self::into_error) (as `Err(..)`); its graph passes it up, and the
/// parent applies it as the output of the node that ran the subgraph. The parent's state must be the
/// command's: another type is an error naming both.
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use weft_graph::{Command, END, ParentCommand, Runtime, START, State, StateGraph};
///
/// #[derive(State, Debug, Clone, Default, Serialize, Deserialize)]
/// struct Team {
///     active: String,
/// }
///
/// #[derive(State, Debug, Clone, Default, Serialize, Deserialize)]
/// struct Worker {
///     notes: String,
/// }
///
/// # tokio_test::block_on(async {
/// let mut worker = StateGraph::<Worker>::new();
/// worker.add_node("hand_off", |_: Worker| -> weft_runnable_core::Result<()> {
///     let command = Command::<Team>::new().update(Team::update().active("reviewer")).goto("reviewer");
///     Err(ParentCommand::new(command).into_error())
/// });
/// worker.add_edge(START, "hand_off");
/// let worker = worker.compile().unwrap();
///
/// let mut team = StateGraph::<Team>::new();
/// team.add_node("writer", worker);
/// team.add_node("reviewer", |s: Team| Team::update().active(format!("{} done", s.active)));
/// team.add_edge(START, "writer");
/// team.add_edge("reviewer", END);
/// let out = team.compile().unwrap().invoke(Team::update(), &Default::default()).await.unwrap();
/// assert_eq!(out.value.active, "reviewer done");
/// # });
/// ```
#[derive(Clone)]
pub struct ParentCommand {
    command: Arc<dyn std::any::Any + Send + Sync>,
    state: std::borrow::Cow<'static, str>,
    /// Whether it left the graph of the node that raised it (the next graph up applies it).
    lifted: bool,
}

impl std::fmt::Debug for ParentCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParentCommand").field("state", &self.state).field("lifted", &self.lifted).finish()
    }
}

impl ParentCommand {
    /// A command for the parent graph, whose state is `P`.
    pub fn new<P: State>(command: Command<P>) -> Self {
        Self { command: Arc::new(command), state: std::any::type_name::<P>().into(), lifted: false }
    }

    /// The same from a shared, type-erased `Command<P>` (as a tool's command payload holds it), with
    /// `P`'s type name for error messages.
    pub fn from_shared(
        command: Arc<dyn std::any::Any + Send + Sync>,
        state: impl Into<std::borrow::Cow<'static, str>>,
    ) -> Self {
        Self { command, state: state.into(), lifted: false }
    }

    /// The control flow a node returns (as its error) to send the command up.
    pub fn into_error(self) -> Error {
        Error::ControlFlow(ControlFlow::new("command for the parent graph", self))
    }

    /// The command as one of a graph over `S`, when that is its type.
    pub(crate) fn command<S: State>(&self) -> Option<Command<S>> {
        let mut command = self.command.downcast_ref::<Command<S>>()?.clone();
        command.graph = CommandGraph::Current;
        Some(command)
    }

    /// The state type it was written for.
    pub fn state_type(&self) -> &str {
        &self.state
    }

    pub(crate) fn is_lifted(&self) -> bool {
        self.lifted
    }

    pub(crate) fn lifted(mut self) -> Self {
        self.lifted = true;
        self
    }
}

/// The typed parent command inside an error, if it carries one.
pub(crate) fn typed_parent_command(err: &Error) -> Option<ParentCommand> {
    match err {
        Error::ControlFlow(flow) => flow.downcast_ref::<ParentCommand>().cloned(),
        _ => None,
    }
}

/// Marker of the [`IntoNode`] implementation for compiled graphs.
#[derive(Debug)]
pub struct SubgraphMarker<C>(std::marker::PhantomData<fn(C)>);

struct SubgraphNode<C: State> {
    graph: CompiledGraph<C>,
}

/// A `Send` packet (an object keyed by channel names) as an update of the subgraph's state; keys the
/// subgraph lacks are dropped.
fn payload_update<C: State>(payload: &Payload, child: &C) -> Result<C::Update> {
    let json = payload.to_json().map_err(Error::Serialization)?;
    let Value::Object(fields) = json else {
        return Err(Error::InvalidInput(format!(
            "a Send to a subgraph carries an object of its channels, not {json}"
        )));
    };
    let writes = fields.into_iter().filter_map(|(k, v)| Some((child.channel_index(&k)?, v))).collect();
    child.update_from_json(writes).map_err(|e| Error::Serialization(e.to_string()))
}

/// A state's non-empty tracked channels by name.
fn named_values<C: State>(state: &C) -> Result<Vec<(String, Value)>> {
    let mut out = Vec::new();
    for (i, spec) in state.channels().iter().enumerate() {
        if !spec.kind.is_tracked() {
            continue;
        }
        if let Some(v) = state.channel_to_json(i).map_err(|e| Error::Serialization(e.to_string()))? {
            out.push((spec.name.to_string(), v));
        }
    }
    Ok(out)
}

/// Maps the shared channels of `from` (by name) into an update of `to`'s state type.
fn map_state<A: State, B: State>(from: &A, to: &B) -> Result<B::Update> {
    let mut writes = Vec::new();
    for (i, spec) in from.channels().iter().enumerate() {
        if let Some(j) = to.channel_index(&spec.name) {
            if let Some(v) = from.channel_to_json(i).map_err(|e| Error::Serialization(e.to_string()))? {
                writes.push((j, v));
            }
        }
    }
    to.update_from_json(writes).map_err(|e| Error::Serialization(e.to_string()))
}

impl<S: State, C: State> NodeFn<S> for SubgraphNode<C> {
    fn call<'a>(&'a self, input: NodeInput<'a, S>, runtime: Runtime) -> BoxFuture<'a, Result<NodeOutput<S>>> {
        async move {
            let child_initial = &self.graph.inner.spec.initial;
            let parent_state = match input {
                NodeInput::State(parent_state) => parent_state,
                // A `Send`: its packet is the subgraph's input (its keys naming the subgraph's channels),
                // and the channels the subgraph has at the end go back to the parent by name.
                NodeInput::Payload(payload) => {
                    if payload.as_command::<S>().is_some() {
                        return Err(Error::InvalidInput(format!(
                            "a Send to subgraph node '{}' carries a Command; a subgraph takes an object of \
                             its channels",
                            runtime.node()
                        )));
                    }
                    let update = payload_update(&payload, child_initial)?;
                    let out = self
                        .graph
                        .invoke(GraphInput::Update(vec![update]), runtime.config())
                        .await
                        .map_err(Error::from)?;
                    return Ok(NodeOutput::Writes(named_values(&out.value)?));
                }
            };
            let update = map_state(parent_state, child_initial)?;
            // A pause of the subgraph comes back as `GraphError::Interrupted`, which `?` turns into the
            // node's own pause.
            let out = self
                .graph
                .invoke(GraphInput::Update(vec![update]), runtime.config())
                .await
                .map_err(Error::from)?;
            Ok(NodeOutput::Update(map_state(&out.value, parent_state)?))
        }
        .boxed()
    }

    fn payload_from_json(&self, value: Value) -> Result<Payload> {
        Ok(Payload::new(value))
    }

    fn subgraph(&self) -> Option<&dyn SubgraphStateReader> {
        Some(&self.graph)
    }
}

impl<S: State, C: State> IntoNode<S, SubgraphMarker<C>> for CompiledGraph<C> {
    fn into_node(self) -> Arc<dyn NodeFn<S>> {
        Arc::new(SubgraphNode { graph: self })
    }
}
