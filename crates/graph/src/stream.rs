//! Stream modes and the chunks a graph run yields.

use serde_json::{Map, Value, json};
use weft_runnable_core::Message;

use crate::checkpoint::{CheckpointConfig, CheckpointMetadata};
use crate::snapshot::PregelTask;
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
    /// The tool calls made inside nodes: each one's start, then its end or error (LangGraph's `tools`
    /// mode, its `StreamToolCallHandler` payloads).
    Tools,
}

/// One moment of a tool call, as the `tools` mode streams it. A tool stopped by control flow (an
/// interrupt) reports no end: it runs again on resume, as in LangGraph.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ToolEvent {
    /// `tool-started`: the call began.
    Started {
        /// The tool call it answers (the tool run's id when the call had none).
        tool_call_id: String,
        /// The tool.
        tool_name: String,
        /// Its arguments, when the tool's run reported them.
        input: Option<Value>,
    },
    /// `tool-finished`: the call's result (a tool message, a command, ...) as JSON.
    Finished {
        /// The tool call.
        tool_call_id: String,
        /// The result.
        output: Value,
    },
    /// `tool-error`: the call failed.
    Error {
        /// The tool call.
        tool_call_id: String,
        /// The error's text.
        message: String,
    },
}

impl ToolEvent {
    /// The event as LangGraph's `tools` mode writes it (`{"event": "tool-started", "tool_call_id", ...}`).
    pub fn to_json(&self) -> Value {
        match self {
            ToolEvent::Started { tool_call_id, tool_name, input } => {
                let mut data =
                    json!({"event": "tool-started", "tool_call_id": tool_call_id, "tool_name": tool_name});
                if let (Some(input), Some(d)) = (input, data.as_object_mut()) {
                    d.insert("input".to_owned(), input.clone());
                }
                data
            }
            ToolEvent::Finished { tool_call_id, output } => {
                json!({"event": "tool-finished", "tool_call_id": tool_call_id, "output": output})
            }
            ToolEvent::Error { tool_call_id, message } => {
                json!({"event": "tool-error", "tool_call_id": tool_call_id, "message": message})
            }
        }
    }
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
    /// `values`: the state after a superstep, at the start of a resumed run, or when a task pauses (then
    /// with the interrupts it raised; LangGraph's `__interrupt__` key, and its v2 parts' `interrupts`).
    Values {
        /// The state.
        state: S,
        /// The interrupts of the task that just paused; empty otherwise.
        interrupts: Vec<Interrupt>,
    },
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
    /// `updates`: what a functional-API task or entrypoint returned, as JSON (LangGraph's
    /// `{name: value}` chunk).
    Returned {
        /// The task or entrypoint.
        node: String,
        /// Its return value.
        value: Value,
    },
    /// `values` of a subgraph (its state type differs from the parent's, so it comes as JSON); the chunk's
    /// `ns` names the subgraph. Only when the run streams subgraphs.
    SubgraphValues {
        /// The subgraph's state as JSON.
        values: Value,
        /// The interrupts of the subgraph task that just paused; empty otherwise.
        interrupts: Vec<Interrupt>,
    },
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
    /// `tools`: a tool call inside a node started, finished or failed.
    Tool(ToolEvent),
    /// `checkpoints`: a saved checkpoint.
    Checkpoint(Box<CheckpointEvent>),
    /// `tasks`: a task started.
    TaskStart {
        /// The task id.
        id: String,
        /// The node.
        name: String,
        /// Its input as JSON.
        input: Value,
        /// The channels that triggered it (`branch:to:<node>`, a barrier, `__pregel_push`).
        triggers: Vec<String>,
        /// The step.
        step: i64,
    },
    /// `debug`: a task or checkpoint event wrapped as LangGraph's debug events are.
    Debug {
        /// The step.
        step: i64,
        /// When the event was made (RFC 3339).
        timestamp: String,
        /// `checkpoint`, `task` or `task_result`.
        kind: String,
        /// The event in LangGraph's JSON form.
        payload: Value,
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

/// A saved checkpoint, as the `checkpoints` mode announces it.
#[derive(Debug, Clone)]
pub struct CheckpointEvent {
    /// Its address.
    pub config: CheckpointConfig,
    /// The checkpoint it was made from (`None` for a thread's first).
    pub parent_config: Option<CheckpointConfig>,
    /// Its metadata.
    pub metadata: CheckpointMetadata,
    /// Its step.
    pub step: i64,
    /// The state it holds.
    pub values: Value,
    /// The nodes it will run next.
    pub next: Vec<String>,
    /// The tasks it plans, in `next`'s order.
    pub tasks: Vec<PregelTask>,
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
            StreamMode::Tools => 128,
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

/// A stream chunk with the state type erased: states and updates as JSON objects (one key per channel).
/// Subgraph runs pass their chunks to their parent in this form, and
/// [`ErasedGraph::stream_json`](crate::erased::ErasedGraph::stream_json) yields it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum JsonStreamData {
    /// `values`: the state after a superstep (see [`StreamData::Values`]).
    Values {
        /// The state, one key per channel that has a value.
        values: Value,
        /// The interrupts of the task that just paused; empty otherwise.
        interrupts: Vec<Interrupt>,
    },
    /// `updates`: the writes of one finished task.
    Updates {
        /// The node.
        node: String,
        /// Its updates, each a JSON object of channel writes.
        updates: Vec<Value>,
        /// Whether the writes were reused instead of computed.
        cached: bool,
    },
    /// `updates`: the run paused; empty for a static breakpoint.
    Interrupt(Vec<Interrupt>),
    /// `updates`: what a functional-API task or entrypoint returned (see [`StreamData::Returned`]).
    Returned {
        /// The task or entrypoint.
        node: String,
        /// Its return value.
        value: Value,
    },
    /// `messages`: a chat-model token or a whole message a node wrote, with the node's metadata.
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
    /// `tools`: a tool call inside a node started, finished or failed.
    Tool(ToolEvent),
    /// `checkpoints`: a saved checkpoint.
    Checkpoint(Box<CheckpointEvent>),
    /// `tasks`: a task started.
    TaskStart {
        /// The task id.
        id: String,
        /// The node.
        name: String,
        /// Its input as JSON.
        input: Value,
        /// The channels that triggered it.
        triggers: Vec<String>,
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
    /// `debug`: a task or checkpoint event in LangGraph's debug form.
    Debug {
        /// The step.
        step: i64,
        /// When the event was made (RFC 3339).
        timestamp: String,
        /// `checkpoint`, `task` or `task_result`.
        kind: String,
        /// The event in LangGraph's JSON form.
        payload: Value,
    },
}

impl JsonStreamData {
    /// The stream mode the chunk belongs to.
    pub fn mode(&self) -> StreamMode {
        match self {
            JsonStreamData::Values { .. } => StreamMode::Values,
            JsonStreamData::Updates { .. }
            | JsonStreamData::Interrupt(_)
            | JsonStreamData::Returned { .. } => StreamMode::Updates,
            JsonStreamData::Message { .. } => StreamMode::Messages,
            JsonStreamData::Custom { .. } => StreamMode::Custom,
            JsonStreamData::Tool(_) => StreamMode::Tools,
            JsonStreamData::Checkpoint(_) => StreamMode::Checkpoints,
            JsonStreamData::TaskStart { .. } | JsonStreamData::TaskResult { .. } => StreamMode::Tasks,
            JsonStreamData::Debug { .. } => StreamMode::Debug,
        }
    }
}

/// One chunk of [`ErasedGraph::stream_json`](crate::erased::ErasedGraph::stream_json).
#[derive(Debug, Clone)]
pub struct JsonStreamPart {
    /// The subgraph namespace the chunk comes from (empty for the root graph).
    pub ns: Vec<String>,
    /// The chunk.
    pub data: JsonStreamData,
}

impl JsonStreamData {
    /// Erases the state type of a chunk of a graph over `C` (`state` names its channels).
    pub(crate) fn erase<C: State>(data: StreamData<C>, state: &C) -> Self {
        let updates_json = |updates: &[C::Update]| -> Vec<Value> {
            let mut out = Vec::with_capacity(updates.len());
            for u in updates {
                let before = out.len();
                if state.update_chunks(u, &mut out).is_err() {
                    // An update that cannot be written as JSON shows as an empty object.
                    out.truncate(before);
                    out.push(Value::Object(Map::new()));
                }
            }
            out
        };
        match data {
            StreamData::Values { state, interrupts } => {
                JsonStreamData::Values { values: crate::state::state_json(&state), interrupts }
            }
            StreamData::Updates { node, updates, cached } => {
                JsonStreamData::Updates { node, updates: updates_json(&updates), cached }
            }
            StreamData::SubgraphValues { values, interrupts } => {
                JsonStreamData::Values { values, interrupts }
            }
            StreamData::SubgraphUpdates { node, updates, cached } => {
                JsonStreamData::Updates { node, updates, cached }
            }
            StreamData::Interrupt(i) => JsonStreamData::Interrupt(i),
            StreamData::Returned { node, value } => JsonStreamData::Returned { node, value },
            StreamData::Message { chunk, metadata } => JsonStreamData::Message { chunk, metadata },
            StreamData::Custom { node, value } => JsonStreamData::Custom { node, value },
            StreamData::Tool(event) => JsonStreamData::Tool(event),
            StreamData::Checkpoint(event) => JsonStreamData::Checkpoint(event),
            StreamData::TaskStart { id, name, input, triggers, step } => {
                JsonStreamData::TaskStart { id, name, input, triggers, step }
            }
            StreamData::TaskResult { id, name, error, result, interrupts, step } => {
                JsonStreamData::TaskResult { id, name, error, result, interrupts, step }
            }
            StreamData::Debug { step, timestamp, kind, payload } => {
                JsonStreamData::Debug { step, timestamp, kind, payload }
            }
        }
    }

    /// The chunk as one of a graph over `P` (state values and updates stay JSON).
    pub(crate) fn typed<P: State>(self) -> StreamData<P> {
        match self {
            JsonStreamData::Values { values, interrupts } => {
                StreamData::SubgraphValues { values, interrupts }
            }
            JsonStreamData::Updates { node, updates, cached } => {
                StreamData::SubgraphUpdates { node, updates, cached }
            }
            JsonStreamData::Interrupt(i) => StreamData::Interrupt(i),
            JsonStreamData::Returned { node, value } => StreamData::Returned { node, value },
            JsonStreamData::Message { chunk, metadata } => StreamData::Message { chunk, metadata },
            JsonStreamData::Custom { node, value } => StreamData::Custom { node, value },
            JsonStreamData::Tool(event) => StreamData::Tool(event),
            JsonStreamData::Checkpoint(event) => StreamData::Checkpoint(event),
            JsonStreamData::TaskStart { id, name, input, triggers, step } => {
                StreamData::TaskStart { id, name, input, triggers, step }
            }
            JsonStreamData::TaskResult { id, name, error, result, interrupts, step } => {
                StreamData::TaskResult { id, name, error, result, interrupts, step }
            }
            JsonStreamData::Debug { step, timestamp, kind, payload } => {
                StreamData::Debug { step, timestamp, kind, payload }
            }
        }
    }
}

/// A task or checkpoint event as a `debug` chunk (`None` for other chunks).
pub(crate) fn debug_event<S: State>(data: &StreamData<S>) -> Option<StreamData<S>> {
    let configurable = |c: &CheckpointConfig| serde_json::json!({"configurable": c});
    let (step, kind, payload) = match data {
        StreamData::TaskStart { id, name, input, triggers, step } => {
            (*step, "task", serde_json::json!({"id": id, "name": name, "input": input, "triggers": triggers}))
        }
        StreamData::TaskResult { id, name, error, result, interrupts, step } => {
            let result: Map<String, Value> = result.iter().cloned().collect();
            let payload = serde_json::json!({"id": id, "name": name, "error": error, "result": result, "interrupts": interrupts});
            (*step, "task_result", payload)
        }
        StreamData::Checkpoint(event) => {
            let CheckpointEvent { config, parent_config, metadata, step, values, next, tasks } = &**event;
            let tasks: Vec<Value> = tasks.iter().map(PregelTask::event_json).collect();
            let payload = serde_json::json!({
                "config": configurable(config),
                "parent_config": parent_config.as_ref().map(configurable),
                "values": values,
                "metadata": metadata,
                "next": next,
                "tasks": tasks,
            });
            (*step, "checkpoint", payload)
        }
        _ => return None,
    };
    let timestamp = crate::checkpoint::stamp::now_rfc3339();
    Some(StreamData::Debug { step, timestamp, kind: kind.to_owned(), payload })
}

/// Forwards erased chunks of a subgraph, with their namespace, to the parent run's stream.
pub(crate) type Forward = std::sync::Arc<dyn Fn(Vec<String>, JsonStreamData) + Send + Sync>;
