//! Runs: created as records first (pending), then started by a worker, one at a time per thread, in the
//! order they were made; multitask strategies, cancellation and the thread's status follow LangGraph's
//! server.

pub(crate) mod channel;
mod exec;
pub(crate) mod feed;
pub(crate) mod modes;
pub(crate) mod result;
pub(crate) mod settle;
pub(crate) mod taps;
pub(crate) mod wire;

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, LazyLock};
use std::time::{Duration, SystemTime};

use serde_json::{Map, Value, json};

pub(crate) use self::channel::{CancelAction, RunChannel};
#[cfg(feature = "scale")]
pub(crate) use self::exec::execute_on;
use crate::api::guard::{Access, Caller};
use crate::api::requests::RunCreate;
use crate::app::{App, is_uuid, merge, new_id, now, object};
use crate::auth::{Action, Resource};
use crate::error::{ApiError, ApiResult};
use crate::model::{Run, RunKwargs, RunRecord, RunStatus, Thread, ThreadStatus};
use crate::storage::Change;

/// A run started as it was made (stored running, holding its run slot), not yet handed to a task: the
/// whole of its execution, to the record of its end.
pub(crate) type Start = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A run started as it was made that must run whoever holds it: handed to a task of its own when
/// dropped unrun (its thread would stay busy otherwise).
pub(crate) struct Started(Option<Start>);

impl Started {
    /// Drives the run in the caller's task as far as it goes without waiting (a run that never waits runs
    /// to its end here, its events ready to go out together); one that waits goes on in a task of its own.
    pub(crate) async fn run_inline(mut self) {
        let Some(run) = self.0.as_mut() else { return };
        let done = std::future::poll_fn(|cx| std::task::Poll::Ready(run.as_mut().poll(cx).is_ready())).await;
        if done {
            self.0 = None;
        } else {
            self.spawn();
        }
    }

    /// Hands the run, unless it ran to its end, to a task of its own.
    fn spawn(&mut self) {
        if let Some(run) = self.0.take() {
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => drop(runtime.spawn(run)),
                Err(_) => {
                    tracing::error!("a started run was dropped outside the runtime; its thread stays busy")
                }
            }
        }
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        self.spawn();
    }
}

impl std::fmt::Debug for Started {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Started").field(&self.0.is_some()).finish()
    }
}

/// A run just made, with its channel and, when asked for, a subscription made before any worker could
/// start the run (so it sees all of it).
#[derive(Debug)]
pub(crate) struct Created {
    pub(crate) record: RunRecord,
    pub(crate) channel: Arc<RunChannel>,
    pub(crate) subscription: Option<channel::Subscription>,
    /// Whether the run was started as it was made (its thread was free and a run slot too), so that no
    /// worker needs waking for it.
    started: bool,
    /// That run, until [`schedule`](Self::schedule) hands it to a task or a streamed run's body takes it
    /// to drive it first ([`take_started`](Self::take_started)).
    run: Option<Started>,
}

impl Created {
    /// Runs this run if it was started as it was made (in a task of its own, unless taken), else starts
    /// the thread's next run if it can.
    pub(crate) fn schedule(&mut self, app: &Arc<App>) {
        if let Some(mut run) = self.run.take() {
            run.spawn();
        } else if !self.started {
            schedule(app, &self.record.run.thread_id);
        }
    }

    /// The run, when it was started as it was made, for the caller to drive ([`Started::run_inline`]).
    pub(crate) fn take_started(&mut self) -> Option<Started> {
        self.run.take()
    }
}

/// The stream modes of a request: a name or a list; none (or an empty list) is `["values"]`.
fn stream_modes(value: &Value) -> Vec<String> {
    let modes: Vec<String> = match value {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
        _ => Vec::new(),
    };
    if modes.is_empty() { vec!["values".to_owned()] } else { modes }
}

/// The last moment a delayed run may start at: the end of the year 9999, the last one LangGraph's dates
/// hold (it fails with a 500 past it).
const LATEST_START: Duration = Duration::from_secs(253_402_300_799);

/// When a run delayed by `after_seconds` starts (none when it is not delayed), or a `422` when that is past
/// [`LATEST_START`].
fn start_after(after_seconds: f64) -> ApiResult<Option<SystemTime>> {
    if after_seconds <= 0.0 {
        return Ok(None);
    }
    let latest = SystemTime::UNIX_EPOCH + LATEST_START;
    let start =
        Duration::try_from_secs_f64(after_seconds).ok().and_then(|d| SystemTime::now().checked_add(d));
    match start {
        Some(start) if start <= latest => Ok(Some(start)),
        _ => {
            let most = latest.duration_since(SystemTime::now()).unwrap_or_default().as_secs();
            Err(ApiError::unprocessable(format!(
                "after_seconds must be at most {most}: the run must start before the year 10000"
            )))
        }
    }
}

/// Makes a run: checks the request as LangGraph does, creates or marks the thread busy, applies the
/// multitask strategy and saves the run as pending. `stateless` runs get a thread of their own, deleted
/// when they end unless `on_completion` is `keep`. `subscribe`: listen to the run from its first event.
/// The caller must be allowed `create_run` on the thread (and to read the assistant, unless the server
/// made it); a thread or assistant it may not see is not found.
pub(crate) async fn create(
    app: &Arc<App>,
    caller: &Caller,
    thread_id: Option<&str>,
    mut body: RunCreate,
    stateless: bool,
    subscribe: bool,
) -> ApiResult<Created> {
    let assistant_id = app.resolve_assistant_id(&body.assistant_id);
    if !is_uuid(&assistant_id) {
        return Err(app.invalid_assistant(&body.assistant_id));
    }
    if thread_id.is_some_and(|t| !is_uuid(t)) {
        return Err(ApiError::unprocessable("Invalid thread ID"));
    }
    if body.checkpoint_id.as_deref().is_some_and(|c| !is_uuid(c)) {
        return Err(ApiError::unprocessable("Invalid checkpoint ID"));
    }
    if let Some(url) = &body.webhook {
        app.webhooks.check_url(url)?;
    }
    let resuming = body.command.as_ref().and_then(|c| c.get("resume")).is_some_and(|r| !r.is_null());
    if (thread_id.is_none() || stateless) && resuming {
        return Err(ApiError::bad_request("You must provide a thread_id when resuming."));
    }
    let temporary = stateless && body.on_completion.as_deref().unwrap_or("delete") == "delete";
    let stream_mode = stream_modes(&body.stream_mode);
    let mut config = body.config.take().unwrap_or_default();
    let mut context = body.context.take().unwrap_or_default();
    let mut configurable = object(config.get("configurable"));
    if !configurable.is_empty() && !context.is_empty() {
        return Err(ApiError::bad_request(
            "Cannot specify both configurable and context. Prefer setting context alone. Context was introduced in \
             LangGraph 0.6.0 and is the long term planned replacement for configurable.",
        ));
    }
    if context.is_empty() {
        context = configurable.clone();
    } else {
        configurable = context.clone();
    }
    if let Some(checkpoint_id) = body.checkpoint_id.take() {
        configurable.insert("checkpoint_id".into(), Value::String(checkpoint_id));
    }
    if let Some(checkpoint) = body.checkpoint.take() {
        configurable.extend(checkpoint);
    }
    if let Some(cron_id) = body.cron_id.take() {
        configurable.insert("cron_id".into(), Value::String(cron_id));
    }
    let after_seconds = body.after_seconds.unwrap_or(0.0).max(0.0);
    let starts_at = start_after(after_seconds)?;
    configurable.insert("__after_seconds__".into(), json!(after_seconds));
    let durability = body.durability.take().unwrap_or_else(|| {
        if body.checkpoint_during == Some(false) { "exit".to_owned() } else { "async".to_owned() }
    });
    let strategy = body.multitask_strategy.take().unwrap_or_else(|| "enqueue".to_owned());
    let if_not_exists = if stateless {
        "create".to_owned()
    } else {
        body.if_not_exists.take().unwrap_or_else(|| "reject".into())
    };
    let metadata = body.metadata.take().unwrap_or_default();
    // The request as an authorization hook sees it (and may change its metadata); built only for one.
    let (access, metadata) = if app.authorizes(caller) {
        let mut value = json!({
            "thread_id": if stateless { None } else { thread_id },
            "assistant_id": assistant_id,
            "metadata": metadata,
            "multitask_strategy": strategy,
            "if_not_exists": if_not_exists,
            "after_seconds": after_seconds,
        });
        let access = app.authorize(caller, Resource::Threads, Action::CreateRun, &mut value).await?;
        (access, object(value.get("metadata")))
    } else {
        (Access::default(), metadata)
    };
    let thread_id = thread_id.map_or_else(new_id, str::to_owned);
    let config_metadata = object(config.get("metadata"));
    let not_found = || ApiError::not_found("Thread or assistant not found.");
    // An assistant made through the API must be readable by the caller (the server's own are everyone's;
    // without authentication, all are).
    if app.authorizes(caller) {
        let owned = app.records.lock().await?.assistants.get(&assistant_id).map(|a| a.metadata.clone());
        if let Some(owned) = owned.filter(|m| m.get("created_by").and_then(Value::as_str) != Some("system")) {
            let mut value = json!({"assistant_id": assistant_id});
            if !app.authorize(caller, Resource::Assistants, Action::Read, &mut value).await?.allows(&owned) {
                return Err(not_found());
            }
        }
    }
    if let Some(user) = caller.user() {
        configurable.insert("langgraph_auth_user_id".into(), json!(user.identity()));
        configurable.insert("langgraph_auth_permissions".into(), json!(user.permissions()));
        configurable.insert(
            "langgraph_auth_user".into(),
            json!({"identity": user.identity(), "display_name": user.display_name(), "permissions": user.permissions()}),
        );
    }
    // The request's config as LangGraph merges it: its own configurable set last.
    config.insert("configurable".into(), Value::Object(configurable.clone()));

    let mut records = app.records.lock().await?;
    let assistant = records.assistants.get(&assistant_id).ok_or_else(not_found)?;
    let assistant_config = assistant.config.as_object().unwrap_or(&*EMPTY);
    let assistant_configurable = inner_object(&assistant.config, "configurable");
    let mut ids = Map::new();
    ids.insert("graph_id".into(), Value::String(assistant.graph_id.clone()));
    ids.insert("assistant_id".into(), Value::String(assistant_id.clone()));
    let existing = records.threads.get(&thread_id);
    if existing.as_ref().is_some_and(|t| !access.allows(&t.metadata)) {
        return Err(not_found());
    }
    let stamp = now();
    let thread = match existing {
        None if if_not_exists == "create" => {
            let mut thread_config = merge(&[assistant_config, &config]);
            thread_config.insert("configurable".into(), Value::Object(assistant_configurable.clone()));
            Thread {
                thread_id: thread_id.clone(),
                created_at: stamp.clone(),
                updated_at: stamp.clone(),
                state_updated_at: stamp.clone(),
                metadata: merge(&[&ids, &config_metadata, &metadata]),
                status: ThreadStatus::Busy,
                config: Value::Object(thread_config),
                values: None,
                error: None,
                interrupts: Map::new(),
            }
        }
        None => return Err(not_found()),
        Some(thread) if thread.status == ThreadStatus::Busy => thread.clone(),
        Some(thread) => {
            let thread_configurable = inner_object(&thread.config, "configurable");
            let mut thread_config =
                merge(&[assistant_config, thread.config.as_object().unwrap_or(&*EMPTY), &config]);
            thread_config.insert(
                "configurable".into(),
                Value::Object(merge(&[assistant_configurable, thread_configurable])),
            );
            // Field by field: what the run replaces is not copied.
            Thread {
                thread_id: thread.thread_id.clone(),
                created_at: thread.created_at.clone(),
                updated_at: stamp.clone(),
                state_updated_at: thread.state_updated_at.clone(),
                metadata: merge(&[&thread.metadata, &ids]),
                status: ThreadStatus::Busy,
                config: Value::Object(thread_config),
                values: thread.values.clone(),
                error: thread.error.clone(),
                interrupts: thread.interrupts.clone(),
            }
        }
    };
    let inflight: Vec<String> = records.active_runs(&thread_id).map(|r| r.run.run_id.clone()).collect();
    if strategy == "reject" && !inflight.is_empty() {
        return Err(ApiError::conflict(
            "Thread is already running a task. Wait for it to finish or choose a different multitask strategy.",
        ));
    }
    let run_id = new_id();
    let thread_configurable = existing.map_or(&*EMPTY, |t| inner_object(&t.config, "configurable"));
    let mut run_configurable = merge(&[assistant_configurable, thread_configurable, &configurable]);
    run_configurable.insert("run_id".into(), Value::String(run_id.clone()));
    run_configurable.insert("thread_id".into(), Value::String(thread_id.clone()));
    run_configurable.insert("graph_id".into(), Value::String(assistant.graph_id.clone()));
    run_configurable.insert("assistant_id".into(), Value::String(assistant_id.clone()));
    // An existing thread's metadata as this run updates it (with the graph and assistant); a new one's
    // adds nothing (as in LangGraph).
    let thread_metadata = if existing.is_some() { &thread.metadata } else { &*EMPTY };
    let mut run_metadata = merge(&[&assistant.metadata, thread_metadata, &config_metadata, &metadata]);
    run_metadata.insert("assistant_id".into(), json!(assistant_id));
    let mut run_config = merge(&[assistant_config, &config]);
    run_config.insert("configurable".into(), Value::Object(run_configurable));
    run_config.insert("metadata".into(), Value::Object(run_metadata.clone()));
    let created_at = starts_at.map_or_else(|| stamp.clone(), weft_graph::time::format_rfc3339);
    let context = match assistant.context.as_object().filter(|c| !c.is_empty()) {
        Some(defaults) => merge(&[defaults, &context]),
        None => context,
    };
    let record = RunRecord {
        run: Run {
            run_id: run_id.clone(),
            thread_id: thread_id.clone(),
            assistant_id: assistant_id.clone(),
            metadata: Arc::new(run_metadata),
            status: RunStatus::Pending,
            kwargs: Arc::new(RunKwargs {
                input: std::mem::take(&mut body.input),
                command: body.command.take().map_or(Value::Null, Value::Object),
                config: Value::Object(run_config),
                context: Value::Object(context),
                stream_mode,
                interrupt_before: std::mem::take(&mut body.interrupt_before),
                interrupt_after: std::mem::take(&mut body.interrupt_after),
                webhook: body.webhook.take().map_or(Value::Null, Value::String),
                feedback_keys: std::mem::take(&mut body.feedback_keys),
                temporary,
                subgraphs: body.stream_subgraphs.unwrap_or(false),
                resumable: body.stream_resumable.unwrap_or(false),
                checkpoint_during: body.checkpoint_during.unwrap_or(true),
                durability,
            }),
            multitask_strategy: strategy.clone(),
            created_at,
            updated_at: stamp,
            langsmith_session_name: None,
        },
        result: None,
        attempt: 0,
        delete_thread: temporary,
    };
    // A run that can start at once (nothing else on its thread, no delay, a free run slot; embedded) is
    // stored running, in the transaction that makes it: one write and no hand-off to a worker task.
    let slot =
        if inflight.is_empty() && after_seconds == 0.0 && starts_here(app) && !app.drain.is_drain_requested()
        {
            Arc::clone(&app.run_slots).try_acquire_owned().ok()
        } else {
            None
        };
    let stored = match &slot {
        Some(_) => {
            let mut running = record.clone();
            running.mark_running();
            running
        }
        None => record.clone(),
    };
    records.commit(vec![Change::Thread(thread), Change::Run(Box::new(stored.clone()))]).await?;
    let channel = app.channels.open(&run_id, record.run.kwargs.resumable);
    let subscription = subscribe.then(|| channel.subscribe(None));
    // The thread's listeners hear of the run before a worker can start it.
    app.thread_taps.run_made(&thread_id, &run_id, &channel);
    drop(records);
    // Scaled out, the thread's listeners on other instances hear of it through Redis.
    #[cfg(feature = "scale")]
    if let Some(scale) = &app.scale {
        scale.announce_run(&thread_id, &run_id);
    }
    if matches!(strategy.as_str(), "interrupt" | "rollback") && !inflight.is_empty() {
        let action = if strategy == "rollback" { CancelAction::Rollback } else { CancelAction::Interrupt };
        match cancel(app, &thread_id, &inflight, action).await {
            // The runs may have finished meanwhile: then there is nothing to cancel, and the new run goes on.
            Ok(()) | Err(CancelError::NotFound | CancelError::NotActive) => {}
            // As in LangGraph, the new run is not made when the runs in flight cannot be cancelled: it goes,
            // and the caller gets the failure.
            Err(e) => {
                tracing::error!(thread_id, run_id, error = %e, "cannot cancel the runs in flight: the new run is withdrawn");
                withdraw(app, &thread_id, &run_id).await;
                return Err(e.into());
            }
        }
    }
    // Not spawned here: a streamed run's body drives it first, so that a run that never waits runs in
    // the connection's task and its events go out in one write.
    let run = slot.map(|permit| {
        let app = Arc::clone(app);
        let channel = Arc::clone(&channel);
        let run: Start = Box::pin(async move {
            exec::execute_on(&app, stored, channel).await;
            drop(permit);
        });
        Started(Some(run))
    });
    // The run as made (`pending`, as LangGraph answers a creation), whether or not it started since.
    Ok(Created { record, channel, subscription, started: run.is_some(), run })
}

/// An object with no keys, for merges of objects that may be missing.
static EMPTY: LazyLock<Map<String, Value>> = LazyLock::new(Map::new);

/// The object `value[key]`, or an empty one.
fn inner_object<'a>(value: &'a Value, key: &str) -> &'a Map<String, Value> {
    value.get(key).and_then(Value::as_object).unwrap_or(&*EMPTY)
}

/// Whether this process starts its runs itself (embedded); scaled out, workers claim them from the queue.
fn starts_here(app: &App) -> bool {
    #[cfg(feature = "scale")]
    if app.scale.is_some() {
        return false;
    }
    let _ = app;
    true
}

/// Starts the thread's next pending run when none is running (in a task of its own). Scaled out: wakes
/// the workers of every instance, which claim it from the queue.
pub(crate) fn schedule(app: &Arc<App>, thread_id: &str) {
    #[cfg(feature = "scale")]
    if let Some(scale) = &app.scale {
        scale.wake();
        return;
    }
    let app = Arc::clone(app);
    let thread_id = thread_id.to_owned();
    tokio::spawn(async move {
        if let Err(e) = start_next(&app, &thread_id).await {
            tracing::error!(thread_id, error = %e, "cannot start the next run");
        }
    });
}

async fn start_next(app: &Arc<App>, thread_id: &str) -> Result<(), crate::error::ServerError> {
    let Ok(permit) = Arc::clone(&app.run_slots).acquire_owned().await else { return Ok(()) };
    // A shutdown: the run stays pending for the next start.
    if app.drain.is_drain_requested() {
        return Ok(());
    }
    let mut records = app.records.lock().await?;
    if records.active_runs(thread_id).any(|r| r.run.status == RunStatus::Running) {
        return Ok(());
    }
    let next = records
        .active_runs(thread_id)
        .filter(|r| r.run.status == RunStatus::Pending)
        .min_by(|a, b| (&a.run.created_at, &a.run.run_id).cmp(&(&b.run.created_at, &b.run.run_id)))
        .cloned();
    let Some(mut next) = next else { return Ok(()) };
    let due = weft_graph::time::parse_rfc3339(&next.run.created_at).unwrap_or(SystemTime::UNIX_EPOCH);
    if let Ok(wait) = due.duration_since(SystemTime::now()) {
        drop(records);
        drop(permit);
        let app = Arc::clone(app);
        let thread_id = thread_id.to_owned();
        tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            schedule(&app, &thread_id);
        });
        return Ok(());
    }
    next.mark_running();
    records.commit(vec![Change::Run(Box::new(next.clone()))]).await?;
    drop(records);
    let app = Arc::clone(app);
    tokio::spawn(async move {
        exec::execute(&app, next).await;
        drop(permit);
    });
    Ok(())
}

/// Why runs could not be cancelled.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CancelError {
    /// None of the runs is on the thread.
    #[error("No runs found to cancel.")]
    NotFound,
    /// None of them is pending or running any more: nothing is left to cancel.
    #[error(
        "No matching runs to cancel. Please verify the thread ID and run IDs are correct, and the runs haven't \
         been deleted or completed."
    )]
    NotActive,
    /// The records could not be read or written: nothing was cancelled.
    #[error("cannot cancel the runs: {0}")]
    Storage(#[source] crate::error::ServerError),
    /// Scaled out: a run in flight on some instance could not be asked to stop (its cancel could not be
    /// recorded in the run queue); it may go on.
    #[cfg_attr(not(feature = "scale"), allow(dead_code))]
    #[error("cannot ask the run to stop where it runs: {0}")]
    Remote(#[source] crate::error::ServerError),
    /// The runs were cancelled, but the thread's state could not be read back into it.
    #[error("the runs were cancelled but the thread was not settled: {}", .0.detail)]
    Settle(ApiError),
}

impl From<CancelError> for ApiError {
    fn from(e: CancelError) -> Self {
        match e {
            CancelError::NotFound | CancelError::NotActive => ApiError::not_found(e.to_string()),
            CancelError::Storage(e) | CancelError::Remote(e) => ApiError::from(e),
            CancelError::Settle(e) => e,
        }
    }
}

/// Withdraws a run just made (its creation failed after it was stored): deletes it and ends its channel.
/// What fails here is logged; the caller reports the failure that made it withdraw.
async fn withdraw(app: &Arc<App>, thread_id: &str, run_id: &str) {
    let deleted = match app.records.lock().await {
        Ok(mut records) => records.commit(vec![Change::DeleteRun(run_id.to_owned())]).await,
        Err(e) => Err(e),
    };
    if let Err(e) = deleted {
        tracing::error!(thread_id, run_id, error = %e, "cannot withdraw the run");
        return;
    }
    if let Some(channel) = app.channels.get(run_id) {
        channel.finish();
    }
    app.channels.remove(run_id);
    if let Err(e) = settle::settle_thread(app, thread_id).await {
        tracing::error!(thread_id, error = %e.detail, "cannot settle the thread after withdrawing a run");
    }
}

/// Cancels runs of a thread: a running run is asked to stop (its worker ends it `interrupted`, or deletes
/// it on `rollback`); a pending one ends at once. The pending ones' ends are written first: when that
/// fails, no run is asked to stop. [`CancelError::NotFound`] or [`CancelError::NotActive`] when none of
/// them is pending or running.
pub(crate) async fn cancel(
    app: &Arc<App>,
    thread_id: &str,
    run_ids: &[String],
    action: CancelAction,
) -> Result<(), CancelError> {
    let mut records = app.records.lock().await.map_err(CancelError::Storage)?;
    let found: Vec<RunRecord> = run_ids
        .iter()
        .filter_map(|id| records.runs.get(id))
        .filter(|r| r.run.thread_id == thread_id)
        .cloned()
        .collect();
    if found.is_empty() {
        return Err(CancelError::NotFound);
    }
    let active: Vec<RunRecord> = found.into_iter().filter(|r| r.run.status.is_active()).collect();
    if active.is_empty() {
        return Err(CancelError::NotActive);
    }
    let mut changes = Vec::new();
    let mut ended = Vec::new();
    let mut running = Vec::new();
    for mut record in active {
        match record.run.status {
            RunStatus::Running => running.push(record),
            _ if action == CancelAction::Rollback => {
                changes.push(Change::DeleteRun(record.run.run_id.clone()));
                ended.push(record.run.run_id);
            }
            _ => {
                record.run.status = RunStatus::Interrupted;
                record.run.updated_at = now();
                ended.push(record.run.run_id.clone());
                changes.push(Change::Run(Box::new(record)));
            }
        }
    }
    records.commit(changes).await.map_err(CancelError::Storage)?;
    #[cfg_attr(not(feature = "scale"), allow(unused_mut))]
    let mut elsewhere: Vec<String> = Vec::new();
    for record in running {
        // The channel is the one the worker listens to (opened now if the worker has not yet).
        let channel = app.channels.open(&record.run.run_id, record.run.kwargs.resumable);
        // Scaled out, the cancel goes to the run's worker below (wherever it is), and its failure to the
        // caller.
        #[cfg(feature = "scale")]
        if app.scale.is_some() {
            elsewhere.push(record.run.run_id);
            continue;
        }
        channel.cancel(action);
    }
    for run_id in ended {
        if let Some(channel) = app.channels.get(&run_id) {
            channel.finish();
        }
        app.channels.remove(&run_id);
    }
    drop(records);
    #[cfg(feature = "scale")]
    let asked = match &app.scale {
        Some(scale) => ask_elsewhere(scale, &elsewhere, action).await,
        None => Ok(()),
    };
    drop(elsewhere);
    // The runs ended here are settled whether or not those elsewhere could be asked to stop.
    settle::settle_thread(app, thread_id).await.map_err(CancelError::Settle)?;
    #[cfg(feature = "scale")]
    asked?;
    Ok(())
}

/// Scaled out: asks each run to stop wherever it runs; the first that could not be asked, as an error.
#[cfg(feature = "scale")]
async fn ask_elsewhere(
    scale: &crate::scale::Scale,
    run_ids: &[String],
    action: CancelAction,
) -> Result<(), CancelError> {
    let mut failed = None;
    for run_id in run_ids {
        if let Err(e) = scale.cancel_everywhere(run_id, action).await {
            tracing::error!(run_id, error = %e, "cannot ask the run to stop where it runs");
            failed.get_or_insert(CancelError::Remote(e));
        }
    }
    failed.map_or(Ok(()), Err)
}

/// A run of the thread and the channel to listen to it on: its live channel while it is pending or
/// running (opened if its worker has not yet), else the one it kept (resumable runs; scaled out, one fed
/// from the run's stream in Redis when this instance kept none), else a closed one holding its result.
/// Decided under the records' lock, as workers close channels under it.
pub(crate) async fn listen(
    app: &App,
    caller: &Caller,
    thread_id: &str,
    run_id: &str,
) -> ApiResult<(RunRecord, Arc<RunChannel>)> {
    crate::app::require_uuid(thread_id, "thread")?;
    crate::app::require_uuid(run_id, "run")?;
    let mut value = json!({"thread_id": thread_id, "run_id": run_id});
    let access = app.authorize(caller, Resource::Threads, Action::Read, &mut value).await?;
    let records = app.records.lock().await?;
    if !records.threads.get(thread_id).is_some_and(|t| access.allows(&t.metadata)) {
        return Err(ApiError::thread_not_found(thread_id));
    }
    let record = records
        .runs
        .get(run_id)
        .filter(|r| r.run.thread_id == thread_id)
        .cloned()
        .ok_or_else(|| ApiError::not_found("Run not found"))?;
    let channel = if record.run.status.is_active() {
        app.channels.open(run_id, record.run.kwargs.resumable)
    } else if let Some(kept) = app.channels.get(run_id) {
        kept
    } else if record.run.kwargs.resumable && app.channels.is_remote() {
        // Scaled out, a finished resumable run's events are still in its stream in Redis: read from there.
        app.channels.open(run_id, true)
    } else {
        let closed = Arc::new(RunChannel::new(false));
        closed.set_result(record.result.clone());
        closed.finish();
        closed
    };
    Ok((record, channel))
}

/// At start-up: runs a stopped server left running go back to pending, and every thread with pending
/// runs is scheduled. Scaled out, other instances may be running them: the queue's leases say which runs
/// were left, and the worker claims them when their lease expires.
pub(crate) async fn recover(app: &Arc<App>) -> Result<(), crate::error::ServerError> {
    #[cfg(feature = "scale")]
    if let Some(scale) = &app.scale {
        scale.wake_here();
        return Ok(());
    }
    let mut records = app.records.lock().await?;
    let mut changes = Vec::new();
    let mut threads = std::collections::BTreeSet::new();
    for record in records.runs.values() {
        if record.run.status.is_active() {
            threads.insert(record.run.thread_id.clone());
        }
        if record.run.status == RunStatus::Running {
            let mut record = record.clone();
            record.run.status = RunStatus::Pending;
            changes.push(Change::Run(Box::new(record)));
        }
    }
    records.commit(changes).await?;
    drop(records);
    for thread_id in threads {
        schedule(app, &thread_id);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    #[test]
    fn a_delayed_start_is_bounded_by_the_year_9999() {
        assert_eq!(start_after(0.0).unwrap(), None);
        assert_eq!(start_after(-5.0).unwrap(), None);
        let soon = start_after(60.0).unwrap().unwrap();
        assert!(soon > SystemTime::now() + Duration::from_secs(50));
        assert!(start_after(1e10).unwrap().is_some());
        for past in [2.6e11, 1e19, 1e300, f64::MAX] {
            let e = start_after(past).unwrap_err();
            assert_eq!(e.status.as_u16(), 422, "{past}");
            assert!(e.detail.contains("before the year 10000"), "{}", e.detail);
        }
    }

    fn started(run: impl Future<Output = ()> + Send + 'static) -> Started {
        Started(Some(Box::pin(run)))
    }

    #[tokio::test]
    async fn a_run_that_never_waits_runs_to_its_end_in_the_callers_task() {
        let ran = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&ran);
        started(async move { flag.store(true, Ordering::SeqCst) }).run_inline().await;
        assert!(ran.load(Ordering::SeqCst), "ran to its end before run_inline returned");
    }

    #[tokio::test]
    async fn a_run_that_waits_goes_on_in_a_task_of_its_own() {
        let (go, wait) = tokio::sync::oneshot::channel::<()>();
        let (done, finished) = tokio::sync::oneshot::channel::<()>();
        started(async move {
            let _ = wait.await;
            let _ = done.send(());
        })
        .run_inline()
        .await;
        // The caller is back while the run waits; the run finishes without the caller.
        go.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(5), finished).await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn a_run_dropped_unrun_runs_in_a_task_of_its_own() {
        let (done, finished) = tokio::sync::oneshot::channel::<()>();
        drop(started(async move {
            let _ = done.send(());
        }));
        tokio::time::timeout(Duration::from_secs(5), finished).await.unwrap().unwrap();
    }
}
