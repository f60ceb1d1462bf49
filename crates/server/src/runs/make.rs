//! Making a run from a request, in steps: the request checked and its settings merged as LangGraph merges
//! them ([`Request::read`]), the caller's right to the assistant checked, then, under the records' lock, the
//! thread as the run leaves it ([`thread_for_run`]), the run's record ([`Request::record`]), the multitask
//! strategy applied and both stored in one write ([`store`]).

use std::sync::{Arc, LazyLock};
use std::time::{Duration, SystemTime};

use serde_json::{Map, Value, json};

use super::{
    CancelAction, CancelError, Created, Start, Started, cancel, channel::Subscription, exec, withdraw,
};
use crate::api::guard::{Access, Caller};
use crate::api::requests::RunCreate;
use crate::app::{App, is_uuid, merge, new_id, now, object};
use crate::auth::{Action, Resource};
use crate::error::{ApiError, ApiResult};
use crate::model::{Assistant, Run, RunKwargs, RunRecord, RunStatus, Thread, ThreadStatus};
use crate::retention::ThreadTtl;
use crate::storage::{Change, Key};

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

/// An object with no keys, for merges of objects that may be missing.
static EMPTY: LazyLock<Map<String, Value>> = LazyLock::new(Map::new);

/// The object `value[key]`, or an empty one.
fn inner_object<'a>(value: &'a Value, key: &str) -> &'a Map<String, Value> {
    value.get(key).and_then(Value::as_object).unwrap_or(&*EMPTY)
}

fn not_found() -> ApiError {
    ApiError::not_found("Thread or assistant not found.")
}

/// A run request, checked, with its settings merged and the caller's authorization applied; what is left
/// of the body (input, command, interrupts…) goes into the run's record as it came.
struct Request {
    body: RunCreate,
    assistant_id: String,
    thread_id: String,
    temporary: bool,
    stream_mode: Vec<String>,
    /// The request's config, its `configurable` as the run sees it.
    config: Map<String, Value>,
    configurable: Map<String, Value>,
    context: Map<String, Value>,
    config_metadata: Map<String, Value>,
    metadata: Map<String, Value>,
    after_seconds: f64,
    starts_at: Option<SystemTime>,
    durability: String,
    strategy: String,
    if_not_exists: String,
    /// Which threads the caller may see.
    access: Access,
}

/// Checks what LangGraph checks of a run request before anything else: the ids, the webhook, a resume
/// without a thread.
fn check(app: &App, thread_id: Option<&str>, body: &RunCreate, stateless: bool) -> ApiResult<String> {
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
    Ok(assistant_id)
}

/// The request's `configurable` and `context`, one standing for the other (both given is a `400`), with
/// the checkpoint and cron the run starts from.
fn configurable_and_context(
    config: &Map<String, Value>,
    body: &mut RunCreate,
) -> ApiResult<(Map<String, Value>, Map<String, Value>)> {
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
    Ok((configurable, context))
}

impl Request {
    /// Checks the request and merges its settings; an authorization hook sees it (and may change its
    /// metadata).
    async fn read(
        app: &App,
        caller: &Caller,
        thread_id: Option<&str>,
        mut body: RunCreate,
        stateless: bool,
    ) -> ApiResult<Self> {
        let assistant_id = check(app, thread_id, &body, stateless)?;
        let temporary = stateless && body.on_completion.as_deref().unwrap_or("delete") == "delete";
        let stream_mode = stream_modes(&body.stream_mode);
        let mut config = body.config.take().unwrap_or_default();
        let (mut configurable, context) = configurable_and_context(&config, &mut body)?;
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
        // The request as an authorization hook sees it; built only for one.
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
        if let Some(user) = caller.user() {
            configurable.insert("langgraph_auth_user_id".into(), json!(user.identity()));
            configurable.insert("langgraph_auth_permissions".into(), json!(user.permissions()));
            configurable.insert(
                "langgraph_auth_user".into(),
                json!({"identity": user.identity(), "display_name": user.display_name(), "permissions": user.permissions()}),
            );
        }
        let config_metadata = object(config.get("metadata"));
        // The request's config as LangGraph merges it: its own configurable set last.
        config.insert("configurable".into(), Value::Object(configurable.clone()));
        Ok(Request {
            body,
            assistant_id,
            thread_id: thread_id.map_or_else(new_id, str::to_owned),
            temporary,
            stream_mode,
            config,
            configurable,
            context,
            config_metadata,
            metadata,
            after_seconds,
            starts_at,
            durability,
            strategy,
            if_not_exists,
            access,
        })
    }

    /// The run's record, pending: its config the assistant's, the thread's and the request's merged (in
    /// that order), its metadata likewise.
    fn record(
        &mut self,
        assistant: &Assistant,
        existing: Option<&Thread>,
        thread: &Thread,
        stamp: String,
    ) -> RunRecord {
        let run_id = new_id();
        let assistant_configurable = inner_object(&assistant.config, "configurable");
        let thread_configurable = existing.map_or(&*EMPTY, |t| inner_object(&t.config, "configurable"));
        let mut run_configurable = merge(&[assistant_configurable, thread_configurable, &self.configurable]);
        run_configurable.insert("run_id".into(), Value::String(run_id.clone()));
        run_configurable.insert("thread_id".into(), Value::String(self.thread_id.clone()));
        run_configurable.insert("graph_id".into(), Value::String(assistant.graph_id.clone()));
        run_configurable.insert("assistant_id".into(), Value::String(self.assistant_id.clone()));
        // An existing thread's metadata as this run updates it (with the graph and assistant); a new one's
        // adds nothing (as in LangGraph).
        let thread_metadata = if existing.is_some() { &thread.metadata } else { &*EMPTY };
        let mut run_metadata =
            merge(&[&assistant.metadata, thread_metadata, &self.config_metadata, &self.metadata]);
        run_metadata.insert("assistant_id".into(), json!(self.assistant_id));
        let assistant_config = assistant.config.as_object().unwrap_or(&*EMPTY);
        let mut run_config = merge(&[assistant_config, &self.config]);
        run_config.insert("configurable".into(), Value::Object(run_configurable));
        run_config.insert("metadata".into(), Value::Object(run_metadata.clone()));
        let created_at = self.starts_at.map_or_else(|| stamp.clone(), weft_graph::time::format_rfc3339);
        let context = std::mem::take(&mut self.context);
        let context = match assistant.context.as_object().filter(|c| !c.is_empty()) {
            Some(defaults) => merge(&[defaults, &context]),
            None => context,
        };
        let body = &mut self.body;
        RunRecord {
            run: Run {
                run_id,
                thread_id: self.thread_id.clone(),
                assistant_id: self.assistant_id.clone(),
                metadata: Arc::new(run_metadata),
                status: RunStatus::Pending,
                kwargs: Arc::new(RunKwargs {
                    input: std::mem::take(&mut body.input),
                    command: body.command.take().map_or(Value::Null, Value::Object),
                    config: Value::Object(run_config),
                    context: Value::Object(context),
                    stream_mode: std::mem::take(&mut self.stream_mode),
                    interrupt_before: std::mem::take(&mut body.interrupt_before),
                    interrupt_after: std::mem::take(&mut body.interrupt_after),
                    webhook: body.webhook.take().map_or(Value::Null, Value::String),
                    feedback_keys: std::mem::take(&mut body.feedback_keys),
                    temporary: self.temporary,
                    subgraphs: body.stream_subgraphs.unwrap_or(false),
                    resumable: body.stream_resumable.unwrap_or(false),
                    checkpoint_during: body.checkpoint_during.unwrap_or(true),
                    durability: std::mem::take(&mut self.durability),
                }),
                multitask_strategy: self.strategy.clone(),
                created_at,
                updated_at: stamp,
                langsmith_session_name: None,
            },
            result: None,
            attempt: 0,
            delete_thread: self.temporary,
        }
    }
}

/// An assistant made through the API must be readable by the caller (the server's own are everyone's;
/// without authentication, all are): else it is not found.
async fn check_assistant_access(app: &App, caller: &Caller, assistant_id: &str) -> ApiResult<()> {
    if !app.authorizes(caller) {
        return Ok(());
    }
    let owned = app.records.read().await?.assistants.get(assistant_id).map(|a| a.metadata.clone());
    if let Some(owned) = owned.filter(|m| m.get("created_by").and_then(Value::as_str) != Some("system")) {
        let mut value = json!({"assistant_id": assistant_id});
        if !app.authorize(caller, Resource::Assistants, Action::Read, &mut value).await?.allows(&owned) {
            return Err(not_found());
        }
    }
    Ok(())
}

/// The thread as the run leaves it, busy: made when missing (if the request says so), else its config
/// merged with the assistant's and the request's. A busy thread stays as it is. A thread made here gets
/// `new_ttl` (the deployment's default).
fn thread_for_run(
    request: &Request,
    assistant: &Assistant,
    existing: Option<&Thread>,
    stamp: &str,
    new_ttl: Option<ThreadTtl>,
) -> ApiResult<Thread> {
    let assistant_config = assistant.config.as_object().unwrap_or(&*EMPTY);
    let assistant_configurable = inner_object(&assistant.config, "configurable");
    let mut ids = Map::new();
    ids.insert("graph_id".into(), Value::String(assistant.graph_id.clone()));
    ids.insert("assistant_id".into(), Value::String(request.assistant_id.clone()));
    Ok(match existing {
        None if request.if_not_exists == "create" => {
            let mut thread_config = merge(&[assistant_config, &request.config]);
            thread_config.insert("configurable".into(), Value::Object(assistant_configurable.clone()));
            Thread {
                thread_id: request.thread_id.clone(),
                created_at: stamp.to_owned(),
                updated_at: stamp.to_owned(),
                state_updated_at: stamp.to_owned(),
                metadata: merge(&[&ids, &request.config_metadata, &request.metadata]),
                status: ThreadStatus::Busy,
                config: Value::Object(thread_config),
                values: None,
                error: None,
                interrupts: Map::new(),
                ttl: new_ttl,
            }
        }
        None => return Err(not_found()),
        Some(thread) if thread.status == ThreadStatus::Busy => thread.clone(),
        Some(thread) => {
            let thread_configurable = inner_object(&thread.config, "configurable");
            let mut thread_config =
                merge(&[assistant_config, thread.config.as_object().unwrap_or(&*EMPTY), &request.config]);
            thread_config.insert(
                "configurable".into(),
                Value::Object(merge(&[assistant_configurable, thread_configurable])),
            );
            // Field by field: what the run replaces is not copied.
            Thread {
                thread_id: thread.thread_id.clone(),
                created_at: thread.created_at.clone(),
                updated_at: stamp.to_owned(),
                state_updated_at: thread.state_updated_at.clone(),
                metadata: merge(&[&thread.metadata, &ids]),
                status: ThreadStatus::Busy,
                config: Value::Object(thread_config),
                values: thread.values.clone(),
                error: thread.error.clone(),
                interrupts: thread.interrupts.clone(),
                ttl: thread.ttl,
            }
        }
    })
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
    body: RunCreate,
    stateless: bool,
    subscribe: bool,
) -> ApiResult<Created> {
    let mut request = Request::read(app, caller, thread_id, body, stateless).await?;
    check_assistant_access(app, caller, &request.assistant_id).await?;
    let mut records = app.records.lock(Key::Thread(&request.thread_id)).await?;
    // Read into memory first (when it is not there), then borrowed beside the assistant.
    records.thread(&request.thread_id).await?;
    let assistant = records.assistants.get(&request.assistant_id).ok_or_else(not_found)?;
    let existing = records.held_thread(&request.thread_id);
    if existing.as_ref().is_some_and(|t| !request.access.allows(&t.metadata)) {
        return Err(not_found());
    }
    let stamp = now();
    let new_ttl = app.thread_ttl.for_new_thread(None);
    let thread = thread_for_run(&request, assistant, existing, &stamp, new_ttl)?;
    let inflight: Vec<String> =
        records.active_runs(&request.thread_id).map(|r| r.run.run_id.clone()).collect();
    if request.strategy == "reject" && !inflight.is_empty() {
        return Err(ApiError::conflict(
            "Thread is already running a task. Wait for it to finish or choose a different multitask strategy.",
        ));
    }
    let record = request.record(assistant, existing, &thread, stamp);
    // A run that can start at once (nothing else on its thread, no delay, a free run slot) is stored
    // running, in the transaction that makes it: one write and no hand-off to a worker task. Scaled out,
    // its queue row is stored claimed by this instance's worker in that transaction too, which runs it
    // (no claim, no turn to start it; should this instance die, its lease lapses as a claimed run's does).
    let slot = if inflight.is_empty() && request.after_seconds == 0.0 && !app.drain.is_drain_requested() {
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
    // Scaled out, such a run is handed its thread's head, read in this transaction by the statement that
    // writes the run: no transaction or round trip of its own to read it (see `ThreadHead`).
    #[cfg(feature = "scale")]
    if let (Some(scale), Some(_)) = (&app.scale, &slot) {
        records.own_on_write(&stored.run.run_id, &scale.worker, scale.lease);
        if reads_head(&stored) {
            records.head_on_write(&request.thread_id);
        }
    }
    records.commit(vec![Change::Thread(thread), Change::Run(Box::new(stored.clone()))]).await?;
    #[cfg(feature = "scale")]
    let head = records.take_head().map(|tuple| weft_graph::ThreadHead::read(&request.thread_id, tuple));
    // Scaled out, a run started here feeds its listeners here itself (not through Redis reads).
    #[cfg(feature = "scale")]
    let here = match (&app.scale, &slot) {
        (Some(_), Some(_)) => app.channels.open_fed(&record.run.run_id, record.run.kwargs.resumable),
        _ => None,
    };
    #[cfg(feature = "scale")]
    let channel = match &here {
        Some(here) => Arc::clone(here),
        None => app.channels.open(&record.run.run_id, record.run.kwargs.resumable),
    };
    #[cfg(not(feature = "scale"))]
    let channel = app.channels.open(&record.run.run_id, record.run.kwargs.resumable);
    let subscription: Option<Subscription> = subscribe.then(|| channel.subscribe(None));
    // The thread's listeners hear of the run before a worker can start it.
    app.thread_taps.run_made(&request.thread_id, &record.run.run_id, &channel);
    drop(records);
    cancel_inflight(app, &request, &record.run.run_id, &inflight).await?;
    // Not spawned here: a streamed run's body drives it first, so that a run that never waits runs in
    // the connection's task and its events go out in one write.
    let run = slot.map(|permit| {
        let app = Arc::clone(app);
        let channel = Arc::clone(&channel);
        let run: Start = Box::pin(async move {
            // Scaled out, run by this instance's worker, its events going out through Redis.
            #[cfg(feature = "scale")]
            if let Some(scale) = app.scale.clone() {
                let how = crate::scale::worker::Launch { cancel: None, head, here };
                crate::scale::worker::launch(&app, &scale, stored, how, permit);
                return;
            }
            exec::execute_on(&app, stored, channel, None).await;
            drop(permit);
        });
        Started(Some(run))
    });
    // The run as made (`pending`, as LangGraph answers a creation), whether or not it started since.
    Ok(Created { record, channel, subscription, started: run.is_some(), run })
}

/// Whether a run made to start at once reads its thread's head where it is made: a first attempt with a
/// checkpointer (not stateless) that replays no checkpoint (no `checkpoint_id`).
#[cfg(feature = "scale")]
fn reads_head(record: &RunRecord) -> bool {
    let configurable = record.run.kwargs.config.get("configurable");
    let replays = configurable.and_then(|c| c.get("checkpoint_id")).is_some_and(|id| !id.is_null());
    let in_namespace = configurable
        .and_then(|c| c.get("checkpoint_ns"))
        .and_then(Value::as_str)
        .is_some_and(|ns| !ns.is_empty());
    !record.run.kwargs.temporary && !replays && !in_namespace
}

/// Announces the new run (scaled out, to the thread's listeners on other instances), then applies the
/// `interrupt` and `rollback` strategies to the runs in flight on its thread. As in LangGraph, the new run
/// is withdrawn when they cannot be cancelled, and the caller gets the failure.
async fn cancel_inflight(
    app: &Arc<App>,
    request: &Request,
    run_id: &str,
    inflight: &[String],
) -> ApiResult<()> {
    let thread_id = request.thread_id.as_str();
    #[cfg(feature = "scale")]
    if let Some(scale) = &app.scale {
        scale.announce_run(thread_id, run_id);
    }
    if !matches!(request.strategy.as_str(), "interrupt" | "rollback") || inflight.is_empty() {
        return Ok(());
    }
    let action =
        if request.strategy == "rollback" { CancelAction::Rollback } else { CancelAction::Interrupt };
    match cancel(app, thread_id, inflight, action).await {
        // The runs may have finished meanwhile: then there is nothing to cancel, and the new run goes on.
        Ok(()) | Err(CancelError::NotFound | CancelError::NotActive) => Ok(()),
        Err(e) => {
            tracing::error!(thread_id, run_id, error = %e, "cannot cancel the runs in flight: the new run is withdrawn");
            withdraw(app, thread_id, run_id).await;
            Err(e.into())
        }
    }
}

#[cfg(test)]
mod tests {
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
}
