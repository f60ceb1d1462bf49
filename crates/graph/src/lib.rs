//! # weft-graph
//!
//! The Pregel engine of weft, in progress: state channels and their write semantics ([`State`]), control
//! values ([`Send`], [`Command`], [`Interrupt`]) and the checkpoint model ([`checkpoint`]). The builder and
//! the superstep loop are being added.

pub mod branch;
pub mod builder;
pub mod checkpoint;
pub mod compiled;
pub mod draw;
pub mod error;
pub mod node;
mod pregel;
pub mod retry;
pub mod runtime;
pub mod state;
pub mod stream;
pub mod types;

pub use branch::{Branch, IntoRoutes, PathMap, Route};
pub use builder::{NodeConfig, StateGraph};
pub use compiled::{
    CompileConfig, CompiledGraph, DEFAULT_GRAPH_RECURSION_LIMIT, Durability, GraphInput, GraphOutput,
    IntoGraphInput, RunOptions,
};
pub use draw::{CurveStyle, DrawEdge, DrawNode, DrawableGraph, MermaidOptions, NodeStyles};
pub use error::{GraphError, GraphResult};
pub use node::{IntoNode, IntoNodeOutput, NodeOutput};
pub use retry::RetryPolicy;
pub use runtime::{ExecutionInfo, GraphInterrupt, Runtime};
pub use state::{ChannelKind, ChannelSet, ChannelSpec, State, UpdateError};
pub use stream::{StreamData, StreamMode, StreamPart};
pub use types::{Command, CommandGraph, END, Goto, Interrupt, Payload, Resume, START, Send};
