//! # weft-graph
//!
//! The Pregel engine of weft, in progress: state channels and their write semantics ([`State`]), control
//! values ([`Send`], [`Command`], [`Interrupt`]), checkpoints ([`checkpoint`]: the [`Checkpointer`] trait,
//! [`InMemorySaver`], retention, a conformance suite for backends) and long-term memory ([`store`]: the
//! [`Store`] trait, [`InMemoryStore`] with vector search and TTLs, a conformance suite). The builder and
//! the superstep loop are being added.

pub mod branch;
pub mod checkpoint;
pub mod error;
pub mod node;
pub mod retry;
pub mod runtime;
pub mod state;
pub mod store;
pub mod types;

pub use branch::{Branch, IntoRoutes, PathMap, Route};
pub use checkpoint::{
    Checkpoint, CheckpointConfig, CheckpointError, CheckpointMetadata, CheckpointSource, CheckpointTuple,
    Checkpointer, InMemorySaver, ListOptions, PendingWrite, RetentionPolicy, get_next_version,
};
pub use error::{GraphError, GraphResult};
pub use node::{IntoNode, IntoNodeOutput, NodeOutput};
pub use retry::RetryPolicy;
pub use runtime::{ExecutionInfo, GraphInterrupt, Runtime};
pub use state::{ChannelKind, ChannelSet, ChannelSpec, State, UpdateError};
pub use store::{InMemoryStore, IndexConfig, Item, SearchItem, Store, StoreError};
pub use types::{Command, CommandGraph, END, Goto, Interrupt, Payload, Resume, START, Send};
