//! What users see, as JSON in the Python half's shapes: states and updates ([`Observe`]), messages in a
//! compact form, snapshots, interrupts, checkpoint addresses, errors by name.

use serde_json::{Map, Value, json};
use weft::graph::checkpoint::{CheckpointConfig, CheckpointMetadata};
use weft::graph::func::{FuncState, FuncValue};
use weft::graph::{
    GraphError, Interrupt, JsonSnapshot, JsonState, MessagesState, PregelTask, State, StateSnapshot,
    TaskState,
};

/// A state whose values and updates the suite can print.
pub(crate) trait Observe: State {
    /// The state as LangGraph's dict: one key per channel that has a value.
    fn values(&self) -> Value;
    /// An update as LangGraph's dict of writes.
    fn update_json(update: &Self::Update) -> Value;
    /// The state as a snapshot and a `values` chunk show it (every channel; a run's output may show
    /// fewer).
    fn snapshot_values(&self) -> Value {
        self.values()
    }
}

impl Observe for weft::agents::agent::AgentState {
    /// A run's output: the output channels (LangChain's output schema); streams show every channel.
    fn values(&self) -> Value {
        compact(self.output_json())
    }

    fn update_json(update: &Self::Update) -> Value {
        compact(update.to_json())
    }

    fn snapshot_values(&self) -> Value {
        compact(self.to_json_value())
    }
}

impl Observe for JsonState {
    fn values(&self) -> Value {
        compact(self.to_json())
    }

    fn update_json(update: &Self::Update) -> Value {
        let mut out = Map::new();
        for (key, value) in update.writes() {
            out.insert(key.clone(), compact(value.clone()));
        }
        Value::Object(out)
    }
}

impl Observe for MessagesState {
    fn values(&self) -> Value {
        compact(serde_json::to_value(self).unwrap_or(Value::Null))
    }

    fn update_json(update: &Self::Update) -> Value {
        let schema = MessagesState::default();
        let names = schema.channels();
        let mut out = Map::new();
        for (index, value) in schema.update_to_json(update).unwrap_or_default() {
            if let Some(spec) = names.get(index) {
                out.insert(spec.name.to_string(), compact(value));
            }
        }
        Value::Object(out)
    }
}

impl Observe for weft::agents::AgentState {
    /// The agent's state without its unset optional keys (LangGraph's dict state has no key until
    /// someone writes it).
    fn values(&self) -> Value {
        let mut values = compact(serde_json::to_value(self).unwrap_or(Value::Null));
        if let Value::Object(map) = &mut values {
            map.retain(|_, v| !v.is_null());
        }
        values
    }

    fn update_json(update: &Self::Update) -> Value {
        let schema = weft::agents::AgentState::default();
        let names = schema.channels();
        let mut out = Map::new();
        for (index, value) in schema.update_to_json(update).unwrap_or_default() {
            if let Some(spec) = names.get(index) {
                out.insert(spec.name.to_string(), compact(value));
            }
        }
        Value::Object(out)
    }
}

impl<I: FuncValue, O: FuncValue, P: FuncValue> Observe for FuncState<I, O, P> {
    /// A functional graph's state as LangGraph shows it: the bare last return value.
    fn values(&self) -> Value {
        compact(self.value().and_then(|v| serde_json::to_value(v).ok()).unwrap_or(Value::Null))
    }

    fn update_json(update: &Self::Update) -> Value {
        compact(update.value().and_then(|v| serde_json::to_value(v).ok()).unwrap_or(Value::Null))
    }
}

impl<T: weft::graph::root::RootValue, R: weft::graph::root::RootReducer<T>> Observe
    for weft::graph::root::RootState<T, R>
{
    /// A root-value state as LangGraph shows it: the bare value.
    fn values(&self) -> Value {
        compact(serde_json::to_value(&**self).unwrap_or(Value::Null))
    }

    /// The value a node wrote (the last one when it wrote several).
    fn update_json(update: &Self::Update) -> Value {
        compact(update.0.last().and_then(|v| serde_json::to_value(v).ok()).unwrap_or(Value::Null))
    }
}

const MESSAGE_TYPES: [&str; 5] = ["human", "ai", "tool", "system", "AIMessageChunk"];

/// Messages anywhere in `value` in the suite's compact form: type, content, id, tool calls, tool call id,
/// name.
pub(crate) fn compact(value: Value) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.into_iter().map(compact).collect()),
        Value::Object(map) => {
            let is_message =
                map.get("type").and_then(Value::as_str).is_some_and(|t| MESSAGE_TYPES.contains(&t))
                    && map.contains_key("content");
            if !is_message {
                return Value::Object(map.into_iter().map(|(k, v)| (k, compact(v))).collect());
            }
            let mut out = Map::new();
            for key in ["type", "content", "id"] {
                out.insert(key.to_owned(), map.get(key).cloned().unwrap_or(Value::Null));
            }
            if let Some(calls) = map.get("tool_calls").and_then(Value::as_array).filter(|c| !c.is_empty()) {
                let calls =
                    calls.iter().map(|c| json!({"name": c["name"], "args": c["args"], "id": c["id"]}));
                out.insert("tool_calls".to_owned(), Value::Array(calls.collect()));
            }
            if map.get("type").and_then(Value::as_str) == Some("tool") {
                out.insert(
                    "tool_call_id".to_owned(),
                    map.get("tool_call_id").cloned().unwrap_or(Value::Null),
                );
            }
            if let Some(name) = map.get("name").filter(|n| !n.is_null()) {
                out.insert("name".to_owned(), name.clone());
            }
            Value::Object(out)
        }
        other => other,
    }
}

/// An error as the suite's error record: the variant's name (the comparer maps it to the shared
/// vocabulary); a node timeout adds its node, which timeout fired and that timeout, in seconds.
pub(crate) fn error(err: &GraphError) -> Value {
    if let Some(t) = err.node_timeout() {
        let kind = match t.kind {
            weft::graph::TimeoutKind::Run => "run",
            weft::graph::TimeoutKind::Idle => "idle",
        };
        return json!({"type": "NodeTimeoutError", "node": t.node, "kind": kind, "timeout": t.timeout.as_secs_f64()});
    }
    // A node that refused its input (a middleware's ValueError in LangChain) keeps that kind.
    if let GraphError::Node { source: weft::Error::InvalidInput(_), .. } = err {
        return json!({"type": "NodeInvalidInput"});
    }
    let debug = format!("{err:?}");
    let name: String = debug.chars().take_while(char::is_ascii_alphanumeric).collect();
    json!({"type": name})
}

pub(crate) fn interrupts(list: &[Interrupt]) -> Value {
    Value::Array(list.iter().map(|i| json!({"value": i.value, "id": i.id})).collect())
}

pub(crate) fn config(c: Option<&CheckpointConfig>) -> Value {
    c.map_or(Value::Null, |c| json!({"checkpoint_ns": c.checkpoint_ns, "checkpoint_id": c.checkpoint_id}))
}

/// A snapshot's config: [`config`], with LangGraph's `checkpoint_map` when the snapshot is a subgraph's.
fn snapshot_config(
    c: Option<&CheckpointConfig>,
    map: Option<std::collections::BTreeMap<String, String>>,
) -> Value {
    let mut out = config(c);
    if let (Some(map), Some(obj)) = (map, out.as_object_mut()) {
        obj.insert("checkpoint_map".to_owned(), json!(map));
    }
    out
}

pub(crate) fn pairs(writes: &[(String, Value)]) -> Value {
    Value::Object(writes.iter().map(|(k, v)| (k.clone(), compact(v.clone()))).collect())
}

fn task(t: &PregelTask) -> Value {
    let mut out = json!({"id": t.id, "name": t.name, "interrupts": interrupts(&t.interrupts)});
    if t.error.is_some() {
        out["error"] = json!(true);
    }
    if let Some(result) = &t.result {
        out["result"] = match result.as_slice() {
            // An entrypoint's result is its return value alone: LangGraph shows it bare (a functional
            // graph's output channel is `__end__` itself, not a dict of channels).
            [(channel, value)] if channel == weft::graph::func::END_CHANNEL => compact(value.clone()),
            _ => pairs(result),
        };
    }
    match &t.state {
        Some(TaskState::Config(c)) => out["state"] = config(Some(c)),
        Some(TaskState::Snapshot(s)) => out["state"] = json_snapshot(s),
        None => {}
    }
    out
}

fn metadata(m: Option<&CheckpointMetadata>) -> Value {
    m.map_or(Value::Null, |m| json!({"source": m.source, "step": m.step, "parents": m.parents}))
}

fn json_snapshot(s: &JsonSnapshot) -> Value {
    json!({
        "values": compact(s.values.clone()),
        "next": s.next,
        "tasks": s.tasks.iter().map(task).collect::<Vec<_>>(),
        "interrupts": interrupts(&s.interrupts),
        "metadata": metadata(s.metadata.as_ref()),
        "config": snapshot_config(s.config.as_ref(), s.checkpoint_map()),
        "parent_config": snapshot_config(s.parent_config.as_ref(), s.parent_checkpoint_map()),
    })
}

/// A snapshot as the Python half prints `StateSnapshot`.
pub(crate) fn snapshot<S: Observe>(s: &StateSnapshot<S>) -> Value {
    json!({
        "values": s.values.snapshot_values(),
        "next": s.next,
        "tasks": s.tasks.iter().map(task).collect::<Vec<_>>(),
        "interrupts": interrupts(&s.interrupts),
        "metadata": metadata(s.metadata.as_ref()),
        "config": snapshot_config(s.config.as_ref(), s.checkpoint_map()),
        "parent_config": snapshot_config(s.parent_config.as_ref(), s.parent_checkpoint_map()),
    })
}
