//! Stream emission of a task's results: `updates` chunks and whole messages in `messages` mode.

use crate::pregel::run::Ctx;
use crate::pregel::sink::SendPart;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};
use weft_runnable_core::{EventPhase, EventSink, Message, RunKind, StreamEvent};

use crate::pregel::task::{Task, TaskKind, TaskWrites};
use crate::state::State;
use crate::stream::{StreamData, StreamMode, StreamPart, ToolEvent};

pub(crate) fn emit_update<S: State>(ctx: &Ctx<'_, S>, task: &Task<S>, writes: &TaskWrites<S>, cached: bool) {
    if task.kind == TaskKind::Start {
        return;
    }
    if let Some(sink) = ctx.sink.filter(|s| s.modes.has(StreamMode::Updates)) {
        if ctx.inner.spec.functional {
            // An entrypoint's chunk is its return value (its graph's `__end__` channel, named as END), as
            // LangGraph streams a functional graph's.
            let state = &ctx.inner.spec.initial;
            let end = state.channel_index(crate::types::END);
            let value = writes
                .updates
                .iter()
                .flat_map(|u| state.update_to_json(u).unwrap_or_default())
                .find(|(i, _)| Some(*i) == end)
                .map_or(Value::Null, |(_, v)| v);
            sink.send(StreamData::Returned { node: task.name.to_string(), value });
            return;
        }
        sink.send(StreamData::Updates {
            node: task.name.to_string(),
            updates: writes.updates.clone(),
            cached,
        });
    }
}

/// In `tasks` mode, a task's end: its error, its writes to state channels, or its interrupts.
pub(crate) fn emit_task_result<S: State>(
    ctx: &Ctx<'_, S>,
    state: &S,
    task: &Task<S>,
    error: Option<String>,
    writes: Option<&TaskWrites<S>>,
    interrupts: Vec<crate::types::Interrupt>,
    step: i64,
) {
    let Some(sink) = ctx.sink.filter(|s| s.modes.tasks() && task.kind != TaskKind::Start) else { return };
    let names = state.channels();
    let mut result = Vec::new();
    for u in writes.iter().flat_map(|w| &w.updates) {
        for (i, value) in state.update_to_json(u).unwrap_or_default() {
            if names[i].kind.is_tracked() {
                result.push((names[i].name.to_string(), value));
            }
        }
    }
    sink.send(StreamData::TaskResult {
        id: task.id.to_string(),
        name: task.name.to_string(),
        error,
        result,
        interrupts,
        step,
    });
}

/// Ids of the messages a stream sent in `messages` mode.
pub(crate) type StreamedIds = Arc<Mutex<HashSet<String>>>;

/// The metadata of a task's run and of the messages it writes, as LangGraph's: the config's metadata, the
/// scalar `configurable` values it does not already have (`thread_id`, ...; not an empty `checkpoint_ns`),
/// then the `langgraph_*` keys. The runs the task starts also get its `checkpoint_ns`
/// ([`with_task_ns`]).
pub(crate) fn task_metadata(
    config: &weft_runnable_core::RunnableConfig,
    name: &str,
    path: &str,
    task_ns: &str,
    step: i64,
    triggers: &[String],
) -> Map<String, Value> {
    let mut m = config.metadata.clone();
    for (key, value) in &config.configurable {
        let scalar = matches!(value, Value::String(_) | Value::Number(_) | Value::Bool(_));
        let empty_ns = key == "checkpoint_ns" && value.as_str() == Some("");
        if scalar && !empty_ns && !key.starts_with("__") && !m.contains_key(key) {
            m.insert(key.clone(), value.clone());
        }
    }
    m.insert("langgraph_step".to_owned(), json!(step));
    m.insert("langgraph_node".to_owned(), json!(name));
    m.insert("langgraph_triggers".to_owned(), json!(triggers));
    m.insert("langgraph_path".to_owned(), path_json(path));
    m.insert("langgraph_checkpoint_ns".to_owned(), json!(task_ns));
    m
}

/// A task path as LangGraph's metadata carries it: the tuple it is made from, as a JSON list
/// (`~__pregel_pull, model` is `["__pregel_pull", "model"]`; a `Send`'s `~__pregel_push, 0000000002,
/// False` is `["__pregel_push", 2, false]`; a call's path holds its parent task's path as a list).
pub(crate) fn path_json(path: &str) -> Value {
    if let Some(name) = path.strip_prefix("~__pregel_pull, ") {
        return json!(["__pregel_pull", name]);
    }
    let Some(rest) = path.strip_prefix("~__pregel_push, ") else { return json!(path) };
    let (rest, flag) = match (rest.strip_suffix(", False"), rest.strip_suffix(", True")) {
        (Some(rest), _) => (rest, false),
        (None, Some(rest)) => (rest, true),
        (None, None) => return json!(path),
    };
    let (parent, index) = match rest.rsplit_once(", ") {
        Some((parent, index)) if parent.starts_with('~') => (Some(parent), index),
        _ => (None, rest),
    };
    let Ok(index) = index.parse::<u64>() else { return json!(path) };
    match parent {
        Some(parent) => json!(["__pregel_push", path_json(parent), index, flag]),
        None => json!(["__pregel_push", index, flag]),
    }
}

/// The metadata of the runs a task starts (its chat models, its subgraphs): the task's own, with the task's
/// checkpoint namespace as `checkpoint_ns` unless it already has one (a subgraph's tasks keep the namespace
/// of the parent task that ran the subgraph), as langchain-core's `ensure_config` copies it from the
/// task's `configurable`.
pub(crate) fn with_task_ns(mut metadata: Map<String, Value>, ns: &str) -> Map<String, Value> {
    metadata.entry("checkpoint_ns").or_insert_with(|| json!(ns));
    metadata
}

/// In `messages` mode, sends the messages a task wrote that the stream did not send already (token by
/// token, or written by a subgraph's node) and that are not already in the state (LangGraph de-duplicates
/// by id the same way).
pub(crate) fn emit_whole_messages<S: State>(
    ctx: &Ctx<'_, S>,
    state: &S,
    task: &Task<S>,
    writes: &TaskWrites<S>,
    step: i64,
    triggers: &[String],
) {
    let Some(sink) = ctx.sink.filter(|s| s.modes.has(StreamMode::Messages)) else { return };
    if task.kind == TaskKind::Start {
        return;
    }
    for u in &writes.updates {
        let Ok(values) = state.update_to_json(u) else { continue };
        for (channel, value) in values {
            let value = match value {
                Value::Object(mut o) if o.contains_key("__overwrite__") => {
                    o.remove("__overwrite__").unwrap_or(Value::Null)
                }
                v => v,
            };
            let items = match value {
                Value::Array(items) => items,
                v @ Value::Object(_) => vec![v],
                _ => continue,
            };
            let mut existing: Option<HashSet<String>> = None;
            for item in items {
                let is_message =
                    item.get("type").or_else(|| item.get("role")).is_some() && item.get("content").is_some();
                if !is_message {
                    continue;
                }
                let Ok(message) = Message::from_like(item) else { continue };
                if let Some(id) = message.id() {
                    let present = existing.get_or_insert_with(|| message_ids(state, channel));
                    if present.contains(id) {
                        continue;
                    }
                    let Ok(mut seen) = sink.seen.lock() else { continue };
                    if !seen.insert(id.to_owned()) {
                        continue;
                    }
                }
                let own = crate::runtime::task_ns(&task.name, &task.id);
                let task_ns = if ctx.ns.is_empty() { own } else { format!("{}|{own}", ctx.ns) };
                let metadata = task_metadata(&ctx.config, &task.name, &task.path, &task_ns, step, triggers);
                sink.send(StreamData::Message { chunk: Box::new(message), metadata });
            }
        }
    }
}

/// Ids of the messages of a channel (empty when the channel holds no messages).
pub(crate) fn message_ids<S: State>(state: &S, channel: usize) -> HashSet<String> {
    let Ok(Some(Value::Array(items))) = state.channel_to_json(channel) else { return HashSet::new() };
    items.iter().filter_map(|m| m.get("id").and_then(Value::as_str).map(str::to_owned)).collect()
}

/// The event sink that turns a task's chat-model tokens into `messages` chunks.
pub(crate) fn messages_sink_for<S: State>(
    send: SendPart<S>,
    seen: StreamedIds,
    task_ns: String,
) -> EventSink {
    EventSink::new(move |event: StreamEvent| {
        if event.event != "on_chat_model_stream" {
            return;
        }
        // Tokens of models inside subgraphs belong to the subgraph's own tasks (whose namespace is longer).
        if event.metadata.get("langgraph_checkpoint_ns").and_then(Value::as_str) != Some(task_ns.as_str()) {
            return;
        }
        // A streamed chunk (`AIMessageChunk`), or the whole reply of a model that does not stream (`ai`).
        let Some(chunk @ Message::Ai(_)) = event.data.chunk.and_then(|c| serde_json::from_value(c).ok())
        else {
            return;
        };
        if let (Some(id), Ok(mut seen)) = (chunk.id().map(str::to_owned), seen.lock()) {
            seen.insert(id);
        }
        send(StreamPart {
            ns: Vec::new(),
            data: StreamData::Message { chunk: Box::new(chunk), metadata: event.metadata },
        });
    })
}

/// The event sink that turns a task's tool runs into `tools` chunks, as LangGraph's
/// `StreamToolCallHandler` does: a tool's start, then its end or its error, keyed by the tool call it
/// answers (its run id when the call had none). A tool stopped by control flow reports no end; tools
/// inside subgraphs belong to the subgraph's own tasks.
pub(crate) fn tools_sink_for<S: State>(send: SendPart<S>, task_ns: String) -> EventSink {
    EventSink::new(move |event: StreamEvent| {
        if event.kind != Some(RunKind::Tool)
            || event.metadata.get("langgraph_checkpoint_ns").and_then(Value::as_str) != Some(task_ns.as_str())
        {
            return;
        }
        let tool_call_id = event.tool_call_id.unwrap_or_else(|| event.run_id.to_string());
        let data = event.data;
        let tool = match event.phase {
            EventPhase::Start => {
                ToolEvent::Started { tool_call_id, tool_name: event.name, input: data.input }
            }
            EventPhase::End if data.error.is_none() => {
                ToolEvent::Finished { tool_call_id, output: data.output.unwrap_or(Value::Null) }
            }
            EventPhase::Error => ToolEvent::Error { tool_call_id, message: data.error.unwrap_or_default() },
            _ => return,
        };
        send(StreamPart { ns: Vec::new(), data: StreamData::Tool(tool) });
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_paths_are_langgraphs_lists() {
        assert_eq!(path_json("~__pregel_pull, model"), json!(["__pregel_pull", "model"]));
        assert_eq!(
            path_json("~__pregel_pull, a, b"),
            json!(["__pregel_pull", "a, b"]),
            "a name with a comma"
        );
        assert_eq!(path_json("~__pregel_pull, __start__"), json!(["__pregel_pull", "__start__"]));
        assert_eq!(path_json("~__pregel_push, 0000000002, False"), json!(["__pregel_push", 2, false]));
        assert_eq!(
            path_json("~__pregel_push, ~__pregel_pull, main, 0000000001, True"),
            json!(["__pregel_push", ["__pregel_pull", "main"], 1, true])
        );
        assert_eq!(path_json("odd"), json!("odd"));
    }
}
