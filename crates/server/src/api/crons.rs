//! Cron routes: create (stateless or on a thread), search, count, get, patch, delete.

use std::sync::Arc;
use std::time::SystemTime;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Map, Value, json};

use super::body::read;
use super::guard::{Access, Caller};
use super::reply::{empty, ok, page};
use super::requests::{
    CRON_COUNT, CRON_CREATE, CRON_FIELDS, CRON_PATCH, CRON_SEARCH, CronCreate, CronPatch, CronSearch,
    THREAD_CRON_CREATE,
};
use crate::app::{App, contains, is_uuid, new_id, now, object, require_uuid};
use crate::auth::{Action, Resource};
use crate::crons::schedule::{self, Schedule};
use crate::crons::{iso, new_record, next_run_date};
use crate::error::ServerError;
use crate::error::{ApiError, ApiResult};
use crate::model::Cron;
use crate::storage::{Change, Key, RecordsView};

type AppState = State<Arc<App>>;

fn unprocessable(e: schedule::ScheduleError) -> ApiError {
    ApiError::unprocessable(e.to_string())
}

/// An `end_time` as the cron keeps it (RFC 3339), or a `422`.
fn end_time(text: &str) -> ApiResult<String> {
    schedule::parse_time(text).map(iso).ok_or_else(|| {
        ApiError::unprocessable(format!("Invalid end_time: '{text}' is not an RFC 3339 date-time"))
    })
}

/// The cron's `user_id`: the caller's identity, or LangGraph's user of a server without authentication
/// (`""`).
fn user_id(caller: &Caller) -> String {
    caller.user().map(|u| u.identity().to_owned()).unwrap_or_default()
}

async fn create(
    app: &Arc<App>,
    caller: &Caller,
    thread_id: Option<String>,
    body: Body,
) -> ApiResult<Response> {
    let schema = if thread_id.is_some() { &THREAD_CRON_CREATE } else { &CRON_CREATE };
    let (request, raw) = read::<CronCreate>(body, app.limits.body_bytes, schema).await?;
    if let Some(thread_id) = &thread_id {
        require_uuid(thread_id, "thread")?;
    }
    if let Some(url) = &request.webhook {
        app.webhooks.check_url(url)?;
    }
    let assistant_id = app.resolve_assistant_id(&request.assistant_id);
    if !is_uuid(&assistant_id) {
        return Err(app.invalid_assistant(&request.assistant_id));
    }
    let cron_id = new_id();
    let mut payload = match raw {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    // The hook sees LangGraph's `CronsCreate`, and may change the cron's metadata (an owner).
    let mut value = json!({
        "payload": payload.clone(),
        "schedule": request.schedule,
        "cron_id": cron_id,
        "thread_id": thread_id,
        "user_id": user_id(caller),
        "end_time": request.end_time,
        "metadata": request.metadata.clone().unwrap_or_default(),
    });
    app.authorize(caller, Resource::Crons, Action::Create, &mut value).await?;
    let metadata = object(value.get("metadata"));
    let schedule = Schedule::parse(&request.schedule, request.timezone.as_deref()).map_err(unprocessable)?;
    let end = request.end_time.as_deref().map(end_time).transpose()?;
    payload.insert("assistant_id".into(), json!(assistant_id));
    if payload.contains_key("metadata") {
        // LangGraph's payload and cron share one metadata: what the hook wrote is in both.
        payload.insert("metadata".into(), Value::Object(metadata.clone()));
    }
    let config = payload.entry("config").or_insert_with(|| json!({}));
    if let Value::Object(config) = config {
        let configurable = config.entry("configurable").or_insert_with(|| json!({}));
        if let Value::Object(configurable) = configurable {
            configurable.insert("cron_id".into(), json!(cron_id));
        }
    }
    let mut cron =
        new_record(cron_id, assistant_id.clone(), thread_id.clone(), &schedule, &request, payload, end)
            .map_err(unprocessable)?;
    cron.metadata = metadata.clone();
    cron.user_id = Some(user_id(caller));
    // An assistant made through the API must be the caller's to read, a thread the caller's to read (as
    // LangGraph checks them): else they answer as missing ones.
    let owned = app.records.read().await?.assistants.get(&assistant_id).map(|a| a.metadata.clone());
    let assistant_access =
        match owned.filter(|m| m.get("created_by").and_then(Value::as_str) != Some("system")) {
            Some(_) => {
                let mut value = json!({"assistant_id": assistant_id});
                Some(app.authorize(caller, Resource::Assistants, Action::Read, &mut value).await?)
            }
            None => None,
        };
    let thread_access = match &thread_id {
        Some(thread_id) => {
            let mut value = json!({"thread_id": thread_id, "metadata": metadata});
            Some(app.authorize(caller, Resource::Threads, Action::Read, &mut value).await?)
        }
        None => None,
    };
    let mut records = app.records.lock(Key::Cron(&cron.cron_id)).await?;
    let assistant_seen = records
        .assistants
        .get(&assistant_id)
        .is_some_and(|a| assistant_access.as_ref().is_none_or(|access| access.allows(&a.metadata)));
    if !assistant_seen {
        return Err(ApiError::not_found(format!("Assistant '{assistant_id}' not found")));
    }
    if let Some(thread_id) = &thread_id {
        let thread_seen = records
            .thread(thread_id)
            .await?
            .is_some_and(|t| thread_access.as_ref().is_none_or(|access| access.allows(&t.metadata)));
        if !thread_seen {
            return Err(ApiError::not_found(format!(
                "Thread with ID '{thread_id}' not found. Please verify the ID is correct and the thread hasn't been \
                 deleted or expired."
            )));
        }
    }
    records.commit(vec![Change::Cron(Box::new(cron.clone()))]).await?;
    drop(records);
    app.cron_wake.notify_one();
    Ok(ok(&cron))
}

/// `POST /runs/crons`: a cron whose every run gets a new thread.
pub(crate) async fn create_stateless(
    State(app): AppState,
    caller: Caller,
    body: Body,
) -> ApiResult<Response> {
    create(&app, &caller, None, body).await
}

/// `POST /threads/{thread_id}/runs/crons`: a cron that runs on the thread.
pub(crate) async fn create_for_thread(
    State(app): AppState,
    caller: Caller,
    Path(thread_id): Path<String>,
    body: Body,
) -> ApiResult<Response> {
    create(&app, &caller, Some(thread_id), body).await
}

/// The search's filters, checked (`422` for ids that are not UUIDs).
fn matches(search: &CronSearch) -> ApiResult<impl Fn(&Cron) -> bool + '_> {
    if let Some(id) = &search.assistant_id {
        require_uuid(id, "assistant")?;
    }
    if let Some(id) = &search.thread_id {
        require_uuid(id, "thread")?;
    }
    let metadata = search.metadata.clone().map(Value::Object);
    Ok(move |cron: &Cron| {
        search.assistant_id.as_ref().is_none_or(|id| *id == cron.assistant_id)
            && search.thread_id.as_ref().is_none_or(|id| Some(id) == cron.thread_id.as_ref())
            && search.enabled.is_none_or(|enabled| enabled == cron.enabled)
            && metadata.as_ref().is_none_or(|m| contains(&Value::Object(cron.metadata.clone()), m))
    })
}

/// What of the crons a caller may see: those its cron filter allows and, for a thread's cron, whose thread
/// its thread filter allows (LangGraph applies both to searches and counts; a stateless cron has no
/// thread to check).
struct Visible {
    crons: Access,
    threads: Access,
}

impl Visible {
    async fn of(app: &App, caller: &Caller, search: &CronSearch, limit: i64, offset: i64) -> ApiResult<Self> {
        let mut value = json!({
            "assistant_id": search.assistant_id,
            "thread_id": search.thread_id,
            "limit": limit,
            "offset": offset,
            "metadata": search.metadata.clone().unwrap_or_default(),
        });
        let crons = app.authorize(caller, Resource::Crons, Action::Search, &mut value).await?;
        let (action, mut value) = match &search.thread_id {
            Some(thread_id) => (Action::Read, json!({"thread_id": thread_id})),
            None => (Action::Search, json!({})),
        };
        let threads = app.authorize(caller, Resource::Threads, action, &mut value).await?;
        Ok(Self { crons, threads })
    }

    /// The crons among `records`' that `filter` matches and the caller may see (a thread's cron, when
    /// the caller may see its thread).
    async fn among(
        &self,
        records: &mut RecordsView<'_>,
        filter: impl Fn(&Cron) -> bool,
    ) -> Result<Vec<Cron>, ServerError> {
        let candidates: Vec<Cron> =
            records.crons.values().filter(|c| filter(c) && self.crons.allows(&c.metadata)).cloned().collect();
        if self.threads.filter().is_none() {
            return Ok(candidates);
        }
        let mut seen = Vec::with_capacity(candidates.len());
        for cron in candidates {
            let allowed = match &cron.thread_id {
                Some(id) => records.thread(id).await?.is_some_and(|t| self.threads.allows(&t.metadata)),
                None => true,
            };
            if allowed {
                seen.push(cron);
            }
        }
        Ok(seen)
    }
}

fn sort_key(cron: &Cron, by: &str) -> String {
    match by {
        "cron_id" => cron.cron_id.clone(),
        "assistant_id" => cron.assistant_id.clone(),
        "thread_id" => cron.thread_id.clone().unwrap_or_default(),
        "next_run_date" => {
            cron.next_run_date.as_deref().and_then(schedule::parse_time).map(iso).unwrap_or_default()
        }
        "end_time" => cron.end_time.as_deref().and_then(schedule::parse_time).map(iso).unwrap_or_default(),
        "updated_at" => cron.updated_at.clone(),
        _ => cron.created_at.clone(),
    }
}

/// `POST /runs/crons/search`: newest first unless sorted otherwise; `select` picks fields.
pub(crate) async fn search(State(app): AppState, caller: Caller, body: Body) -> ApiResult<Response> {
    let (search, _) = read::<CronSearch>(body, app.limits.body_bytes, &CRON_SEARCH).await?;
    let limit = usize::try_from(search.limit.unwrap_or(10)).unwrap_or(0);
    let offset = usize::try_from(search.offset.unwrap_or(0)).unwrap_or(0);
    if let Some(select) = &search.select {
        let wrong: Vec<&String> = select.iter().filter(|f| !CRON_FIELDS.contains(&f.as_str())).collect();
        if !wrong.is_empty() {
            return Err(ApiError::unprocessable(format!("Invalid select columns: {wrong:?}")));
        }
    }
    let filter = matches(&search)?;
    let visible =
        Visible::of(&app, &caller, &search, search.limit.unwrap_or(10), search.offset.unwrap_or(0)).await?;
    let by = search.sort_by.clone().unwrap_or_else(|| "created_at".to_owned());
    let ascending = search.sort_order.as_deref() == Some("asc");
    let mut records = app.records.read().await?;
    let mut found = visible.among(&mut records, filter).await?;
    drop(records);
    found.sort_by(|a, b| {
        let order = sort_key(a, &by).cmp(&sort_key(b, &by)).then_with(|| a.cron_id.cmp(&b.cron_id));
        if ascending { order } else { order.reverse() }
    });
    let total = found.len();
    let items: Vec<Value> = found
        .into_iter()
        .skip(offset)
        .take(limit)
        .map(|cron| {
            let mut value = serde_json::to_value(cron).unwrap_or(Value::Null);
            if let (Some(select), Value::Object(map)) = (&search.select, &mut value) {
                map.retain(|k, _| select.contains(k));
            }
            value
        })
        .collect();
    Ok(page(&items, total, offset))
}

/// `POST /runs/crons/count`.
pub(crate) async fn count(State(app): AppState, caller: Caller, body: Body) -> ApiResult<Response> {
    let (search, _) = read::<CronSearch>(body, app.limits.body_bytes, &CRON_COUNT).await?;
    let filter = matches(&search)?;
    let visible = Visible::of(&app, &caller, &search, 0, 0).await?;
    let mut records = app.records.read().await?;
    Ok(ok(&visible.among(&mut records, filter).await?.len()))
}

fn cron_id_checked(cron_id: &str) -> ApiResult<()> {
    if is_uuid(cron_id) { Ok(()) } else { Err(ApiError::unprocessable("Invalid cron ID: must be a UUID")) }
}

/// What the caller may touch of crons for `action` (one it may not answers as a missing one).
async fn cron_access(app: &App, caller: &Caller, action: Action, cron_id: &str) -> ApiResult<Access> {
    let mut value = json!({"cron_id": cron_id});
    app.authorize(caller, Resource::Crons, action, &mut value).await
}

/// `GET /runs/crons/{cron_id}`.
pub(crate) async fn get(
    State(app): AppState,
    caller: Caller,
    Path(cron_id): Path<String>,
) -> ApiResult<Response> {
    cron_id_checked(&cron_id)?;
    let access = cron_access(&app, &caller, Action::Read, &cron_id).await?;
    let records = app.records.read().await?;
    records
        .crons
        .get(&cron_id)
        .filter(|c| access.allows(&c.metadata))
        .map(ok)
        .ok_or_else(|| ApiError::not_found("Not Found"))
}

/// `DELETE /runs/crons/{cron_id}`: `204`; the runs it made stay.
pub(crate) async fn delete(
    State(app): AppState,
    caller: Caller,
    Path(cron_id): Path<String>,
) -> ApiResult<Response> {
    cron_id_checked(&cron_id)?;
    let access = cron_access(&app, &caller, Action::Delete, &cron_id).await?;
    let mut records = app.records.lock(Key::Cron(&cron_id)).await?;
    if !records.crons.get(&cron_id).is_some_and(|c| access.allows(&c.metadata)) {
        return Err(ApiError::not_found("Not Found"));
    }
    records.commit(vec![Change::DeleteCron(cron_id)]).await?;
    drop(records);
    app.cron_wake.notify_one();
    Ok(empty(StatusCode::NO_CONTENT))
}

/// `PATCH /runs/crons/{cron_id}`: the schedule, time zone, end time, `enabled`, `on_run_completed` and
/// metadata (merged) of the cron, and what its runs are made from (merged into its payload). A new
/// schedule or time zone sets the next time afresh.
pub(crate) async fn patch(
    State(app): AppState,
    caller: Caller,
    Path(cron_id): Path<String>,
    body: Body,
) -> ApiResult<Response> {
    cron_id_checked(&cron_id)?;
    let (mut patch, raw) = read::<CronPatch>(body, app.limits.body_bytes, &CRON_PATCH).await?;
    let Value::Object(mut raw) = raw else {
        return Err(ApiError::bad_request("Request body cannot be empty"));
    };
    if raw.is_empty() {
        return Err(ApiError::bad_request("Request body cannot be empty"));
    }
    if let Some(url) = &patch.webhook {
        app.webhooks.check_url(url)?;
    }
    if let Some(zone) = &patch.timezone {
        schedule::zone(zone).map_err(unprocessable)?;
    }
    let end = match raw.get("end_time") {
        Some(Value::String(text)) => Some(Some(end_time(text)?)),
        Some(_) => Some(None),
        None => None,
    };
    // The hook sees LangGraph's `CronsUpdate`; what it writes in the metadata is kept.
    let mut value = json!({
        "cron_id": cron_id,
        "schedule": patch.schedule,
        "end_time": raw.get("end_time"),
        "enabled": patch.enabled,
        "on_run_completed": patch.on_run_completed,
        "payload": raw.clone(),
    });
    if let (Some(metadata), Value::Object(value)) = (&patch.metadata, &mut value) {
        value.insert("metadata".into(), Value::Object(metadata.clone()));
    }
    let access = app.authorize(&caller, Resource::Crons, Action::Update, &mut value).await?;
    if let Some(Value::Object(metadata)) = value.get("metadata") {
        patch.metadata = Some(metadata.clone());
        if raw.contains_key("metadata") {
            // As in LangGraph, the payload's metadata is the one the hook saw.
            raw.insert("metadata".into(), Value::Object(metadata.clone()));
        }
    }
    let mut records = app.records.lock(Key::Cron(&cron_id)).await?;
    let mut cron = records
        .crons
        .get(&cron_id)
        .filter(|c| access.allows(&c.metadata))
        .cloned()
        .ok_or_else(|| ApiError::not_found(format!("Cron '{cron_id}' not found")))?;
    if patch.timezone.is_some() {
        cron.timezone = patch.timezone.clone();
    }
    if let Some(schedule) = &patch.schedule {
        cron.schedule = schedule.clone();
    }
    if patch.schedule.is_some() || patch.timezone.is_some() {
        Schedule::parse(&cron.schedule, cron.timezone.as_deref()).map_err(unprocessable)?;
        cron.next_run_date = next_run_date(&cron, SystemTime::now());
    }
    if let Some(end) = end {
        cron.end_time = end;
    }
    if let Some(enabled) = patch.enabled {
        cron.enabled = enabled;
    }
    if let Some(on_run_completed) = &patch.on_run_completed {
        cron.on_run_completed = Some(on_run_completed.clone());
    }
    if let Some(metadata) = &patch.metadata {
        cron.metadata.extend(metadata.clone());
    }
    // The payload takes the patch's keys, but keeps its assistant and the cron's id in its configuration.
    let assistant_id = cron.payload.get("assistant_id").cloned();
    cron.payload.extend(raw);
    if let Some(assistant_id) = assistant_id {
        cron.payload.insert("assistant_id".into(), assistant_id);
    }
    let config = cron.payload.entry("config").or_insert_with(|| json!({}));
    if !config.is_object() {
        *config = json!({});
    }
    if let Value::Object(config) = config {
        let configurable = config.entry("configurable").or_insert_with(|| json!({}));
        if !configurable.is_object() {
            *configurable = json!({});
        }
        if let Value::Object(configurable) = configurable {
            configurable.insert("cron_id".into(), json!(cron_id));
        }
    }
    cron.updated_at = now();
    records.commit(vec![Change::Cron(Box::new(cron.clone()))]).await?;
    drop(records);
    app.cron_wake.notify_one();
    Ok(ok(&cron))
}
