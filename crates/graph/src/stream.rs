//! Stream modes and the chunks a graph run yields.

use serde_json::{Map, Value};
use weft_runnable_core::Message;

use crate::checkpoint::CheckpointConfig;
use crate::state::State;
use crate::types::Interrupt;

/// What a run streams; several modes can be asked for at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StreamMode {
    /// The whole state after every superstep.
    Values,
    /// What each node wrote, as it finishes.
    Updates,
    /// Tokens of chat models called inside nodes, with the node's metadata.
    Messages,
    /// Values nodes send through [`Runtime::write`](crate::Runtime::write).
    Custom,
    /// Each checkpoint as it is saved.
    Checkpoints,
    /// Task starts and results.
    Tasks,
    /// Checkpoints and tasks, with step and timestamp.
    Debug,
}

/// One chunk of a graph stream.
#[derive(Debug, Clone)]
pub struct StreamPart<S: State> {
    /// The subgraph namespace the chunk comes from (empty for the root graph).
    pub ns: Vec<String>,
    /// The chunk.
    pub data: StreamData<S>,
}

/// The payload of a stream chunk, by mode.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum StreamData<S: State> {
    /// `values`: the state after a superstep.
    Values(S),
    /// `updates`: the writes of one finished task.
    Updates {
        /// The node.
        node: String,
        /// Its updates (empty when it wrote no state; several when it wrote a key more than once).
        updates: Vec<S::Update>,
        /// Whether the writes were reused (saved before a resume, or a cache hit) instead of computed.
        cached: bool,
    },
    /// `updates`: the run paused; empty for a static breakpoint.
    Interrupt(Vec<Interrupt>),
    /// `values` of a subgraph (its state type differs from the parent's, so it comes as JSON); the chunk's
    /// `ns` names the subgraph. Only when the run streams subgraphs.
    SubgraphValues(Value),
    /// `updates` of a subgraph node, as JSON; the chunk's `ns` names the subgraph.
    SubgraphUpdates {
        /// The subgraph's node.
        node: String,
        /// Its updates as JSON objects.
        updates: Vec<Value>,
        /// Whether the writes were reused.
        cached: bool,
    },
    /// `messages`: a token of a chat model called inside a node (an AI message chunk), or a whole message a
    /// node wrote that was not streamed token by token (de-duplicated by id), with the node's metadata.
    Message {
        /// The chunk or message.
        chunk: Box<Message>,
        /// `langgraph_node`, `langgraph_step`, ... plus the config's metadata.
        metadata: Map<String, Value>,
    },
    /// `custom`: a value written by a node.
    Custom {
        /// The node that wrote it.
        node: String,
        /// The value.
        value: Value,
    },
    /// `checkpoints`: a saved checkpoint.
    Checkpoint {
        /// Its address.
        config: CheckpointConfig,
        /// Its step.
        step: i64,
        /// The state it holds.
        values: Value,
        /// The nodes it will run next.
        next: Vec<String>,
    },
    /// `tasks`: a task started.
    TaskStart {
        /// The task id.
        id: String,
        /// The node.
        name: String,
        /// Its input as JSON.
        input: Value,
        /// The step.
        step: i64,
    },
    /// `tasks`: a task finished.
    TaskResult {
        /// The task id.
        id: String,
        /// The node.
        name: String,
        /// The error text, if it failed.
        error: Option<String>,
        /// The writes as `(channel, value)` pairs.
        result: Vec<(String, Value)>,
        /// Interrupts it raised.
        interrupts: Vec<Interrupt>,
        /// The step.
        step: i64,
    },
}

/// The set of requested modes, as bits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Modes(u16);

impl Modes {
    pub(crate) fn from_slice(modes: &[StreamMode]) -> Self {
        let mut bits = 0u16;
        for m in modes {
            bits |= Self::bit(*m);
        }
        Self(bits)
    }

    fn bit(m: StreamMode) -> u16 {
        match m {
            StreamMode::Values => 1,
            StreamMode::Updates => 2,
            StreamMode::Messages => 4,
            StreamMode::Custom => 8,
            StreamMode::Checkpoints => 16,
            StreamMode::Tasks => 32,
            StreamMode::Debug => 64,
        }
    }

    pub(crate) fn has(self, m: StreamMode) -> bool {
        self.0 & Self::bit(m) != 0
    }

    pub(crate) fn tasks(self) -> bool {
        self.has(StreamMode::Tasks) || self.has(StreamMode::Debug)
    }

    pub(crate) fn checkpoints(self) -> bool {
        self.has(StreamMode::Checkpoints) || self.has(StreamMode::Debug)
    }
}

/// A stream chunk with the state type erased, passed from a subgraph run to its parent.
#[derive(Debug, Clone)]
pub(crate) enum ErasedData {
    Values(Value),
    Updates {
        node: String,
        updates: Vec<Value>,
        cached: bool,
    },
    Interrupt(Vec<Interrupt>),
    Message {
        chunk: Box<Message>,
        metadata: Map<String, Value>,
    },
    Custom {
        node: String,
        value: Value,
    },
    Checkpoint {
        config: CheckpointConfig,
        step: i64,
        values: Value,
        next: Vec<String>,
    },
    TaskStart {
        id: String,
        name: String,
        input: Value,
        step: i64,
    },
    TaskResult {
        id: String,
        name: String,
        error: Option<String>,
        result: Vec<(String, Value)>,
        interrupts: Vec<Interrupt>,
        step: i64,
    },
}

impl ErasedData {
    /// Erases the state type of a chunk of a graph over `C` (`state` names its channels).
    pub(crate) fn erase<C: State>(data: StreamData<C>, state: &C) -> Self {
        let names = state.channels();
        let update_json = |u: &C::Update| -> Value {
            let mut map = Map::new();
            for (i, v) in state.update_to_json(u).unwrap_or_default() {
                map.insert(names[i].name.to_string(), v);
            }
            Value::Object(map)
        };
        match data {
            StreamData::Values(v) => ErasedData::Values(crate::pregel::task::state_json(&v)),
            StreamData::Updates { node, updates, cached } => {
                ErasedData::Updates { node, updates: updates.iter().map(update_json).collect(), cached }
            }
            StreamData::SubgraphValues(v) => ErasedData::Values(v),
            StreamData::SubgraphUpdates { node, updates, cached } => {
                ErasedData::Updates { node, updates, cached }
            }
            StreamData::Interrupt(i) => ErasedData::Interrupt(i),
            StreamData::Message { chunk, metadata } => ErasedData::Message { chunk, metadata },
            StreamData::Custom { node, value } => ErasedData::Custom { node, value },
            StreamData::Checkpoint { config, step, values, next } => {
                ErasedData::Checkpoint { config, step, values, next }
            }
            StreamData::TaskStart { id, name, input, step } => {
                ErasedData::TaskStart { id, name, input, step }
            }
            StreamData::TaskResult { id, name, error, result, interrupts, step } => {
                ErasedData::TaskResult { id, name, error, result, interrupts, step }
            }
        }
    }

    /// The chunk as one of a graph over `P` (state values and updates stay JSON).
    pub(crate) fn typed<P: State>(self) -> StreamData<P> {
        match self {
            ErasedData::Values(v) => StreamData::SubgraphValues(v),
            ErasedData::Updates { node, updates, cached } => {
                StreamData::SubgraphUpdates { node, updates, cached }
            }
            ErasedData::Interrupt(i) => StreamData::Interrupt(i),
            ErasedData::Message { chunk, metadata } => StreamData::Message { chunk, metadata },
            ErasedData::Custom { node, value } => StreamData::Custom { node, value },
            ErasedData::Checkpoint { config, step, values, next } => {
                StreamData::Checkpoint { config, step, values, next }
            }
            ErasedData::TaskStart { id, name, input, step } => {
                StreamData::TaskStart { id, name, input, step }
            }
            ErasedData::TaskResult { id, name, error, result, interrupts, step } => {
                StreamData::TaskResult { id, name, error, result, interrupts, step }
            }
        }
    }
}

/// Forwards erased chunks of a subgraph, with their namespace, to the parent run's stream.
pub(crate) type Forward = std::sync::Arc<dyn Fn(Vec<String>, ErasedData) + Send + Sync>;
