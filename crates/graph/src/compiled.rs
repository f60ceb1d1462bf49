//! `CompiledGraph`: a validated graph, ready to invoke, stream and inspect.

use std::any::Any;
use std::borrow::Cow;
use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use weft_runnable_core::{Error, Result, RunKind, Runnable, RunnableConfig};

use crate::checkpoint::Checkpointer;
use crate::error::{GraphError, GraphResult};
use crate::pregel::spec::GraphSpec;
use crate::retry::RetryPolicy;
use crate::state::State;
use crate::stream::{StreamData, StreamMode, StreamPart};
use crate::types::{Command, Interrupt};

/// The default recursion limit of graphs (LangGraph 1.x uses 10,007; plain runnables keep 25).
pub const DEFAULT_GRAPH_RECURSION_LIMIT: u32 = 10_000;

pub use crate::types::Durability;

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

/// Values a run can start from: the state's update type and the state itself (implemented by
/// `#[derive(State)]`), a [`Command`], a [`GraphInput`].
pub trait IntoGraphInput<S: State> {
    /// Converts into a graph input.
    fn into_graph_input(self) -> GraphInput<S>;
}

impl<S: State> IntoGraphInput<S> for GraphInput<S> {
    fn into_graph_input(self) -> GraphInput<S> {
        self
    }
}

impl<S: State> IntoGraphInput<S> for Command<S> {
    fn into_graph_input(self) -> GraphInput<S> {
        GraphInput::Command(self)
    }
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
}

impl std::fmt::Debug for RunOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunOptions")
            .field("durability", &self.durability)
            .field("subgraphs", &self.subgraphs)
            .field("interrupt_before", &self.interrupt_before)
            .field("interrupt_after", &self.interrupt_after)
            .finish_non_exhaustive()
    }
}

pub(crate) struct Inner<S: State> {
    /// Shared by the graphs [`CompiledGraph::with_checkpointer`] and [`CompiledGraph::with_store`] make.
    pub(crate) spec: Arc<GraphSpec<S>>,
    pub(crate) config: CompileConfig,
    /// The names checkpoints use.
    pub(crate) names: crate::pregel::spec::CheckpointNames,
    pub(crate) interrupt_before: Vec<bool>,
    pub(crate) interrupt_after: Vec<bool>,
    pub(crate) name: String,
    /// Subgraphs that function nodes called (by node name), so that `get_state_with_subgraphs` can show
    /// their state; LangGraph finds them among a function's closure variables, weft when they first run.
    pub(crate) called_subgraphs: crate::pregel::parent::CalledSubgraphs,
}

/// One flag per node: whether `names` (node names, `"*"` for every node) names it.
pub(crate) fn breakpoint_flags<S: State>(spec: &GraphSpec<S>, names: &[String]) -> Vec<bool> {
    spec.nodes.iter().map(|n| names.iter().any(|x| x == "*" || **x == *n.name)).collect()
}

/// A compiled graph. Cheap to clone; runs concurrently on many threads.
pub struct CompiledGraph<S: State> {
    pub(crate) inner: Arc<Inner<S>>,
}

impl<S: State> Clone for CompiledGraph<S> {
    fn clone(&self) -> Self {
        Self { inner: Arc::clone(&self.inner) }
    }
}

impl<S: State> std::fmt::Debug for CompiledGraph<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledGraph")
            .field("name", &self.inner.name)
            .field("nodes", &self.inner.spec.nodes.iter().map(|n| &n.name).collect::<Vec<_>>())
            .finish()
    }
}

impl<S: State> CompiledGraph<S> {
    pub(crate) fn new(spec: GraphSpec<S>, config: CompileConfig) -> Self {
        Self::with_spec(Arc::new(spec), config)
    }

    fn with_spec(spec: Arc<GraphSpec<S>>, config: CompileConfig) -> Self {
        let interrupt_before = breakpoint_flags(&spec, &config.interrupt_before);
        let interrupt_after = breakpoint_flags(&spec, &config.interrupt_after);
        let names = spec.checkpoint_names();
        let name = config.name.clone().unwrap_or_else(|| "LangGraph".to_owned());
        let called_subgraphs = crate::pregel::parent::CalledSubgraphs::default();
        let inner = Inner { spec, config, names, interrupt_before, interrupt_after, name, called_subgraphs };
        Self { inner: Arc::new(inner) }
    }

    /// The graph's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The same graph saving its checkpoints to `checkpointer` (none when `None`), as if it had been
    /// compiled with it: a host that owns persistence (the HTTP server) gives every graph its saver this
    /// way. Nodes, edges and every other setting are shared with `self`.
    pub fn with_checkpointer(&self, checkpointer: Option<Arc<dyn Checkpointer>>) -> Self {
        let config = CompileConfig { checkpointer, ..self.inner.config.clone() };
        Self::with_spec(Arc::clone(&self.inner.spec), config)
    }

    /// The same graph with `store` as its long-term memory (none when `None`); see
    /// [`with_checkpointer`](CompiledGraph::with_checkpointer).
    pub fn with_store(&self, store: Option<Arc<dyn crate::store::Store>>) -> Self {
        let config = CompileConfig { store, ..self.inner.config.clone() };
        Self::with_spec(Arc::clone(&self.inner.spec), config)
    }

    /// Drops the cached writes of these nodes (all nodes when `None`).
    pub async fn clear_cache(&self, nodes: Option<&[String]>) {
        if let Some(cache) = &self.inner.config.cache {
            cache.clear(nodes).await;
        }
    }

    /// The checkpointer, if any.
    pub fn checkpointer(&self) -> Option<&Arc<dyn Checkpointer>> {
        self.inner.config.checkpointer.as_ref()
    }

    /// Runs to the end (or to an interrupt) and returns the final state.
    pub async fn invoke(
        &self,
        input: impl IntoGraphInput<S>,
        config: &RunnableConfig,
    ) -> GraphResult<GraphOutput<S>> {
        self.invoke_with(input, config, RunOptions::default()).await
    }

    /// Like [`invoke`](CompiledGraph::invoke), with run options (durability, context).
    pub async fn invoke_with(
        &self,
        input: impl IntoGraphInput<S>,
        config: &RunnableConfig,
        options: RunOptions,
    ) -> GraphResult<GraphOutput<S>> {
        let out = crate::pregel::run::run(
            &self.inner,
            input.into_graph_input(),
            Cow::Borrowed(config),
            &options,
            None,
        )
        .await?;
        // Inside another graph's node, a pause travels up as an error the node returns with `?`.
        if out.is_interrupted() && config.extensions.get::<crate::pregel::parent::ParentRun>().is_some() {
            return Err(GraphError::Interrupted(out.interrupts));
        }
        Ok(out)
    }

    /// Runs with a typed input and output (LangGraph's input and output schemas): `input`'s fields are
    /// written to the channels of the same names (fields that are not channels are an error naming them),
    /// and the output is read from the final state's channels of `O`'s field names.
    pub async fn invoke_as<I, O>(&self, input: &I, config: &RunnableConfig) -> GraphResult<GraphOutput<O>>
    where
        I: serde::Serialize,
        O: serde::de::DeserializeOwned,
    {
        let state = &self.inner.spec.initial;
        let serde_json::Value::Object(fields) =
            serde_json::to_value(input).map_err(|e| GraphError::Serialization(e.to_string()))?
        else {
            return Err(GraphError::Serialization("graph input must serialize to a JSON object".to_owned()));
        };
        let mut writes = Vec::new();
        for (name, value) in fields {
            let i = state.channel_index(&name).ok_or_else(|| {
                GraphError::Serialization(format!(
                    "input field '{name}' is not a channel of the graph's state"
                ))
            })?;
            writes.push((i, value));
        }
        let update = state.update_from_json(writes).map_err(|error| GraphError::InvalidUpdate {
            error,
            step: -1,
            nodes: Vec::new(),
        })?;
        let out = self.invoke(GraphInput::Update(vec![update]), config).await?;
        let value = serde_json::from_value(crate::pregel::task::state_json(&out.value)).map_err(|e| {
            GraphError::Serialization(format!("cannot read the output type from the state: {e}"))
        })?;
        Ok(GraphOutput { value, interrupts: out.interrupts })
    }

    /// Streams the run in the given modes (LangGraph's default for `stream` is `updates`).
    pub fn stream(
        &self,
        input: impl IntoGraphInput<S>,
        config: &RunnableConfig,
        modes: &[StreamMode],
    ) -> BoxStream<'static, GraphResult<StreamPart<S>>> {
        self.stream_with(input, config, modes, RunOptions::default())
    }

    /// Like [`stream`](CompiledGraph::stream), with run options.
    pub fn stream_with(
        &self,
        input: impl IntoGraphInput<S>,
        config: &RunnableConfig,
        modes: &[StreamMode],
        options: RunOptions,
    ) -> BoxStream<'static, GraphResult<StreamPart<S>>> {
        self.stream_owned(input.into_graph_input(), config.clone(), modes, options)
    }

    /// [`stream_with`](CompiledGraph::stream_with) with a config the run takes over (no copy of it).
    pub(crate) fn stream_owned(
        &self,
        input: GraphInput<S>,
        config: RunnableConfig,
        modes: &[StreamMode],
        options: RunOptions,
    ) -> BoxStream<'static, GraphResult<StreamPart<S>>> {
        // The channel is unbounded, but the run waits on the gate at its await points (each chat model
        // token, each step) while the reader is `QUEUED_CHUNKS` behind.
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let gate = weft_runnable_core::QueueGate::new(crate::pregel::sink::QUEUED_CHUNKS);
        let modes = crate::stream::Modes::from_slice(modes);
        let sink = crate::pregel::sink::Sink::root(tx, gate.clone(), modes, options.subgraphs);
        let inner = Arc::clone(&self.inner);
        let run = async move {
            let result =
                crate::pregel::run::run(&inner, input, Cow::Owned(config), &options, Some(&sink)).await;
            result.err()
        };
        crate::pregel::sink::drive(run, rx, gate)
    }
}

/// A compiled graph is a runnable from its input to its output (final state and interrupts).
#[async_trait]
impl<S> Runnable<GraphInput<S>, GraphOutput<S>> for CompiledGraph<S>
where
    S: State,
    S::Update: std::fmt::Debug,
{
    fn name(&self) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed(&self.inner.name)
    }

    fn kind(&self) -> RunKind {
        RunKind::Chain
    }

    async fn invoke(&self, input: GraphInput<S>, config: &RunnableConfig) -> Result<GraphOutput<S>> {
        CompiledGraph::invoke(self, input, config).await.map_err(Error::from)
    }

    fn stream<'a>(
        &'a self,
        input: GraphInput<S>,
        config: &RunnableConfig,
    ) -> BoxStream<'a, Result<GraphOutput<S>>> {
        // One chunk per superstep that changed the state (LangGraph's `values` mode); when the run pauses,
        // the last chunk carries the pending interrupts.
        let mut last: Option<S> = None;
        let mut pending: Vec<Interrupt> = Vec::new();
        CompiledGraph::stream(self, input, config, &[StreamMode::Values, StreamMode::Updates])
            .filter_map(move |part| {
                let item = match part {
                    Err(e) => Some(Err(Error::from(e))),
                    Ok(StreamPart { data: StreamData::Values { state, interrupts }, .. })
                        if interrupts.is_empty() =>
                    {
                        last = Some(state.clone());
                        Some(Ok(GraphOutput { value: state, interrupts }))
                    }
                    // One chunk per paused task: each output carries every interrupt so far.
                    Ok(StreamPart { data: StreamData::Interrupt(interrupts), .. })
                        if !interrupts.is_empty() =>
                    {
                        pending.extend(interrupts);
                        last.clone().map(|value| Ok(GraphOutput { value, interrupts: pending.clone() }))
                    }
                    Ok(_) => None,
                };
                futures::future::ready(item)
            })
            .boxed()
    }

    fn merge_chunks(&self, _acc: GraphOutput<S>, next: GraphOutput<S>) -> Result<GraphOutput<S>> {
        // Each chunk is the whole state after a step: the latest one is the merged output.
        Ok(next)
    }
}

impl<S: State> std::fmt::Debug for Inner<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner").field("name", &self.name).finish_non_exhaustive()
    }
}

/// Checks that `err` is the graph error it claims to be, for callers holding a core error.
pub fn as_graph_error(err: &Error) -> Option<&GraphError> {
    err.downcast_custom::<GraphError>()
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
