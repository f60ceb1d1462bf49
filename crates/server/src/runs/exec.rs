//! Running one run: its graph streamed into the run's channel as SSE events, stopped by a cancel, and its
//! outcome written to the run and its thread.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::{FutureExt as _, StreamExt as _};
use serde_json::{Value, json};
use weft_graph::checkpoint::{CheckpointConfig, CheckpointError, CheckpointTuple, Checkpointer, ListOptions};
use weft_graph::erased::{ErasedGraph, JsonCommand, JsonInput};
use weft_graph::{Durability, EndState, GraphError, JsonSnapshot, RunOptions, ThreadHead};
use weft_runnable_core::{EventSink, RunnableConfig};

use super::channel::{CancelAction, RunChannel};
use super::modes::Modes;
use super::result::{RunResult, from_thread};
use super::settle::{apply_state, status, thread_config};
use super::wire::Wire;
use crate::app::{App, now, object};
use crate::model::{RunRecord, RunStatus};
use crate::storage::{Change, Key, RecordsGuard};

/// How a run ended.
#[derive(Debug)]
enum Ended {
    Success,
    /// The error event's data: `{"error", "message"}`.
    Error(Value),
    /// It ran past the server's run timeout; the error event's data.
    Timeout(Value),
    Cancelled(CancelAction),
    /// The server is shutting down: the run stopped at a superstep boundary, saved, and goes on at the
    /// next start.
    Drained,
}

/// The error event of a failed run: the error's kind, as LangGraph names its exceptions where there is
/// one to name, and its message: a failed node's own error (through subgraphs, the innermost node's), as
/// LangGraph's server reports what the node raised, else the run's error.
pub(crate) fn error_json(error: &GraphError) -> Value {
    use weft_runnable_core::Error;
    let own = error.node_error();
    let name = match (error, own) {
        (GraphError::InvalidUpdate { .. } | GraphError::InvalidNodeReturn { .. }, _)
        | (GraphError::Serialization(_), _) => "InvalidUpdateError",
        (GraphError::RecursionLimit { .. }, _) => "GraphRecursionError",
        (GraphError::EmptyInput, _) => "EmptyInputError",
        (_, Some(Error::InvalidInput(_))) => "ValueError",
        (_, Some(Error::Timeout { .. })) => "TimeoutError",
        (_, Some(_)) => "NodeError",
        _ => "GraphError",
    };
    let message = match own {
        // A `ValueError`'s message is its text alone, as Python prints the exception.
        Some(Error::InvalidInput(text)) => text.clone(),
        Some(own) => own.to_string(),
        None => error.to_string(),
    };
    json!({"error": name, "message": message})
}

/// The config a run's graph gets: the run's configurable values and metadata; its root run named after
/// its graph, as LangGraph's server names it.
fn runnable_config(record: &RunRecord) -> RunnableConfig {
    let run_config = &record.run.kwargs.config;
    let mut config = RunnableConfig::default();
    config.run_name = run_config
        .get("configurable")
        .and_then(|c| c.get("graph_id"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    config.configurable = object(run_config.get("configurable"));
    config.configurable.remove("__after_seconds__");
    let mut metadata = object(run_config.get("metadata"));
    metadata.insert("run_attempt".into(), json!(record.attempt));
    for key in ["run_id", "thread_id", "graph_id", "assistant_id"] {
        if let Some(v) = config.configurable.get(key) {
            metadata.insert(key.into(), v.clone());
        }
    }
    config.metadata = metadata;
    config.tags = run_config
        .get("tags")
        .and_then(Value::as_array)
        .map(|tags| tags.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default();
    config.recursion_limit =
        run_config.get("recursion_limit").and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok());
    config.run_id = uuid::Uuid::parse_str(&record.run.run_id).ok();
    config
}

/// A run's breakpoints: `"*"`, a list of node names, or none (the graph's own).
fn breakpoints(value: &Value) -> Option<Vec<String>> {
    match value {
        Value::String(s) => Some(vec![s.clone()]),
        Value::Array(items) => Some(items.iter().filter_map(Value::as_str).map(str::to_owned).collect()),
        _ => None,
    }
}

/// The run's input: its command or input, or, for a run started again after a stop that had saved
/// checkpoints already, the thread's checkpoint to continue from (its input is in it).
fn input_of(record: &RunRecord, continues: bool) -> Result<JsonInput, GraphError> {
    let kwargs = &record.run.kwargs;
    if continues {
        return Ok(JsonInput::Resume);
    }
    match &kwargs.command {
        Value::Null => JsonInput::from_json(kwargs.input.clone()),
        command => Ok(JsonInput::Command(JsonCommand::from_json(command.clone())?)),
    }
}

/// Where a run's graph starts, with the thread's head when it was read for it (see [`ThreadHead`]; the
/// graph reads it otherwise).
#[derive(Debug)]
enum Start {
    /// From the thread's head, with the run's input.
    Fresh(Option<ThreadHead>),
    /// From the checkpoint the run saved last before it was stopped (its input is in it).
    Continues(Option<ThreadHead>),
}

/// Streams the run's graph into its channel until it ends, is cancelled or runs past the server's run
/// timeout; the graph leaves the thread's state in `end` when the run ends with nothing left to run.
async fn drive(
    app: &App,
    record: &RunRecord,
    graph: &Arc<dyn ErasedGraph>,
    start: Start,
    channel: &Arc<RunChannel>,
    result: &mut RunResult,
    end: &EndState,
) -> Ended {
    let timeout = app.limits.run_timeout;
    let kwargs = &record.run.kwargs;
    let modes = Modes::from_names(&kwargs.stream_mode);
    let mut wire = Wire::new(modes, kwargs.subgraphs, record.run.metadata.clone());
    let (continues, head) = match start {
        Start::Fresh(head) => (false, head),
        Start::Continues(head) => (true, head),
    };
    let input = match input_of(record, continues) {
        Ok(input) => input,
        Err(e) => return Ended::Error(error_json(&e)),
    };
    let options = RunOptions {
        durability: match kwargs.durability.as_str() {
            "sync" => Durability::Sync,
            "exit" => Durability::Exit,
            _ => Durability::Async,
        },
        context: Some(Arc::new(kwargs.context.clone())),
        subgraphs: kwargs.subgraphs,
        interrupt_before: breakpoints(&kwargs.interrupt_before),
        interrupt_after: breakpoints(&kwargs.interrupt_after),
        end_state: Some(end.clone()),
        head,
    };
    let mut config = runnable_config(record);
    app.drain.attach(&mut config);
    channel.progress().attach(&mut config);
    if modes.events {
        // `events`: every run event (the graph, its nodes, models, tools) as it happens.
        let events = Arc::clone(channel);
        config.callbacks = Some(EventSink::new(move |event| {
            events.publish("events", super::wire::run_event(&event).to_string());
        }));
    }
    let mut stream = graph.stream_json(input, config, &modes.graph_modes(), options);
    let cancelled = channel.cancelled();
    tokio::pin!(cancelled);
    let deadline = async move {
        match timeout {
            Some(timeout) => tokio::time::sleep(timeout).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            biased;
            action = &mut cancelled => return Ended::Cancelled(action),
            () = &mut deadline => {
                let seconds = timeout.map_or(0.0, |t| t.as_secs_f64());
                return Ended::Timeout(json!({
                    "error": "TimeoutError",
                    "message": format!("the run timed out after {seconds} s (the server's run timeout)"),
                }));
            }
            // A worker's channel whose events Redis has not taken holds the run (see `OUTLET_BYTES`);
            // listeners never do: the channel cuts those that fall behind.
            part = async { channel.room().await; stream.next().await } => match part {
                None => return Ended::Success,
                Some(Err(GraphError::Drained { .. })) => return Ended::Drained,
                Some(Err(e)) => {
                    // The event carries the node's own error; the log keeps where it failed.
                    tracing::warn!(run_id = record.run.run_id, error = %e, "a run failed");
                    return Ended::Error(error_json(&e));
                }
                Some(Ok(part)) => {
                    channel.progress().note();
                    for (name, data) in wire.events(part) {
                        let text = data.to_string();
                        result.absorb(&name, data);
                        channel.publish(name, text);
                    }
                }
            }
        }
    }
}

/// The served graph a run runs (`graph_id` in its config).
fn graph_of<'a>(app: &'a App, record: &RunRecord) -> Option<&'a crate::graphs::Registered> {
    let config = &record.run.kwargs.config;
    config
        .get("configurable")
        .and_then(|c| c.get("graph_id"))
        .and_then(Value::as_str)
        .and_then(|id| app.graphs.get(id))
}

/// Runs `record` (already marked running) to its end and records the outcome.
pub(super) async fn execute(app: &Arc<App>, record: RunRecord) {
    let channel = app.channels.open(&record.run.run_id, record.run.kwargs.resumable);
    execute_on(app, record, channel, None).await;
}

/// Runs `record` (already marked running) to its end, publishing on `channel`, and records the outcome;
/// `head`: the thread's head as the run's maker read it, for a first attempt.
pub(crate) async fn execute_on(
    app: &Arc<App>,
    record: RunRecord,
    channel: Arc<RunChannel>,
    head: Option<ThreadHead>,
) {
    let run_id = record.run.run_id.clone();
    let thread_id = record.run.thread_id.clone();
    let kwargs = &record.run.kwargs;
    let started_at = now();
    let clock = std::time::Instant::now();
    channel.publish("metadata", json!({"run_id": run_id, "attempt": record.attempt}).to_string());
    let graph_id = kwargs.config.get("configurable").and_then(|c| c.get("graph_id")).and_then(Value::as_str);
    let registered = graph_of(app, &record);
    let mut result = RunResult::default();
    // The thread's state as the run leaves it, handed back by the graph (no read of it at the end).
    let end = end_slot(app);
    let ended = match registered {
        None => Ended::Error(
            json!({"error": "GraphNotFound", "message": format!("graph '{}' is not served", graph_id.unwrap_or_default())}),
        ),
        Some(registered) => {
            let run = run_graph(app, &record, registered, &channel, &mut result, &end, head);
            tokio::select! {
                ended = run => ended,
                idle = stalled(channel.progress(), app.limits.run_watchdog) => {
                    tracing::error!(run_id, idle_s = idle.as_secs_f64(), "a run made no progress: the watchdog ends it");
                    Ended::Error(stall_error(idle))
                }
            }
        }
    };
    if let Ended::Drained = ended {
        leave_drained(app, &record, &channel).await;
        return;
    }
    if let Ended::Error(error) | Ended::Timeout(error) = &ended {
        result.absorb("error", error.clone());
        channel.publish("error", error.to_string());
    }
    #[cfg(feature = "scale")]
    if let Some(scale) = &app.scale {
        // Every event is out before the end is recorded.
        scale.before_finish(&run_id, &channel).await;
    }
    // Built only for a run with a webhook (it copies the run's last values).
    let webhook = kwargs.webhook.as_str().map(|url| (url.to_owned(), Hook::new(&ended, &result)));
    let log = |e: crate::error::ApiError| tracing::error!(run_id, error = %e.detail, "cannot record the end of a run");
    #[cfg(feature = "scale")]
    let last_saves = held_saves(&ended, &end);
    // Read before the records' lock: a rolled-back run's undoing, and where the run left its thread.
    let state = end_state(app, &record, &ended, end.take()).await.map_err(log).ok();
    // One turn of the records: the run's end written, then its channel finished, so that a listener who
    // finds the run still going also finds its channel.
    // Scaled out, the run's lease is checked in the turn's first round trip.
    #[cfg(feature = "scale")]
    let lease = app
        .scale
        .as_ref()
        .map(|scale| crate::storage::Lease { run_id: run_id.clone(), worker: scale.worker.clone() });
    #[cfg(not(feature = "scale"))]
    let lease = None;
    let mut records = app.records.lock_checking(Key::Thread(&thread_id), lease).await;
    // A worker that lost its run to another (its lease expired) records nothing, and stores nothing more;
    // else the run's last saves go in this turn.
    #[cfg(feature = "scale")]
    if let (Some(scale), Ok(records)) = (&app.scale, &mut records)
        && !scale.end_turn(records, &run_id, last_saves).await
    {
        return;
    }
    app.metrics.record(Hook::status_of(&ended).0, clock.elapsed());
    let (body, delete_thread) = match (&mut records, state) {
        (Ok(records), Some(snapshot)) => {
            record_end(records, &record, ended, result, snapshot).await.map_err(log).unwrap_or_default()
        }
        (Err(e), Some(_)) => {
            tracing::error!(run_id, error = %e, "cannot record the end of a run");
            (None, false)
        }
        (_, None) => (None, false),
    };
    channel.set_result(body);
    channel.finish();
    if !app.channels.is_remote() {
        if kwargs.resumable {
            app.channels.keep_finished(&run_id);
        } else {
            app.channels.remove(&run_id);
        }
    }
    let values = match (&mut records, &webhook) {
        (_, None) => None,
        (Ok(records), Some(_)) => match records.thread(&thread_id).await {
            Ok(thread) => thread.and_then(|t| t.values.clone()),
            Err(e) => {
                tracing::error!(run_id, error = %e, "cannot read the thread's values for the webhook");
                None
            }
        },
        (Err(e), Some(_)) => {
            tracing::error!(run_id, error = %e, "cannot read the thread's values for the webhook");
            None
        }
    };
    // The thread's next run, if one waits (a run made from now on finds the thread free and starts
    // itself, or wakes a worker when it cannot). Scaled out too, the turn read every run of the thread
    // that other instances made, and a run of another thread waits for no end but a slot's (its worker
    // claims when a slot frees) or a lease's (the poll finds it).
    let waiting = match &records {
        Ok(records) => records.active_runs(&thread_id).any(|r| r.run.status == RunStatus::Pending),
        Err(_) => true,
    };
    drop(records);
    // A stateless run's thread goes with it: its checkpoints last (its records are gone already).
    if delete_thread && let Err(e) = app.checkpointer.delete_thread(&thread_id).await {
        tracing::error!(run_id, error = %e, "cannot delete a stateless run's checkpoints");
    }
    if let Some((url, hook)) = webhook {
        app.webhooks.send(url, hook.payload(&record, started_at, values));
    }
    if waiting {
        super::schedule(app, &thread_id);
    }
}

/// The slot where the run leaves the thread's state; scaled out, the saves of its last step too, which
/// the turn that records its end stores with it (see [`EndState::with_last_saves`]).
fn end_slot(app: &App) -> EndState {
    #[cfg(feature = "scale")]
    if app.scale.is_some() {
        return EndState::with_last_saves();
    }
    let _ = app;
    EndState::new()
}

/// The saves a run left in its slot ([`end_slot`]), to store in the turn that records its end, however
/// it is recorded as ending (a cancel or the run timeout may come as the graph ends): a run recorded
/// ended has its last checkpoint, and a failed store records nothing (whoever takes the run over runs
/// its last step again, and finds the cancel asked of it in the queue). A rolled-back run's are dropped:
/// its checkpoints go.
#[cfg(feature = "scale")]
fn held_saves(ended: &Ended, end: &EndState) -> Vec<weft_graph::checkpoint::SaveOp> {
    let saves = end.take_saves();
    if matches!(ended, Ended::Cancelled(CancelAction::Rollback)) { Vec::new() } else { saves }
}

/// Runs the run's graph: from the thread's head when the run continues an earlier attempt; `head`: the
/// thread's head as the run's maker read it.
async fn run_graph(
    app: &Arc<App>,
    record: &RunRecord,
    registered: &crate::graphs::Registered,
    channel: &Arc<RunChannel>,
    result: &mut RunResult,
    end: &EndState,
    head: Option<ThreadHead>,
) -> Ended {
    let (run_id, thread_id) = (&record.run.run_id, &record.run.thread_id);
    let graph = if record.run.kwargs.temporary { &registered.stateless } else { &registered.stateful };
    // A run started again after a stop continues from the thread's head when it saved that head
    // (its input is in it). A first attempt reads nothing here: where the thread stood before the
    // run (for a rollback) is found when a rollback asks for it.
    match start_of(app, record, head).await {
        Ok(start) => {
            // A node's or a router's panic is its error already (the engine catches it); one
            // anywhere else in the run (a reducer, say) ends the run as an error too, instead of
            // ending its task or its connection with the run left `running`.
            let driven = drive(app, record, graph, start, channel, result, end);
            AssertUnwindSafe(driven).catch_unwind().await.unwrap_or_else(|payload| {
                let error = weft_runnable_core::Error::from_panic(payload.as_ref());
                tracing::error!(run_id, %error, "a run panicked");
                Ended::Error(json!({"error": "GraphError", "message": format!("the run {error}")}))
            })
        }
        Err(e) => {
            tracing::error!(run_id, error = %e, "cannot read the thread's head to continue a run");
            Ended::Error(json!({
                "error": "CheckpointError",
                "message": format!("cannot read the head of thread '{thread_id}' to continue the run: {e}"),
            }))
        }
    }
}

/// Waits until the run has made no progress (no step, event or save) for `limit`; how long it has not.
/// Never, without a limit.
async fn stalled(progress: &weft_graph::Progress, limit: Option<std::time::Duration>) -> std::time::Duration {
    let Some(limit) = limit else { return std::future::pending().await };
    loop {
        let idle = progress.idle();
        if idle >= limit {
            return idle;
        }
        tokio::time::sleep(limit - idle).await;
    }
}

/// The error event of a run the watchdog ended.
fn stall_error(idle: std::time::Duration) -> Value {
    json!({
        "error": "RunStalled",
        "message": format!(
            "the run made no progress (no step, event or checkpoint) for {:.0} s and was stopped \
             (the server's run watchdog); it may be waiting on something that never answers",
            idle.as_secs_f64()
        ),
    })
}

/// Leaves a drained run as a stopped server leaves its runs: `running` in the records, which the next
/// start takes up from the checkpoint the run saved (scaled out: its lease let go, for another instance to
/// claim now); its listeners here see their streams end cleanly, to resume them on the next process.
async fn leave_drained(app: &Arc<App>, record: &RunRecord, channel: &Arc<RunChannel>) {
    tracing::info!(run_id = record.run.run_id, "run drained for the shutdown: it goes on at the next start");
    #[cfg(feature = "scale")]
    if let Some(scale) = &app.scale {
        // Every event is out before another instance can take the run over.
        channel.flush().await;
        scale.release(&record.run.run_id).await;
        return;
    }
    channel.finish_drained();
    let _ = app;
}

/// What a run's webhook says of its end.
#[derive(Debug)]
struct Hook {
    status: &'static str,
    error: Option<Value>,
    /// The run's own last values (a stateless run's thread is gone by the time the webhook is called).
    values: Option<Value>,
}

impl Hook {
    /// How the run ended, as the webhook and the metrics name it, and its error.
    fn status_of(ended: &Ended) -> (&'static str, Option<&Value>) {
        match ended {
            Ended::Success => ("success", None),
            Ended::Error(e) => ("error", Some(e)),
            Ended::Timeout(e) => ("timeout", Some(e)),
            Ended::Cancelled(CancelAction::Rollback) => ("rollback", None),
            Ended::Cancelled(_) => ("interrupted", None),
            // Not an end: never recorded nor sent (see `leave_drained`).
            Ended::Drained => ("running", None),
        }
    }

    fn new(ended: &Ended, result: &RunResult) -> Self {
        let (status, error) = Self::status_of(ended);
        let error = error.cloned();
        let values = if status == "rollback" { None } else { result.values().cloned() };
        Self { status, error, values }
    }

    /// LangGraph's webhook payload: the run, its status, when it started and ended, the thread's values
    /// (`webhook_sent_at` is added at each attempt).
    fn payload(self, record: &RunRecord, started_at: String, thread_values: Option<Value>) -> Value {
        let mut run = record.run.clone();
        let ended_at = now();
        if let Some(status) = crate::model::RunStatus::parse(self.status) {
            run.status = status;
        }
        run.updated_at = ended_at.clone();
        let mut payload = match serde_json::to_value(&run) {
            Ok(Value::Object(map)) => map,
            _ => serde_json::Map::new(),
        };
        payload.insert("status".into(), json!(self.status));
        payload.insert("run_started_at".into(), json!(started_at));
        payload.insert("run_ended_at".into(), json!(ended_at));
        let values = if self.status == "rollback" { None } else { thread_values.or(self.values) };
        payload.insert("values".into(), values.unwrap_or(Value::Null));
        if let Some(error) = self.error {
            payload.insert("error".into(), error);
        }
        Value::Object(payload)
    }
}

/// What [`record_end`] needs read before the records' lock: undoes a rolled-back run, then the thread's
/// state as the run left it: the one its graph handed back (`handed`, for a run that ended with nothing
/// left to run: the same `get_state` would read), else read through the run's graph (the thread's own);
/// `None` inside for a stateless run or a graph no longer served.
async fn end_state(
    app: &Arc<App>,
    record: &RunRecord,
    ended: &Ended,
    handed: Option<JsonSnapshot>,
) -> Result<Option<JsonSnapshot>, crate::error::ApiError> {
    if let Ended::Cancelled(CancelAction::Rollback) = ended {
        rollback(app, record).await?;
    }
    Ok(match graph_of(app, record) {
        Some(_) if record.run.kwargs.temporary => None,
        // Handed back only by a graph that ended with nothing left to run, whatever the run is recorded
        // as (a cancel or the timeout may come as it ends): the state its last saves lead to.
        Some(_) if handed.is_some() && !matches!(ended, Ended::Cancelled(CancelAction::Rollback)) => handed,
        Some(registered) => {
            registered.stateful.get_state_json(&thread_config(&record.run.thread_id), false).await.ok()
        }
        None => None,
    })
}

/// Writes the run's end under the records' lock: its status and result, the thread's state (`snapshot`)
/// and status; forgets a rolled-back run; deletes a stateless run's thread from the records. Returns the
/// `/wait` body (none for a rolled-back run) and whether the thread's checkpoints are to be deleted.
async fn record_end(
    records: &mut RecordsGuard<'_>,
    record: &RunRecord,
    ended: Ended,
    result: RunResult,
    snapshot: Option<JsonSnapshot>,
) -> Result<(Option<Value>, bool), crate::error::ApiError> {
    let thread_id = &record.run.thread_id;
    let mut changes = Vec::new();
    let error = match &ended {
        Ended::Error(e) | Ended::Timeout(e) => Some(e.clone()),
        _ => None,
    };
    // The thread's values and interrupts are not copied where the run's end state replaces them.
    let replaced = snapshot.as_ref().is_some_and(|s| s.config.is_some());
    let mut thread =
        records.thread(thread_id).await?.map(|t| if replaced { t.without_state() } else { t.clone() });
    if let Some(thread) = thread.as_mut() {
        let paused = snapshot.as_ref().is_some_and(|s| !s.next.is_empty());
        if let Some(snapshot) = snapshot {
            apply_state(thread, snapshot);
        }
        let active = records.active_runs(thread_id).any(|r| r.run.run_id != record.run.run_id);
        thread.error = error.clone();
        thread.status = status(active, error.is_some(), paused);
        thread.updated_at = now();
    }
    let mut body = None;
    let delete_thread =
        record.delete_thread && !records.active_runs(thread_id).any(|r| r.run.run_id != record.run.run_id);
    match ended {
        Ended::Cancelled(CancelAction::Rollback) => {
            changes.push(Change::DeleteRun(record.run.run_id.clone()))
        }
        ended => {
            let mut done = record.clone();
            done.run.status = match ended {
                Ended::Success => RunStatus::Success,
                Ended::Error(_) => RunStatus::Error,
                Ended::Timeout(_) => RunStatus::Timeout,
                Ended::Cancelled(_) => RunStatus::Interrupted,
                Ended::Drained => RunStatus::Running,
            };
            done.run.updated_at = now();
            done.result = Some(result.body(|| from_thread(thread.as_ref())));
            body = done.result.clone();
            // A stateless run goes with its thread (its result reaches whoever waits through the channel);
            // a run deleted meanwhile (with its thread) stays deleted.
            let still_there = records.is_live(&done.run.run_id);
            if delete_thread {
                changes.push(Change::DeleteRun(done.run.run_id.clone()));
            } else if still_there {
                changes.push(Change::Run(Box::new(done)));
            }
        }
    }
    match thread {
        Some(_) if delete_thread => changes.push(Change::DeleteThread(thread_id.clone())),
        Some(thread) => changes.push(Change::Thread(thread)),
        None => {}
    }
    records.commit(changes).await?;
    Ok((body, delete_thread))
}

/// Whether the checkpoint was saved by the run `run_id` (its metadata names the run).
fn made_by(tuple: &CheckpointTuple, run_id: &str) -> bool {
    tuple.metadata.extra.get("run_id").and_then(Value::as_str) == Some(run_id)
}

/// Where the run starts: a run started again after a stop (attempt 2 on) continues from the thread's
/// head when it saved that head, else starts afresh; either is handed the head read here (the graph
/// reads it no more). A first attempt and a stateless run read nothing here (`made`: the head its maker
/// read, if it did).
async fn start_of(app: &App, record: &RunRecord, made: Option<ThreadHead>) -> Result<Start, CheckpointError> {
    let thread_id = record.run.thread_id.as_str();
    if record.attempt <= 1 || record.run.kwargs.temporary {
        return Ok(Start::Fresh(made));
    }
    let head = app.checkpointer.get_tuple(&CheckpointConfig::thread(thread_id)).await?;
    let continues = head.as_ref().is_some_and(|head| made_by(head, &record.run.run_id));
    let read = Some(ThreadHead::read(thread_id, head));
    Ok(if continues { Start::Continues(read) } else { Start::Fresh(read) })
}

/// Where a thread stood before a run, as its saved checkpoints say.
#[derive(Debug, PartialEq)]
enum Before {
    /// The run saved no root checkpoint: the thread is where the run found it.
    Untouched,
    /// The checkpoint the run's first one was made from.
    At(String),
    /// The run's first checkpoint is the thread's first: the thread had none.
    Empty,
}

/// Where the thread stood before the run `run_id`: the parent of the oldest root checkpoint that names the
/// run in its metadata, in one listing (other writers' checkpoints among the run's do not stop it).
async fn started_from(
    checkpointer: &dyn Checkpointer,
    thread_id: &str,
    run_id: &str,
) -> Result<Before, crate::error::ApiError> {
    let mut filter = serde_json::Map::new();
    filter.insert("run_id".into(), Value::String(run_id.to_owned()));
    let listed = checkpointer
        .list(Some(&CheckpointConfig::thread(thread_id)), ListOptions { filter, ..ListOptions::default() })
        .await
        .map_err(|e| crate::error::ApiError::internal(e.to_string()))?;
    // Newest first: the run's first checkpoint is the last listed.
    let Some(first) = listed.into_iter().last() else { return Ok(Before::Untouched) };
    match first.parent_config {
        None => Ok(Before::Empty),
        Some(parent) => match parent.checkpoint_id {
            Some(id) => Ok(Before::At(id)),
            // Not "nothing before": a rollback would then delete the thread's older checkpoints too.
            None => Err(crate::error::ApiError::internal("a checkpoint's parent has no id")),
        },
    }
}

/// Puts the thread back where the run found it: a thread that had no checkpoint loses them all; one that
/// had gets a copy of that checkpoint as its latest (the run's checkpoints stay in its history, behind it).
async fn rollback(app: &Arc<App>, record: &RunRecord) -> Result<(), crate::error::ApiError> {
    let thread_id = &record.run.thread_id;
    if record.run.kwargs.temporary {
        return Ok(());
    }
    match started_from(app.checkpointer.as_ref(), thread_id, &record.run.run_id).await? {
        Before::Untouched => {}
        Before::At(checkpoint_id) => {
            let Some(registered) = graph_of(app, record) else { return Ok(()) };
            let mut config = thread_config(thread_id);
            config.configurable.insert("checkpoint_id".into(), Value::String(checkpoint_id));
            registered.stateful.update_state_json(&config, None, Some("__copy__")).await?;
        }
        Before::Empty => {
            app.checkpointer
                .delete_thread(thread_id)
                .await
                .map_err(|e| crate::error::ApiError::internal(e.to_string()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
