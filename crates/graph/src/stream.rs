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
