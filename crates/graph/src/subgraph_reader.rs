//! The reader of a subgraph's state, for a graph that does not know the subgraph's state type: nested
//! `get_state`, and the state calls a parent hands to the subgraph its `checkpoint_ns` names. Compiled
//! graphs implement it (`subgraph/reader.rs`); nodes, node options and the engine hold it.

use std::any::Any;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;

use crate::checkpoint::{CheckpointConfig, Checkpointer, ListOptions};
use crate::error::GraphResult;
use crate::snapshot::{JsonSnapshot, TaskState};

/// Reads and writes a subgraph's state without knowing its state type (for nested `get_state`, and for
/// the state calls a parent hands to the subgraph named by a config's `checkpoint_ns`).
///
/// `lent` is the parent's checkpointer: a subgraph keeps its checkpoints there unless it has one of its
/// own (none for [`SubgraphCheckpoints::Never`](crate::compiled::SubgraphCheckpoints::Never)).
pub trait SubgraphStateReader: std::marker::Send + Sync {
    /// The subgraph's state for a parent task: its address, and its live snapshot as JSON when
    /// `nested` is set. `None` when the subgraph keeps no checkpoints.
    fn read_state<'a>(
        &'a self,
        parent_saver: Option<Arc<dyn Checkpointer>>,
        thread_id: String,
        task_ns: String,
        node_ns: String,
        nested: bool,
    ) -> BoxFuture<'a, GraphResult<Option<TaskState>>>;

    /// The state at `address` as `get_state` shows it, values as JSON (with subgraph snapshots nested
    /// when `subgraphs` is set).
    fn state_json<'a>(
        &'a self,
        lent: Option<Arc<dyn Checkpointer>>,
        address: CheckpointConfig,
        subgraphs: bool,
    ) -> BoxFuture<'a, GraphResult<JsonSnapshot>>;

    /// The checkpoints at `address`, newest first, as `get_state_history` shows them, values as JSON.
    fn history_json<'a>(
        &'a self,
        lent: Option<Arc<dyn Checkpointer>>,
        address: CheckpointConfig,
        options: ListOptions,
    ) -> BoxFuture<'a, GraphResult<Vec<JsonSnapshot>>>;

    /// `update_state` with `values` a JSON object keyed by channel name; returns the new checkpoint's
    /// address.
    fn update_json<'a>(
        &'a self,
        lent: Option<Arc<dyn Checkpointer>>,
        address: CheckpointConfig,
        values: Value,
        as_node: Option<String>,
    ) -> BoxFuture<'a, GraphResult<CheckpointConfig>>;

    /// The subgraph node `node` runs: a compiled graph added as the node, or the first one the node's
    /// function called (once it has run in this process).
    fn subgraph(&self, node: &str) -> Option<Arc<dyn SubgraphStateReader>>;

    /// This reader as a shared trait object.
    fn shared(&self) -> Arc<dyn SubgraphStateReader>;

    /// The graph itself, so that a parent with the same state type can call it typed
    /// (`downcast_ref::<CompiledGraph<S>>()`).
    fn as_any(&self) -> &dyn Any;

    /// The graph's name, when it has one (a compiled graph's; for debug output).
    fn graph_name(&self) -> Option<&str> {
        None
    }

    /// The graph as an opaque handle for the user API, which knows what it holds: for a compiled graph,
    /// its JSON-facing form (read it with
    /// [`ErasedSubgraph::erased`](crate::erased::ErasedSubgraph::erased)). `None` by default.
    fn erased_handle(&self) -> Option<Box<dyn Any + Send>> {
        None
    }
}
