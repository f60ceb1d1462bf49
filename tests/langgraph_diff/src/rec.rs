//! Records what a weft user observes, in the order it happens: invoke results (with `__interrupt__`),
//! stream chunks as `[mode, namespace, payload]` in LangGraph's payload shapes, snapshots, history and
//! saved checkpoints. Ids, timestamps and versions are left as they are: the comparer (xtask) normalises
//! both sides alike.

use futures::StreamExt as _;
use serde_json::{Map, Value, json};
use weft::RunnableConfig;
use weft::graph::checkpoint::CheckpointConfig;
use weft::graph::compiled::IntoGraphInput;
use weft::graph::{CompiledGraph, GraphOutput, ListOptions, RunOptions, StreamData, StreamMode};

pub(crate) use crate::observe::{Observe, error};
use crate::observe::{compact, config, interrupts, pairs, snapshot};

/// A thread's config, `thread_id` `tid`.
pub(crate) fn thread(tid: &str) -> RunnableConfig {
    RunnableConfig::default().with_configurable("thread_id", tid)
}

/// Records observations in order.
#[derive(Debug, Default)]
pub(crate) struct Rec {
    /// What was seen so far.
    pub(crate) obs: Vec<Value>,
}

impl Rec {
    /// Adds an observation.
    pub(crate) fn note(&mut self, value: Value) {
        self.obs.push(value);
    }

    /// `invoke`, recording the result (with `__interrupt__` when it paused) or the error.
    pub(crate) async fn invoke<S: Observe>(
        &mut self,
        app: &CompiledGraph<S>,
        input: impl IntoGraphInput<S>,
        cfg: &RunnableConfig,
    ) -> Option<GraphOutput<S>> {
        self.invoke_with(app, input, cfg, RunOptions::default()).await
    }

    /// [`Rec::invoke`] with run options.
    pub(crate) async fn invoke_with<S: Observe>(
        &mut self,
        app: &CompiledGraph<S>,
        input: impl IntoGraphInput<S>,
        cfg: &RunnableConfig,
        options: RunOptions,
    ) -> Option<GraphOutput<S>> {
        match app.invoke_with(input, cfg, options).await {
            Ok(out) => {
                let values = with_interrupts(out.value.values(), &out.interrupts);
                self.note(json!({"op": "invoke", "out": values}));
                Some(out)
            }
            Err(err) => {
                self.note(json!({"op": "invoke", "error": error(&err)}));
                None
            }
        }
    }

    /// Sorts the last recorded stream's results of parallel tasks within each step by mode, then by
    /// canonical JSON: its `updates` chunks and its `tasks` result chunks, in each run of chunks between
    /// two step marks (a `values` chunk, or a `tasks` chunk that starts a task). Parallel tasks report in
    /// the order they finish, which neither side fixes (LangGraph runs sync nodes on a thread pool).
    pub(crate) fn unorder_parallel_results(&mut self) {
        let Some(chunks) =
            self.obs.last_mut().and_then(|o| o.get_mut("chunks")).and_then(Value::as_array_mut)
        else {
            return;
        };
        for step in chunks.split_mut(step_mark) {
            step.sort_by_cached_key(result_key);
        }
    }

    /// `stream` in `modes`, recording every chunk as `[mode, namespace, payload]`.
    pub(crate) async fn stream<S: Observe>(
        &mut self,
        app: &CompiledGraph<S>,
        input: impl IntoGraphInput<S>,
        cfg: &RunnableConfig,
        modes: &[StreamMode],
        options: RunOptions,
    ) {
        let names: Vec<&str> = modes.iter().map(|m| mode_name(*m)).collect();
        let mut chunks = Vec::new();
        let mut failed = None;
        let mut parts = app.stream_with(input, cfg, modes, options);
        while let Some(part) = parts.next().await {
            let part = match part {
                Ok(part) => part,
                Err(err) => {
                    failed = Some(error(&err));
                    break;
                }
            };
            let (mode, payload) = match part.data {
                StreamData::Values { state, interrupts: list } => {
                    ("values", with_interrupts(state.snapshot_values(), &list))
                }
                StreamData::Updates { node, updates, cached } => {
                    let merged = merge(updates.iter().map(S::update_json));
                    ("updates", updates_chunk(&node, merged, cached))
                }
                StreamData::Interrupt(list) => ("updates", json!({"__interrupt__": interrupts(&list)})),
                StreamData::Returned { node, value } => ("updates", json!({ node: compact(value) })),
                StreamData::SubgraphValues { values, interrupts: list } => {
                    ("values", with_interrupts(compact(values), &list))
                }
                StreamData::SubgraphUpdates { node, updates, cached } => {
                    ("updates", updates_chunk(&node, merge(updates.into_iter().map(compact)), cached))
                }
                StreamData::Message { chunk, metadata } => {
                    let msg = compact(serde_json::to_value(&chunk).unwrap_or(Value::Null));
                    let keep = [
                        "langgraph_node",
                        "langgraph_step",
                        "langgraph_triggers",
                        "thread_id",
                        "checkpoint_ns",
                    ];
                    let meta: Map<String, Value> =
                        metadata.into_iter().filter(|(k, _)| keep.contains(&k.as_str())).collect();
                    ("messages", json!([msg, meta]))
                }
                StreamData::Custom { value, .. } => ("custom", value),
                StreamData::Checkpoint(event) => {
                    let e = *event;
                    let tasks: Vec<Value> = e.tasks.iter().map(task_in_event).collect();
                    let payload = json!({"config": config(Some(&e.config)), "parent_config": config(e.parent_config.as_ref()),
                        "metadata": e.metadata, "values": compact(e.values), "next": e.next, "tasks": tasks});
                    ("checkpoints", payload)
                }
                StreamData::Debug { step, kind, mut payload, .. } => {
                    // The payload in the recorder's form: addresses as (namespace, id), error as a flag.
                    for key in ["config", "parent_config"] {
                        if let Some(conf) = payload.get(key).and_then(|c| c.get("configurable")).cloned() {
                            payload[key] = json!({"checkpoint_ns": conf["checkpoint_ns"], "checkpoint_id": conf["checkpoint_id"]});
                        }
                    }
                    if let Some(err) = payload.get("error").cloned() {
                        payload["error"] = if err.is_null() { Value::Null } else { json!(true) };
                    }
                    if let Some(Value::Array(tasks)) = payload.get_mut("tasks") {
                        tasks.iter_mut().for_each(error_as_flag);
                    }
                    if let Some(v) = payload.get("values").cloned() {
                        payload["values"] = compact(v);
                    }
                    ("debug", json!({"step": step, "type": kind, "payload": payload}))
                }
                StreamData::TaskStart { id, name, input, triggers, .. } => {
                    ("tasks", json!({"id": id, "name": name, "input": compact(input), "triggers": triggers}))
                }
                StreamData::TaskResult { id, name, error, result, interrupts: list, .. } => {
                    let error = error.map(|_| json!(true));
                    let payload = json!({"id": id, "name": name, "error": error, "result": pairs(&result),
                        "interrupts": interrupts(&list)});
                    ("tasks", payload)
                }
                _ => ("unknown", Value::Null),
            };
            chunks.push(json!([mode, part.ns, payload]));
        }
        let mut rec = json!({"op": "stream", "modes": names, "chunks": chunks});
        if let Some(err) = failed {
            rec["error"] = err;
        }
        self.note(rec);
    }

    /// `stream` in `values` mode, recorded as LangGraph's v2 parts (`type`, `ns`, `data`, `interrupts`): weft
    /// has no v2 parts, so a part carries what a values chunk carries.
    pub(crate) async fn stream_v2<S: Observe>(
        &mut self,
        app: &CompiledGraph<S>,
        input: impl IntoGraphInput<S>,
        cfg: &RunnableConfig,
    ) {
        let mut parts = Vec::new();
        let mut stream = app.stream(input, cfg, &[StreamMode::Values]);
        while let Some(Ok(part)) = stream.next().await {
            if let StreamData::Values { state, interrupts: list } = part.data {
                parts.push(json!({"type": "values", "ns": part.ns, "data": state.values(), "interrupts": interrupts(&list)}));
            }
        }
        self.note(json!({"op": "stream_v2", "parts": parts}));
    }

    /// `get_state` (with subgraphs when asked).
    pub(crate) async fn state<S: Observe>(
        &mut self,
        app: &CompiledGraph<S>,
        cfg: &RunnableConfig,
        subgraphs: bool,
    ) {
        let got = if subgraphs { app.get_state_with_subgraphs(cfg).await } else { app.get_state(cfg).await };
        match got {
            Ok(s) => self.note(json!({"op": "state", "snap": snapshot(&s)})),
            Err(err) => self.note(json!({"op": "state", "error": error(&err)})),
        }
    }

    /// `get_state_history`, newest first.
    pub(crate) async fn history<S: Observe>(&mut self, app: &CompiledGraph<S>, cfg: &RunnableConfig) {
        match app.get_state_history(cfg, ListOptions::default()).await {
            Ok(list) => {
                self.note(json!({"op": "history", "snaps": list.iter().map(snapshot).collect::<Vec<_>>()}))
            }
            Err(err) => self.note(json!({"op": "history", "error": error(&err)})),
        }
    }

    /// `update_state`, recording the new checkpoint's address or the error.
    pub(crate) async fn update<S: Observe>(
        &mut self,
        app: &CompiledGraph<S>,
        cfg: &RunnableConfig,
        updates: Vec<S::Update>,
        as_node: Option<&str>,
    ) -> Option<RunnableConfig> {
        match app.update_state(cfg, updates, as_node).await {
            Ok(c) => {
                self.note(json!({"op": "update_state", "config": config(Some(&c))}));
                let id = c.checkpoint_id.unwrap_or_default();
                Some(cfg.clone().with_configurable("checkpoint_id", id))
            }
            Err(err) => {
                self.note(json!({"op": "update_state", "error": error(&err)}));
                None
            }
        }
    }

    /// The thread's saved root checkpoints, oldest first: step, source, pending writes and the checkpoint
    /// `fields` asked for (`versions_seen`, `updated_channels`, `channel_versions`, `channel_values`).
    pub(crate) async fn saved<S: Observe>(&mut self, app: &CompiledGraph<S>, tid: &str, fields: &[&str]) {
        let Some(saver) = app.checkpointer() else { return };
        let address = CheckpointConfig::thread(tid);
        let list = match saver.list(Some(&address), ListOptions::default()).await {
            Ok(list) => list,
            Err(err) => {
                self.note(json!({"op": "saved", "error": err.to_string()}));
                return;
            }
        };
        let rows: Vec<Value> = list
            .iter()
            .rev()
            .map(|t| {
                let writes: Vec<Value> =
                    t.pending_writes.iter().map(|w| json!([w.channel, compact(w.value.clone())])).collect();
                let mut row =
                    json!({"step": t.metadata.step, "source": t.metadata.source, "pending_writes": writes});
                for field in fields {
                    row[*field] = match *field {
                        "versions_seen" => json!(t.checkpoint.versions_seen),
                        "updated_channels" => json!(t.checkpoint.updated_channels),
                        "channel_versions" => json!(t.checkpoint.channel_versions),
                        "channel_values" => compact(json!(t.checkpoint.channel_values)),
                        _ => Value::Null,
                    };
                }
                row
            })
            .collect();
        self.note(json!({"op": "saved", "checkpoints": rows}));
    }
}

/// The name LangGraph gives a mode.
pub(crate) fn mode_name(mode: StreamMode) -> &'static str {
    match mode {
        StreamMode::Values => "values",
        StreamMode::Updates => "updates",
        StreamMode::Messages => "messages",
        StreamMode::Custom => "custom",
        StreamMode::Checkpoints => "checkpoints",
        StreamMode::Tasks => "tasks",
        StreamMode::Debug => "debug",
        _ => "unknown",
    }
}

fn merge(updates: impl Iterator<Item = Value>) -> Value {
    let mut out = Map::new();
    let mut any = false;
    // A root-value state's updates are bare values: the last one is the chunk.
    let mut bare = None;
    for update in updates {
        any = true;
        match update {
            Value::Object(map) => out.extend(map),
            Value::Null => {}
            other => bare = Some(other),
        }
    }
    match bare {
        Some(v) => v,
        None if any && !out.is_empty() => Value::Object(out),
        None => Value::Null,
    }
}

fn updates_chunk(node: &str, merged: Value, cached: bool) -> Value {
    let mut out = Map::new();
    out.insert(node.to_owned(), merged);
    if cached {
        out.insert("__metadata__".to_owned(), json!({"cached": true}));
    }
    Value::Object(out)
}

/// A values chunk (or an invoke result) as LangGraph v1 shows it: the state, with `__interrupt__` when
/// a task paused; a state that is not a dict (a functional graph's bare value) is replaced by the
/// interrupts then.
fn with_interrupts(mut values: Value, list: &[weft::graph::Interrupt]) -> Value {
    if !list.is_empty() {
        match &mut values {
            Value::Object(map) => {
                map.insert("__interrupt__".to_owned(), interrupts(list));
            }
            _ => values = json!({"__interrupt__": interrupts(list)}),
        }
    }
    values
}

/// `value` as JSON with object keys sorted and no spaces (Python's `json.dumps(v, sort_keys=True,
/// separators=(",", ":"), ensure_ascii=False)`).
fn canonical(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let fields: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", Value::String((*k).clone()), canonical(&map[*k])))
                .collect();
            format!("{{{}}}", fields.join(","))
        }
        Value::Array(items) => format!("[{}]", items.iter().map(canonical).collect::<Vec<_>>().join(",")),
        other => other.to_string(),
    }
}

/// A task of a `checkpoints` event in the recorder's form: LangGraph's shape, the error as a flag.
fn task_in_event(task: &weft::graph::PregelTask) -> Value {
    let mut value = task.event_json();
    error_as_flag(&mut value);
    value
}

/// A checkpoint event's task with its error text (LangGraph's is the exception's `repr`) as `true`.
fn error_as_flag(task: &mut Value) {
    if let Some(err) = task.get_mut("error") {
        *err = json!(true);
    }
}

/// A chunk that opens a step's results: a `values` chunk or a task's start in the tasks stream.
fn step_mark(chunk: &Value) -> bool {
    chunk[0] == "values" || (chunk[0] == "tasks" && chunk[2].get("input").is_some())
}

/// How `unorder_parallel_results` orders a step's chunks: results by mode and canonical JSON (a task
/// result's without its id), any other chunk first, in its place among the others (the sort is stable).
fn result_key(chunk: &Value) -> (String, String) {
    if chunk[0] == "updates" {
        return ("updates".to_owned(), canonical(&chunk[2]));
    }
    match chunk[2].as_object() {
        Some(task) if chunk[0] == "tasks" && !task.contains_key("input") => {
            // Without the task's id: the two sides' ids differ (the comparer matches them by place).
            let mut task = task.clone();
            task.remove("id");
            ("tasks".to_owned(), canonical(&Value::Object(task)))
        }
        _ => (String::new(), String::new()),
    }
}
