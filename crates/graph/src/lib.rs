//! # weft-graph
//!
//! The Pregel engine of weft, in progress: state channels and their write semantics ([`State`]), control
//! values ([`Send`], [`Command`], [`Interrupt`]) and the checkpoint model ([`checkpoint`]). The builder and
//! the superstep loop are being added.

extern crate self as weft_graph;

pub mod branch;
pub mod builder;
pub mod checkpoint;
pub mod compiled;
pub mod error;
pub mod json_state;
pub mod messages;
pub mod node;
mod pregel;
pub mod retry;
pub mod runtime;
pub mod state;
pub mod state_api;
pub mod stream;
pub mod subgraph;
pub mod types;

pub use branch::{Branch, IntoRoutes, PathMap, Route};
pub use builder::{NodeConfig, StateGraph};
pub use compiled::{
    CompileConfig, CompiledGraph, DEFAULT_GRAPH_RECURSION_LIMIT, Durability, GraphInput, GraphOutput,
    IntoGraphInput, RunOptions,
};
pub use error::{GraphError, GraphResult};
pub use json_state::{JsonChannel, JsonState, JsonStateBuilder, JsonUpdate};
pub use messages::{Messages, MessagesState, MessagesStateUpdate, add_messages};
pub use node::{IntoNode, IntoNodeOutput, NodeOutput};
pub use retry::RetryPolicy;
pub use runtime::{ExecutionInfo, GraphInterrupt, Runtime};
pub use state::{ChannelKind, ChannelSet, ChannelSpec, Overwrite, State, UpdateError, append};
pub use state_api::{PregelTask, StateSnapshot};
pub use stream::{StreamData, StreamMode, StreamPart};
pub use types::{Command, CommandGraph, END, Goto, Interrupt, Payload, Resume, START, Send};
pub use weft_macros::State;
