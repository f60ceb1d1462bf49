//! Run routes: create in the background, stream, wait, join, join the stream, cancel, list, get, delete,
//! on a thread and stateless.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use futures::FutureExt as _;
use serde_json::Value;

use super::body::read;
use super::guard::{Access, Caller};
use super::reply::{empty, ok, with_header};
use super::requests::{
    RUN_FIELDS, RUN_STATEFUL, RUN_STATELESS, RUN_STREAMED, RUNS_CANCEL, RunCreate, RunsCancel,
};
use super::sse;
use crate::app::{App, require_uuid};
use crate::auth::{Action, Resource};
use crate::error::{ApiError, ApiResult};
use crate::runs::{self, CancelAction, result};

type AppState = State<Arc<App>>;

fn flag(query: &HashMap<String, String>, key: &str) -> bool {
    query.get(key).is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "true" | "yes" | "1"))
}

fn paths(thread_id: &str, run_id: &str, stateless: bool) -> (String, String) {
    if stateless {
        (format!("/runs/{run_id}"), format!("/runs/{run_id}/stream"))
    } else {
        (format!("/threads/{thread_id}/runs/{run_id}"), format!("/threads/{thread_id}/runs/{run_id}/stream"))
    }
}

/// A run's request, checked against its schema (and, for a streamed one, `on_disconnect`'s).
async fn create_body(app: &App, body: Body, stateless: bool, streamed: bool) -> ApiResult<RunCreate> {
    let schema = if stateless { &RUN_STATELESS } else { &RUN_STATEFUL };
    let (body, value) = read::<RunCreate>(body, app.limits.body_bytes, schema).await?;
    if streamed {
        super::validate::check(&RUN_STREAMED, &value)?;
    }
    Ok(body)
}

/// `POST /threads/{thread_id}/runs`: a background run.
pub(crate) async fn create(
    State(app): AppState,
    caller: Caller,
    Path(thread_id): Path<String>,
    body: Body,
) -> ApiResult<Response> {
    let body = create_body(&app, body, false, false).await?;
    let mut created = runs::create(&app, &caller, Some(&thread_id), body, false, false).await?;
    created.schedule(&app);
    let (location, _) = paths(&thread_id, &created.record.run.run_id, false);
    Ok(with_header(ok(&created.record.run), "content-location", &location))
}

/// `POST /runs`: a stateless background run.
pub(crate) async fn create_stateless(
    State(app): AppState,
    caller: Caller,
    body: Body,
) -> ApiResult<Response> {
    let body = create_body(&app, body, true, false).await?;
    let mut created = runs::create(&app, &caller, None, body, true, false).await?;
    created.schedule(&app);
    let (location, _) = paths("", &created.record.run.run_id, true);
    Ok(with_header(ok(&created.record.run), "content-location", &location))
}

async fn stream_run(
    app: Arc<App>,
    caller: Caller,
    thread_id: Option<String>,
    body: Body,
) -> ApiResult<Response> {
    let stateless = thread_id.is_none();
    let body = create_body(&app, body, stateless, true).await?;
    let cancel_on_disconnect = body.on_disconnect.as_deref() == Some("cancel");
    let mut created = runs::create(&app, &caller, thread_id.as_deref(), body, stateless, true).await?;
    // A run started as it was made runs in the body's task until it first waits.
    let started = created.take_started();
    created.schedule(&app);
    let run = &created.record.run;
    let subscription = created.subscription.unwrap_or_else(|| created.channel.subscribe(None));
    let (content_location, location) = paths(&run.thread_id, &run.run_id, stateless);
    Ok(sse::events(
        app.limits.keep_alive,
        subscription,
        created.channel,
        sse::Options { filter: Vec::new(), resumable: run.kwargs.resumable, cancel_on_disconnect, started },
        &location,
        &content_location,
    ))
}

/// `POST /threads/{thread_id}/runs/stream`.
pub(crate) async fn stream(
    State(app): AppState,
    caller: Caller,
    Path(thread_id): Path<String>,
    body: Body,
) -> ApiResult<Response> {
    stream_run(app, caller, Some(thread_id), body).await
}

/// `POST /runs/stream`.
pub(crate) async fn stream_stateless(
    State(app): AppState,
    caller: Caller,
    body: Body,
) -> ApiResult<Response> {
    stream_run(app, caller, None, body).await
}

/// The `/wait` or `/join` answer of a run: what its channel holds, else its record's, else its thread's.
fn answer(
    app: Arc<App>,
    run_id: String,
    thread_id: String,
) -> impl Fn(Option<Value>) -> futures::future::BoxFuture<'static, Value> {
    move |held: Option<Value>| {
        let (app, run_id, thread_id) = (Arc::clone(&app), run_id.clone(), thread_id.clone());
        async move {
            if let Some(value) = held {
                return value;
            }
            let mut records = match app.records.read().await {
                Ok(records) => records,
                Err(e) => {
                    tracing::error!(run_id, error = %e, "cannot read the run's result");
                    return serde_json::json!({"__error__": {"error": "StorageError", "message": e.to_string()}});
                }
            };
            let read = async {
                if let Some(value) = records.run(&run_id).await?.and_then(|r| r.result.clone()) {
                    return Ok(value);
                }
                Ok::<_, crate::error::ServerError>(result::from_thread(records.thread(&thread_id).await?))
            };
            match read.await {
                Ok(value) => value,
                Err(e) => {
                    tracing::error!(run_id, error = %e, "cannot read the run's result");
                    serde_json::json!({"__error__": {"error": "StorageError", "message": e.to_string()}})
                }
            }
        }
        .boxed()
    }
}

async fn wait_run(
    app: Arc<App>,
    caller: Caller,
    thread_id: Option<String>,
    body: Body,
) -> ApiResult<Response> {
    let stateless = thread_id.is_none();
    let body = create_body(&app, body, stateless, false).await?;
    let cancel_on_disconnect = body.on_disconnect.as_deref() == Some("cancel");
    let mut created = runs::create(&app, &caller, thread_id.as_deref(), body, stateless, false).await?;
    created.schedule(&app);
    let run = &created.record.run;
    let content_location = format!("/threads/{}/runs/{}", run.thread_id, run.run_id);
    let location = format!("{content_location}/join");
    let answer = answer(Arc::clone(&app), run.run_id.clone(), run.thread_id.clone());
    Ok(sse::wait(
        app.limits.keep_alive,
        created.channel,
        cancel_on_disconnect,
        &location,
        &content_location,
        answer,
    ))
}

/// `POST /threads/{thread_id}/runs/wait`.
pub(crate) async fn wait(
    State(app): AppState,
    caller: Caller,
    Path(thread_id): Path<String>,
    body: Body,
) -> ApiResult<Response> {
    wait_run(app, caller, Some(thread_id), body).await
}

/// `POST /runs/wait`.
pub(crate) async fn wait_stateless(State(app): AppState, caller: Caller, body: Body) -> ApiResult<Response> {
    wait_run(app, caller, None, body).await
}

/// `POST /runs/batch`: several stateless background runs.
pub(crate) async fn batch(State(app): AppState, caller: Caller, body: Body) -> ApiResult<Response> {
    let value = super::body::json_value(body, app.limits.body_bytes).await?;
    let Value::Array(items) = value else {
        return Err(ApiError::unprocessable(format!(
            "{} is not of type \"array\"",
            super::validate::instance(&value)
        )));
    };
    let mut bodies = Vec::with_capacity(items.len());
    for item in items {
        super::validate::check(&RUN_STATELESS, &item)?;
        bodies.push(
            serde_json::from_value::<RunCreate>(item).map_err(|e| ApiError::unprocessable(e.to_string()))?,
        );
    }
    let mut made = Vec::with_capacity(bodies.len());
    for body in bodies {
        let mut created = runs::create(&app, &caller, None, body, true, false).await?;
        created.schedule(&app);
        made.push(created.record.run);
    }
    Ok(ok(&made))
}

/// What the caller may touch on threads for `action` (LangGraph authorizes runs as their thread's).
async fn thread_access(app: &App, caller: &Caller, action: Action, thread_id: &str) -> ApiResult<Access> {
    let mut value = serde_json::json!({"thread_id": thread_id});
    app.authorize(caller, Resource::Threads, action, &mut value).await
}

async fn existing_run(
    app: &App,
    caller: &Caller,
    action: Action,
    thread_id: &str,
    run_id: &str,
) -> ApiResult<crate::model::RunRecord> {
    require_uuid(thread_id, "thread")?;
    require_uuid(run_id, "run")?;
    let access = thread_access(app, caller, action, thread_id).await?;
    let mut records = app.records.read().await?;
    if !records.thread(thread_id).await?.is_some_and(|t| access.allows(&t.metadata)) {
        return Err(ApiError::thread_not_found(thread_id));
    }
    records
        .run(run_id)
        .await?
        .filter(|r| r.run.thread_id == thread_id)
        .cloned()
        .ok_or_else(|| ApiError::not_found("Run not found"))
}

/// `GET /threads/{thread_id}/runs/{run_id}`.
pub(crate) async fn get(
    State(app): AppState,
    caller: Caller,
    Path((thread_id, run_id)): Path<(String, String)>,
) -> ApiResult<Response> {
    Ok(ok(&existing_run(&app, &caller, Action::Read, &thread_id, &run_id).await?.run))
}

/// A `select` of fields that are not all `allowed`: LangGraph's `422`, its text as Python writes it.
fn check_columns(select: &[String], allowed: &[&str]) -> ApiResult<()> {
    let quoted =
        |items: &mut dyn Iterator<Item = &str>| -> Vec<String> { items.map(|s| format!("'{s}'")).collect() };
    let wrong = quoted(&mut select.iter().map(String::as_str).filter(|f| !allowed.contains(f)));
    if wrong.is_empty() {
        return Ok(());
    }
    Err(ApiError::unprocessable(format!(
        "Invalid select columns: [{}]. Expected: {{{}}}",
        wrong.join(", "),
        quoted(&mut allowed.iter().copied()).join(", ")
    )))
}

/// `GET /threads/{thread_id}/runs`: newest first, `limit` (10) and `offset`, optionally by `status`;
/// `select` (repeated) picks fields.
pub(crate) async fn list(
    State(app): AppState,
    caller: Caller,
    Path(thread_id): Path<String>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> ApiResult<Response> {
    require_uuid(&thread_id, "thread")?;
    let select: Vec<String> = pairs.iter().filter(|(k, _)| k == "select").map(|(_, v)| v.clone()).collect();
    check_columns(&select, RUN_FIELDS)?;
    let query: HashMap<String, String> = pairs.into_iter().collect();
    // Integers, as LangGraph reads them; a negative one is taken as 0 (LangGraph answers `200` there).
    let number = |key: &str, default: usize| -> ApiResult<usize> {
        query.get(key).map_or(Ok(default), |v| {
            let n: i64 = v.parse().map_err(|_| ApiError::unprocessable(format!("Invalid {key}")))?;
            Ok(usize::try_from(n).unwrap_or(0))
        })
    };
    let (limit, offset) = (number("limit", 10)?, number("offset", 0)?);
    let access = thread_access(&app, &caller, Action::Search, &thread_id).await?;
    let mut records = app.records.read().await?;
    if !records.thread(&thread_id).await?.is_some_and(|t| access.allows(&t.metadata)) {
        return Err(ApiError::thread_not_found(&thread_id));
    }
    // A status no run can have lists nothing (as LangGraph, which filters on it as given).
    let status = match query.get("status") {
        Some(s) => match crate::model::RunStatus::parse(s) {
            Some(status) => Some(status),
            None => return Ok(ok(&Vec::<Value>::new())),
        },
        None => None,
    };
    let page: Vec<_> = records
        .thread_runs_page(&thread_id, status, (limit, offset))
        .await?
        .into_iter()
        .map(|r| r.run)
        .collect();
    if select.is_empty() {
        return Ok(ok(&page));
    }
    let picked: Vec<Value> = page
        .iter()
        .map(|run| {
            let mut value = serde_json::to_value(run).unwrap_or(Value::Null);
            if let Value::Object(map) = &mut value {
                map.retain(|k, _| select.contains(k));
            }
            value
        })
        .collect();
    Ok(ok(&picked))
}

/// `GET /threads/{thread_id}/runs/{run_id}/join`.
pub(crate) async fn join(
    State(app): AppState,
    caller: Caller,
    Path((thread_id, run_id)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let (_, channel) = runs::listen(&app, &caller, &thread_id, &run_id).await?;
    let content_location = format!("/threads/{thread_id}/runs/{run_id}");
    let location = format!("{content_location}/join");
    let answer = answer(Arc::clone(&app), run_id, thread_id);
    Ok(sse::wait(
        app.limits.keep_alive,
        channel,
        flag(&query, "cancel_on_disconnect"),
        &location,
        &content_location,
        answer,
    ))
}

/// `GET /threads/{thread_id}/runs/{run_id}/stream`: the run's events from now on, after those following
/// `Last-Event-ID` (kept for resumable runs only); empty for a finished run that kept none.
pub(crate) async fn join_stream(
    State(app): AppState,
    caller: Caller,
    Path((thread_id, run_id)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let (record, channel) = runs::listen(&app, &caller, &thread_id, &run_id).await?;
    let last_event_id = headers.get("last-event-id").and_then(|v| v.to_str().ok()).filter(|v| !v.is_empty());
    let filter: Vec<String> = match query.get("stream_mode").filter(|m| !m.is_empty()) {
        None => Vec::new(),
        Some(m) if m.starts_with('[') => serde_json::from_str(m).unwrap_or_else(|_| vec![m.clone()]),
        Some(m) => vec![m.clone()],
    };
    let subscription = channel.subscribe(last_event_id);
    let content_location = format!("/threads/{thread_id}/runs/{run_id}");
    let location = format!("{content_location}/stream");
    let cancel = flag(&query, "cancel_on_disconnect");
    Ok(sse::events(
        app.limits.keep_alive,
        subscription,
        channel,
        sse::Options {
            filter,
            resumable: record.run.kwargs.resumable,
            cancel_on_disconnect: cancel,
            started: None,
        },
        &location,
        &content_location,
    ))
}

fn action(query: &HashMap<String, String>) -> CancelAction {
    if query.get("action").is_some_and(|a| a == "rollback") {
        CancelAction::Rollback
    } else {
        CancelAction::Interrupt
    }
}

/// `POST /threads/{thread_id}/runs/{run_id}/cancel[?wait=&action=interrupt|rollback]`: `202`, or with
/// `wait` the run's `/join` answer once it has stopped.
pub(crate) async fn cancel(
    State(app): AppState,
    caller: Caller,
    Path((thread_id, run_id)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    require_uuid(&thread_id, "thread")?;
    require_uuid(&run_id, "run")?;
    let access = thread_access(&app, &caller, Action::Update, &thread_id).await?;
    if !app.records.read().await?.thread(&thread_id).await?.is_some_and(|t| access.allows(&t.metadata)) {
        return Err(ApiError::not_found("No runs found to cancel."));
    }
    let channel = app.channels.get(&run_id);
    runs::cancel(&app, &thread_id, std::slice::from_ref(&run_id), action(&query)).await?;
    match channel {
        Some(channel) if flag(&query, "wait") => {
            let content_location = format!("/threads/{thread_id}/runs/{run_id}");
            let location = format!("{content_location}/join");
            let answer = answer(Arc::clone(&app), run_id, thread_id);
            Ok(sse::wait(app.limits.keep_alive, channel, false, &location, &content_location, answer))
        }
        _ => Ok(empty(StatusCode::ACCEPTED)),
    }
}

/// `POST /runs/cancel`: runs by thread and ids, or every run of a status (`pending`, `running`, `all`).
pub(crate) async fn cancel_many(
    State(app): AppState,
    caller: Caller,
    Query(query): Query<HashMap<String, String>>,
    body: Body,
) -> ApiResult<Response> {
    let (body, mut raw) = read::<RunsCancel>(body, app.limits.body_bytes, &RUNS_CANCEL).await?;
    let action = action(&query);
    if let Some(status) = body.status.as_deref().map(str::to_ascii_lowercase) {
        if !matches!(status.as_str(), "pending" | "running" | "all") {
            return Err(ApiError::unprocessable("Invalid status: must be 'pending', 'running', or 'all'"));
        }
        if body.thread_id.is_some() || body.run_ids.is_some() {
            return Err(ApiError::unprocessable(
                "When providing a 'status', 'thread_id' and 'run_ids' must be omitted. The 'status' parameter cancels \
                 all runs with the given status, regardless of thread or run ID.",
            ));
        }
        // Only the runs of threads the caller may update.
        let access = app.authorize(&caller, Resource::Threads, Action::Update, &mut raw).await?;
        let by_thread: Vec<(String, String)> = {
            let mut records = app.records.read().await?;
            let live: Vec<(String, String)> = records
                .live_runs()
                .filter(|r| match status.as_str() {
                    "pending" => r.run.status == crate::model::RunStatus::Pending,
                    "running" => r.run.status == crate::model::RunStatus::Running,
                    _ => true,
                })
                .map(|r| (r.run.thread_id.clone(), r.run.run_id.clone()))
                .collect();
            let mut allowed = Vec::with_capacity(live.len());
            for (thread_id, run_id) in live {
                if records.thread(&thread_id).await?.is_some_and(|t| access.allows(&t.metadata)) {
                    allowed.push((thread_id, run_id));
                }
            }
            allowed
        };
        if by_thread.is_empty() {
            return Err(ApiError::not_found("No runs found to cancel."));
        }
        let mut failed = None;
        for (thread_id, run_id) in by_thread {
            match runs::cancel(&app, &thread_id, std::slice::from_ref(&run_id), action).await {
                // A run that ended meanwhile has nothing left to cancel.
                Ok(()) | Err(runs::CancelError::NotFound | runs::CancelError::NotActive) => {}
                // The others are still cancelled; the caller gets the first failure.
                Err(e) => {
                    tracing::error!(thread_id, run_id, error = %e, "cannot cancel a run");
                    failed.get_or_insert(e);
                }
            }
        }
        if let Some(e) = failed {
            return Err(e.into());
        }
        return Ok(empty(StatusCode::NO_CONTENT));
    }
    let (Some(thread_id), Some(run_ids)) = (body.thread_id, body.run_ids) else {
        return Err(ApiError::unprocessable(
            "Must provide either a status, an assistant_id, or both 'thread_id' and 'run_ids'",
        ));
    };
    require_uuid(&thread_id, "thread")?;
    for run_id in &run_ids {
        require_uuid(run_id, "run")?;
    }
    let access = thread_access(&app, &caller, Action::Update, &thread_id).await?;
    if !app.records.read().await?.thread(&thread_id).await?.is_some_and(|t| access.allows(&t.metadata)) {
        return Err(ApiError::not_found("No runs found to cancel."));
    }
    runs::cancel(&app, &thread_id, &run_ids, action).await?;
    Ok(empty(StatusCode::NO_CONTENT))
}

/// `DELETE /threads/{thread_id}/runs/{run_id}`: `204`; a run still going is refused.
pub(crate) async fn delete(
    State(app): AppState,
    caller: Caller,
    Path((thread_id, run_id)): Path<(String, String)>,
) -> ApiResult<Response> {
    let record = existing_run(&app, &caller, Action::Delete, &thread_id, &run_id).await?;
    if record.run.status.is_active() {
        return Err(ApiError::conflict(format!(
            "Run {run_id} is still {}: cancel it first",
            status_name(record.run.status)
        )));
    }
    let mut records = app.records.lock(crate::storage::Key::Thread(&thread_id)).await?;
    records.commit(vec![crate::storage::Change::DeleteRun(run_id.clone())]).await?;
    drop(records);
    app.channels.remove(&run_id);
    Ok(empty(StatusCode::NO_CONTENT))
}

fn status_name(status: crate::model::RunStatus) -> String {
    serde_json::to_value(status).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}
