//! Thread routes: create, get, patch, delete, search, count, copy, prune.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::{Map, Value, json};

use super::body::read;
use super::guard::{Access, Caller};
use super::reply::{empty, ok, selected_page};
use super::requests::{
    Superstep, THREAD_CREATE, THREAD_PATCH, THREAD_PRUNE, THREAD_SEARCH, ThreadCreate, ThreadPatch,
    ThreadPrune, ThreadSearch,
};
use crate::app::{App, contains, new_id, now, object, require_uuid};
use crate::auth::{Action, Resource};
use crate::error::{ApiError, ApiResult};
use crate::model::{Thread, ThreadStatus};
use crate::retention::{TtlStrategy, prune_thread};
use crate::runs::CancelAction;
use crate::runs::settle::{settle_thread, thread_config};
use crate::storage::{Change, Key, ThreadFilter, ThreadOrder, ThreadScan};
use weft_graph::erased::JsonStateUpdate;

type AppState = State<Arc<App>>;

/// `POST /threads`.
pub(crate) async fn create(State(app): AppState, caller: Caller, body: Body) -> ApiResult<Response> {
    let (mut body, _) = read::<ThreadCreate>(body, app.limits.body_bytes, &THREAD_CREATE).await?;
    let supersteps = supersteps(body.supersteps.take().unwrap_or_default())?;
    if let Some(id) = &body.thread_id {
        require_uuid(id, "thread")?;
    }
    let thread_id = body.thread_id.as_deref().map_or_else(new_id, crate::app::canonical_id);
    let mut value = json!({"thread_id": thread_id, "metadata": body.metadata, "if_exists": body.if_exists});
    let access = app.authorize(&caller, Resource::Threads, Action::Create, &mut value).await?;
    body.metadata = value.get("metadata").and_then(Value::as_object).cloned();
    let mut records = app.records.lock(Key::Thread(&thread_id)).await?;
    if let Some(existing) = records.thread(&thread_id).await? {
        if body.if_exists.as_deref() == Some("do_nothing") && access.allows(&existing.metadata) {
            return Ok(ok(existing));
        }
        return Err(ApiError::conflict(format!("Thread with ID {thread_id} already exists")));
    }
    let stamp = now();
    let thread = Thread {
        thread_id,
        created_at: stamp.clone(),
        updated_at: stamp.clone(),
        state_updated_at: stamp,
        metadata: body.metadata.unwrap_or_default(),
        status: ThreadStatus::Idle,
        config: json!({}),
        values: None,
        error: None,
        interrupts: Map::new(),
        ttl: app.thread_ttl.for_new_thread(body.ttl.as_ref()),
    };
    records.commit(vec![Change::Thread(thread.clone())]).await?;
    drop(records);
    if supersteps.is_empty() {
        return Ok(ok(&thread));
    }
    apply_supersteps(&app, &caller, &thread, supersteps).await?;
    Ok(ok(&app.thread(&thread.thread_id).await?))
}

/// The `supersteps` of a new thread as updates; a `422` for a command (not taken yet).
fn supersteps(given: Vec<Superstep>) -> ApiResult<Vec<Vec<JsonStateUpdate>>> {
    given
        .into_iter()
        .map(|superstep| {
            superstep
                .updates
                .into_iter()
                .map(|update| match update.command.filter(|c| !c.is_null()) {
                    Some(_) => Err(ApiError::unprocessable(
                        "Commands in supersteps are not supported by weft-server yet: write values as a node",
                    )),
                    None => Ok(JsonStateUpdate { values: update.values, as_node: update.as_node }),
                })
                .collect()
        })
        .collect()
}

/// Applies a new thread's supersteps as `update_state` calls of its graph (the `graph_id` of its metadata),
/// one checkpoint each, then settles the thread (its values, status and interrupts) as LangGraph does. A
/// thread with no graph stays made: LangGraph's answer is then a `201` saying what went wrong.
async fn apply_supersteps(
    app: &Arc<App>,
    caller: &Caller,
    thread: &Thread,
    supersteps: Vec<Vec<JsonStateUpdate>>,
) -> ApiResult<()> {
    let thread_id = &thread.thread_id;
    let problem = |detail: String| {
        ApiError::new(
            StatusCode::CREATED,
            format!("Thread {thread_id} was created, but there were problems updating the state: {detail}"),
        )
    };
    let mut value = json!({"thread_id": thread_id});
    let access = app.authorize(caller, Resource::Threads, Action::Update, &mut value).await?;
    if !access.allows(&thread.metadata) {
        return Err(problem("Forbidden".to_owned()));
    }
    let graph = match thread.graph_id() {
        None => {
            return Err(problem(format!(
                "Thread '{thread_id}' has no assigned graph ID. This usually occurs when no runs have been made on \
                 this particular thread. This operation requires a graph ID. Please ensure a run has been made for the \
                 thread or manually update the thread metadata (by setting the 'graph_id' field) before running this \
                 operation."
            )));
        }
        Some(id) => match app.graphs.get(id) {
            Some(graph) => Arc::clone(&graph.stateful),
            None => return Err(problem(format!("Graph '{id}' not found"))),
        },
    };
    graph.bulk_update_state_json(&thread_config(thread_id), supersteps).await?;
    settle_thread(app, thread_id).await?;
    super::state::announce(app, thread_id, graph.as_ref()).await
}

/// `GET /threads/{thread_id}`.
pub(crate) async fn get(
    State(app): AppState,
    caller: Caller,
    Path(thread_id): Path<String>,
) -> ApiResult<Response> {
    require_uuid(&thread_id, "thread")?;
    Ok(ok(&app.thread_for(&caller, Action::Read, &thread_id).await?))
}

/// `PATCH /threads/{thread_id}`: merges metadata and sets a new TTL when given (`Prefer: return=minimal`
/// answers `204`).
pub(crate) async fn patch(
    State(app): AppState,
    caller: Caller,
    Path(thread_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    require_uuid(&thread_id, "thread")?;
    let (mut body, _) = read::<ThreadPatch>(body, app.limits.body_bytes, &THREAD_PATCH).await?;
    let mut value = json!({"thread_id": thread_id, "metadata": body.metadata.take().unwrap_or_default()});
    let access = app.authorize(&caller, Resource::Threads, Action::Update, &mut value).await?;
    let mut records = app.records.lock(Key::Thread(&thread_id)).await?;
    let mut thread = records
        .thread(&thread_id)
        .await?
        .filter(|t| access.allows(&t.metadata))
        .cloned()
        .ok_or_else(|| ApiError::thread_not_found(&thread_id))?;
    thread.metadata.extend(object(value.get("metadata")));
    if let Some(ttl) = body.ttl.as_ref().filter(|t| !t.is_null()) {
        thread.ttl = crate::retention::ThreadTtl::from_request(ttl, app.thread_ttl.strategy);
    }
    thread.updated_at = now();
    records.commit(vec![Change::Thread(thread.clone())]).await?;
    if headers.get("prefer").and_then(|v| v.to_str().ok()) == Some("return=minimal") {
        return Ok(empty(StatusCode::NO_CONTENT));
    }
    Ok(ok(&thread))
}

/// Deletes a thread: its runs stop, its records and checkpoints go. `false` when there was none.
pub(crate) async fn delete_thread(app: &Arc<App>, thread_id: &str, access: &Access) -> ApiResult<bool> {
    delete_thread_when(app, thread_id, access, None).await
}

/// Deletes a thread as [`delete_thread`] does; with `idle_since`, only when its `updated_at` is still that
/// and it has no pending or running run (checked under the records' lock). `false` when it was not
/// deleted.
pub(crate) async fn delete_thread_when(
    app: &Arc<App>,
    thread_id: &str,
    access: &Access,
    idle_since: Option<&str>,
) -> ApiResult<bool> {
    let mut records = app.records.lock(Key::Thread(thread_id)).await?;
    let Some(thread) = records.thread(thread_id).await?.filter(|t| access.allows(&t.metadata)) else {
        return Ok(false);
    };
    if let Some(since) = idle_since {
        let idle = thread.updated_at == since && records.active_runs(thread_id).next().is_none();
        if !idle {
            return Ok(false);
        }
    }
    let runs = records.thread_run_heads(thread_id).await?;
    let mut changes = vec![Change::DeleteThread(thread_id.to_owned())];
    changes.extend(runs.iter().map(|r| Change::DeleteRun(r.run_id.clone())));
    records.commit(changes).await?;
    for run in runs {
        if run.status.is_active() {
            // Its worker stops, and drops the channel when it ends.
            app.channels.open(&run.run_id, run.resumable).cancel(CancelAction::Interrupt);
        } else {
            app.channels.remove(&run.run_id);
        }
    }
    drop(records);
    app.checkpointer.delete_thread(thread_id).await.map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(true)
}

/// `DELETE /threads/{thread_id}`: `204`.
pub(crate) async fn delete(
    State(app): AppState,
    caller: Caller,
    Path(thread_id): Path<String>,
) -> ApiResult<Response> {
    require_uuid(&thread_id, "thread")?;
    let mut value = json!({"thread_id": thread_id});
    let access = app.authorize(&caller, Resource::Threads, Action::Delete, &mut value).await?;
    if !delete_thread(&app, &thread_id, &access).await? {
        return Err(ApiError::thread_not_found(&thread_id));
    }
    Ok(empty(StatusCode::NO_CONTENT))
}

/// Whether `thread` matches the search's filters other than `ids` (which the scan applies).
fn matches(thread: &Thread, search: &ThreadSearch) -> bool {
    let status = search.status.as_deref().and_then(ThreadStatus::parse);
    status.is_none_or(|s| s == thread.status)
        && search
            .metadata
            .as_ref()
            .is_none_or(|m| contains(&Value::Object(thread.metadata.clone()), &Value::Object(m.clone())))
        && search.values.as_ref().is_none_or(|v| {
            thread.values.as_ref().is_some_and(|values| contains(values, &Value::Object(v.clone())))
        })
}

/// The page of threads a search asks for (`offset`, `limit`: 10 by default), newest first unless
/// `sort_by`/`sort_order` say otherwise, and how many match in all.
async fn found(
    app: &App,
    caller: &Caller,
    body: Body,
    page: bool,
) -> ApiResult<(Vec<Thread>, usize, ThreadSearch)> {
    let (search, mut value) = read::<ThreadSearch>(body, app.limits.body_bytes, &THREAD_SEARCH).await?;
    let access = app.authorize(caller, Resource::Threads, Action::Search, &mut value).await?;
    let scan = ThreadScan {
        ids: search.ids.as_deref(),
        metadata: search.metadata.as_ref(),
        status: search.status.as_deref().filter(|s| ThreadStatus::parse(s).is_some()),
        ..ThreadScan::all(
            ThreadOrder::parse(search.sort_by.as_deref()),
            search.sort_order.as_deref() == Some("asc"),
        )
    };
    let filtered = search.status.is_some()
        || search.metadata.is_some()
        || search.values.is_some()
        || access.filter().is_some();
    let filter = |t: &Thread| matches(t, &search) && access.allows(&t.metadata);
    let (offset, limit) = if page {
        let offset = usize::try_from(search.offset.unwrap_or(0)).unwrap_or(0);
        (offset, usize::try_from(search.limit.unwrap_or(10)).unwrap_or(0))
    } else {
        (0, 0)
    };
    let filter: Option<ThreadFilter<'_>> = if filtered { Some(&filter) } else { None };
    let (threads, total) = app.records.search_threads(scan, filter, offset, limit).await?;
    Ok((threads, total, search))
}

/// `POST /threads/search`: newest first unless `sort_by`/`sort_order` say otherwise.
pub(crate) async fn search(State(app): AppState, caller: Caller, body: Body) -> ApiResult<Response> {
    let (threads, total, search) = found(&app, &caller, body, true).await?;
    let offset = usize::try_from(search.offset.unwrap_or(0)).unwrap_or(0);
    Ok(selected_page(&threads, search.select.as_deref(), total, offset))
}

/// `POST /threads/count`.
pub(crate) async fn count(State(app): AppState, caller: Caller, body: Body) -> ApiResult<Response> {
    Ok(ok(&found(&app, &caller, body, false).await?.1))
}

/// `POST /threads/{thread_id}/copy`: a new thread with the same metadata and a copy of every checkpoint; a
/// `409` for a thread that is not there (as in LangGraph).
pub(crate) async fn copy(
    State(app): AppState,
    caller: Caller,
    Path(thread_id): Path<String>,
) -> ApiResult<Response> {
    require_uuid(&thread_id, "thread")?;
    // A thread that cannot be copied (missing, or the caller's to see) is LangGraph's 409.
    let source = app
        .thread_for(&caller, Action::Read, &thread_id)
        .await
        .map_err(|e| if e.status == StatusCode::NOT_FOUND { ApiError::conflict("Conflict") } else { e })?;
    let copy_id = new_id();
    // The caller must be allowed to make threads; the copy keeps the source's metadata (as in LangGraph).
    let mut value = json!({"thread_id": copy_id});
    app.authorize(&caller, Resource::Threads, Action::Create, &mut value).await?;
    app.checkpointer
        .copy_thread(&thread_id, &copy_id)
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let stamp = now();
    let status = if source.status == ThreadStatus::Busy { ThreadStatus::Idle } else { source.status };
    let copy = Thread {
        thread_id: copy_id,
        created_at: stamp.clone(),
        updated_at: stamp.clone(),
        state_updated_at: stamp,
        status,
        ..source
    };
    let mut records = app.records.lock(Key::Thread(&copy.thread_id)).await?;
    records.commit(vec![Change::Thread(copy.clone())]).await?;
    Ok(ok(&copy))
}

/// `POST /threads/prune`: deletes the threads (`delete`), or keeps only their latest checkpoint
/// (`keep_latest`); answers how many were pruned.
pub(crate) async fn prune(State(app): AppState, caller: Caller, body: Body) -> ApiResult<Response> {
    let (body, mut value) = read::<ThreadPrune>(body, app.limits.body_bytes, &THREAD_PRUNE).await?;
    // Threads the caller may not delete are skipped, as if they did not exist (as in LangGraph).
    let access = app.authorize(&caller, Resource::Threads, Action::Delete, &mut value).await?;
    let strategy = body.strategy.as_deref().and_then(TtlStrategy::parse).unwrap_or_default();
    let mut pruned = 0usize;
    for thread_id in &body.thread_ids {
        if crate::app::is_uuid(thread_id) && prune_thread(&app, thread_id, strategy, &access, None).await? {
            pruned += 1;
        }
    }
    Ok(ok(&json!({"pruned_count": pruned})))
}
