//! Thread state routes: the state now or at a checkpoint, updates (`as_node`, forks), history.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use serde_json::{Map, Value, json};
use weft_graph::checkpoint::ListOptions;
use weft_graph::erased::ErasedGraph;
use weft_graph::{JsonSnapshot, PregelTask, TaskState};
use weft_runnable_core::RunnableConfig;

use super::body::read;
use super::guard::Caller;
use super::reply::ok;
use super::requests::{HISTORY, History, STATE_AT, STATE_UPDATE, StateAt, StateUpdate};
use crate::app::{App, require_uuid};
use crate::auth::Action;
use crate::error::{ApiError, ApiResult};
use crate::runs::settle::{settle_thread, thread_config};
use crate::runs::wire::{checkpoint_address, interrupt_record, state_values, task_path};

type AppState = State<Arc<App>>;

fn task_json(task: &PregelTask) -> Value {
    let (checkpoint, state) = match &task.state {
        Some(TaskState::Config(config)) => (checkpoint_address(config), Value::Null),
        Some(TaskState::Snapshot(snapshot)) => (Value::Null, thread_state(snapshot)),
        None => (Value::Null, Value::Null),
    };
    json!({
        "id": task.id,
        "name": task.name,
        "path": task_path(&task.path),
        "error": task.error,
        "interrupts": task.interrupts.iter().map(interrupt_record).collect::<Vec<_>>(),
        "checkpoint": checkpoint,
        "state": state,
        "result": task.result.as_ref().map(|writes| Value::Object(writes.iter().cloned().collect())),
    })
}

/// A snapshot as LangGraph's `ThreadState`.
pub(crate) fn thread_state(snapshot: &JsonSnapshot) -> Value {
    let id = |c: &Option<weft_graph::checkpoint::CheckpointConfig>| {
        c.as_ref().and_then(|c| c.checkpoint_id.clone())
    };
    json!({
        "values": state_values(snapshot.values.clone()),
        "next": snapshot.next,
        "tasks": snapshot.tasks.iter().map(task_json).collect::<Vec<_>>(),
        "metadata": snapshot.metadata,
        "created_at": snapshot.created_at,
        "checkpoint": snapshot.config.as_ref().map(checkpoint_address),
        "parent_checkpoint": snapshot.parent_config.as_ref().map(checkpoint_address),
        "interrupts": snapshot.interrupts.iter().map(interrupt_record).collect::<Vec<_>>(),
        "checkpoint_id": id(&snapshot.config),
        "parent_checkpoint_id": id(&snapshot.parent_config),
    })
}

/// The state of a thread that has no graph (no run yet).
fn empty_state() -> Value {
    thread_state(&JsonSnapshot {
        values: json!({}),
        next: Vec::new(),
        config: None,
        parent_config: None,
        metadata: None,
        created_at: None,
        tasks: Vec::new(),
        interrupts: Vec::new(),
    })
}

/// The thread's graph (`None` before its first run), or a 404 when there is no such thread.
async fn graph_of(app: &App, caller: &Caller, thread_id: &str) -> ApiResult<Option<Arc<dyn ErasedGraph>>> {
    require_uuid(thread_id, "thread")?;
    let thread = app.thread_for(caller, Action::Read, thread_id).await?;
    Ok(thread.graph_id().and_then(|id| app.graphs.get(id)).map(|g| Arc::clone(&g.stateful)))
}

/// A config addressing the thread at a checkpoint given as `{"checkpoint_id", "checkpoint_ns", ...}`.
fn config_at(thread_id: &str, checkpoint: &Map<String, Value>) -> RunnableConfig {
    let mut config = thread_config(thread_id);
    for key in ["checkpoint_id", "checkpoint_ns"] {
        if let Some(value) = checkpoint.get(key).filter(|v| !v.is_null()) {
            config.configurable.insert(key.into(), value.clone());
        }
    }
    config
}

async fn state_at(
    app: &App,
    caller: &Caller,
    thread_id: &str,
    checkpoint: &Map<String, Value>,
    subgraphs: bool,
) -> ApiResult<Response> {
    let Some(graph) = graph_of(app, caller, thread_id).await? else { return Ok(ok(&empty_state())) };
    let snapshot = graph.get_state_json(&config_at(thread_id, checkpoint), subgraphs).await?;
    Ok(ok(&thread_state(&snapshot)))
}

fn subgraphs(query: &HashMap<String, String>) -> bool {
    query.get("subgraphs").is_some_and(|s| s == "true" || s == "True")
}

/// `GET /threads/{thread_id}/state[?subgraphs=true]`.
pub(crate) async fn get(
    State(app): AppState,
    caller: Caller,
    Path(thread_id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    state_at(&app, &caller, &thread_id, &Map::new(), subgraphs(&query)).await
}

/// `GET /threads/{thread_id}/state/{checkpoint_id}`.
pub(crate) async fn get_at(
    State(app): AppState,
    caller: Caller,
    Path((thread_id, checkpoint_id)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let mut checkpoint = Map::new();
    checkpoint.insert("checkpoint_id".into(), json!(checkpoint_id));
    state_at(&app, &caller, &thread_id, &checkpoint, subgraphs(&query)).await
}

/// `POST /threads/{thread_id}/state/checkpoint`.
pub(crate) async fn post_at(
    State(app): AppState,
    caller: Caller,
    Path(thread_id): Path<String>,
    body: Body,
) -> ApiResult<Response> {
    let (body, _) = read::<StateAt>(body, app.limits.body_bytes, &STATE_AT).await?;
    state_at(&app, &caller, &thread_id, &body.checkpoint, body.subgraphs).await
}

/// `POST /threads/{thread_id}/state`: writes values as a node (from the latest checkpoint, or from
/// `checkpoint_id`, which forks); refused while the thread has runs in flight.
pub(crate) async fn update(
    State(app): AppState,
    caller: Caller,
    Path(thread_id): Path<String>,
    body: Body,
) -> ApiResult<Response> {
    require_uuid(&thread_id, "thread")?;
    let (body, _) = read::<StateUpdate>(body, app.limits.body_bytes, &STATE_UPDATE).await?;
    let thread = app.thread_for(&caller, Action::Update, &thread_id).await?;
    let inflight: Vec<String> =
        app.records.read().await?.active_runs(&thread_id).map(|r| r.run.run_id.clone()).collect();
    if !inflight.is_empty() {
        return Err(ApiError::conflict(format!(
            "Thread {thread_id} has in-flight runs: {}",
            inflight.join(", ")
        )));
    }
    let Some(graph) = thread.graph_id().and_then(|id| app.graphs.get(id)).map(|g| Arc::clone(&g.stateful))
    else {
        return Err(ApiError::bad_request(format!(
            "Thread '{thread_id}' has no assigned graph ID. This usually occurs when no runs have been made on this \
             particular thread. This operation requires a graph ID. Please ensure a run has been made for the thread \
             or manually update the thread metadata (by setting the 'graph_id' field) before running this operation."
        )));
    };
    let mut checkpoint = body.checkpoint.unwrap_or_default();
    if let Some(id) = body.checkpoint_id {
        checkpoint.insert("checkpoint_id".into(), json!(id));
    }
    let config = config_at(&thread_id, &checkpoint);
    let values = match body.values {
        Value::Array(mut items) if items.len() == 1 => items.pop(),
        Value::Null => None,
        other => Some(other),
    };
    let saved = graph.update_state_json(&config, values, body.as_node.as_deref()).await?;
    settle_thread(&app, &thread_id).await?;
    announce(&app, &thread_id, graph.as_ref()).await?;
    let address = checkpoint_address(&saved);
    Ok(ok(&json!({"checkpoint": address, "configurable": address, "checkpoint_id": saved.checkpoint_id})))
}

/// Tells the thread's listeners (`GET /threads/{id}/stream`) its state was written: LangGraph's
/// `state_update`, with the state as `GET /threads/{id}/state` shows it.
pub(crate) async fn announce(app: &App, thread_id: &str, graph: &dyn ErasedGraph) -> ApiResult<()> {
    if super::thread_stream::is_heard(app, thread_id) {
        let snapshot = graph.get_state_json(&thread_config(thread_id), false).await?;
        super::thread_stream::state_updated(app, thread_id, thread_state(&snapshot));
    }
    Ok(())
}

async fn history(app: &App, caller: &Caller, thread_id: &str, query: History) -> ApiResult<Response> {
    let Some(graph) = graph_of(app, caller, thread_id).await? else { return Ok(ok(&Vec::<Value>::new())) };
    let checkpoint = query.checkpoint.unwrap_or_default();
    let before = match query.before {
        Value::String(id) => Some(id),
        Value::Object(map) => map
            .get("checkpoint_id")
            .or_else(|| map.get("configurable").and_then(|c| c.get("checkpoint_id")))
            .and_then(Value::as_str)
            .map(str::to_owned),
        _ => None,
    };
    let limit = usize::try_from(query.limit.unwrap_or(1)).unwrap_or(0);
    let options = ListOptions { filter: query.metadata.unwrap_or_default(), before, limit: Some(limit) };
    let snapshots = graph.get_state_history_json(&config_at(thread_id, &checkpoint), options).await?;
    Ok(ok(&snapshots.iter().map(thread_state).collect::<Vec<_>>()))
}

/// `POST /threads/{thread_id}/history`: checkpoints newest first (`limit` 1 by default, as in LangGraph).
pub(crate) async fn history_post(
    State(app): AppState,
    caller: Caller,
    Path(thread_id): Path<String>,
    body: Body,
) -> ApiResult<Response> {
    let (query, _) = read::<History>(body, app.limits.body_bytes, &HISTORY).await?;
    history(&app, &caller, &thread_id, query).await
}

/// `GET /threads/{thread_id}/history[?limit=&before=]`.
pub(crate) async fn history_get(
    State(app): AppState,
    caller: Caller,
    Path(thread_id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let limit = match query.get("limit") {
        None => None,
        Some(l) => Some(l.parse::<i64>().map_err(|_| ApiError::unprocessable(format!("Invalid limit {l}")))?),
    };
    let before = query.get("before").map_or(Value::Null, |b| json!(b));
    history(&app, &caller, &thread_id, History { limit, before, metadata: None, checkpoint: None }).await
}
