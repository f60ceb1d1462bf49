//! `CompiledGraph`: a validated graph, ready to invoke, stream and inspect.

use std::borrow::Cow;
use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use weft_runnable_core::{Error, Result, RunKind, Runnable, RunnableConfig};

use crate::checkpoint::Checkpointer;
use crate::error::{GraphError, GraphResult};
use crate::pregel::graph::{Inner, breakpoint_flags};
use crate::pregel::spec::GraphSpec;
use crate::state::State;
use crate::stream::{StreamData, StreamMode, StreamPart};
use crate::types::{Command, Interrupt};

pub use crate::pregel::graph::{
    CompileConfig, DEFAULT_GRAPH_RECURSION_LIMIT, EndState, GraphInput, GraphOutput, RunOptions,
    SubgraphCheckpoints, ThreadHead,
};
pub use crate::types::Durability;

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
        let reader = |inner: &Arc<Inner<S>>| -> Arc<dyn crate::subgraph::SubgraphStateReader> {
            Arc::new(CompiledGraph { inner: Arc::clone(inner) })
        };
        let inner =
            Inner { spec, config, names, interrupt_before, interrupt_after, name, called_subgraphs, reader };
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

/// Checks that `err` is the graph error it claims to be, for callers holding a core error.
pub fn as_graph_error(err: &Error) -> Option<&GraphError> {
    err.downcast_custom::<GraphError>()
}
