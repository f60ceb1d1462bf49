//! A thread's state as `get_state` and the debug stream show it: the snapshot of a checkpoint and the
//! tasks planned from it.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::checkpoint::{CheckpointConfig, CheckpointMetadata};
use crate::state::State;
use crate::types::Interrupt;

/// A task planned from a checkpoint, with what it did if it already ran.
#[derive(Debug, Clone, PartialEq)]
pub struct PregelTask {
    /// The task id.
    pub id: String,
    /// The node.
    pub name: String,
    /// Its path (`~__pregel_pull, <node>` or `~__pregel_push, <index>, False`).
    pub path: String,
    /// The error text, if it failed.
    pub error: Option<String>,
    /// Interrupts it raised and that are not answered yet.
    pub interrupts: Vec<Interrupt>,
    /// Its saved writes, as `(channel, value)`, if it finished.
    pub result: Option<Vec<(String, Value)>>,
    /// For a subgraph node: the subgraph's checkpoint address, or its whole state when asked for with
    /// [`get_state_with_subgraphs`](crate::CompiledGraph::get_state_with_subgraphs).
    pub state: Option<TaskState>,
}

impl PregelTask {
    /// The task as LangGraph's `checkpoints` and `debug` events list it: `{id, name, error, state}` when
    /// it failed, `{id, name, result, interrupts, state}` when it has a result (its writes by channel),
    /// else `{id, name, interrupts, state}`; `state` is a subgraph task's checkpoint address
    /// (`{"configurable": {"thread_id", "checkpoint_ns"}}`), else null.
    pub fn event_json(&self) -> Value {
        let state = match &self.state {
            Some(TaskState::Config(c)) => serde_json::json!({
                "configurable": {"thread_id": c.thread_id, "checkpoint_ns": c.checkpoint_ns}
            }),
            Some(TaskState::Snapshot(_)) | None => Value::Null,
        };
        let mut out = serde_json::json!({"id": self.id, "name": self.name, "state": state});
        let Value::Object(map) = &mut out else { return out };
        if let Some(error) = &self.error {
            map.insert("error".to_owned(), Value::String(error.clone()));
            return out;
        }
        if let Some(result) = self.result.as_ref().filter(|r| !r.is_empty()) {
            let result: serde_json::Map<String, Value> = result.iter().cloned().collect();
            map.insert("result".to_owned(), Value::Object(result));
        }
        map.insert("interrupts".to_owned(), serde_json::to_value(&self.interrupts).unwrap_or_default());
        out
    }
}

/// The state of a subgraph task.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskState {
    /// Where the subgraph's checkpoints are.
    Config(CheckpointConfig),
    /// The subgraph's state (its state type differs from the parent's, so values are JSON).
    Snapshot(Box<JsonSnapshot>),
}

/// A state snapshot with JSON values: a subgraph's, nested in its parent's, or what
/// [`get_state_json`](crate::CompiledGraph::get_state_json) returns for a graph of any state type.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonSnapshot {
    /// The values, one key per non-empty channel.
    pub values: Value,
    /// The nodes that run next.
    pub next: Vec<String>,
    /// The checkpoint's address.
    pub config: Option<CheckpointConfig>,
    /// The checkpoint it was made from.
    pub parent_config: Option<CheckpointConfig>,
    /// The checkpoint's metadata.
    pub metadata: Option<CheckpointMetadata>,
    /// When it was made.
    pub created_at: Option<String>,
    /// The planned tasks.
    pub tasks: Vec<PregelTask>,
    /// Unanswered interrupts.
    pub interrupts: Vec<Interrupt>,
}

impl JsonSnapshot {
    /// A typed snapshot with its values as JSON.
    pub fn from_typed<S: State>(snapshot: StateSnapshot<S>) -> Self {
        Self {
            values: crate::state::state_json(&snapshot.values),
            next: snapshot.next,
            config: snapshot.config,
            parent_config: snapshot.parent_config,
            metadata: snapshot.metadata,
            created_at: snapshot.created_at,
            tasks: snapshot.tasks,
            interrupts: snapshot.interrupts,
        }
    }

    /// LangGraph's `checkpoint_map` of [`config`](Self::config): see [`StateSnapshot::checkpoint_map`].
    pub fn checkpoint_map(&self) -> Option<BTreeMap<String, String>> {
        checkpoint_map(self.config.as_ref(), self.metadata.as_ref())
    }

    /// LangGraph's `checkpoint_map` of [`parent_config`](Self::parent_config).
    pub fn parent_checkpoint_map(&self) -> Option<BTreeMap<String, String>> {
        checkpoint_map(self.parent_config.as_ref(), self.metadata.as_ref())
    }
}

impl<S> StateSnapshot<S> {
    /// LangGraph's `checkpoint_map` of [`config`](Self::config), for a subgraph's snapshot: the checkpoint
    /// of each enclosing graph (the metadata's `parents`) and this one, by namespace. `None` at the root
    /// (no parents) or without a checkpoint. weft keeps it out of [`CheckpointConfig`], whose namespace and
    /// id address the checkpoint alone.
    pub fn checkpoint_map(&self) -> Option<BTreeMap<String, String>> {
        checkpoint_map(self.config.as_ref(), self.metadata.as_ref())
    }

    /// LangGraph's `checkpoint_map` of [`parent_config`](Self::parent_config) (the same parents, and the
    /// parent checkpoint under this namespace).
    pub fn parent_checkpoint_map(&self) -> Option<BTreeMap<String, String>> {
        checkpoint_map(self.parent_config.as_ref(), self.metadata.as_ref())
    }
}

/// `parents` with `config`'s checkpoint added under its namespace, as LangGraph patches a snapshot's
/// configs; `None` without parents or a checkpoint id.
fn checkpoint_map(
    config: Option<&CheckpointConfig>,
    metadata: Option<&CheckpointMetadata>,
) -> Option<BTreeMap<String, String>> {
    let parents = &metadata?.parents;
    let config = config?;
    if parents.is_empty() {
        return None;
    }
    let mut map = parents.clone();
    map.insert(config.checkpoint_ns.clone(), config.checkpoint_id.clone()?);
    Some(map)
}

/// A thread's state at one checkpoint.
#[derive(Debug, Clone)]
pub struct StateSnapshot<S> {
    /// The state values.
    pub values: S,
    /// The nodes that run next.
    pub next: Vec<String>,
    /// The checkpoint's address (`None` for a thread with no checkpoint).
    pub config: Option<CheckpointConfig>,
    /// The checkpoint's metadata.
    pub metadata: Option<CheckpointMetadata>,
    /// When it was made.
    pub created_at: Option<String>,
    /// The checkpoint it was made from.
    pub parent_config: Option<CheckpointConfig>,
    /// The tasks planned from it.
    pub tasks: Vec<PregelTask>,
    /// Unanswered interrupts.
    pub interrupts: Vec<Interrupt>,
}
