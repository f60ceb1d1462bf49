//! # weft-graph
//!
//! The Pregel engine of weft: a [`StateGraph`] of nodes over a typed [`State`], compiled into a
//! [`CompiledGraph`] that runs in supersteps (nodes of a step run concurrently and see the state as of the
//! start of the step; their writes are applied together, in a deterministic order, through each channel's
//! reducer), with conditional edges, cycles, [`Send`] fan-out, [`Command`]s, interrupts and resumes,
//! checkpoints ([`checkpoint`]: the [`Checkpointer`] trait, [`InMemorySaver`], a conformance suite for
//! backends), time travel, subgraphs and long-term memory ([`store`]). [`func`] is LangGraph's functional API:
//! an `entrypoint` function run as a graph, and `task`s whose results a resumed run reuses.
//!
//! ```
//! use serde::{Deserialize, Serialize};
//! use weft_graph::{END, START, State, StateGraph};
//! # tokio_test::block_on(async {
//! #[derive(State, Debug, Clone, Default, Serialize, Deserialize)]
//! struct Counter {
//!     count: i64,
//!     #[state(append)]
//!     log: Vec<String>,
//! }
//!
//! let mut graph = StateGraph::<Counter>::new();
//! graph.add_node("inc", |s: Counter| Counter::update().count(s.count + 1).log(vec![format!("at {}", s.count)]));
//! graph.add_edge(START, "inc");
//! graph.add_conditional_edges("inc", |s: &Counter| if s.count < 3 { "inc" } else { END }, None);
//! let app = graph.compile().unwrap();
//! let out = app.invoke(Counter::update().count(0), &Default::default()).await.unwrap();
//! assert_eq!(out.value.count, 3);
//! assert_eq!(out.value.log, vec!["at 0", "at 1", "at 2"]);
//! # });
//! ```

extern crate self as weft_graph;

pub mod branch;
pub mod builder;
pub mod cache;
pub mod checkpoint;
pub mod compiled;
mod control;
pub mod draw;
pub mod erased;
pub mod error;
pub mod func;
pub mod json_state;
pub mod messages;
pub mod node;
mod node_input_fields;
mod parent_command;
mod pregel;
pub mod retry;
pub mod root;
pub mod runtime;
mod snapshot;
pub mod state;
pub mod state_api;
pub mod store;
pub mod stream;
pub mod subgraph;
mod subgraph_reader;
pub mod timeout;
mod topology;
pub mod types;

/// RFC 3339 timestamps in UTC with microseconds, as Python's `isoformat()` writes them.
pub mod time {
    pub use crate::store::time::{format_rfc3339, parse_rfc3339};
}

pub use branch::{Branch, Destinations, IntoRouter, IntoRoutes, PathMap, Route, RouteRef, Router};
pub use builder::{NodeConfig, NodeDefaults, StateGraph};
pub use cache::{CachePolicy, InMemoryCache, NodeCache};
pub use checkpoint::{
    Checkpoint, CheckpointConfig, CheckpointError, CheckpointErrorKind, CheckpointMetadata, CheckpointSource,
    CheckpointTuple, Checkpointer, ExpectedHead, InMemorySaver, ListOptions, PendingWrite, RetentionPolicy,
    get_next_version,
};
pub use compiled::{
    CompileConfig, CompiledGraph, DEFAULT_GRAPH_RECURSION_LIMIT, Durability, EndState, GraphInput,
    GraphOutput, IntoGraphInput, RunOptions, SubgraphCheckpoints, ThreadHead,
};
pub use control::{Progress, RunControl};
pub use draw::{CurveStyle, DrawEdge, DrawNode, DrawableGraph, MermaidOptions, NodeStyles, Xray};
pub use error::{GraphError, GraphResult, InvalidNodeReturn, NodeRef};
pub use json_state::{JsonChannel, JsonState, JsonStateBuilder, JsonUpdate};
pub use messages::{Messages, MessagesState, MessagesStateUpdate, add_messages};
pub use node::{BoxNode, IntoNode, IntoNodeOutput, NodeFn, NodeOutput};
pub use parent_command::ParentCommand;
pub use retry::RetryPolicy;
pub use root::RootState;
pub use runtime::{ExecutionInfo, GraphInterrupt, NodeError, Runtime};
pub use state::{ChannelKind, ChannelSet, ChannelSpec, Overwrite, State, UpdateError, append};
pub use state_api::{JsonSnapshot, PregelTask, StateSnapshot, StateUpdate, TaskState};
pub use store::{InMemoryStore, IndexConfig, Item, SearchItem, Store, StoreError};
pub use stream::{
    CheckpointEvent, JsonStreamData, JsonStreamPart, StreamData, StreamMode, StreamPart, ToolEvent,
};
pub use timeout::{NodeTimeoutError, RefreshOn, TimeoutKind, TimeoutPolicy, TimeoutPolicyError};
pub use types::{Command, CommandGraph, END, Goto, Interrupt, Payload, Resume, START, Send};
pub use weft_macros::{Destinations, State, node};

#[doc(hidden)]
pub mod __private {
    //! Re-exports used by weft's macros. Not a public API.
    pub use weft_runnable_core as core;
}
