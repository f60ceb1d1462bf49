//! Graph stream chunks as LangGraph's server sends them: event names (`mode` or `mode|ns`) and data in
//! the shapes of its SSE events, messages as LangChain's dicts.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use weft_graph::checkpoint::CheckpointConfig;
use weft_graph::{CheckpointEvent, Interrupt, JsonStreamData, JsonStreamPart, PregelTask, ToolEvent};
use weft_runnable_core::Message;
use weft_runnable_core::runnable::Merge as _;

use super::modes::Modes;

const MESSAGE_TYPES: [&str; 6] = ["human", "ai", "tool", "system", "AIMessageChunk", "remove"];

/// An interrupt as streamed: `{"value", "id", "response_schema"}`.
pub(crate) fn interrupt_json(interrupt: &Interrupt) -> Value {
    json!({"value": interrupt.value, "id": interrupt.id, "response_schema": null})
}

/// An interrupt as threads and states show it: `{"id", "value"}`.
pub(crate) fn interrupt_record(interrupt: &Interrupt) -> Value {
    json!({"id": interrupt.id, "value": interrupt.value})
}

/// A message as LangChain's `model_dump()` writes it: every field present, in LangChain's order. `chunk`
/// gives the `AIMessageChunk` form of an AI message.
pub(crate) fn message_dict(message: &Value, chunk: bool) -> Value {
    let Value::Object(source) = message else { return message.clone() };
    let kind = source.get("type").and_then(Value::as_str).unwrap_or_default();
    let kind = if chunk && kind == "ai" { "AIMessageChunk" } else { kind };
    let mut out = Map::new();
    let take = |out: &mut Map<String, Value>, key: &str, default: Value| {
        out.insert(key.to_owned(), source.get(key).cloned().unwrap_or(default));
    };
    take(&mut out, "content", json!(""));
    take(&mut out, "additional_kwargs", json!({}));
    take(&mut out, "response_metadata", json!({}));
    out.insert("type".to_owned(), json!(kind));
    take(&mut out, "name", Value::Null);
    take(&mut out, "id", Value::Null);
    match kind {
        "ai" | "AIMessageChunk" => {
            take(&mut out, "tool_calls", json!([]));
            take(&mut out, "invalid_tool_calls", json!([]));
            take(&mut out, "usage_metadata", Value::Null);
            if kind == "AIMessageChunk" {
                take(&mut out, "tool_call_chunks", json!([]));
                take(&mut out, "chunk_position", Value::Null);
            }
        }
        "tool" => {
            take(&mut out, "tool_call_id", json!(""));
            take(&mut out, "artifact", Value::Null);
            take(&mut out, "status", json!("success"));
        }
        _ => {}
    }
    for (key, value) in source {
        if !out.contains_key(key) {
            out.insert(key.clone(), value.clone());
        }
    }
    Value::Object(out)
}

fn is_message(value: &Value) -> bool {
    value.get("content").is_some()
        && value.get("type").and_then(Value::as_str).is_some_and(|t| MESSAGE_TYPES.contains(&t))
}

/// A state with the messages of its channels (a channel holding a message or a list of messages) in
/// LangChain's full dict form.
pub(crate) fn state_values(values: Value) -> Value {
    let Value::Object(map) = values else { return values };
    let map = map
        .into_iter()
        .map(|(key, value)| {
            let value = match value {
                Value::Array(items) if !items.is_empty() && items.iter().all(is_message) => {
                    Value::Array(items.iter().map(|m| message_dict(m, false)).collect())
                }
                v if is_message(&v) => message_dict(&v, false),
                v => v,
            };
            (key, value)
        })
        .collect();
    Value::Object(map)
}

/// `state` with `__interrupt__` added when `interrupts` is not empty (LangGraph's values at a pause).
pub(crate) fn values_with_interrupts(values: Value, interrupts: &[Interrupt]) -> Value {
    let mut values = state_values(values);
    if let (Value::Object(map), false) = (&mut values, interrupts.is_empty()) {
        map.insert("__interrupt__".to_owned(), interrupts.iter().map(interrupt_json).collect());
    }
    values
}

/// `{"thread_id", "checkpoint_ns", "checkpoint_id"}` of a checkpoint address.
pub(crate) fn checkpoint_address(config: &CheckpointConfig) -> Value {
    json!({
        "thread_id": config.thread_id,
        "checkpoint_ns": config.checkpoint_ns,
        "checkpoint_id": config.checkpoint_id,
    })
}

/// LangGraph's task path from weft's `~__pregel_pull, node` text: `["__pregel_pull", "node"]`, with
/// numbers and booleans as such.
pub(crate) fn task_path(path: &str) -> Value {
    path.trim_start_matches('~')
        .split(", ")
        .map(|part| match part {
            "True" => json!(true),
            "False" => json!(false),
            p => p.parse::<i64>().map_or_else(|_| json!(p), |n| json!(n)),
        })
        .collect()
}

/// The `tasks` of a checkpoint event, in LangGraph's form ([`PregelTask::event_json`]: a subgraph task's
/// `state`, a finished task's `result`, a failed one's `error`), interrupts as the server writes them.
fn checkpoint_tasks(tasks: &[PregelTask]) -> Value {
    tasks
        .iter()
        .map(|t| {
            let mut task = t.event_json();
            if let Some(interrupts) = task.get_mut("interrupts") {
                *interrupts = t.interrupts.iter().map(interrupt_json).collect();
            }
            task
        })
        .collect()
}

/// The `checkpoints` event of a saved checkpoint.
fn checkpoint_payload(event: &CheckpointEvent) -> Value {
    let configurable = |c: &CheckpointConfig| json!({"configurable": checkpoint_address(c)});
    json!({
        "config": configurable(&event.config),
        "parent_config": event.parent_config.as_ref().map(configurable),
        "values": state_values(event.values.clone()),
        "metadata": event.metadata,
        "next": event.next,
        "tasks": checkpoint_tasks(&event.tasks),
    })
}

/// A `debug` payload as the server sends it: checkpoint payloads also carry `checkpoint` and
/// `parent_checkpoint` addresses.
fn debug_payload(kind: &str, mut payload: Value) -> Value {
    if kind != "checkpoint" {
        return payload;
    }
    let address = |config: Option<&Value>| -> Value {
        match config.and_then(|c| c.get("configurable")) {
            Some(c) if c.get("checkpoint_id").is_some_and(|id| !id.is_null()) => c.clone(),
            _ => Value::Null,
        }
    };
    let checkpoint = address(payload.get("config"));
    let parent = address(payload.get("parent_config"));
    if let Value::Object(map) = &mut payload {
        if let Some(values) = map.remove("values") {
            map.insert("values".to_owned(), state_values(values));
        }
        map.insert("checkpoint".to_owned(), checkpoint);
        map.insert("parent_checkpoint".to_owned(), parent);
    }
    payload
}

/// A run event (`events` mode) as LangChain's `astream_events` v2 dict, its messages as LangChain's
/// dicts (a chat model's streamed chunks as `AIMessageChunk`s).
pub(crate) fn run_event(event: &weft_runnable_core::StreamEvent) -> Value {
    let mut value = serde_json::to_value(event).unwrap_or(Value::Null);
    // A chat model's chunks and reply are AI messages (serialized without their type).
    let model = event.event.starts_with("on_chat_model");
    let streamed = event.event == "on_chat_model_stream";
    if let Some(Value::Object(data)) = value.get_mut("data") {
        for key in ["chunk", "output"] {
            let Some(v) = data.get_mut(key) else { continue };
            if let (true, Value::Object(message)) = (model, &mut *v) {
                message.entry("type").or_insert_with(|| json!("ai"));
            }
            if is_message(v) {
                *v = message_dict(v, streamed && key == "chunk");
            } else if v.is_object() {
                *v = state_values(v.take());
            }
        }
    }
    value
}

/// A `tools` chunk as LangGraph's `tools` mode sends it; a finished call's tool message in LangChain's
/// dict form.
fn tool_event(event: &ToolEvent) -> Value {
    let mut data = event.to_json();
    if let Some(Value::Object(output)) = data.get_mut("output") {
        if output.contains_key("tool_call_id") && output.contains_key("content") {
            output.entry("type").or_insert_with(|| json!("tool"));
            let message = message_dict(&Value::Object(std::mem::take(output)), false);
            data["output"] = message;
        }
    }
    data
}

/// Turns a run's graph chunks into SSE events, keeping what the legacy `messages` mode accumulates.
#[derive(Debug)]
pub(crate) struct Wire {
    modes: Modes,
    subgraphs: bool,
    /// The run's metadata, shown on `tasks` events.
    metadata: Arc<Map<String, Value>>,
    /// Legacy `messages` mode: the message so far, by id.
    partial: HashMap<String, Message>,
}

impl Wire {
    pub(crate) fn new(modes: Modes, subgraphs: bool, metadata: Arc<Map<String, Value>>) -> Self {
        Self { modes, subgraphs, metadata, partial: HashMap::new() }
    }

    fn name(&self, mode: &str, ns: &[String]) -> String {
        if self.subgraphs && !ns.is_empty() { format!("{mode}|{}", ns.join("|")) } else { mode.to_owned() }
    }

    /// The events of one chunk (none when no asked-for mode takes it).
    pub(crate) fn events(&mut self, part: JsonStreamPart) -> Vec<(String, Value)> {
        let JsonStreamPart { ns, data } = part;
        let modes = self.modes;
        let one = |on: bool, mode: &str, value: Value| -> Vec<(String, Value)> {
            if on { vec![(self.name(mode, &ns), value)] } else { Vec::new() }
        };
        match data {
            JsonStreamData::Values { values, interrupts } => {
                one(modes.values, "values", values_with_interrupts(values, &interrupts))
            }
            JsonStreamData::Updates { node, updates, cached } => {
                let value = match updates.len() {
                    0 => Value::Null,
                    1 => updates.into_iter().next().map(state_values).unwrap_or(Value::Null),
                    _ => Value::Array(updates.into_iter().map(state_values).collect()),
                };
                let mut chunk = Map::new();
                chunk.insert(node, value);
                if cached {
                    chunk.insert("__metadata__".to_owned(), json!({"cached": true}));
                }
                one(modes.updates, "updates", Value::Object(chunk))
            }
            JsonStreamData::Interrupt(interrupts) => one(
                modes.updates,
                "updates",
                json!({"__interrupt__": interrupts.iter().map(interrupt_json).collect::<Vec<_>>()}),
            ),
            JsonStreamData::Returned { node, value } => {
                let mut chunk = Map::new();
                chunk.insert(node, value);
                one(modes.updates, "updates", Value::Object(chunk))
            }
            JsonStreamData::Custom { value, .. } => one(modes.custom, "custom", value),
            JsonStreamData::Tool(event) => one(modes.tools, "tools", tool_event(&event)),
            JsonStreamData::Checkpoint(event) => {
                one(modes.checkpoints, "checkpoints", checkpoint_payload(&event))
            }
            JsonStreamData::TaskStart { id, name, input, triggers, .. } => one(
                modes.tasks,
                "tasks",
                json!({"id": id, "name": name, "input": state_values(input), "triggers": triggers, "metadata": *self.metadata}),
            ),
            JsonStreamData::TaskResult { id, name, error, result, interrupts, .. } => {
                let result: Map<String, Value> = result.into_iter().collect();
                let value = json!({
                    "id": id,
                    "name": name,
                    "error": error,
                    "result": state_values(Value::Object(result)),
                    "interrupts": interrupts.iter().map(interrupt_json).collect::<Vec<_>>(),
                });
                one(modes.tasks, "tasks", value)
            }
            JsonStreamData::Debug { step, timestamp, kind, payload } => {
                let payload = debug_payload(&kind, payload);
                one(
                    modes.debug,
                    "debug",
                    json!({"step": step, "timestamp": timestamp, "type": kind, "payload": payload}),
                )
            }
            JsonStreamData::Message { chunk, metadata } => self.message(*chunk, metadata, &ns),
            _ => Vec::new(),
        }
    }

    /// A `messages` chunk: the `[message, metadata]` pair (`messages-tuple`), and the legacy
    /// `messages/metadata`, `messages/partial` and `messages/complete` events.
    fn message(
        &mut self,
        message: Message,
        metadata: Map<String, Value>,
        ns: &[String],
    ) -> Vec<(String, Value)> {
        // A streamed token is a chunk (an `AIMessageChunk`); a whole message, a node's or a model's that
        // did not stream, is sent as it is.
        let chunk = matches!(&message, Message::Ai(ai) if ai.is_chunk);
        let json = serde_json::to_value(&message).unwrap_or(Value::Null);
        let mut out = Vec::new();
        if self.modes.messages_tuple {
            out.push((self.name("messages", ns), json!([message_dict(&json, chunk), metadata])));
        }
        if self.modes.messages {
            let id = message.id().unwrap_or_default().to_owned();
            let merged = match (self.partial.remove(&id), &message) {
                (Some(Message::Ai(so_far)), Message::Ai(next)) if chunk => {
                    so_far.clone().merge(next.clone()).map(Message::Ai).unwrap_or(Message::Ai(so_far))
                }
                (Some(previous), _) if chunk => previous,
                (seen, _) => {
                    if seen.is_none() {
                        out.push((
                            "messages/metadata".to_owned(),
                            json!({ id.clone(): {"metadata": metadata} }),
                        ));
                    }
                    message.clone()
                }
            };
            let name = if chunk { "messages/partial" } else { "messages/complete" };
            // The tokens so far, or the whole message, as one AI message (not a chunk).
            let mut shown = merged.clone();
            if let Message::Ai(ai) = &mut shown {
                ai.is_chunk = false;
            }
            let whole = serde_json::to_value(&shown).unwrap_or(Value::Null);
            out.push((name.to_owned(), json!([message_dict(&whole, false)])));
            self.partial.insert(id, merged);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_events_are_langgraphs_with_the_tool_message_as_a_dict() {
        let started = ToolEvent::Started {
            tool_call_id: "c".into(),
            tool_name: "add".into(),
            input: Some(json!({"a": 1})),
        };
        assert_eq!(
            tool_event(&started),
            json!({"event": "tool-started", "tool_call_id": "c", "tool_name": "add", "input": {"a": 1}})
        );
        let output = json!({"content": "5", "tool_call_id": "c", "name": "add", "status": "success"});
        let finished = tool_event(&ToolEvent::Finished { tool_call_id: "c".into(), output });
        assert_eq!(
            finished["output"],
            json!({"content": "5", "additional_kwargs": {}, "response_metadata": {}, "type": "tool", "name": "add",
                   "id": null, "tool_call_id": "c", "artifact": null, "status": "success"})
        );
        let keys: Vec<&String> = finished["output"].as_object().unwrap().keys().collect();
        assert_eq!(keys[3], "type", "LangChain's order");
        let error = tool_event(&ToolEvent::Error { tool_call_id: "c".into(), message: "boom".into() });
        assert_eq!(error, json!({"event": "tool-error", "tool_call_id": "c", "message": "boom"}));
    }

    #[test]
    fn messages_get_every_langchain_field_in_order() {
        let dict = message_dict(&json!({"type": "ai", "content": "hi", "id": "x"}), true);
        let keys: Vec<&String> = dict.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "content",
                "additional_kwargs",
                "response_metadata",
                "type",
                "name",
                "id",
                "tool_calls",
                "invalid_tool_calls",
                "usage_metadata",
                "tool_call_chunks",
                "chunk_position"
            ]
        );
        assert_eq!(dict["type"], "AIMessageChunk");
    }

    #[test]
    fn task_paths_become_lists() {
        assert_eq!(task_path("~__pregel_pull, node_b"), json!(["__pregel_pull", "node_b"]));
        assert_eq!(task_path("~__pregel_push, 0, False"), json!(["__pregel_push", 0, false]));
    }

    #[test]
    fn values_at_a_pause_carry_the_interrupts() {
        let i = Interrupt { value: json!({"q": 1}), id: "abc".into() };
        let v = values_with_interrupts(json!({"items": []}), &[i]);
        assert_eq!(
            v,
            json!({"items": [], "__interrupt__": [{"value": {"q": 1}, "id": "abc", "response_schema": null}]})
        );
    }

    #[test]
    fn a_functional_task_return_is_an_updates_event_keyed_by_the_task() {
        let mut wire = Wire::new(Modes { updates: true, ..Modes::default() }, false, Arc::default());
        let part = JsonStreamPart {
            ns: Vec::new(),
            data: JsonStreamData::Returned { node: "write_essay".into(), value: json!("an essay") },
        };
        assert_eq!(wire.events(part), vec![("updates".to_owned(), json!({"write_essay": "an essay"}))]);
        let mut quiet = Wire::new(Modes { values: true, ..Modes::default() }, false, Arc::default());
        let part = JsonStreamPart {
            ns: Vec::new(),
            data: JsonStreamData::Returned { node: "write_essay".into(), value: json!(1) },
        };
        assert!(quiet.events(part).is_empty());
    }

    #[test]
    fn subgraph_events_are_named_with_their_namespace() {
        let modes = Modes { custom: true, ..Modes::default() };
        let mut wire = Wire::new(modes, true, Arc::default());
        let part = JsonStreamPart {
            ns: vec!["inner:1".into()],
            data: JsonStreamData::Custom { node: "x".into(), value: json!(1) },
        };
        assert_eq!(wire.events(part), vec![("custom|inner:1".to_owned(), json!(1))]);
    }
}
