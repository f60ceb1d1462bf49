//! `ErasedGraph`: a compiled graph behind an object-safe interface that takes and gives JSON, so that
//! graphs of different state types live side by side (the HTTP server holds its graphs this way).
//!
//! Every [`CompiledGraph`] is an `ErasedGraph`; [`CompiledGraph::erase`] boxes one.
//!
//! ```
//! use futures::StreamExt as _;
//! use serde_json::json;
//! use weft_graph::erased::{ErasedGraph, JsonInput};
//! use weft_graph::{ChannelKind, JsonState, JsonStreamData, JsonUpdate, RunOptions, START, StateGraph, StreamMode};
//! # tokio_test::block_on(async {
//! let state = JsonState::builder().channel("count", ChannelKind::LastValue).build();
//! let mut graph = StateGraph::with_initial(state);
//! graph.add_node("inc", |s: &JsonState| {
//!     let count = s.get("count").and_then(|v| v.as_i64()).unwrap_or(0);
//!     JsonUpdate::new().write("count", json!(count + 1))
//! });
//! graph.add_edge(START, "inc");
//! let erased = graph.compile().unwrap().erase();
//! let input = JsonInput::from_json(json!({"count": 1})).unwrap();
//! let mut stream = erased.stream_json(input, Default::default(), &[StreamMode::Values], RunOptions::default());
//! let mut last = None;
//! while let Some(part) = stream.next().await {
//!     if let JsonStreamData::Values { values, .. } = part.unwrap().data {
//!         last = Some(values);
//!     }
//! }
//! assert_eq!(last, Some(json!({"count": 2})));
//! # });
//! ```

mod input;

use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use serde_json::Value;
use weft_runnable_core::RunnableConfig;

pub use input::{JsonCommand, JsonGoto, JsonInput};

use crate::checkpoint::{CheckpointConfig, Checkpointer, ListOptions};
use crate::compiled::{CompiledGraph, RunOptions};
use crate::draw::{DrawableGraph, Xray};
use crate::error::{GraphError, GraphResult};
use crate::state::{ChannelSpec, State};
use crate::state_api::JsonSnapshot;
use crate::store::Store;
use crate::stream::{JsonStreamData, JsonStreamPart, StreamMode};
use crate::subgraph_reader::SubgraphStateReader;

/// A compiled graph whose state type is erased: inputs, state and stream chunks are JSON.
#[async_trait]
pub trait ErasedGraph: Send + Sync + std::fmt::Debug + 'static {
    /// The graph's name.
    fn name(&self) -> &str;

    /// The state's channels, in declaration order.
    fn channels(&self) -> Vec<ChannelSpec>;

    /// The graph's topology (LangGraph's `get_graph()`).
    fn get_graph(&self) -> DrawableGraph;

    /// The graph's topology with subgraphs drawn inline (LangGraph's `get_graph(xray=...)`).
    fn get_graph_xray(&self, xray: Xray) -> DrawableGraph;

    /// The nodes that are compiled subgraphs, with the subgraph each runs, in node order.
    fn subgraphs(&self) -> Vec<(String, Arc<dyn ErasedGraph>)>;

    /// The checkpointer, if any.
    fn checkpointer(&self) -> Option<Arc<dyn Checkpointer>>;

    /// The same graph saving checkpoints to `checkpointer` (see [`CompiledGraph::with_checkpointer`]).
    fn with_checkpointer(&self, checkpointer: Option<Arc<dyn Checkpointer>>) -> Arc<dyn ErasedGraph>;

    /// The same graph with `store` as its long-term memory (see [`CompiledGraph::with_store`]).
    fn with_store(&self, store: Option<Arc<dyn Store>>) -> Arc<dyn ErasedGraph>;

    /// Streams a run in `modes`. An input the state cannot take is the stream's only item, an error.
    fn stream_json(
        &self,
        input: JsonInput,
        config: RunnableConfig,
        modes: &[StreamMode],
        options: RunOptions,
    ) -> BoxStream<'static, GraphResult<JsonStreamPart>>;

    /// The thread's state ([`CompiledGraph::get_state`]), with each subgraph task's state nested when
    /// `subgraphs` is set ([`CompiledGraph::get_state_with_subgraphs`]).
    async fn get_state_json(&self, config: &RunnableConfig, subgraphs: bool) -> GraphResult<JsonSnapshot>;

    /// The thread's checkpoints, newest first ([`CompiledGraph::get_state_history`]).
    async fn get_state_history_json(
        &self,
        config: &RunnableConfig,
        options: ListOptions,
    ) -> GraphResult<Vec<JsonSnapshot>>;

    /// Writes `values` (a JSON object of channel writes; `None` writes nothing) to the thread as node
    /// `as_node` ([`CompiledGraph::update_state`]) and returns the new checkpoint's address.
    async fn update_state_json(
        &self,
        config: &RunnableConfig,
        values: Option<Value>,
        as_node: Option<&str>,
    ) -> GraphResult<CheckpointConfig>;

    /// Applies several supersteps of updates, one checkpoint each ([`CompiledGraph::bulk_update_state`]):
    /// within a superstep every update must name its node. Returns the last checkpoint's address.
    async fn bulk_update_state_json(
        &self,
        config: &RunnableConfig,
        supersteps: Vec<Vec<JsonStateUpdate>>,
    ) -> GraphResult<CheckpointConfig>;
}

/// One update of [`ErasedGraph::bulk_update_state_json`]: a JSON object of channel writes (`None` writes
/// nothing) and the node they are attributed to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JsonStateUpdate {
    /// The writes.
    pub values: Option<Value>,
    /// The node the writes come from (`None` infers it, in a superstep of one update).
    pub as_node: Option<String>,
}

/// The JSON-facing form of a subgraph its reader holds (a compiled graph's), for the user API.
pub trait ErasedSubgraph {
    /// The subgraph behind the JSON-facing [`ErasedGraph`] interface, when it is a compiled graph.
    fn erased(&self) -> Option<Arc<dyn ErasedGraph>>;
}

impl<R: SubgraphStateReader + ?Sized> ErasedSubgraph for R {
    fn erased(&self) -> Option<Arc<dyn ErasedGraph>> {
        let handle = self.erased_handle()?;
        handle.downcast::<Arc<dyn ErasedGraph>>().ok().map(|graph| *graph)
    }
}

impl<S: State> CompiledGraph<S> {
    /// The graph behind the object-safe, JSON-facing [`ErasedGraph`] interface.
    pub fn erase(&self) -> Arc<dyn ErasedGraph> {
        Arc::new(self.clone())
    }
}

/// Reads a JSON object of channel writes into an update of `state`: keys that are not channels are ignored
/// (LangGraph logs them and moves on); anything but an object is an error. A root-value state
/// ([`RootState`](crate::root::RootState)) takes the whole value, whatever it is, as LangGraph writes a bare
/// `__root__` schema's input and updates.
fn update_from_object<S: State>(state: &S, value: Value) -> GraphResult<S::Update> {
    let writes: Vec<(usize, Value)> = if is_root_value(state) {
        vec![(0, value)]
    } else {
        let Value::Object(map) = value else {
            return Err(GraphError::Serialization(format!("expected dict, got {value}")));
        };
        map.into_iter().filter_map(|(key, v)| state.channel_index(&key).map(|i| (i, v))).collect()
    };
    state.update_from_json(writes).map_err(|error| GraphError::InvalidUpdate {
        error,
        step: -1,
        nodes: Vec::new(),
    })
}

/// Whether `state` is one bare value (a [`RootState`](crate::root::RootState): its one channel is
/// `__root__`).
pub(crate) fn is_root_value<S: State>(state: &S) -> bool {
    matches!(&*state.channels(), [only] if only.name == crate::root::ROOT_CHANNEL)
}

#[async_trait]
impl<S: State> ErasedGraph for CompiledGraph<S> {
    fn name(&self) -> &str {
        CompiledGraph::name(self)
    }

    fn channels(&self) -> Vec<ChannelSpec> {
        self.inner.spec.initial.channels().into_owned()
    }

    fn get_graph(&self) -> DrawableGraph {
        CompiledGraph::get_graph(self)
    }

    fn get_graph_xray(&self, xray: Xray) -> DrawableGraph {
        CompiledGraph::get_graph_xray(self, xray)
    }

    fn subgraphs(&self) -> Vec<(String, Arc<dyn ErasedGraph>)> {
        let spec = &self.inner.spec;
        spec.insertion_order
            .iter()
            .filter_map(|&n| {
                let node = &spec.nodes[n];
                let graph = node.subgraph()?.erased()?;
                Some((node.name.to_string(), graph))
            })
            .collect()
    }

    fn checkpointer(&self) -> Option<Arc<dyn Checkpointer>> {
        CompiledGraph::checkpointer(self).cloned()
    }

    fn with_checkpointer(&self, checkpointer: Option<Arc<dyn Checkpointer>>) -> Arc<dyn ErasedGraph> {
        Arc::new(CompiledGraph::with_checkpointer(self, checkpointer))
    }

    fn with_store(&self, store: Option<Arc<dyn Store>>) -> Arc<dyn ErasedGraph> {
        Arc::new(CompiledGraph::with_store(self, store))
    }

    fn stream_json(
        &self,
        input: JsonInput,
        config: RunnableConfig,
        modes: &[StreamMode],
        options: RunOptions,
    ) -> BoxStream<'static, GraphResult<JsonStreamPart>> {
        let state = self.inner.spec.initial.clone();
        let input = match input.into_graph_input(&self.inner.spec) {
            Ok(input) => input,
            Err(e) => return futures::stream::once(futures::future::ready(Err(e))).boxed(),
        };
        self.stream_owned(input, config, modes, options)
            .map(move |part| {
                part.map(|p| JsonStreamPart { ns: p.ns, data: JsonStreamData::erase(p.data, &state) })
            })
            .boxed()
    }

    async fn get_state_json(&self, config: &RunnableConfig, subgraphs: bool) -> GraphResult<JsonSnapshot> {
        let snapshot = if subgraphs {
            self.get_state_with_subgraphs(config).await?
        } else {
            self.get_state(config).await?
        };
        Ok(crate::state_api::JsonSnapshot::from_typed(snapshot))
    }

    async fn get_state_history_json(
        &self,
        config: &RunnableConfig,
        options: ListOptions,
    ) -> GraphResult<Vec<JsonSnapshot>> {
        let history = self.get_state_history(config, options).await?;
        Ok(history.into_iter().map(crate::state_api::JsonSnapshot::from_typed).collect())
    }

    async fn update_state_json(
        &self,
        config: &RunnableConfig,
        values: Option<Value>,
        as_node: Option<&str>,
    ) -> GraphResult<CheckpointConfig> {
        let updates = match values {
            None | Some(Value::Null) => Vec::new(),
            Some(values) => vec![update_from_object(&self.inner.spec.initial, values)?],
        };
        self.update_state(config, updates, as_node).await
    }

    async fn bulk_update_state_json(
        &self,
        config: &RunnableConfig,
        supersteps: Vec<Vec<JsonStateUpdate>>,
    ) -> GraphResult<CheckpointConfig> {
        let typed = supersteps
            .into_iter()
            .map(|superstep| {
                superstep
                    .into_iter()
                    .map(|update| {
                        let updates = match update.values {
                            None | Some(Value::Null) => Vec::new(),
                            Some(values) => vec![update_from_object(&self.inner.spec.initial, values)?],
                        };
                        Ok(crate::state_api::StateUpdate { as_node: update.as_node, updates })
                    })
                    .collect::<GraphResult<Vec<_>>>()
            })
            .collect::<GraphResult<Vec<_>>>()?;
        self.bulk_update_state(config, typed).await
    }
}

#[cfg(test)]
mod tests;
