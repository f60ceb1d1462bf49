//! The compiled graph's shared part the engine runs ([`Inner`]), and the settings it reads: the compile
//! settings, a run's input, options and output. `compiled` re-exports the public ones.

use std::any::Any;
use std::sync::Arc;

use crate::checkpoint::Checkpointer;
use crate::pregel::parent::CalledSubgraphs;
use crate::pregel::spec::{CheckpointNames, GraphSpec};
use crate::retry::RetryPolicy;
use crate::state::State;
use crate::subgraph_reader::SubgraphStateReader;
use crate::types::{Command, Durability, Interrupt};

/// The default recursion limit of graphs (LangGraph 1.x uses 10,007; plain runnables keep 25).
pub const DEFAULT_GRAPH_RECURSION_LIMIT: u32 = 10_000;

/// Settings of `compile_with`.
#[derive(Debug, Clone, Default)]
pub struct CompileConfig {
    /// Saves checkpoints; needed for interrupts to be resumed and for threads.
    pub checkpointer: Option<Arc<dyn Checkpointer>>,
    /// Pause before these nodes run (`"*"` = every node).
    pub interrupt_before: Vec<String>,
    /// Pause after these nodes run (`"*"` = every node).
    pub interrupt_after: Vec<String>,
    /// The graph's name in events (default `LangGraph`).
    pub name: Option<String>,
    /// Retry policies of nodes that have none of their own (the first whose `retry_on` matches the error
    /// applies).
    pub retry: Vec<RetryPolicy>,
    /// Where nodes with a cache policy keep their writes.
    pub cache: Option<Arc<dyn crate::cache::NodeCache>>,
    /// Long-term memory shared across threads, reachable from nodes through
    /// [`Runtime::store`](crate::Runtime::store).
    pub store: Option<Arc<dyn crate::store::Store>>,
    /// When this graph runs as a subgraph: whether and where it keeps checkpoints.
    pub subgraph_checkpoints: SubgraphCheckpoints,
    /// Which checkpoints of a thread to keep; applied at the end of every run on the thread (the newest
    /// checkpoint is always kept).
    pub retention: Option<crate::checkpoint::RetentionPolicy>,
    /// Whether traces show the graph's runs as an agent (OpenInference span kind `AGENT`) rather than a
    /// chain; `create_react_agent` sets it.
    pub trace_as_agent: bool,
    /// The recursion limit of runs whose config sets none (LangChain's agents compile theirs with
    /// `with_config(recursion_limit=9999)`); `None` keeps LangGraph's default of 25.
    pub recursion_limit: Option<u32>,
}

/// How a graph used as a subgraph keeps checkpoints (LangGraph's `checkpointer=None/True/False`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SubgraphCheckpoints {
    /// Use the parent's checkpointer in a namespace of its own per parent task: each run of the parent
    /// node starts fresh, and interrupts inside resume there.
    #[default]
    Inherit,
    /// Use the parent's checkpointer in one namespace per node: the subgraph's state accumulates across
    /// runs of the parent node on a thread.
    PerNode,
    /// Keep no checkpoints (interrupts inside cannot be resumed).
    Never,
}

impl CompileConfig {
    /// Default settings.
    pub fn new() -> Self {
        Self::default()
    }

    /// Shows the graph's runs as an agent in traces (OpenInference span kind `AGENT`).
    pub fn trace_as_agent(mut self, agent: bool) -> Self {
        self.trace_as_agent = agent;
        self
    }

    /// Sets the checkpointer.
    pub fn checkpointer(mut self, checkpointer: Arc<dyn Checkpointer>) -> Self {
        self.checkpointer = Some(checkpointer);
        self
    }

    /// Pauses before these nodes.
    pub fn interrupt_before<I: IntoIterator<Item = T>, T: Into<String>>(mut self, nodes: I) -> Self {
        self.interrupt_before = nodes.into_iter().map(Into::into).collect();
        self
    }

    /// Pauses after these nodes.
    pub fn interrupt_after<I: IntoIterator<Item = T>, T: Into<String>>(mut self, nodes: I) -> Self {
        self.interrupt_after = nodes.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the graph's name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Sets the node cache.
    pub fn cache(mut self, cache: Arc<dyn crate::cache::NodeCache>) -> Self {
        self.cache = Some(cache);
        self
    }

    /// Sets the store nodes reach through their runtime.
    pub fn store(mut self, store: Arc<dyn crate::store::Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// Sets how this graph keeps checkpoints when it runs as a subgraph.
    pub fn subgraph_checkpoints(mut self, mode: SubgraphCheckpoints) -> Self {
        self.subgraph_checkpoints = mode;
        self
    }

    /// Keeps only the checkpoints `policy` allows, pruning at the end of every run on a thread.
    pub fn retention(mut self, policy: crate::checkpoint::RetentionPolicy) -> Self {
        self.retention = Some(policy);
        self
    }

    /// Adds a default node retry policy after the ones already given (the first whose `retry_on` matches
    /// the error applies).
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry.push(policy);
        self
    }

    /// Sets the default node retry policies (the first whose `retry_on` matches the error applies).
    pub fn retry_policies(mut self, policies: impl IntoIterator<Item = RetryPolicy>) -> Self {
        self.retry = policies.into_iter().collect();
        self
    }
}

/// What a run starts from.
#[derive(Debug, Clone)]
pub enum GraphInput<S: State> {
    /// New input: updates written into the state by the START step.
    Update(Vec<S::Update>),
    /// A command: resume interrupts, update state, go to nodes.
    Command(Command<S>),
    /// Continue the thread from its latest (or the addressed) checkpoint (LangGraph's `invoke(None)`).
    Resume,
}

/// The result of a run: the final state and the interrupts it paused on (empty when it finished).
#[derive(Debug, Clone)]
pub struct GraphOutput<S> {
    /// The state.
    pub value: S,
    /// Pending interrupts.
    pub interrupts: Vec<Interrupt>,
}

impl<S> GraphOutput<S> {
    /// The state, dropping the interrupts.
    pub fn into_value(self) -> S {
        self.value
    }

    /// Whether the run paused.
    pub fn is_interrupted(&self) -> bool {
        !self.interrupts.is_empty()
    }
}

impl<S: serde::Serialize> serde::Serialize for GraphOutput<S> {
    fn serialize<Z: serde::Serializer>(&self, serializer: Z) -> std::result::Result<Z::Ok, Z::Error> {
        use serde::ser::SerializeStruct as _;
        let mut s = serializer.serialize_struct("GraphOutput", 2)?;
        s.serialize_field("value", &self.value)?;
        s.serialize_field("interrupts", &self.interrupts)?;
        s.end()
    }
}

/// Per-run options beyond the config.
#[derive(Clone, Default)]
pub struct RunOptions {
    /// When checkpoints are written.
    pub durability: Durability,
    /// A value nodes read with [`Runtime::context`](crate::Runtime::context).
    pub context: Option<Arc<dyn Any + Send + Sync>>,
    /// Whether chunks of subgraphs are streamed too (each carrying the subgraph's namespace).
    pub subgraphs: bool,
    /// Pause before these nodes in this run instead of the ones the graph was compiled with (`"*"` =
    /// every node; unknown names are ignored). Applies to the root graph only, as in LangGraph.
    pub interrupt_before: Option<Vec<String>>,
    /// Pause after these nodes in this run instead of the ones the graph was compiled with.
    pub interrupt_after: Option<Vec<String>>,
    /// Where the run leaves the thread's state when it ends with nothing left to run (see [`EndState`]).
    pub end_state: Option<EndState>,
    /// The thread's latest checkpoint as the caller read it, for the run to start from instead of
    /// reading it (see [`ThreadHead`]).
    pub head: Option<ThreadHead>,
}

/// The latest checkpoint of a thread's root namespace as the caller read it (in the transaction that
/// made the run, say), for the run to start from instead of reading it itself: one read less. Taken
/// once, by a root run of that thread in its root namespace that replays no checkpoint (no
/// `checkpoint_id`); any other run reads as usual. As with a head the run reads itself, its first
/// checkpoint is stored only while the thread's head is still that one (a
/// [`Conflict`](crate::checkpoint::CheckpointErrorKind::Conflict) otherwise): a head read some time
/// before the run starts is never built on once another writer has moved it.
#[derive(Clone, Debug)]
pub struct ThreadHead(Arc<std::sync::Mutex<Option<HeadRead>>>);

/// What a [`ThreadHead`] holds until it is taken: the thread, and its head as read.
type HeadRead = (String, Option<crate::checkpoint::CheckpointTuple>);

impl ThreadHead {
    /// The head of thread `thread_id`'s root namespace as read: `tuple`, or `None` for a thread without
    /// a checkpoint there.
    pub fn read(thread_id: impl Into<String>, tuple: Option<crate::checkpoint::CheckpointTuple>) -> Self {
        Self(Arc::new(std::sync::Mutex::new(Some((thread_id.into(), tuple)))))
    }

    /// The head read for the root namespace of `thread_id`, taken; `None` when it was read for another
    /// thread or taken already.
    pub(crate) fn take_for(&self, thread_id: &str) -> Option<Option<crate::checkpoint::CheckpointTuple>> {
        let mut slot = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let matches = slot.as_ref().is_some_and(|(thread, tuple)| {
            thread == thread_id
                && tuple
                    .as_ref()
                    .is_none_or(|t| t.config.thread_id == thread_id && t.config.checkpoint_ns.is_empty())
        });
        if matches { slot.take().map(|(_, tuple)| tuple) } else { None }
    }
}

/// The thread's state as a run left it, handed back by the run instead of read from the checkpointer:
/// set when a root run with a checkpointer ends with nothing left to run (no next task, no interrupt,
/// no error) after saving its last checkpoint in `sync` or `async` durability; it is then what
/// [`get_state_json`](crate::CompiledGraph::get_state_json) would return for the thread (the same
/// values, `next`, tasks and interrupts, built from the same checkpoint). Left empty otherwise (a
/// pause, an error, a drain, `exit` durability, a run that saved nothing): read the state then.
///
/// A slot made with [`EndState::with_last_saves`] also takes the run's last saves: see there.
#[derive(Clone, Debug, Default)]
pub struct EndState(Arc<std::sync::Mutex<EndSlot>>);

/// What an [`EndState`] holds.
#[derive(Debug, Default)]
struct EndSlot {
    snapshot: Option<crate::snapshot::JsonSnapshot>,
    /// Whether the run leaves its last saves to the caller.
    hands_back: bool,
    saves: Vec<crate::checkpoint::SaveOp>,
}

impl EndState {
    /// An empty slot, to pass in [`RunOptions::end_state`].
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty slot for a run that also leaves its last saves to the caller, so that the caller stores
    /// them in the transaction that records the run's end (one transaction less per run). In `async`
    /// durability, a root run whose graph prunes nothing ([`CompileConfig::retention`] unset) holds back
    /// the saves of each step's end (the writes of a lone task, the checkpoint) until it plans the next
    /// step; when it ends as [`EndState`] says, those of its last step are not stored but handed back
    /// ([`EndState::take_saves`]) with the state they lead to, every earlier save stored. Until the
    /// caller stores them (with [`Checkpointer::put_batch`](crate::checkpoint::Checkpointer::put_batch),
    /// or a backend's own way in a transaction of the caller's), that state is not durable: a crash
    /// then loses the run's last step, as it may lose the step in flight in `async` durability, and a
    /// caller that records the run's end must do so in the same transaction or after. A run that ends
    /// otherwise (a pause, an error, a drain) stores every save itself, as without this.
    ///
    /// [`CompileConfig::retention`]: crate::CompileConfig::retention
    pub fn with_last_saves() -> Self {
        Self(Arc::new(std::sync::Mutex::new(EndSlot { hands_back: true, ..EndSlot::default() })))
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, EndSlot> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The state the run left, once it ended as [`EndState`] says (taken: a second call gets `None`).
    pub fn take(&self) -> Option<crate::snapshot::JsonSnapshot> {
        self.slot().snapshot.take()
    }

    /// The saves the run left to the caller (see [`EndState::with_last_saves`]), in order (taken: a
    /// second call gets none). Empty unless the slot was made for them and the run ended as
    /// [`EndState`] says.
    pub fn take_saves(&self) -> Vec<crate::checkpoint::SaveOp> {
        std::mem::take(&mut self.slot().saves)
    }

    /// Whether the run is to leave its last saves to the caller.
    pub(crate) fn hands_back(&self) -> bool {
        self.slot().hands_back
    }

    pub(crate) fn set(&self, snapshot: crate::snapshot::JsonSnapshot, saves: Vec<crate::checkpoint::SaveOp>) {
        let mut slot = self.slot();
        slot.snapshot = Some(snapshot);
        slot.saves = saves;
    }
}

impl std::fmt::Debug for RunOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunOptions")
            .field("durability", &self.durability)
            .field("subgraphs", &self.subgraphs)
            .field("interrupt_before", &self.interrupt_before)
            .field("interrupt_after", &self.interrupt_after)
            .field("end_state", &self.end_state.is_some())
            .field("head", &self.head.is_some())
            .finish_non_exhaustive()
    }
}

/// The shared part of a compiled graph, which the engine runs: the spec, the compile settings and the names
/// derived from them. A [`CompiledGraph`](crate::CompiledGraph) holds it in an `Arc`.
pub(crate) struct Inner<S: State> {
    /// Shared by the graphs [`CompiledGraph::with_checkpointer`](crate::CompiledGraph::with_checkpointer)
    /// and [`CompiledGraph::with_store`](crate::CompiledGraph::with_store) make.
    pub(crate) spec: Arc<GraphSpec<S>>,
    pub(crate) config: CompileConfig,
    /// The names checkpoints use.
    pub(crate) names: CheckpointNames,
    pub(crate) interrupt_before: Vec<bool>,
    pub(crate) interrupt_after: Vec<bool>,
    pub(crate) name: String,
    /// Subgraphs that function nodes called (by node name), so that `get_state_with_subgraphs` can show
    /// their state; LangGraph finds them among a function's closure variables, weft when they first run.
    pub(crate) called_subgraphs: CalledSubgraphs,
    /// This graph as a subgraph state reader (a compiled graph holding this `Inner`), which a run
    /// registers with its parent graph.
    pub(crate) reader: fn(&Arc<Inner<S>>) -> Arc<dyn SubgraphStateReader>,
}

/// One flag per node: whether `names` (node names, `"*"` for every node) names it.
pub(crate) fn breakpoint_flags<S: State>(spec: &GraphSpec<S>, names: &[String]) -> Vec<bool> {
    spec.nodes.iter().map(|n| names.iter().any(|x| x == "*" || **x == *n.name)).collect()
}

impl<S: State> std::fmt::Debug for Inner<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner").field("name", &self.name).finish_non_exhaustive()
    }
}

impl<S> serde::Serialize for GraphInput<S>
where
    S: State,
    S::Update: serde::Serialize,
{
    fn serialize<Z: serde::Serializer>(&self, serializer: Z) -> std::result::Result<Z::Ok, Z::Error> {
        use serde::ser::SerializeMap as _;
        match self {
            GraphInput::Update(updates) if updates.len() == 1 => updates[0].serialize(serializer),
            GraphInput::Update(updates) => updates.serialize(serializer),
            GraphInput::Resume => serializer.serialize_none(),
            GraphInput::Command(cmd) => {
                let mut map = serializer.serialize_map(None)?;
                map.serialize_entry("update", &cmd.update)?;
                let goto: Vec<&str> = cmd
                    .goto
                    .iter()
                    .map(|g| match g {
                        crate::types::Goto::Node(n) => n.as_str(),
                        crate::types::Goto::Send(s) => s.node(),
                    })
                    .collect();
                map.serialize_entry("goto", &goto)?;
                let resume = match &cmd.resume {
                    None => serde_json::Value::Null,
                    Some(crate::types::Resume::Value(v)) => v.clone(),
                    Some(crate::types::Resume::ById(m)) => serde_json::Value::Object(m.clone()),
                };
                map.serialize_entry("resume", &resume)?;
                map.end()
            }
        }
    }
}
